"""Meta-training logic: the original's schedules and quirks, the curriculum
and imitation pieces on scripted scenarios, and a short real run that writes
checkpoints and resumes."""

import io
import os
import random
import types

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_training import curriculum as curriculum_lib
from l2o_scale import metaopt
from l2o_scale.meta_training import mt_utils
from l2o_scale.steps import tf1_optimizers
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import train_state
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import unroll as unroll_lib
from optimizer import hierarchical_rnn
from problems import problem_generator as pg
from problems import problem_spec
from tests import resume_check


def test_regularizer_switch_quirks():
  sw = plan_lib.regularizer_switch
  # 'none' disables the regularizer in every unroll (the paper's command).
  assert not any(sw(u, 5, "none", 0.5) for u in range(5))
  # 'posterior': on strictly after int(5 * 0.5 + 1) = 3.
  assert [sw(u, 5, "posterior", 0.5) for u in range(5)] == [
      False, False, False, False, True]
  assert [sw(u, 5, "prior", 0.5) for u in range(5)] == [
      True, True, True, False, False]
  assert all(sw(u, 5, "always", 0.5) for u in range(5))


def test_sample_numiter_bounds_and_sigmoid_weights():
  np.random.seed(0)
  samples = [plan_lib.sample_numiter(40, 10) for _ in range(500)]
  assert min(samples) >= 10 and max(samples) <= 30
  w = plan_lib.sigmoid_weights(20)
  assert w.sum() == pytest.approx(1.) and np.all(np.diff(w) > 0)


def test_split_batches_mt_stride():
  batches = list(range(12))
  assert plan_lib.split_batches(batches, [2, 4]) == [[0, 1], [2, 3, 4, 5]]
  # k = 2: every other batch for the learner, consecutive groups of 2*n.
  assert plan_lib.split_batches(batches, [2, 4], 2) == [[0, 2], [4, 6, 8, 10]]


def test_curriculum_scripted():
  cl = curriculum_lib.Curriculum(unroll_length=20)
  assert cl.train_unrolls == 5 and cl.eval_unrolls == 10
  assert cl.observe(5.).action == "improved"
  assert cl.observe(6.).action == "continue"
  # Third evaluation at this stage, an earlier one improved: promote.
  decision = cl.observe(7.)
  assert decision == curriculum_lib.Decision("promote", 0)
  assert cl.stage == 1 and cl.train_unrolls == 10 and cl.eval_unrolls == 25
  cl.reset_best(4.)
  assert cl.observe(4.5).action == "continue"
  assert cl.observe(4.6).action == "continue"
  assert cl.observe(4.7).action == "stop"


def test_teacher_adam_matches_numpy():
  problem = pg.Quadratic(4, random_seed=1)
  init = [np.random.RandomState(0).randn(4, 1).astype(np.float32)]
  labels = mt_utils.MTUtils(problem).get_mt_labels(
      init, np.zeros([0]), np.zeros([0], np.int32), [np.zeros([0], int)] * 2,
      [[[]] * 3, [[]] * 3])
  x, m, v = init[0].astype(np.float64), 0., 0.
  expected = []
  for t in range(1, 7):
    g = problem.w.T @ (problem.w @ x - problem.y)
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    lr = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    step = lr * m / (np.sqrt(v) + 1e-8)
    x = x - step
    expected.append(step)
  got = [s[0] for unroll in labels for s in unroll]
  assert len(got) == 6
  for a, b in zip(got, expected):
    np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-7)


def test_tf1_rmsprop_starts_mean_square_at_one():
  v = tf.Variable([1.])
  opt = tf1_optimizers.RMSProp([v], learning_rate=0.1, decay=0.9,
                               epsilon=1e-20)
  opt.apply_gradients([tf.constant([2.])])
  # ms = 0.9 * 1 + 0.1 * 4 = 1.3; step = 0.1 * 2 / sqrt(1.3)
  assert v.numpy()[0] == pytest.approx(1. - 0.2 / np.sqrt(1.3), rel=1e-6)


def _quadratic_spec():
  return [(problem_spec.Spec(pg.Quadratic, (5,), {"random_seed": 3}), None,
           None)]


# The default range of --min_lr/--max_lr: every fresh optimizer state draws
# its initial learning rates.
_RANDOM_LR = (1e-6, 1e-2)


