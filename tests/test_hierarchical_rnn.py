"""HierarchicalRNN over its whole option space, against the original's
formulas and invariants (the exact numbers are checked by test_fidelity)."""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from optimizer import hierarchical_rnn
from optimizer import utils

SHAPES = [(5, 3), (3,), (2, 2, 2)]


def _params():
  rng = np.random.RandomState(0)
  return [tf.constant(rng.randn(*s).astype(np.float32)) for s in SHAPES]


def _grads(scale=1.):
  rng = np.random.RandomState(1)
  return [tf.constant(scale * rng.randn(*s).astype(np.float32))
          for s in SHAPES]


def _step(opt, params, grads):
  states = [opt.initialize_state(p) for p in params]
  return opt.compute_updates(params, grads, states,
                             opt.initialize_global_state())


def test_rms_scaling_first_step_ignores_decay():
  g = tf.constant([[3.], [-4.]])
  scaled, ms = utils.rms_scaling(g, tf.constant([[0.9], [0.9]]),
                                 tf.zeros([2, 1]))
  np.testing.assert_allclose(ms.numpy(), [[9. + 1e-12], [16. + 1e-12]])
  np.testing.assert_allclose(scaled.numpy(), [[math.asinh(1.)],
                                              [-math.asinh(1.)]], rtol=1e-5)
  # Second step: the decay applies.
  _, ms2 = utils.rms_scaling(g, tf.constant([[0.5], [0.5]]), ms)
  np.testing.assert_allclose(ms2.numpy(), [[9.], [16.]], rtol=1e-6)


def test_make_finite():
  t = tf.constant([1., np.nan, np.inf, -2.])
  np.testing.assert_array_equal(utils.make_finite(t, tf.zeros_like(t)).numpy(),
                                [1., 0., 0., -2.])


def test_variable_names_and_shapes_match_tf1():
  opt = hierarchical_rnn.HierarchicalRNN(
      [10, 20, 20], use_gradient_shortcut=True, use_grad_products=True,
      use_problem_lr_mean=True)
  names = opt.tf1_variables()
  assert names["LOL/PerTensor/Layer0_RNN/BiasGRUCell/gates/Affine/Matrix"].shape == (22, 20)
  assert names["LOL/PerTensor/Layer1_RNN/BiasGRUCell/gates/Affine/Matrix"].shape == (42, 40)
  assert names["LOL/Layer2_RNN/BiasGRUCell/gates/Affine/Matrix"].shape == (40, 40)
  assert names["LOL/PerTensor/GradsToDelta/Matrix"].shape == (4, 1)
  assert len(names) == 31


OPTION_GRID = list(itertools.product(
    [[6], [6, 8], [6, 8, 5]],          # levels
    [1, 3],                            # gradient scales
    [True, False],                     # dynamic_output_scale (+ relative lr)
    [True, False],                     # attention
))


@pytest.mark.parametrize("levels,scales,dynamic,attention", OPTION_GRID)
def test_option_space_steps_and_differentiates(levels, scales, dynamic,
                                               attention):
  opt = hierarchical_rnn.HierarchicalRNN(
      levels, init_lr_range=(1e-4, 1e-2), num_gradient_scales=scales,
      dynamic_output_scale=dynamic, use_relative_lr=dynamic,
      use_extreme_indicator=dynamic, use_lr_shortcut=dynamic,
      use_attention=attention, use_gradient_shortcut=True,
      use_grad_products=True, use_multiple_scale_decays=scales > 1,
      learnable_decay=scales > 1, random_seed=3)
  params, grads = _params(), _grads()
  with tf.GradientTape() as tape:
    new_params, new_states, new_global, attend, steps = _step(opt, params,
                                                              grads)
    loss = tf.add_n([tf.reduce_sum(p ** 2) for p in new_params + attend])
  for p, s, n, a in zip(params, steps, new_params, attend):
    assert n.shape == p.shape and a.shape == p.shape
    np.testing.assert_allclose((p - s).numpy(), n.numpy(), rtol=1e-6)
  assert len(new_global) == (1 if len(levels) == 3 else 0)
  meta_grads = tape.gradient(loss, opt.meta_variables)
  assert all(np.all(np.isfinite(g.numpy())) for g in meta_grads
             if g is not None)
  assert sum(g is not None and np.any(g.numpy() != 0) for g in meta_grads) > 3


def test_update_is_scale_invariant_in_the_gradient():
  """RMS normalisation: scaling every gradient by c leaves the first step."""
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], init_lr_range=(1e-3, 1e-3),
                                         random_seed=1)
  params = _params()
  a = _step(opt, params, _grads(1.))[4]
  b = _step(opt, params, _grads(1000.))[4]
  for x, y in zip(a, b):
    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=2e-3, atol=1e-7)


def test_dynamic_output_scale_normalises_direction():
  """With a constant LR the step of each tensor has RMS exactly lr*e^offset."""
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], init_lr_range=(1e-3, 1e-3),
                                         random_seed=2)
  for v in (opt.lr_weights, opt.lr_bias):
    v.assign(tf.zeros_like(v))
  steps = _step(opt, _params(), _grads())[4]
  expected = 1e-3 * math.exp(opt.param_stepsize_offset.numpy())
  for s in steps:
    rms = float(tf.sqrt(tf.reduce_mean(tf.square(s))))
    assert rms == pytest.approx(expected, rel=1e-4)


def test_lr_clip_lets_gradient_through():
  """max_log_lr clips the value but keeps the unclipped gradient (l.675)."""
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], init_lr_range=(1e-3, 1e-3),
                                         max_log_lr=-20., random_seed=2)
  params, grads = _params(), _grads()
  with tf.GradientTape() as tape:
    steps = _step(opt, params, grads)[4]
    loss = tf.add_n([tf.reduce_sum(tf.abs(s)) for s in steps])
  # Clipped: every step uses exp(-20 + offset) whatever lr_bias is...
  expected = math.exp(-20. + opt.param_stepsize_offset.numpy())
  rms = float(tf.sqrt(tf.reduce_mean(tf.square(steps[0]))))
  assert rms == pytest.approx(expected, rel=1e-4)
  # ...yet lr_bias still receives a gradient (straight-through).
  assert float(tape.gradient(loss, opt.lr_bias)[0]) != 0.


def test_apply_gradients_matches_compute_updates():
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], init_lr_range=(1e-3, 1e-3),
                                         random_seed=4)
  params = _params()
  variables = [tf.Variable(p) for p in params]
  states = [opt.initialize_state(p) for p in params]
  global_state = opt.initialize_global_state()
  apply = tf.function(lambda gs: opt.apply_gradients(zip(gs, variables)))
  opt.build(variables)
  for step in range(3):
    grads = _grads(1. + step)
    params, states, global_state, _, _ = opt.compute_updates(
        params, grads, states, global_state)
    apply(grads)
  for v, p in zip(variables, params):
    np.testing.assert_allclose(v.numpy(), p.numpy(), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(opt.global_state_variables[0].numpy(),
                             global_state[0].numpy(), rtol=1e-5)


def test_invalid_configurations_raise():
  with pytest.raises(ValueError, match="1, 2, or 3 levels"):
    hierarchical_rnn.HierarchicalRNN([4, 4, 4, 4])
  with pytest.raises(ValueError, match="dynamic_output_scale"):
    hierarchical_rnn.HierarchicalRNN([4], dynamic_output_scale=False,
                                     use_relative_lr=True)
  with pytest.raises(TypeError, match="Unknown optimizer arguments"):
    hierarchical_rnn.HierarchicalRNN([4], not_an_option=True)
