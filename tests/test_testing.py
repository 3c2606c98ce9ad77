"""Tests of l2o_scale.meta_testing.testing (metaopt.test_optimizer / run_wall_clock_test)."""

import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_testing import baselines
from l2o_scale.runs import checkpoints
from l2o_scale import metaopt
from l2o_scale.meta_testing import testing
from optimizer import hierarchical_rnn
from problems import datasets
from problems import problem_generator as pg


def _fixture(fixtures_dir):
  folder = os.path.join(fixtures_dir, "mnist_mlp_sigmoid")
  with open(os.path.join(folder, "spec.json")) as f:
    spec = json.load(f)
  return folder, spec, np.load(os.path.join(folder, "arrays.npz"))


def _fixture_problem_and_optimizer(spec):
  kwargs = dict(spec["problem"]["kwargs"])
  kwargs["activation"] = tf.nn.sigmoid
  problem = pg.FullyConnected(*spec["problem"]["args"], **kwargs)
  opt = hierarchical_rnn.HierarchicalRNN(spec["optimizer"]["level_sizes"],
                                         **spec["optimizer"]["kwargs"])
  return problem, opt


def _max_rel(port, expected):
  return np.max(np.abs(port - expected)) / (np.max(np.abs(expected)) + 1e-12)


def _rel_l2(port, expected):
  return np.linalg.norm(port - expected) / (np.linalg.norm(expected) + 1e-12)


def test_replays_tf1_fixture_with_records(fixtures_dir, data_dir):
  folder, spec, arrays = _fixture(fixtures_dir)
  problem, opt = _fixture_problem_and_optimizer(spec)
  dataset = datasets.mnist(train=False, data_dir=data_dir)
  n = spec["num_steps"]
  seen = []
  objs, params, records = metaopt.test_optimizer(
      opt, problem, n, dataset=dataset, batch_size=spec["batch_size"],
      seed=[arrays["init{}".format(i)] for i in range(4)],
      logdir=os.path.join(folder, "ckpt"), restore_model_name="model.ckpt-0",
      record_every=50, batches=arrays["batches"], progress=seen.append,
      progress_every=40)
  tol = spec["tolerances"]
  assert len(objs) == n
  assert _max_rel(np.array(objs), arrays["objectives"]) < \
      tol["objectives"]["max_rel"]
  for i, p in enumerate(params):
    assert _rel_l2(p, arrays["final{}".format(i)]) < tol["final"]["rel_l2"]
  # Records before steps 0 and 50, as the original.
  assert records["iter"] == [0, 50]
  assert len(records["objective"]) == 2
  assert all(np.isfinite(records["objective"]))
  assert records["objective"][1] < records["objective"][0]
  assert [len(g) for g in records["grad_norm"]] == [4, 4]
  np.testing.assert_allclose(records["param_norm"][0],
                             [np.linalg.norm(arrays["init{}".format(i)])
                              for i in range(4)], rtol=1e-5)
  assert records["param0_log_learning_rate"][0].shape == (784 * 20, 1)
  # Progress was reported during the run (chunks at 40, 50, 80, 100).
  assert [p["iteration"] for p in seen] == [40, 80, 100]
  # The first chunk (steps 0-40) compiles; later rates leave it out.
  assert [p["includes_compile"] for p in seen] == [True, False, False]


def test_speed_leaves_out_the_compiling_chunk():
  # Started at t=0, first chunk (40 steps, with compiling) ended at t=30.
  first = testing._speed(0.0, (30.0, 40), 30.0, 40)  # pylint: disable=protected-access
  assert first == dict(steps_per_second=40 / 30.0, includes_compile=True)
  later = testing._speed(0.0, (30.0, 40), 32.0, 100)  # pylint: disable=protected-access
  assert later == dict(steps_per_second=30.0, includes_compile=False)


def test_baselines_follow_tf1_update_rules():
  problem = pg.Quadratic(5, random_seed=3)
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  w, y = problem.w.astype(np.float64), problem.y.astype(np.float64)

  def grad(x):
    return w.T @ (w @ x - y)

  for name in ["SGD", "Adam", "Adagrad"]:
    opt = baselines.build(name)
    _, params, _ = testing.test_optimizer(opt, problem, 3, seed=init,
                                          progress=False)
    x = init[0].astype(np.float64)
    m = v = np.zeros_like(x)
    acc = np.full_like(x, 0.1)
    lr = baselines.EVAL_LEARNING_RATES[name]
    for t in range(1, 4):
      g = grad(x)
      if name == "SGD":
        x = x - lr * g
      elif name == "Adam":
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        lr_t = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        x = x - lr_t * m / (np.sqrt(v) + 1e-8)
      else:
        acc = acc + g * g
        x = x - lr * g / np.sqrt(acc)
    np.testing.assert_allclose(params[0], x, rtol=2e-5, atol=1e-7)
    assert not np.allclose(params[0], init[0])


