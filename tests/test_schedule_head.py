"""The learned schedule-and-decay head (l2o_scale/steps/learned_schedule.py):
a zero-initialised head changes no step (Keras and the meta-test step), its
outputs stay within their bounds for any input, its multiplier moves the
step where the learned learning rate sits at its cap, its scaled decay is
the decay times the multiplier, and its arguments are checked."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from l2o_scale import keras_optimizer
from l2o_scale import pretrained
from l2o_scale.meta_testing import inner_step
from l2o_scale.steps import learned_schedule as ls
from l2o_scale.steps import transform
from optimizer import hierarchical_rnn
from problems import problem_generator as pg
from tests import keras_steps


@pytest.fixture(scope="module")
def shipped():
  return keras_optimizer.LearnedOptimizer.pretrained("l2o-scale")


def test_zero_initialized_head_is_the_optimizer_bit_for_bit_in_keras(shipped):
  learned = shipped.learned_optimizer
  alone = keras_steps.weights_after_steps(keras_optimizer.LearnedOptimizer(learned))
  head = ls.ScheduleHead()
  headed = keras_steps.weights_after_steps(keras_optimizer.LearnedOptimizer(
      learned, schedule_head=head, total_steps=6))
  for a, b in zip(alone, headed):
    assert a.tobytes() == b.tobytes()
  # The head did run: its state counted the steps.
  assert head.state.numpy()[0] == 6.
  # A head that is not zero changes the weights (so the comparison can fail).
  theta = ls.initial_theta()
  theta[-2] = 0.5  # the multiplier's bias
  moved = keras_steps.weights_after_steps(keras_optimizer.LearnedOptimizer(
      learned, schedule_head=ls.ScheduleHead(theta), total_steps=6))
  assert any(not np.array_equal(a, b) for a, b in zip(alone, moved))


def test_zero_initialized_head_is_the_optimizer_in_the_meta_test_step(
    shipped):
  learned = shipped.learned_optimizer
  problem = pg.Quadratic(ndim=6, random_seed=3)
  head = ls.ScheduleHead()
  chain = transform.chain(head)
  progress = ls.progress_inputs(5)
  start = [tf.constant(np.linspace(-2., 2., 6).reshape(6, 1), tf.float32)]

  def run(transforms):
    variables = list(start)
    states = learned.initialize_packed_state(variables, seed=[4, 0])
    global_state = learned.initialize_global_state()
    for t in range(5):
      result = inner_step.inner_step(
          problem, learned, variables, states, global_state, None, None,
          packed=True, transforms=transforms,
          step_inputs={ls.PROGRESS: progress[t]})
      variables, states, global_state = (result.variables, result.states,
                                         result.global_state)
    return [v.numpy() for v in variables]

  alone = run(None)
  assert not np.array_equal(alone[0], start[0].numpy())
  for a, b in zip(alone, run(chain)):
    assert a.tobytes() == b.tobytes()
  assert head.state.numpy()[0] == 5.


def test_outputs_stay_within_their_bounds_for_any_input():
  rng = np.random.default_rng(0)
  bounds = (1e-3, 10., 3e-3)
  seen_low = seen_high = seen_decay = False
  for trial in range(20):
    theta = rng.standard_normal(ls.NUM_PARAMETERS).astype(np.float32) * (
        10. ** rng.uniform(-1, 3))
    feats = tf.constant(rng.standard_normal(ls.NUM_GLOBAL_FEATURES) * 1e3,
                        tf.float32)
    tensor_feats = tf.constant(
        rng.standard_normal((7, ls.NUM_TENSOR_FEATURES)) * 1e3, tf.float32)
    m, w = ls.head_outputs(theta, feats, tensor_feats, *bounds)
    m, w = m.numpy(), w.numpy()
    assert np.all(np.isfinite(m)) and np.all(np.isfinite(w))
    assert np.all(m >= bounds[0] * (1 - 1e-6))
    assert np.all(m <= bounds[1] * (1 + 1e-6))
    assert np.all(w >= 0.) and np.all(w <= bounds[2])
    seen_low |= bool(np.any(m < 2e-3))
    seen_high |= bool(np.any(m > 5.))
    seen_decay |= bool(np.any(w > 1e-3))
    del trial
  # The bounds are reached, not merely respected by a head that never moves.
  assert seen_low and seen_high and seen_decay


def test_features_stay_finite_on_extreme_steps():
  feats, state = ls.global_features(
      0.5, [tf.constant([0., 0.]), tf.constant([1e30])], ls.initial_state())
  assert np.all(np.isfinite(feats.numpy()))
  assert state.numpy()[0] == 1.
  rows = ls.tensor_features([tf.zeros([3, 2]), tf.constant([1e20])],
                            [tf.zeros([3, 2]), tf.constant([-1e20])])
  assert np.all(np.isfinite(rows.numpy()))
  assert rows.numpy()[:, 0].tolist() == [0., 1.]  # matrix, vector


def test_the_multiplier_moves_the_step_where_the_rate_is_at_its_cap():
  # A learned learning rate capped far below its initial range: every
  # coordinate's rate sits at the cap (exp(-12)).
  learned = hierarchical_rnn.HierarchicalRNN(
      [4, 3, 2], init_lr_range=(1e-3, 1e-2), max_log_lr=-12.,
      random_seed=5)
  params = [tf.constant(np.linspace(-1., 1., 6).reshape(2, 3), tf.float32)]
  grads = [tf.constant(np.linspace(0.5, -0.3, 6).reshape(2, 3), tf.float32)]
  packed = learned.initialize_packed_state(params, seed=[1, 0])
  proposed, new_packed, _, _, _ = learned.compute_updates_packed(
      params, grads, packed, learned.initialize_global_state())
  np.testing.assert_allclose(new_packed["log_learning_rate"].numpy().max(),
                             -12., atol=0.1 + 0.1 * 12)
  step = proposed[0].numpy() - params[0].numpy()
  assert np.abs(step).max() > 0.
  theta = ls.initial_theta()
  theta[-2] = 0.6  # the multiplier's bias
  head = ls.ScheduleHead(theta)
  m, w, _ = head.outputs(params, proposed, 0.5, grads, ls.initial_state())
  assert w.numpy()[0] == 0. and m.numpy()[0] > 1.5
  headed = ls.apply_outputs(params, proposed, m, w)[0].numpy()
  # Within a few float32 rounding units of the parameters (~1), far below
  # the change the multiplier makes ((m - 1) |step| ~ 4e-6).
  np.testing.assert_allclose(headed - params[0].numpy(),
                             m.numpy()[0] * step, rtol=0., atol=3e-7)
  assert np.abs((m.numpy()[0] - 1.) * step).min() > 10 * 3e-7


def test_progress_and_total_steps():
  np.testing.assert_allclose(ls.progress_inputs(4), [0., 0.25, 0.5, 0.75])
  assert float(ls.keras_progress(tf.constant(500), 1000)) == 0.5
  assert float(ls.keras_progress(tf.constant(500))) == (
      500. / ls.DEFAULT_TOTAL_STEPS)
  # The embedding holds at progress 1 beyond the run's end.
  a, _ = ls.global_features(1., [tf.ones([2])], ls.initial_state())
  b, _ = ls.global_features(3., [tf.ones([2])], ls.initial_state())
  assert np.array_equal(a.numpy(), b.numpy())


def test_bad_arguments_are_refused(shipped, tmp_path):
  learned = shipped.learned_optimizer
  with pytest.raises(ValueError, match="total_steps"):
    keras_optimizer.LearnedOptimizer(learned, schedule_head=ls.ScheduleHead(),
                                     total_steps=0)
  with pytest.raises(ValueError, match="schedule_head"):
    keras_optimizer.LearnedOptimizer(learned, schedule_head=3)
  with pytest.raises(ValueError, match="min_multiplier"):
    ls.ScheduleHead(min_multiplier=2.)
  with pytest.raises(ValueError, match="max_weight_decay"):
    ls.ScheduleHead(max_weight_decay=1.)
  with pytest.raises(ValueError, match="theta"):
    ls.ScheduleHead(np.zeros(3))
  with pytest.raises(FileNotFoundError, match="no schedule head"):
    ls.schedule_head(str(tmp_path / "missing.npz"))
  with pytest.raises(ValueError, match="progress"):
    ls.ScheduleHead().apply([tf.ones(2)], [tf.ones(2)], {})


def test_scaled_decay_is_the_decay_times_the_multiplier():
  # With decay_scaled_by_multiplier the multipliers are the plain head's
  # and each decay is the plain decay times its tensor's multiplier, so a
  # step annealed towards 0 takes its decay with it.
  rng = np.random.default_rng(3)
  theta = ls.initial_theta(seed=3)
  # The output layer (weights, then the multiplier's and the decay's
  # biases): multipliers below 1 and decays that are on, varied per tensor.
  outputs = 2 * ls.HIDDEN_UNITS
  theta[-2 - outputs:-2] = rng.standard_normal(outputs) * 0.3
  theta[-2:] = [-0.5, 0.5]
  feats = tf.constant(rng.standard_normal(ls.NUM_GLOBAL_FEATURES),
                      tf.float32)
  tensor_feats = tf.constant(
      rng.standard_normal((9, ls.NUM_TENSOR_FEATURES)), tf.float32)
  bounds = (1e-3, 1., 3e-3)
  m, w = [x.numpy() for x in ls.head_outputs(theta, feats, tensor_feats,
                                             *bounds)]
  ms, ws = [x.numpy() for x in ls.head_outputs(theta, feats, tensor_feats,
                                               *bounds, True)]
  assert np.array_equal(ms, m)
  np.testing.assert_allclose(ws, w * m, rtol=1e-6, atol=0.)
  # The draw covers decays that are on and multipliers well below 1.
  assert np.any((w > 1e-4) & (m < 0.5))
  # The transform applies it: new = proposed + (m - 1) step - m w old.
  old = [tf.constant(rng.standard_normal((3, 2)), tf.float32)]
  proposed = [old[0] + 0.1]
  head = ls.ScheduleHead(theta, *bounds, decay_scaled_by_multiplier=True)
  plain = ls.ScheduleHead(theta, *bounds)
  inputs = {ls.PROGRESS: 0.5, transform.GRADIENTS: [tf.ones((3, 2))]}
  pm, pw, _ = plain.outputs(old, proposed, 0.5, inputs[transform.GRADIENTS],
                            ls.initial_state())
  expected = (proposed[0] + (pm[0] - 1.) * 0.1 - pm[0] * pw[0] * old[0])
  np.testing.assert_allclose(head.apply(old, proposed, inputs)[0].numpy(),
                             expected.numpy(), rtol=0., atol=1e-6)


def test_heads_saved_with_three_bounds_load_with_the_plain_decay(tmp_path):
  # Heads saved before the scaled decay existed (among them the runs under
  # reproduce/results/head/) keep the decay they were trained with.
  path = str(tmp_path / "old.npz")
  np.savez(path, theta=ls.initial_theta(seed=2),
           bounds=np.array([1e-3, 1., 3e-3]))
  assert ls.ScheduleHead.load(path).bounds == (1e-3, 1., 3e-3, False)
  head = ls.ScheduleHead(ls.initial_theta(seed=2), 1e-3, 1., 3e-3, True)
  head.save(path)
  assert ls.ScheduleHead.load(path).bounds == (1e-3, 1., 3e-3, True)


def test_save_and_load(tmp_path):
  theta = ls.initial_theta(seed=3)
  theta[-1] = 0.25
  head = ls.ScheduleHead(theta, 1e-2, 4., 1e-3)
  path = str(tmp_path / "head.npz")
  head.save(path)
  loaded = ls.schedule_head(path)
  assert loaded.bounds == head.bounds
  assert np.array_equal(loaded.theta.numpy(), theta)


def test_zero_initialized_head_in_test_optimizer(shipped):
  from l2o_scale.meta_testing import testing  # pylint: disable=g-import-not-at-top
  learned = shipped.learned_optimizer
  problem = pg.Quadratic(ndim=6, random_seed=3)
  start = [np.linspace(-2., 2., 6).reshape(6, 1).astype(np.float32)]
  head = ls.ScheduleHead()

  def run(**kwargs):
    # The optimizer's initial learning rates are drawn from TensorFlow's
    # random stream.
    tf.random.set_seed(7)
    return testing.test_optimizer(learned, problem, 12, seed=start,
                                  progress=False, **kwargs)[1]

  alone = run()
  headed = run(step_transforms=head)
  assert not np.array_equal(alone[0], start[0])
  assert alone[0].tobytes() == headed[0].tobytes()
  assert head.state.numpy()[0] == 12.
  theta = ls.initial_theta()
  theta[-2] = -1.  # the multiplier's bias: shorter steps
  shorter = run(step_transforms=ls.ScheduleHead(theta))
  assert (np.abs(shorter[0] - start[0]).sum() <
          np.abs(alone[0] - start[0]).sum())


def _a_head_that_reads_its_progress():
  """A head whose multiplier depends on the run's progress: the
  multiplier's weight from the hidden unit fed by the progress embedding
  at centre 0.03 (whose value moves most early in a run)."""
  theta = ls.initial_theta(seed=4)
  hidden = np.zeros((ls.NUM_INPUTS, ls.HIDDEN_UNITS), np.float32)
  hidden[0, 0] = 3.  # unit 0 reads tanh(10 (progress - 0.03))
  theta[:hidden.size] = hidden.reshape(-1)
  w2 = np.zeros((ls.HIDDEN_UNITS, ls.NUM_OUTPUTS), np.float32)
  w2[0, 0] = 1.  # the multiplier's input from unit 0
  start = ls.NUM_INPUTS * ls.HIDDEN_UNITS + ls.HIDDEN_UNITS
  theta[start:start + w2.size] = w2.reshape(-1)
  return theta


def test_pretrained_with_a_head_feeds_total_steps_to_it_not_the_card(
    shipped):
  """pretrained("l2o-scale", schedule_head=H, total_steps=30) takes the
  steps of the optimizer with H over a run of 30 steps and no other
  setting, bit for bit: not those of H over the default length, and not
  the card's (weight decay, decaying learning rate), which total_steps
  applies without a head."""
  theta = _a_head_that_reads_its_progress()
  head = lambda: ls.ScheduleHead(theta, 0.1, 10., 0.)  # pylint: disable=unnecessary-lambda-assignment

  def weights(**kwargs):
    return keras_steps.weights_after_steps(
        keras_optimizer.LearnedOptimizer.pretrained("l2o-scale", **kwargs))

  by_name = weights(schedule_head=head(), total_steps=30)
  alone = keras_steps.weights_after_steps(keras_optimizer.LearnedOptimizer(
      shipped.learned_optimizer, schedule_head=head(), total_steps=30))
  assert _same(by_name, alone)
  assert not _same(by_name, weights(schedule_head=head()))
  assert not _same(by_name, weights())  # the head changes the steps
  # The card over 30 steps: a weight decay and a schedule that decays.
  carded = weights(total_steps=30)
  assert not _same(carded, weights())


def _same(a, b):
  return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def test_a_head_refuses_a_hand_set_decay_or_step_scale_as_metatest_does():
  """A schedule head decides the step's scale and the weight decay: a
  weight_decay or a learning_rate other than 1 beside it is refused in
  one line, the rule of metatest.py's --schedule_head."""
  head = ls.ScheduleHead()
  rule = ("decides the step's scale and the weight decay: drop "
          "learning_rate and weight_decay$")
  for kwargs in (dict(weight_decay=0.1), dict(learning_rate=0.5),
                 dict(learning_rate=keras.optimizers.schedules
                      .CosineDecay(1., 10))):
    with pytest.raises(ValueError, match="^LearnedOptimizer: the "
                       "schedule_head " + rule):
      keras_optimizer.LearnedOptimizer.pretrained(
          "l2o-scale", schedule_head=head, total_steps=8, **kwargs)
    with pytest.raises(ValueError, match="^l2o-scale-head has a learned "
                       "schedule head, which " + rule):
      keras_optimizer.LearnedOptimizer.pretrained("l2o-scale-head",
                                                  **kwargs)
  # The same rule, in metatest.py's words.
  with pytest.raises(ValueError, match="^--schedule_head decides the "
                     "step's scale and the weight decay: drop "
                     "--step_schedule and --weight_decay$"):
    ls.check_no_hand_set_schedule("--schedule_head", False, 1e-3,
                                  ("--step_schedule", "--weight_decay"))
  ls.check_no_hand_set_schedule("--schedule_head", False, 0.,
                                ("--step_schedule", "--weight_decay"))
  # learning_rate 1 is the head's own step.
  keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale", schedule_head=head, learning_rate=1.)


