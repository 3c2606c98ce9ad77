"""Tests of l2o_scale.meta_testing.inner_step: the attention rule against hand-computed
truth, and the packed and per-tensor forms of the step agreeing."""

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_testing import inner_step
from optimizer import hierarchical_rnn
from problems import problem_generator as pg

CENTER = np.array([[1.], [-2.], [3.]], np.float32)


class _Bowl(pg.Problem):
  """f(x) = sum((x - c)^2): gradient 2 (x - c), checkable by hand."""

  def __init__(self):
    super().__init__([(3, 1)], 0, 0.0)

  def objective(self, params, data=None, labels=None):
    return tf.reduce_sum(tf.square(params[0] - CENTER))


def _bowl(x):
  return float(np.sum(np.square(x - CENTER)))


class _Recorder(object):
  """Optimizer stub: new = true_param - 0.1 grad, attended = new + 1.
  Records the gradients it is given."""

  def __init__(self, use_attention):
    self.use_attention = use_attention
    self.seen_grads = None

  def compute_updates(self, params, grads, states, global_state,
                      mode_mt=None, update_steps_mt=None):
    del mode_mt, update_steps_mt
    self.seen_grads = [g.numpy() for g in grads]
    new_params = [s["true_param"] - 0.1 * g for s, g in zip(states, grads)]
    new_attend = [p + 1. for p in new_params]
    new_states = [{"true_param": p} for p in new_params]
    return new_params, new_states, list(global_state), new_attend, [
        0.1 * g for g in grads]


def _run(use_attention):
  true = np.array([[0.], [0.], [0.]], np.float32)
  attended = np.array([[2.], [2.], [2.]], np.float32)
  opt = _Recorder(use_attention)
  # With attention the variable holds the attended point; without, the
  # variable is the real parameter (the slot equals it).
  variable = attended if use_attention else true
  out = inner_step.inner_step(_Bowl(), opt, [tf.constant(variable)],
                              [{"true_param": tf.constant(true)}], [], None,
                              None)
  return true, attended, opt, out


def test_attention_objective_at_true_param_gradient_at_attended_point():
  true, attended, opt, out = _run(use_attention=True)
  assert float(out.objective) == pytest.approx(_bowl(true))
  assert float(out.objective) != pytest.approx(_bowl(attended))
  np.testing.assert_allclose(opt.seen_grads[0], 2 * (attended - CENTER))
  new_true = true - 0.1 * 2 * (attended - CENTER)
  # The variable takes the attended point, the slot the real parameter.
  np.testing.assert_allclose(out.variables[0].numpy(), new_true + 1.,
                             rtol=1e-6)
  np.testing.assert_allclose(out.states[0]["true_param"].numpy(), new_true,
                             rtol=1e-6)


def test_without_attention_one_point_for_everything():
  true, _, opt, out = _run(use_attention=False)
  assert float(out.objective) == pytest.approx(_bowl(true))
  np.testing.assert_allclose(opt.seen_grads[0], 2 * (true - CENTER))
  np.testing.assert_allclose(out.variables[0].numpy(),
                             true - 0.1 * 2 * (true - CENTER), rtol=1e-6)


def test_rule_helpers():
  on, off = _Recorder(True), _Recorder(False)
  assert inner_step.gradient_point(on, "real", "attended") == "attended"
  assert inner_step.gradient_point(off, "real", "attended") == "real"
  assert inner_step.next_variables(on, "new", "attended") == "attended"
  assert inner_step.next_variables(off, "new", "attended") == "new"
  states = [{"true_param": "slot"}]
  assert inner_step.true_params(on, ["var"], states) == ["slot"]
  assert inner_step.true_params(off, ["var"], states) == ["var"]