def test_integer_seed_is_reproducible_and_loss_falls(data_dir):
  dataset = datasets.mnist(train=False, data_dir=data_dir)
  problem = pg.FullyConnected(784, 10, hidden_sizes=(20,),
                              activation=tf.nn.relu)
  opt = baselines.build("Adam")
  runs = [testing.test_optimizer(opt, problem, 60, dataset=dataset,
                                 batch_size=128, seed=s, progress=False)[0]
          for s in (6, 6, 12)]
  np.testing.assert_array_equal(runs[0], runs[1])
  assert not np.array_equal(runs[0], runs[2])
  assert all(isinstance(v, np.float32) for v in runs[0])
  assert np.mean(runs[0][-10:]) < np.mean(runs[0][:10]) - 0.01


def test_run_cache_reuses_the_compiled_loop_with_the_same_results():
  problem = pg.Quadratic(5, random_seed=3)
  opt = baselines.build("Adam")
  inits = [[np.random.RandomState(s).randn(5, 1).astype(np.float32)]
           for s in (0, 1)]
  fresh = [testing.test_optimizer(opt, problem, 5, seed=i, progress=False)
           for i in inits]
  cache = testing.RunCache()
  cached = [testing.test_optimizer(opt, problem, 5, seed=i, progress=False,
                                   run_cache=cache) for i in inits]
  run = cache.get(opt, problem, [tf.constant(inits[0][0])], None, None,
                  False)
  assert cache.get(opt, problem, [tf.constant(inits[1][0])], None, None,
                   False) is run  # The same compiled run, reset.
  for (objs_a, params_a, _), (objs_b, params_b, _) in zip(fresh, cached):
    np.testing.assert_array_equal(objs_a, objs_b)
    np.testing.assert_array_equal(params_a[0], params_b[0])
  assert not np.array_equal(cached[0][0], cached[1][0])


def test_heldout_records_loss_and_accuracy(data_dir):
  train = datasets.mnist(train=True, data_dir=data_dir)
  test = datasets.mnist(train=False, data_dir=data_dir)
  problem = pg.FullyConnected(784, 10, hidden_sizes=(20,),
                              activation=tf.nn.relu)
  objs, _, records = testing.test_optimizer(
      baselines.Adam(learning_rate=1e-3), problem, 50, dataset=train,
      batch_size=128, seed=6, heldout_dataset=test, heldout_every=20,
      progress=False)
  assert len(objs) == 50
  assert records["heldout_iter"] == [0, 20, 40, 50]
  acc = records["heldout_accuracy"]
  assert all(0. <= a <= 1. for a in acc)
  assert acc[-1] > acc[0] + 0.2
  assert records["heldout_loss"][-1] < records["heldout_loss"][0]
  assert records["train_loss"][-1] < records["train_loss"][0]


def test_restore_errors(fixtures_dir, tmp_path):
  folder, spec, _ = _fixture(fixtures_dir)
  problem, opt = _fixture_problem_and_optimizer(spec)
  ckpt_dir = os.path.join(folder, "ckpt")
  with pytest.raises(FileNotFoundError, match="model.ckpt-0"):
    testing.test_optimizer(opt, problem, 1, seed=1, logdir=ckpt_dir,
                           restore_model_name="model.ckpt-7", progress=False)
  kwargs = dict(spec["optimizer"]["kwargs"], use_attention=True)
  other = hierarchical_rnn.HierarchicalRNN([10, 20, 20], **kwargs)
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match="has no variable .LOL/.*Attn"):
    testing.test_optimizer(other, problem, 1, seed=1, logdir=ckpt_dir,
                           restore_model_name="model.ckpt-0", progress=False)
  with pytest.raises(TypeError, match="pure step interface"):
    testing.test_optimizer(tf.keras.optimizers.Adam(), problem, 1, seed=1,
                           progress=False)


def test_run_wall_clock_test_is_the_median_per_step_chunk_time(data_dir,
                                                               monkeypatch):
  """The rule, on a scripted clock: one untimed warm-up chunk, then the
  steps in chunks of ``timing_chunk`` (the last one shorter), each timed
  and divided by its own length; the median of those is returned."""
  readings = [0., 1., 10., 14., 20., 21.5]  # chunk durations 1, 4, 1.5
  calls = []

  def clock():
    calls.append(len(calls))
    return readings[len(calls) - 1]

  monkeypatch.setattr(testing, "time", types.SimpleNamespace(time=clock))
  dataset = datasets.mnist(train=False, data_dir=data_dir)
  problem = pg.FullyConnected(784, 10, hidden_sizes=(20,))
  t = metaopt.run_wall_clock_test(baselines.build("SGD"), problem, 25,
                                  dataset=dataset, seed=1, batch_size=128,
                                  timing_chunk=10)
  # Per-step times 1/10, 4/10, 1.5/5: median 0.3 (mean 0.267; dividing
  # the last chunk by 10 would give a median of 0.15).
  assert len(calls) == len(readings)
  assert t == pytest.approx(0.3, rel=1e-12)