def _optimizer_spec(init_lr_range=(1e-3, 1e-3)):
  return problem_spec.Spec(hierarchical_rnn.HierarchicalRNN, ([6, 8, 5],),
                           {"init_lr_range": init_lr_range,
                            "use_second_derivatives": False})


def _recording_spec(built, init_lr_range=(1e-3, 1e-3)):
  """``_optimizer_spec`` whose builds append their initial meta-parameters
  (by TF1 name) to ``built``: the values training starts from."""
  def build(*args, **kwargs):
    opt = hierarchical_rnn.HierarchicalRNN(*args, **kwargs)
    built.append({n: v.numpy().copy()
                  for n, v in opt.tf1_variables().items()})
    return opt
  spec = _optimizer_spec(init_lr_range)
  return problem_spec.Spec(build, spec.args, spec.kwargs)


def _restored(path):
  """The meta-parameters of checkpoint ``path``, by TF1 name."""
  from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
  opt = _optimizer_spec().build()
  checkpoints.restore_optimizer(path, opt)
  return {n: v.numpy() for n, v in opt.tf1_variables().items()}


def _moved(before, after):
  """Names of the meta-parameters that differ (beyond float noise)."""
  assert sorted(before) == sorted(after)
  return [n for n in before
          if not np.allclose(before[n], after[n], rtol=0., atol=1e-7)]


def _train(logdir, iterations, init_lr_range=(1e-3, 1e-3), built=None,
           **kwargs):
  out = io.StringIO()
  spec = (_optimizer_spec(init_lr_range) if built is None
          else _recording_spec(built, init_lr_range))
  result = metaopt.train_optimizer(
      logdir, spec, _quadratic_spec(), 1,
      iterations,
      lambda: 2, lambda: 5, learning_rate=1e-3, gradient_clip=1e4,
      fix_unroll=True, fix_unroll_length=5, fix_num_steps=10,
      fix_num_steps_eval=10, evaluation_epochs=1, out=out, **kwargs)
  return result, out.getvalue()


def test_train_writes_checkpoints_and_resumes(tmp_path):
  logdir = str(tmp_path / "HierarchicalRNN_GRUCell_20_2")
  built = []
  result, log = _train(logdir, 2, built=built)
  names = sorted(f for f in os.listdir(logdir) if f.endswith(".index"))
  assert names == ["model.ckpt-0.index", "model.ckpt-1.index",
                   "model.ckpt-2.index"]
  assert "[meta-iteration 2/2] unroll 2/2" in log and "meta-objective" in log
  assert any(f.startswith("events.out.tfevents") and f.endswith(".v2")
             for f in os.listdir(logdir))
  assert result["meta_iterations"] == 2
  # Meta-parameters moved: each meta-iteration's checkpoint differs from the
  # values training started from, and the second from the first.
  assert len(built) == 1
  first = _restored(os.path.join(logdir, "model.ckpt-1"))
  second = _restored(os.path.join(logdir, "model.ckpt-2"))
  assert _moved(built[0], first) and _moved(first, second)
  result, log = _train(logdir, 3)
  assert "Resuming from" in log and "at meta-iteration 2 of 3" in log
  assert "[meta-iteration 1/3]" not in log and "[meta-iteration 3/3]" in log
  assert os.path.exists(os.path.join(logdir, "model.ckpt-3.index"))
  _, log = _train(logdir, 3)
  assert "already complete" in log


def _checkpoint_values(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(("optimizer/", "meta_optimizer/"))}


@pytest.mark.parametrize("meta_optimizer,warmup,meta_batch_size",
                         [("rmsprop_ms0", 0, 1), ("adam", 3, 2)])
