"""--meta_objective=validation: the meta-objective (and the robust selection
score) is the loss on held-back training rows that meta-training never trains
on; the default keeps the original's objective on the mini dataset."""

import io

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale import metaopt
from l2o_scale.meta_testing import testing
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import selection
from l2o_scale.meta_training import task as task_lib
from optimizer import hierarchical_rnn
from problems import datasets
from problems import problem_sets
from problems import problem_spec as spec_lib

from tests import resume_check

ROWS = 300


def test_the_split_is_fixed_disjoint_and_leaves_numpy_alone():
  np.random.seed(5)
  expected_next = np.random.uniform()
  np.random.seed(5)
  train, held = task_lib.validation_split(1000, 0.2)
  assert np.random.uniform() == expected_next  # the run's stream untouched
  assert len(held) == 200 and len(train) == 800
  assert not set(train) & set(held)
  np.testing.assert_array_equal(np.sort(np.concatenate([train, held])),
                                np.arange(1000))
  again = task_lib.validation_split(1000, 0.2)
  np.testing.assert_array_equal(again[1], held)
  # A random draw, not the last rows (a dataset sorted by label stays fair).
  assert held.min() < 700
  # At least one row on each side.
  assert [len(p) for p in task_lib.validation_split(3, 0.01)] == [2, 1]
  assert [len(p) for p in task_lib.validation_split(3, 0.99)] == [1, 2]


def _mnist(data_dir, noisy_held=False):
  problem_spec, dataset, batch_size = problem_sets.mnist_mlp_problems(
      data_dir=data_dir)[0]
  data = np.asarray(dataset.data[:ROWS], np.float32).copy()
  labels = np.asarray(dataset.labels[:ROWS])
  if noisy_held:
    _, held = task_lib.validation_split(ROWS, 0.2)
    data[held] = np.random.RandomState(1).uniform(size=data[held].shape)
  return problem_spec, datasets.Dataset(data, labels, ROWS), batch_size


def _task(data_dir, noisy_held=False, optimizer=None, **overrides):
  spec, dataset, batch_size = _mnist(data_dir, noisy_held)
  problem = spec.build()
  optimizer = optimizer or hierarchical_rnn.HierarchicalRNN(
      [6, 8, 5], init_lr_range=(1e-3, 1e-3), use_second_derivatives=False)
  config = config_lib.TrainingConfig(**dict(
      dict(meta_objective="validation", validation_fraction=0.2), **overrides))
  return task_lib.MetaTrainingTask(problem, "mlp", dataset, batch_size,
                                   optimizer, config, lambda _: None)


def _first_unroll(task):
  schedule = config_lib.Schedule(1, fix_unroll=True, fix_unroll_length=5,
                                 fix_num_steps=5)
  np.random.seed(0)
  plan = task.planner.meta_iteration(0, schedule, None)
  inputs = task.unroll_inputs(
      task.series_tensors(plan), 0,
      task.mini_dataset(plan.draws.mini_rows[0]), False, True, True)
  return plan, task.eval_unroll(inputs, None)


def _selection_run(task, run):
  """A selection run of ``task`` as meta-testing makes it, independently of
  the selection's code: its minibatch objectives and final parameters."""
  with selection.fixed_initial_learning_rate(task.optimizer,
                                             run.learning_rate):
    objectives, params, _ = testing.test_optimizer(
        task.optimizer, task.problem, len(run.batches), dataset=task.dataset,
        batch_size=task.batch_size, seed=run.params, batches=run.batches,
        progress=False, jit_compile=True)
  return objectives, params


def test_meta_objective_is_the_held_back_loss_and_training_never_reads_it(
    data_dir):
  task = _task(data_dir)
  spec, full, _ = _mnist(data_dir)
  train, held = task_lib.validation_split(ROWS, 0.2)
  # Meta-training's data is the training rows only.
  np.testing.assert_array_equal(task.data, full.data[train])
  assert task.planner.data_size == len(train) == task.dataset.size
  plan, out = _first_unroll(task)
  assert max(int(np.max(b)) for b in plan.draws.batches) < len(train)
  # Independent truth: the objective of the initial parameters on the
  # held-back rows (one-hot over the whole dataset's labels).
  init = [tf.constant(t) for t in plan.draws.init_tensors]
  want = task.problem.objective(
      init, tf.constant(full.data[held]),
      tf.constant(datasets.one_hot_rows(full.labels[held], 10)))
  objectives = out.problem_objectives.numpy()
  assert objectives[0] == pytest.approx(float(want), rel=1e-5)
  on_train = task.problem.objective(init, *task.mini_dataset(
      plan.draws.mini_rows[0]))
  assert abs(objectives[0] - float(on_train)) > 1e-4
  # Noise in the held-back rows changes the meta-objective, and not one
  # bit of the trajectory.
  noisy_plan, noisy = _first_unroll(_task(data_dir, noisy_held=True,
                                          optimizer=task.optimizer))
  for a, b in zip(plan.draws.init_tensors, noisy_plan.draws.init_tensors):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(out.final_state.params, noisy.final_state.params):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert np.all(np.abs(noisy.problem_objectives.numpy() - objectives) > 1e-3)