@pytest.mark.parametrize("name", ["cosine", "linear"])
def test_step_schedule_scales_every_update(name):
  """SGD under a schedule is SGD whose learning rate follows it (the closed
  form, step by step), with the scales of Keras' own schedules; none keeps
  the constant-step run bit for bit."""
  import keras  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import step_schedule  # pylint: disable=g-import-not-at-top
  steps = 7
  keras_schedule = (keras.optimizers.schedules.CosineDecay(1.0, steps)
                    if name == "cosine" else
                    keras.optimizers.schedules.PolynomialDecay(1.0, steps, 0.))
  scales = step_schedule.step_scales(name, steps)
  np.testing.assert_allclose(scales, keras_schedule(np.arange(steps)),
                             rtol=1e-6, atol=1e-7)
  assert scales[0] == 1. and 0. < scales[-1] < 0.15
  problem = pg.Quadratic(5, random_seed=3)
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  w, y = problem.w.astype(np.float64), problem.y.astype(np.float64)
  opt = baselines.build("SGD", 0.05)
  _, params, _ = testing.test_optimizer(opt, problem, steps, seed=init,
                                        progress=False, step_schedule=name)
  x = init[0].astype(np.float64)
  for t in range(steps):
    x = x - 0.05 * scales[t] * (w.T @ (w @ x - y))
  np.testing.assert_allclose(params[0], x, rtol=2e-5, atol=1e-6)
  plain = testing.test_optimizer(opt, problem, steps, seed=init,
                                 progress=False)
  unscheduled = testing.test_optimizer(opt, problem, steps, seed=init,
                                       progress=False, step_schedule="none")
  np.testing.assert_array_equal(plain[1][0], unscheduled[1][0])
  assert not np.allclose(plain[1][0], params[0])
  with pytest.raises(ValueError, match="unknown step schedule"):
    step_schedule.step_scales("exponential", steps)


def test_step_decay_start_holds_the_step_then_decays():
  from l2o_scale.steps import step_schedule  # pylint: disable=g-import-not-at-top
  scales = step_schedule.step_scales("cosine", 100, decay_start=0.8)
  np.testing.assert_array_equal(scales[:81], 1.)
  np.testing.assert_allclose(scales[80:],
                             step_schedule.step_scales("cosine", 20),
                             rtol=1e-6)
  assert np.all(np.diff(scales[80:]) < 0)
  # The same as Keras' CosineDecay "warming up" from 1 to 1 (the Keras
  # form of this schedule for LearnedOptimizer(learning_rate=...)).
  import keras  # pylint: disable=g-import-not-at-top
  keras_schedule = keras.optimizers.schedules.CosineDecay(
      1.0, decay_steps=20, warmup_target=1.0, warmup_steps=80)
  np.testing.assert_allclose(scales, [float(keras_schedule(t))
                                      for t in range(100)], atol=1e-6)
  for bad in (1., -0.1):
    with pytest.raises(ValueError, match="decay_start"):
      step_schedule.step_scales("cosine", 100, decay_start=bad)


def test_weight_decay_is_decoupled_from_the_update():
  """SGD with a decoupled weight decay follows the closed form x <- x - lr g
  - s wd x step by step (s: the schedule's scale), wd 0 keeps the run bit
  for bit, and a negative decay is refused."""
  from l2o_scale.steps import step_schedule  # pylint: disable=g-import-not-at-top
  steps, lr, wd = 7, 0.05, 0.1
  problem = pg.Quadratic(5, random_seed=3)
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  w, y = problem.w.astype(np.float64), problem.y.astype(np.float64)
  opt = baselines.build("SGD", lr)
  for schedule in ("none", "linear"):
    scales = step_schedule.step_scales(schedule, steps)
    scales = np.ones(steps) if scales is None else scales
    _, params, _ = testing.test_optimizer(opt, problem, steps, seed=init,
                                          progress=False, weight_decay=wd,
                                          step_schedule=schedule)
    x = init[0].astype(np.float64)
    for t in range(steps):
      x = x - scales[t] * (lr * (w.T @ (w @ x - y)) + wd * x)
    np.testing.assert_allclose(params[0], x, rtol=2e-5, atol=1e-6)
  plain = testing.test_optimizer(opt, problem, steps, seed=init,
                                 progress=False)
  undecayed = testing.test_optimizer(opt, problem, steps, seed=init,
                                     progress=False, weight_decay=0.)
  np.testing.assert_array_equal(plain[1][0], undecayed[1][0])
  with pytest.raises(ValueError, match="weight_decay must be >= 0"):
    testing.test_optimizer(opt, problem, steps, seed=init, progress=False,
                           weight_decay=-1e-4)


def test_run_cache_keeps_runs_of_another_weight_decay_apart():
  """The decay is traced into the compiled loop: a cached loop of another
  decay is not reused."""
  problem = pg.Quadratic(5, random_seed=3)
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  opt = baselines.build("SGD", 0.05)
  cache = testing.RunCache()
  runs = [testing.test_optimizer(opt, problem, 5, seed=init, progress=False,
                                 run_cache=cache, weight_decay=wd)[1][0]
          for wd in (0., 0.1, 0.)]
  fresh = testing.test_optimizer(opt, problem, 5, seed=init, progress=False,
                                 weight_decay=0.1)[1][0]
  np.testing.assert_array_equal(runs[1], fresh)
  np.testing.assert_array_equal(runs[0], runs[2])
  assert not np.allclose(runs[0], runs[1])