def test_resumed_run_with_a_meta_optimizer_option_equals_uninterrupted(
    tmp_path, meta_optimizer, warmup, meta_batch_size):
  """Also with --meta_batch_size=2: each meta-iteration draws two optimizee
  instances (their own initial parameters), carries a state per instance
  and saves both, and the resumed run ends where the uninterrupted one
  does."""
  config = metaopt.TrainingConfig(meta_optimizer=meta_optimizer,
                                  meta_lr_warmup=warmup,
                                  meta_batch_size=meta_batch_size)

  def train(logdir, iterations):
    np.random.seed(1)
    random.seed(1)
    tf.random.set_seed(1)
    return _train(str(logdir), iterations, config=config, summaries=False)

  train(tmp_path / "straight", 3)
  train(tmp_path / "resumed", 2)
  _, log = train(tmp_path / "resumed", 3)
  assert "at meta-iteration 2 of 3" in log
  # The last checkpoint, and the best model chosen over the evaluations of
  # both parts of the run.
  for checkpoint in ("model.ckpt-0", "model.ckpt-3"):
    straight = _checkpoint_values(str(tmp_path / "straight" / checkpoint))
    resumed = _checkpoint_values(str(tmp_path / "resumed" / checkpoint))
    assert sorted(straight) == sorted(resumed)
    for name in straight:
      np.testing.assert_array_equal(straight[name], resumed[name],
                                    err_msg=checkpoint + " " + name)
  assert any("/m/" in n for n in straight) == (meta_optimizer == "adam")
  # 3 meta-iterations of 2 meta-updates, the meta-parameters moved.
  assert straight["meta_optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE"] == 6
  first = _checkpoint_values(str(tmp_path / "straight" / "model.ckpt-1"))
  assert any(not np.array_equal(first[n], straight[n]) for n in straight
             if n.startswith("optimizer/"))
  with np.load(str(tmp_path / "straight" / "model.ckpt-3.resume.npz")) as saved:
    single = len(train_state.CarriedState(
        _quadratic_spec()[0][0].build(), _optimizer_spec().build())
        .to_arrays())
    assert sum(k.startswith("carried_") for k in saved.files) == (
        meta_batch_size * single)


def test_mini_batch_larger_than_data_uses_all(tmp_path, data_dir):
  from problems import problem_sets  # pylint: disable=g-import-not-at-top
  problems = problem_sets.mnist_mlp_problems(data_dir=data_dir)
  out = io.StringIO()
  metaopt.train_optimizer(
      str(tmp_path), _optimizer_spec(), problems, 1, 1, lambda: 1, lambda: 2,
      learning_rate=1e-4, fix_unroll=True, fix_unroll_length=2,
      fix_num_steps=2, fix_num_steps_eval=2, evaluation_epochs=1, out=out,
      config=metaopt.TrainingConfig(mini_batch_size=10000), summaries=False)
  assert ("the dataset has 5000 rows, fewer than --mini_batch_size=10000"
          in out.getvalue())


class _NegativeQuadratic(pg.Quadratic):

  def objective(self, params, data=None, labels=None):
    return super().objective(params) - 1e6


def test_negative_objectives_are_rejected(tmp_path):
  spec = [(problem_spec.Spec(_NegativeQuadratic, (3,), {}), None, None)]
  with pytest.raises(ValueError, match="nonnegative"):
    metaopt.train_optimizer(
        str(tmp_path), _optimizer_spec(), spec, 1, 1, lambda: 1, lambda: 2,
        fix_unroll=True, fix_unroll_length=2, fix_num_steps=2,
        evaluation_epochs=1, out=io.StringIO(), summaries=False)


class _NanQuadratic(pg.Quadratic):
  """Becomes NaN after the first step: the original zeroes such gradients."""

  def objective(self, params, data=None, labels=None):
    value = super().objective(params)
    return value + tf.math.log(tf.reduce_min(params[0]) * 0. - 1.)