@pytest.mark.parametrize("use_attention", [True, False])
def test_packed_and_per_tensor_steps_agree_for_the_hrnn(use_attention):
  problem = pg.Quadratic(4, random_seed=3)
  opt = hierarchical_rnn.HierarchicalRNN([4, 5, 6], random_seed=1,
                                         use_attention=use_attention)
  params = [tf.constant(np.random.RandomState(0).randn(4, 1), tf.float32)]
  states = [opt.initialize_state(p) for p in params]
  glob = opt.initialize_global_state()
  # Two steps, so that with attention variable and true_param differ.
  a1 = inner_step.inner_step(problem, opt, params, states, glob, None, None)
  a2 = inner_step.inner_step(problem, opt, a1.variables, a1.states,
                             a1.global_state, None, None)
  b1 = inner_step.inner_step(problem, opt, params, opt.pack_state(states),
                             glob, None, None, packed=True)
  b2 = inner_step.inner_step(problem, opt, b1.variables, b1.states,
                             b1.global_state, None, None, packed=True)
  np.testing.assert_allclose(a2.objective.numpy(), b2.objective.numpy(),
                             rtol=1e-5)
  np.testing.assert_allclose(a2.variables[0].numpy(), b2.variables[0].numpy(),
                             rtol=1e-5, atol=1e-6)
  # The objective of step 2 is read at the real parameters after step 1.
  real = a1.states[0]["true_param"]
  attended = a1.variables[0]
  assert (not np.allclose(real.numpy(), attended.numpy())) == use_attention
  np.testing.assert_allclose(a2.objective.numpy(),
                             problem.objective([real]).numpy(), rtol=1e-6)
  np.testing.assert_allclose(
      inner_step.true_params(opt, b1.variables, b1.states,
                             packed=True)[0].numpy(), real.numpy(),
      rtol=1e-5, atol=1e-6)


def test_step_scale_scales_the_update_and_refuses_attention():
  """The scaled step moves a fraction of the proposed update (closed form
  for the stub's gradient step); scale 1 is the proposed update bit for bit;
  with attention it is refused (the real parameters live in the state)."""
  true = np.array([[0.5], [0.25], [-1.]], np.float32)
  proposed = true - 0.1 * 2. * (true - CENTER)
  for scale, expected in ((1., proposed), (0.25, true + 0.25 * (proposed -
                                                                 true))):
    out = inner_step.inner_step(
        _Bowl(), _Recorder(False), [tf.constant(true)],
        [{"true_param": tf.constant(true)}], [], None, None,
        step_scale=tf.constant(scale))
    if scale == 1.:
      np.testing.assert_array_equal(out.variables[0].numpy(), expected)
    else:
      np.testing.assert_allclose(out.variables[0].numpy(), expected,
                                 rtol=1e-6)
  with pytest.raises(ValueError, match="use_attention"):
    inner_step.inner_step(_Bowl(), _Recorder(True), [tf.constant(true)],
                          [{"true_param": tf.constant(true)}], [], None,
                          None, step_scale=tf.constant(0.5))


def test_weight_decay_shrinks_the_old_point_and_refuses_attention():
  """new = proposed - s * wd * old (closed form for the stub's gradient
  step, with and without a step scale s); wd 0 is the proposed update bit
  for bit; with attention it is refused."""
  true = np.array([[0.5], [0.25], [-1.]], np.float32)
  proposed = true - 0.1 * 2. * (true - CENTER)
  for scale, expected in (
      (None, proposed - 0.01 * true),
      (0.5, true + 0.5 * (proposed - true) - 0.5 * 0.01 * true)):
    out = inner_step.inner_step(
        _Bowl(), _Recorder(False), [tf.constant(true)],
        [{"true_param": tf.constant(true)}], [], None, None,
        step_scale=None if scale is None else tf.constant(scale),
        weight_decay=0.01)
    np.testing.assert_allclose(out.variables[0].numpy(), expected, rtol=1e-6)
  out = inner_step.inner_step(
      _Bowl(), _Recorder(False), [tf.constant(true)],
      [{"true_param": tf.constant(true)}], [], None, None, weight_decay=0.)
  np.testing.assert_array_equal(out.variables[0].numpy(), proposed)
  with pytest.raises(ValueError, match="weight decay"):
    inner_step.inner_step(_Bowl(), _Recorder(True), [tf.constant(true)],
                          [{"true_param": tf.constant(true)}], [], None,
                          None, weight_decay=0.01)
