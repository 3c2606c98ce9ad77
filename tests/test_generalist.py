"""Meta-training on a distribution of problems (the generalist recipe's
machinery): the problem of each meta-iteration drawn from a mixture, a
robust selection over fixed problems, a warm start, Glorot-initialised MLPs
and the recipe itself."""

import io
import math
import os
import re

import numpy as np
import pytest

from l2o_scale.config import recipes
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import mixing
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import selection
from l2o_scale.meta_training import task as task_lib
from l2o_scale.meta_training import trainer as trainer_lib
from l2o_scale.meta_training import training
from l2o_scale.runs import checkpoints
from optimizer import hierarchical_rnn
from problems import problem_generator as pg
from problems import problem_sets
from problems import problem_spec
from tests import resume_check


def _optimizer_spec():
  return problem_spec.Spec(hierarchical_rnn.HierarchicalRNN, ([6, 8, 5],),
                           {"init_lr_range": (1e-3, 1e-3),
                            "use_second_derivatives": False})


def _quadratic(n, seed):
  return (problem_spec.Spec(pg.Quadratic, (n,), {"random_seed": seed}), None,
          None)


def _config(logdir, iterations, **training):
  # One 5-step unroll per meta-iteration: the runs here test what is drawn
  # and restored, not what is learned.
  schedule = config_lib.Schedule(
      num_meta_iterations=iterations, learning_rate=1e-3, fix_unroll=True,
      fix_unroll_length=5, fix_num_steps=5, fix_num_steps_eval=5,
      evaluation_epochs=1, evaluation_period=3)
  return config_lib.TrainerConfig(
      logdir=logdir, schedule=schedule,
      training=config_lib.TrainingConfig(**training))


def test_the_mixture_is_a_fixed_draw_per_meta_iteration():
  draws = [mixing.mixed_problem_index(k, 5) for k in range(200)]
  assert draws == [mixing.mixed_problem_index(k, 5) for k in range(200)]
  assert set(draws) == set(range(5))
  # Each problem gets its share (200 draws of 5: 40 expected each).
  assert min(np.bincount(draws)) > 20


def test_a_mixed_run_trains_on_each_drawn_problem_and_resumes_exactly(
    tmp_path):
  """--mix_problems: meta-iteration k trains on the problem
  mixed_problem_index draws, every one from a fresh state; a run stopped
  after two meta-iterations and resumed ends bit for bit where the
  uninterrupted one does."""
  problems = [_quadratic(5, 3), _quadratic(7, 4)]
  picks = [mixing.mixed_problem_index(k, 2) for k in range(3)]
  assert len(set(picks)) == 2  # Both problems are trained on.

  def train(logdir, n):
    # One problem's compiled unrolls kept at a time: every switch releases
    # the other's and traces it again, and the run still resumes exactly.
    out = io.StringIO()
    result = training.run_meta_training(
        _config(logdir, n, mix_problems=True, max_compiled_problems=1),
        _optimizer_spec(), problems, out=out)
    return result, out.getvalue()

  (result, log), (_, resumed_log) = resume_check.assert_resumes_exactly(
      train, tmp_path, checkpoints=(3,))
  assert result["meta_iterations"] == 3
  assert "Resuming from" in resumed_log
  # One line per meta-iteration names the problem it trains on.
  assert len(re.findall(r"training on Quadratic", log)) == 3


class _Task(object):
  def __init__(self):
    self.released = 0

  def release_compiled(self):
    self.released += 1


def test_at_most_max_compiled_problems_keep_their_compiled_functions():
  """--max_compiled_problems: using one task more than the bound releases
  the compiled functions of the task used least recently; 0: no bound."""
  tasks = [_Task() for _ in range(4)]
  kept = mixing.CompiledTasks(2)
  for i in (0, 1, 0, 2, 3, 0):
    kept.use(i, tasks[i])
  # 2 pushes out 1 (0 was used after it), 3 pushes out 0, 0 pushes out 2.
  assert [t.released for t in tasks] == [1, 1, 1, 0]
  unbounded = mixing.CompiledTasks(0)
  for i in (0, 1, 2, 3):
    unbounded.use(i, tasks[i])
  assert [t.released for t in tasks] == [1, 1, 1, 0]


def test_a_released_task_compiles_again_to_the_same_numbers():
  """release_compiled drops a task's traced meta-gradient (its memory with
  it); the next use traces a new one that gives the same numbers bit for
  bit, so a bounded --max_compiled_problems leaves the run unchanged."""
  np.random.seed(0)
  config = config_lib.TrainingConfig()
  task = task_lib.MetaTrainingTask(
      pg.Quadratic(4, random_seed=3), "q", None, None,
      _optimizer_spec().build(), config, lambda _: None)
  draws = plan_lib.SeriesDraws(task.planner.init_tensors(),
                               *task.planner.batches([5])[:1],
                               task.planner.mini_rows(1), None)
  plan = plan_lib.MetaIterationPlan(0, [5], False, (draws,), [False], True)
  inputs = task.unroll_inputs(task.series_tensors(plan), 0,
                              task.mini_dataset(draws.mini_rows[0]), False,
                              True, True)
  first = task.meta_step
  out, grads = first(inputs, None, False)
  assert task.holds_compiled
  task.release_compiled()
  assert not task.holds_compiled
  again, grads_again = task.meta_step(inputs, None, False)
  assert task.meta_step is not first
  np.testing.assert_array_equal(out.metaobj.numpy(), again.metaobj.numpy())
  for g, h in zip(grads, grads_again):
    np.testing.assert_array_equal(g.numpy(), h.numpy())