def test_nonfinite_meta_gradients_are_zeroed_and_reported(tmp_path):
  spec = [(problem_spec.Spec(_NanQuadratic, (3,), {"random_seed": 1}), None,
           None)]
  """Every meta-gradient of an unroll whose objective turns NaN is NaN; the
  original zeroes them, so the meta-update (RMSProp with a zero gradient)
  leaves every meta-parameter exactly where it was, and the log says so."""
  built = []
  out = io.StringIO()
  result = metaopt.train_optimizer(
      str(tmp_path), _recording_spec(built), spec, 1, 1, lambda: 1,
      lambda: 2, fix_unroll=True, fix_unroll_length=2, fix_num_steps=2,
      fix_num_steps_eval=2, evaluation_epochs=1, out=out, summaries=False)
  log = out.getvalue()
  assert "non-finite" in log and result["nonfinite_unrolls"] >= 1
  after = _restored(str(tmp_path / "model.ckpt-1"))
  for name, value in after.items():
    assert np.all(np.isfinite(value)), name
    np.testing.assert_array_equal(value, built[0][name], err_msg=name)
  # The zeroing itself, on the meta-learner every training loop applies
  # meta-gradients through: NaN and inf entries become 0 (so RMSProp leaves
  # those meta-parameters exactly in place), finite ones are clipped and
  # applied, and the count is returned.
  from l2o_scale.meta_training import meta_learner  # pylint: disable=g-import-not-at-top
  variables = [tf.Variable(np.ones((2, 3), np.float32)),
               tf.Variable(np.ones(4, np.float32))]
  learner = meta_learner.MetaLearner(meta_learner.build_meta_optimizer(
      variables, 0.1, metaopt.TrainingConfig()), gradient_clip=1.)
  grads = [tf.constant([[np.nan, 0.5, -np.inf], [2., np.nan, -0.25]],
                       tf.float32),
           tf.constant([np.inf, 1., np.nan, -3.], tf.float32)]
  update = learner.apply(grads)
  assert update.nonfinite == 5 and update.entries == 10
  np.testing.assert_array_equal(update.clipped[0].numpy(),
                                [[0., .5, 0.], [1., 0., -.25]])
  np.testing.assert_array_equal(update.clipped[1].numpy(), [0., 1., 0., -1.])
  for var, grad in zip(variables, grads):
    bad = ~np.isfinite(grad.numpy())
    assert np.all(np.isfinite(var.numpy()))
    assert np.all(var.numpy()[bad] == 1.)
    assert np.all(var.numpy()[~bad] != 1.)


def _quadratic_inputs(problem, steps=5):
  """A first unroll of ``steps`` steps from ones on a data-free problem."""
  return unroll_lib.UnrollInputs(
      obj_weights=tf.ones([steps]) / steps,
      batches=tf.zeros([steps, 0], tf.int32), mini_data=tf.zeros([0]),
      mini_labels=tf.zeros([0]), init_tensors=[tf.ones([3, 1])],
      jacob_switch=tf.constant(False),
      mt_labels=unroll_lib.zero_mt_labels(problem.param_shapes, steps),
      first_unroll=True, reset_state=True)


def test_unroll_stops_when_objective_is_not_finite():
  problem = _NanQuadratic(3, random_seed=1)
  opt = hierarchical_rnn.HierarchicalRNN([4, 4, 4], init_lr_range=(1e-3, 1e-3))
  out = unroll_lib.unroll(problem, opt, _quadratic_inputs(problem), None)
  # The loop condition checks the accumulated objective before each step.
  assert out.problem_objectives.shape[0] == 2


def test_objective_limit_and_the_unroll_stop_it_drives():
  assert unroll_lib.objective_limit(2., 3.) == 6.  # 2 + 2 * |2|
  assert unroll_lib.objective_limit(-2., 3.) == 2.  # -2 + 2 * |-2|
  # A learning rate of 10 on the quadratic blows the objective up at once:
  # with obj_train_max_multiplier=2 the loop stops after the first step
  # whose objective exceeds 2x (initial + |initial|); without it, it runs on.
  problem = pg.Quadratic(3, random_seed=1)
  steps = []
  for multiplier in (2., -1.):
    opt = hierarchical_rnn.HierarchicalRNN(
        [4, 4, 4], init_lr_range=(10., 10.),
        obj_train_max_multiplier=multiplier)
    out = unroll_lib.unroll(problem, opt, _quadratic_inputs(problem), None)
    objectives = out.problem_objectives.numpy()
    steps.append(len(objectives))
    if multiplier > 0:
      limit = unroll_lib.objective_limit(float(out.initial_obj), multiplier)
      assert objectives[-1] >= limit and np.all(objectives[:-1] < limit)
  assert steps[0] < 6 and steps[1] == 6


