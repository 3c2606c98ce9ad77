"""The learned schedule-and-decay head (l2o_scale/steps/learned_schedule.py):
a zero-initialised head changes no step (Keras and the meta-test step), its
outputs stay within their bounds for any input, its multiplier moves the
step where the learned learning rate sits at its cap, its scaled decay is
the decay times the multiplier, and its arguments are checked."""

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale import keras_optimizer
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


def test_pretrained_with_a_head_feeds_total_steps_to_it_not_the_card():
  head = ls.ScheduleHead()
  optimizer = keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale", schedule_head=head, total_steps=300)
  assert optimizer.schedule_head is head and optimizer.total_steps == 300
  # l2o-scale's card (a weight decay, a decaying learning rate) is not
  # applied: the head decides both.
  assert not optimizer.weight_decay
  assert float(optimizer.learning_rate) == 1.
  carded = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale",
                                                       total_steps=300)
  assert carded.weight_decay