def test_the_robust_score_runs_depend_on_their_seeds_alone():
  """The robust score's fixed runs (also those of a --selection_set) draw
  their initial parameters from their seeds, whatever the state of
  numpy's global stream, and leave that stream as it was: a resumed run
  that makes them after restoring the stream gets the same runs and the
  same draws after them."""
  problem = pg.Quadratic(4, random_seed=5)
  optimizer = _optimizer_spec().build()
  np.random.seed(0)
  first = selection.make_runs(problem, optimizer, 0, 0, 10, (1, 2))
  after_first = np.random.uniform()
  np.random.seed(123)
  np.random.uniform(size=7)
  second = selection.make_runs(problem, optimizer, 0, 0, 10, (1, 2))
  for a, b in zip(first, second):
    for x, y in zip(a.params, b.params):
      np.testing.assert_array_equal(x, y)
  np.random.seed(0)
  assert np.random.uniform() == after_first


def test_selection_over_problems_is_the_geometric_mean():
  r = selection.SelectionResult
  combined = selection.combine([r(0.5, [0.4, 0.6], []), r(8., [8.], [])])
  assert combined.score == pytest.approx(math.sqrt(0.5 * 8.))
  assert combined.finals == [0.4, 0.6, 8.]
  diverged = selection.combine([r(0.5, [0.5], []),
                                r(float("inf"), [float("inf")], [7])])
  assert diverged.score == float("inf") and diverged.diverged_runs == [7]


def test_a_warm_start_begins_at_the_checkpoint(tmp_path):
  """--warm_start: a fresh run's meta-parameters are the checkpoint's; a
  run that resumes keeps its own."""
  source = str(tmp_path / "source")
  training.run_meta_training(_config(source, 1), _optimizer_spec(),
                             [_quadratic(5, 3)], out=io.StringIO())
  path = os.path.join(source, "model.ckpt-1")
  out = io.StringIO()
  warm = trainer_lib.MetaTrainer(
      _config(str(tmp_path / "warm"), 1, warm_start=path),
      _optimizer_spec(), out)
  assert warm.start()
  assert "Warm start: meta-parameters from {}".format(path) in out.getvalue()
  fresh = trainer_lib.MetaTrainer(_config(str(tmp_path / "fresh"), 1),
                                  _optimizer_spec(), io.StringIO())
  saved = checkpoints.read_meta_parameters(path, fresh.optimizer)
  moved = 0
  for (name, var), fresh_var in zip(
      warm.optimizer.tf1_variables().items(),
      fresh.optimizer.tf1_variables().values()):
    np.testing.assert_array_equal(var.numpy(), saved[name])
    moved += not np.array_equal(var.numpy(), fresh_var.numpy())
  assert moved  # The checkpoint is not the initialisation.


def test_glorot_initialised_mlp_and_the_original_default():
  glorot = pg.FullyConnected(30, 10, hidden_sizes=(20,), glorot_init=True)
  w1, b1, w2, b2 = [t.numpy() for t in glorot.init_tensors(seed=1)]
  for w, (fan_in, fan_out) in ((w1, (30, 20)), (w2, (20, 10))):
    limit = math.sqrt(6. / (fan_in + fan_out))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.8 * limit
  assert not b1.any() and not b2.any()
  original = pg.FullyConnected(30, 10, hidden_sizes=(20,))
  values = np.concatenate([t.numpy().ravel()
                           for t in original.init_tensors(seed=1)])
  assert 0.008 < values.std() < 0.012  # N(0, 0.01), 840 values


def test_the_family_and_the_selection_problems_differ():
  family = {(h, a) for h, a, _ in problem_sets.MNIST_MLP_FAMILY}
  chosen = {(h, a) for h, a, _ in problem_sets.MNIST_MLP_SELECTION}
  assert not family & chosen
  assert len({a for _, a in family}) >= 4  # activations
  assert len({len(h) for h, _ in family}) >= 3  # depths
  assert len({b for _, _, b in problem_sets.MNIST_MLP_FAMILY}) >= 3


def test_the_generalist_recipe_mixes_sets_and_selects_outside_them():
  argv = recipes.expand(["metarun.py", "--recipe=generalist"])
  flags = open(argv[1].split("=", 1)[1]).read()
  assert "--mix_problems" in flags and "--warm_start=l2o-scale" in flags
  included = [line for line in flags.splitlines()
              if line.startswith("--include_")]
  assert len(included) >= 5
  assert "--selection_set=mnist_mlp_selection_problems" in flags


def test_every_training_set_gives_training_triples(data_dir):
  """--selection_set takes any training set: test_problems' entries carry a
  name and a fixed init after (spec, data, batch), which the selection drops."""
  full = problem_sets.get("test_problems", data_dir=data_dir)
  triples = problem_sets.get_training_triples("test_problems",
                                              data_dir=data_dir)
  assert len(full[0]) == 5
  assert [len(t) for t in triples] == [3] * len(full)
  assert [repr(t[0]) for t in triples] == [repr(f[0]) for f in full]
  assert [t[2] for t in triples] == [f[2] for f in full]