def test_imitation_meta_iteration_with_k_teacher_steps(tmp_path):
  """An MT meta-iteration (mt_ratio=1) with mt_k=2 trains on the imitation
  objective and moves the meta-parameters."""
  config = metaopt.TrainingConfig(if_mt=True, mt_ratio=1.0, mt_k=2)
  built = []
  out = io.StringIO()
  metaopt.train_optimizer(
      str(tmp_path), _recording_spec(built), _quadratic_spec(), 1, 1,
      lambda: 1, lambda: 2,
      learning_rate=1e-2, fix_unroll=True, fix_unroll_length=3,
      fix_num_steps=6, fix_num_steps_eval=3, evaluation_epochs=1, out=out,
      config=config, summaries=False)
  log = out.getvalue()
  assert "imitation on Quadratic: 2 unrolls of 3 steps" in log
  assert "(3 steps, imitation) meta-objective" in log
  # The checkpoint differs from the values this training started from.
  assert len(built) == 1
  assert _moved(built[0], _restored(str(tmp_path / "model.ckpt-1")))


def test_meta_training_sees_the_problems_gradient_transform():
  """SparseProblem's gradient sparsification (the original's ``gradients``
  override) also applies inside meta-training unrolls."""
  sparse = pg.SparseProblem(
      problem_spec.Spec(pg.Quadratic, (6,), {"random_seed": 2}),
      zero_probability=1.0)
  params = [tf.ones((6, 1))]
  grads, _ = unroll_lib._step_gradients(  # pylint: disable=protected-access
      sparse, params, tf.zeros([0]), tf.zeros([0]), regularizer_lib.NO_REGULARIZER,
      tf.constant(False))
  assert np.all(grads[0].numpy() == 0.)
  dense, _ = unroll_lib._step_gradients(  # pylint: disable=protected-access
      sparse.problem, params, tf.zeros([0]), tf.zeros([0]),
      regularizer_lib.NO_REGULARIZER, tf.constant(False))
  assert np.any(dense[0].numpy() != 0.)


def test_a_long_evaluation_reports_progress_with_the_time_left():
  """At most one line every `every` seconds, none after the last run, the
  estimate from the mean time per finished run."""
  from l2o_scale.meta_training import reporting  # pylint: disable=g-import-not-at-top
  out = io.StringIO()
  reporter = reporting.Reporter(out, None, "p", types.SimpleNamespace(
      meta_variables=[]), 1)
  now = [0.]
  progress = reporting.Progress(reporter, "evaluation", 20, every=10.,
                                clock=lambda: now[0])
  for count in range(1, 21):
    now[0] = 3. * count  # 3 s per run
    progress.done(count)
  lines = out.getvalue().splitlines()
  assert lines[0] == "  evaluation: 4 of 20 runs done, about 48 s left"
  assert lines[-1] == "  evaluation: 16 of 20 runs done, about 12 s left"
  assert len(lines) == 4  # after runs 4, 8, 12, 16


def test_fast_forward_draws_only_when_asked():
  """--fast_forward_max_steps=0 (the original) draws nothing extra; with
  fraction 1 every series gets 1..N steps of batches over the data."""
  problem = _quadratic_spec()[0][0].build()
  np.random.seed(3)
  off = plan_lib.Planner(problem, 50, 8, 50, metaopt.TrainingConfig())
  assert off.fast_forward() is None
  after_off = np.random.uniform()
  np.random.seed(3)
  assert np.random.uniform() == after_off
  on = plan_lib.Planner(problem, 50, 8, 50, metaopt.TrainingConfig(
      fast_forward_max_steps=300, fast_forward_fraction=1.))
  draws = [on.fast_forward() for _ in range(200)]
  steps = [len(d) for d in draws]
  assert min(steps) >= 1 and max(steps) <= 300
  assert np.median(steps) < 100  # log-uniform, not uniform
  assert all(d.shape[1] == 8 and d.min() >= 0 and d.max() < 50
             for d in draws)
  never = plan_lib.Planner(problem, 50, 8, 50, metaopt.TrainingConfig(
      fast_forward_max_steps=300, fast_forward_fraction=0.))
  assert all(never.fast_forward() is None for _ in range(20))