def test_the_default_objective_is_the_mini_dataset(data_dir):
  task = _task(data_dir, meta_objective="train")
  assert task.planner.data_size == ROWS and task.objective_rows is None
  plan, out = _first_unroll(task)
  init = [tf.constant(t) for t in plan.draws.init_tensors]
  want = task.problem.objective(init, *task.mini_dataset(
      plan.draws.mini_rows[0]))
  assert out.problem_objectives.numpy()[0] == pytest.approx(float(want),
                                                            rel=1e-5)


def test_robust_selection_scores_the_held_back_loss(data_dir):
  task = _task(data_dir, selection_steps=20, selection_seeds=(1, 2))
  result = task.robust_score()
  _, full, _ = _mnist(data_dir)
  _, held = task_lib.validation_split(ROWS, 0.2)
  held_data = (tf.constant(full.data[held]),
               tf.constant(datasets.one_hot_rows(full.labels[held], 10)))
  runs = task._selection_runs  # pylint: disable=protected-access
  assert [len(r.batches) for r in runs] == [20, 20]
  assert max(int(np.max(r.batches)) for r in runs) < task.planner.data_size
  for run, final in zip(runs, result.finals):
    _, params = _selection_run(task, run)
    want = task.problem.objective([tf.constant(p) for p in params],
                                  *held_data)
    assert final == pytest.approx(float(want), rel=1e-4)
  assert result.score == pytest.approx(np.mean(result.finals))


def test_a_resumed_validation_run_equals_the_uninterrupted_one(tmp_path,
                                                               data_dir):
  """The held-back rows are a fixed draw and take nothing from the run's
  random streams, so 2 + 1 meta-iterations with a resume end with the
  meta-parameters of 3 straight (fast-forward and robust selection on).

  With ``reset_rnn_params=False`` and random initial learning rates, every
  series starts a fresh optimizer state with its own draw: inside the
  compiled unroll, or in the fast-forward for the series that have one
  (both kinds occur), and the resumed run draws them as the uninterrupted
  run does."""
  spec, dataset, batch_size = _mnist(data_dir)
  optimizer = spec_lib.Spec(hierarchical_rnn.HierarchicalRNN, ([6, 8, 5],),
                            {"init_lr_range": (1e-6, 1e-2),
                             "use_second_derivatives": False})
  config = config_lib.TrainingConfig(
      meta_objective="validation", fast_forward_max_steps=30,
      fast_forward_fraction=0.5, selection="robust", selection_steps=20,
      selection_seeds=(1,), reset_rnn_params=False)

  def train(logdir, iterations):
    out = io.StringIO()
    metaopt.train_optimizer(
        logdir, optimizer, [(spec, dataset, batch_size)], 1, iterations,
        lambda: 2, lambda: 5, learning_rate=1e-3, fix_unroll=True,
        fix_unroll_length=5, fix_num_steps=10, fix_num_steps_eval=10,
        evaluation_epochs=1, evaluation_period=1, out=out, config=config,
        summaries=False)
    return out.getvalue()

  straight_log, resumed_log = resume_check.assert_resumes_exactly(
      train, tmp_path)
  assert "240 rows" in straight_log  # 300 rows less the held-back 60
  # One series per meta-iteration, 3 meta-iterations: some series start in
  # a fast-forward, some in the compiled unroll.
  assert 0 < straight_log.count("fast-forward of") < 3, straight_log
  assert "Resuming from" in resumed_log


def test_selection_on_a_validation_split_keeps_the_training_objective(
    data_dir):
  """--selection_objective=validation: the rows are held back from all of
  meta-training and score the robust selection, and the meta-objective is
  still the original's (the mini dataset of the remaining rows)."""
  task = _task(data_dir, meta_objective="train",
               selection_objective="validation", selection_steps=20,
               selection_seeds=(1,))
  _, full, _ = _mnist(data_dir)
  train, held = task_lib.validation_split(ROWS, 0.2)
  np.testing.assert_array_equal(task.data, full.data[train])
  assert task.objective_rows is None
  plan, out = _first_unroll(task)
  assert max(int(np.max(b)) for b in plan.draws.batches) < len(train)
  init = [tf.constant(t) for t in plan.draws.init_tensors]
  on_mini = task.problem.objective(init, *task.mini_dataset(
      plan.draws.mini_rows[0]))
  assert out.problem_objectives.numpy()[0] == pytest.approx(float(on_mini),
                                                            rel=1e-5)
  # The score is the held-back rows' loss at the end of the selection run.
  result = task.robust_score()
  run = task._selection_runs[0]  # pylint: disable=protected-access
  objectives, params = _selection_run(task, run)
  want = task.problem.objective(
      [tf.constant(p) for p in params], tf.constant(full.data[held]),
      tf.constant(datasets.one_hot_rows(full.labels[held], 10)))
  assert result.finals[0] == pytest.approx(float(want), rel=1e-4)
  assert abs(result.finals[0] - float(np.mean(objectives[-10:]))) > 1e-4