def _head_files(folder):
  """{what is wrong: the path of such a file}."""
  shipped_head = pretrained.schedule_head("l2o-scale-head")
  with open(shipped_head, "rb") as f:
    data = f.read()
  files = {}
  files["truncated"] = folder / "half.npz"
  files["truncated"].write_bytes(data[:len(data) // 2])
  files["text"] = folder / "notes.npz"
  files["text"].write_text("theta = 1, 2, 3\n")
  files["nan"] = folder / "nan.npz"
  theta = ls.initial_theta()
  theta[5] = np.nan
  np.savez(files["nan"], theta=theta, bounds=np.array([1e-3, 1., 3e-3]))
  files["keys"] = folder / "keys.npz"
  np.savez(files["keys"], weights=theta)
  files["array"] = folder / "array.npy"
  np.save(files["array"], theta)
  return files


def test_a_file_that_is_not_a_head_is_refused_in_one_line_naming_it(
    tmp_path):
  """ScheduleHead.load (behind LearnedOptimizer's schedule_head, metatest's
  --schedule_head and the benchmark's +head=): a truncated file, a text
  file, NaN parameters, other arrays: one HeadFileError line naming the
  file and what is wrong; the benchmark names it once."""
  from l2o_scale.benchmark import optimizers as bench_optimizers  # pylint: disable=g-import-not-at-top
  why = {"truncated": "it is truncated or damaged", "text": "it is not an "
         ".npz file", "nan": "theta holds 1 values that are not finite",
         "keys": "it has no theta and no bounds array",
         "array": "it is one numpy array"}
  for what, path in _head_files(tmp_path).items():
    expected = "{} is not a saved schedule head: {}".format(path, why[what])
    with pytest.raises(ls.HeadFileError) as e:
      keras_optimizer.LearnedOptimizer.pretrained("l2o-scale",
                                                  schedule_head=str(path))
    assert str(e.value).startswith(expected), (what, str(e.value))
    assert "\n" not in str(e.value)
    spec = "l2o-scale+head={}".format(path)
    with pytest.raises(ValueError) as e:
      bench_optimizers.factory(spec)
    assert str(e.value).startswith("--optimizer={!r}: {}".format(
        spec, expected)), str(e.value)
    assert str(e.value).count(str(path)) == 2  # in the spec, then once


def test_the_head_round_trips_through_its_config_exactly():
  theta = ls.initial_theta(seed=5)
  theta[-2:] = [0.1234567, -3.3e-7]
  head = ls.ScheduleHead(theta, 0.01, 4., 1e-3, True)
  config = json.loads(json.dumps(head.get_config()))
  again = ls.schedule_head(config)
  assert again.bounds == head.bounds
  assert again.theta.numpy().tobytes() == theta.tobytes()