def test_fast_forwarded_series_start_from_the_problems_initialisation():
  """--fast_forward_init=problem: a series with a fast-forward starts from
  the problem's own initialisation (here N(0, 0.01)), one without keeps
  N(0, 1); every other draw of the meta-iteration is the one of
  --fast_forward_init=same (the problem's start is drawn after them)."""
  problem = pg.FullyConnected(6, 3, hidden_sizes=(4,))
  schedule = types.SimpleNamespace(fix_unroll=True, fix_unroll_length=5,
                                   fix_num_steps=10, if_cl=False)

  def plans(init):
    planner = plan_lib.Planner(problem, 40, 8, 40, metaopt.TrainingConfig(
        fast_forward_max_steps=50, fast_forward_fraction=0.5,
        fast_forward_init=init))
    out = []
    for k in range(12):  # The same streams at the start of each.
      np.random.seed(k)
      random.seed(k)
      out.append(planner.meta_iteration(k, schedule, None))
    return out

  same, problem_init = plans("same"), plans("problem")
  forwarded = 0
  for a, b in zip(same, problem_init):
    a, b = a.draws, b.draws
    assert (a.fast_forward is None) == (b.fast_forward is None)
    if a.fast_forward is not None:
      np.testing.assert_array_equal(a.fast_forward, b.fast_forward)
    for x, y in zip(a.batches + a.mini_rows, b.batches + b.mini_rows):
      np.testing.assert_array_equal(x, y)
    largest = max(np.abs(t).max() for t in b.init_tensors)
    if b.fast_forward is None:
      assert largest > 1.  # N(0, 1): 54 values
      for x, y in zip(a.init_tensors, b.init_tensors):
        np.testing.assert_array_equal(x, y)
    else:
      forwarded += 1
      assert largest < 0.1  # N(0, 0.01): 54 values, within 10 sigma
  assert 0 < forwarded < 12


def test_a_series_after_a_fast_forward_continues_the_trajectory(tmp_path):
  """With a fast-forward, the first unroll starts where the learned
  optimizer's own S-step run from the same initial parameters ends (a
  meta-test run), not from the initial parameters; training runs and
  resumes exactly, with random initial learning rates in every
  fast-forward's fresh state."""
  config = metaopt.TrainingConfig(fast_forward_max_steps=40,
                                  fast_forward_fraction=1.)
  (result, log), (_, resumed_log) = resume_check.assert_resumes_exactly(
      lambda logdir, n: _train(logdir, n, _RANDOM_LR, config=config),
      tmp_path)
  assert result["meta_iterations"] == 3
  assert "fast-forward of" in log
  assert "Resuming from" in resumed_log


def test_fast_forward_state_is_the_meta_test_run_from_the_same_start():
  from l2o_scale.meta_testing import compiled_run  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import task as task_lib  # pylint: disable=g-import-not-at-top
  problem = _quadratic_spec()[0][0].build()
  optimizer = _optimizer_spec().build()
  config = metaopt.TrainingConfig(fast_forward_max_steps=30,
                                  fast_forward_fraction=1.)
  task = task_lib.MetaTrainingTask(problem, "q", None, None, optimizer,
                                   config, print)
  init = [np.full(s, 2., np.float32) for s in problem.param_shapes]
  draws = plan_lib.SeriesDraws(init, [], [], None,
                               np.zeros((30, 0), np.int32))
  state = task.fast_forward(draws, task.mini_dataset([]))
  run = compiled_run.CompiledRun(optimizer, problem,
                                 [tf.constant(t) for t in init], None, None,
                                 False)
  objectives = run.run_chunk(tf.zeros((30, 0), tf.int32)).numpy()
  for got, want in zip(state.params, run.param_vars):
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
  start = float(problem.objective([tf.constant(t) for t in init], None, None))
  assert float(state.initial_obj) == pytest.approx(start)
  end = float(problem.objective(state.params, None, None))
  # It moved: the state is not the start (whether the untrained optimizer's
  # 30 steps lower the objective depends on its random meta-parameters).
  assert end != start and objectives[-1] != objectives[0]
  # The first unroll of the series starts from that state.
  inputs = task.unroll_inputs(task.series_tensors(plan_lib.MetaIterationPlan(
      0, [5], False, (plan_lib.SeriesDraws(
          init, [np.zeros((5, 0), np.int32)], [np.zeros([0], np.int64)],
          None, draws.fast_forward),), [False], True)), 0,
      task.mini_dataset([]), False, False, False)
  out, _ = task.meta_step(inputs, state, False)
  assert out.problem_objectives.numpy()[0] == pytest.approx(end, rel=1e-5)
