"""HierarchicalRNN over its whole option space, against the original's
formulas and invariants (the exact numbers are checked by test_fidelity)."""

import functools
import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from optimizer import hierarchical_rnn
from optimizer import hrnn_segments
from optimizer import utils

from tests import hrnn_reference

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


# ----------------------------------------------------------------------------
# compute_updates (feature-major fast path) against
# hrnn_reference.compute_updates_reference (the line-by-line port), over the option grid and the remaining flags.

EQUIVALENCE_SHAPES = [(32, 4), (5, 3), (3,), (2, 2, 2)]  # 128: aligned rows

EXTRA_OPTIONS = [
    dict(use_problem_lr_mean=True),
    dict(use_log_means_squared=False, use_grad_products=False),
    dict(learnable_decay=False, zero_init_lr_weights=False),
    dict(learnable_inp_decay=False, use_gradient_shortcut=False),
    dict(learnable_rnn_init=False, num_gradient_scales=4),
]


def _equivalence_cases():
  for levels, scales, dynamic, attention in OPTION_GRID:
    yield levels, dict(
        num_gradient_scales=scales, dynamic_output_scale=dynamic,
        use_relative_lr=dynamic, use_extreme_indicator=dynamic,
        use_lr_shortcut=dynamic, use_attention=attention,
        use_gradient_shortcut=True, use_grad_products=True,
        use_multiple_scale_decays=scales > 1, learnable_decay=scales > 1)
  for levels in ([6], [6, 8, 5]):
    for extra in EXTRA_OPTIONS:
      yield levels, dict(extra)


def _run_both(opt, num_steps=3, mode_mt=None):
  """``num_steps`` steps of both paths from the same start; per step the
  outputs of each path and, for the last step, meta-gradients."""
  rng = np.random.RandomState(5)
  params = [tf.constant(rng.randn(*s).astype(np.float32))
            for s in EQUIVALENCE_SHAPES]
  results = []
  for fn in (opt.compute_updates, functools.partial(
      hrnn_reference.compute_updates_reference, opt)):
    p = list(params)
    states = [opt.initialize_state(x) for x in p]
    glob = opt.initialize_global_state()
    outs = []
    grng = np.random.RandomState(6)
    with tf.GradientTape() as tape:
      for _ in range(num_steps):
        grads = [tf.constant(grng.randn(*s).astype(np.float32))
                 for s in EQUIVALENCE_SHAPES]
        teacher = ([0.01 * g for g in grads] if mode_mt is not None
                   else None)
        out = fn(p, grads, states, glob, mode_mt, teacher)
        p, states, glob = out[0], out[1], out[2]
        outs.append(out)
      loss = tf.add_n([tf.reduce_sum(tf.sin(x)) for x in
                       tf.nest.flatten(out) if x.dtype == tf.float32])
    meta_grads = tape.gradient(loss, opt.meta_variables)
    results.append((outs, meta_grads))
  return results


@pytest.mark.parametrize("levels,options", list(_equivalence_cases()))
def test_fast_path_equals_reference(levels, options):
  """The feature-major compute_updates equals the reference port (values,
  state dicts with their TF1 keys and shapes, meta-gradients)."""
  # A fixed initial LR: the random one is drawn per initialize_state call.
  opt = hierarchical_rnn.HierarchicalRNN(levels, init_lr_range=(1e-3, 1e-3),
                                         random_seed=7, **options)
  (fast, fast_grads), (ref, ref_grads) = _run_both(opt)
  for fast_out, ref_out in zip(fast, ref):
    for fast_state, ref_state in zip(fast_out[1], ref_out[1]):
      assert sorted(fast_state) == sorted(ref_state)
      for key in ref_state:
        assert fast_state[key].shape == ref_state[key].shape, key
    tf.nest.assert_same_structure(fast_out, ref_out)
    for x, y in zip(tf.nest.flatten(fast_out), tf.nest.flatten(ref_out)):
      np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
  for v, x, y in zip(opt.meta_variables, fast_grads, ref_grads):
    assert (x is None) == (y is None), v.name
    if x is not None:
      np.testing.assert_allclose(tf.convert_to_tensor(x).numpy(),
                                 tf.convert_to_tensor(y).numpy(),
                                 rtol=1e-3, atol=1e-4, err_msg=v.name)


def test_fast_path_equals_reference_when_following_teacher():
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], init_lr_range=(1e-3, 1e-3),
                                         use_attention=True, random_seed=8)
  for mode in (True, False):
    (fast, _), (ref, _) = _run_both(opt, num_steps=2,
                                    mode_mt=tf.constant(mode))
    for x, y in zip(tf.nest.flatten(fast), tf.nest.flatten(ref)):
      np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)


def test_fast_path_equals_reference_compiled():
  """Same under tf.function and XLA (the callers' jit_compile option)."""
  opt = hierarchical_rnn.HierarchicalRNN(
      [10, 20, 20], init_lr_range=(1e-3, 1e-3), use_problem_lr_mean=True,
      use_gradient_shortcut=True, use_grad_products=True, random_seed=9)
  rng = np.random.RandomState(10)
  params = [tf.constant(rng.randn(*s).astype(np.float32))
            for s in [(64, 20), (20,)]]
  grads = [tf.constant(rng.randn(*p.shape).astype(np.float32))
           for p in params]
  states = [opt.initialize_state(p) for p in params]
  glob = opt.initialize_global_state()
  ref = hrnn_reference.compute_updates_reference(opt, params, grads, states,
                                                 glob)
  for jit in (False, True):
    fast = tf.function(opt.compute_updates, jit_compile=jit)(
        params, grads, states, glob)
    for x, y in zip(tf.nest.flatten(fast), tf.nest.flatten(ref)):
      np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# The packed state (compute_updates_packed): what the meta-test loop, the
# benchmark and any caller that keeps the state between steps use.

@pytest.mark.parametrize("levels,attention", [([6], False), ([6, 8], True),
                                              ([6, 8, 5], False)])
def test_packed_state_round_trip(levels, attention):
  opt = hierarchical_rnn.HierarchicalRNN(levels, use_attention=attention,
                                         random_seed=3)
  params = _params()
  states = [opt.initialize_state(p) for p in params]
  packed = opt.pack_state(states)
  assert packed["parameter"].shape == (levels[0], 15 + 3 + 8)
  assert packed["ms"].shape == (opt.num_gradient_scales, 26)
  assert ("true_param" in packed) == attention
  back = opt.unpack_state(packed, params)
  for state, again in zip(states, back):
    assert sorted(state) == sorted(again)
    for key in state:
      np.testing.assert_array_equal(state[key].numpy(), again[key].numpy(),
                                    err_msg=key)


def test_packed_steps_carried_equal_reference():
  """Five steps carrying the packed state (never re-packed) equal five steps
  of the line-by-line reference, including the state in the TF1 layout."""
  opt = hierarchical_rnn.HierarchicalRNN(
      [6, 8, 5], init_lr_range=(1e-3, 1e-3), use_attention=True,
      use_gradient_shortcut=True, use_grad_products=True, random_seed=4)
  params = _params()
  ref_p, fast_p = list(params), list(params)
  ref_s = [opt.initialize_state(p) for p in params]
  packed = opt.pack_state(ref_s)
  ref_g = fast_g = opt.initialize_global_state()
  rng = np.random.RandomState(2)
  for _ in range(5):
    grads = [tf.constant(rng.randn(*s).astype(np.float32)) for s in SHAPES]
    ref_p, ref_s, ref_g, ref_a, _ = hrnn_reference.compute_updates_reference(
        opt, ref_p, grads, ref_s, ref_g)
    fast_p, packed, fast_g, fast_a, _ = opt.compute_updates_packed(
        fast_p, grads, packed, fast_g)
  for x, y in zip(tf.nest.flatten([fast_p, fast_g, fast_a]),
                  tf.nest.flatten([ref_p, ref_g, ref_a])):
    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
  for fast_state, ref_state in zip(opt.unpack_state(packed, fast_p), ref_s):
    for key in ref_state:
      np.testing.assert_allclose(fast_state[key].numpy(),
                                 ref_state[key].numpy(), rtol=1e-4,
                                 atol=1e-5, err_msg=key)


def test_mean_squares_stay_positive_after_the_first_step():
  """The invariant behind testing the first-step rule per coordinate in the
  packed step: after one step every mean square is > 0, even for zero
  gradients and a decay saturated at 1, so "this entry is 0" and "this
  tensor's mean square is all 0" agree on every reachable state."""
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5], random_seed=5)
  params = _params()
  packed = opt.initialize_packed_state(params)
  glob = opt.initialize_global_state()
  zeros = [tf.zeros_like(p) for p in params]
  params, packed, glob, _, _ = opt.compute_updates_packed(params, zeros,
                                                          packed, glob)
  assert np.all(packed["ms"].numpy() > 0)
  packed["decays"] = tf.ones_like(packed["decays"])  # decay exactly 1
  for _ in range(2):
    params, packed, glob, _, _ = opt.compute_updates_packed(params, zeros,
                                                            packed, glob)
    assert np.all(packed["ms"].numpy() > 0)


def test_seeded_initial_learning_rates_depend_on_the_seed_alone():
  """Given a seed, the random initial log learning rates are a function of
  it alone (draws from TensorFlow's stream in between change nothing) and
  keep the original's distribution: a per-coordinate uniform plus one
  per-tensor offset, each on half of [log min_lr, log max_lr]."""
  min_lr, max_lr = 1e-6, 1e-2
  opt = hierarchical_rnn.HierarchicalRNN([6, 8, 5],
                                         init_lr_range=(min_lr, max_lr))
  params = [tf.zeros([50, 20]), tf.zeros([20]), tf.zeros([50, 20])]

  def log_lrs(seed):
    return opt.initialize_packed_state(
        params, seed=seed)["log_learning_rate"].numpy()[0]

  first = log_lrs([3, 4])
  tf.random.uniform([7])  # Moves TensorFlow's global stream.
  np.testing.assert_array_equal(first, log_lrs(np.array([3, 4], np.int64)))
  assert np.mean(first != log_lrs([3, 5])) > 0.99
  half = (math.log(max_lr) - math.log(min_lr)) / 2.
  assert first.min() >= math.log(min_lr) - 1e-5
  assert first.max() <= math.log(max_lr) + 1e-5
  tensor0, tensor2 = first[:1000], first[1020:]
  for values in (tensor0, tensor2):  # One offset per tensor: spread <= half.
    assert 0.9 * half <= values.max() - values.min() <= half + 1e-5
  # Tensors of the same shape draw their own values.
  assert np.mean(tensor0 != tensor2) > 0.99
  # Without a seed: TensorFlow's stream, as the original (values vary).
  assert np.mean(opt.initialize_packed_state(params)["log_learning_rate"]
                 .numpy()[0] != opt.initialize_packed_state(params)
                 ["log_learning_rate"].numpy()[0]) > 0.99


@pytest.mark.parametrize("count", [3, hrnn_segments.SELECT_MAX_TENSORS + 2])
def test_segments_spread_and_its_gradient(count):
  # Both forms of the spread (selects up to SELECT_MAX_TENSORS tensors, the
  # concat of broadcasts beyond): each tensor's value on its coordinates;
  # the gradient is the per-tensor sum of the upstream gradient.
  sizes = [1 + (7 * t) % 5 for t in range(count)]
  seg = hrnn_segments.Segments(sizes)
  rng = np.random.RandomState(0)
  values = tf.constant(rng.randn(2, count).astype(np.float32))
  upstream = rng.randn(2, sum(sizes)).astype(np.float32)
  with tf.GradientTape() as tape:
    tape.watch(values)
    spread = seg.spread(values)
    loss = tf.reduce_sum(spread * upstream)
  np.testing.assert_array_equal(spread.numpy(),
                                np.repeat(values.numpy(), sizes, axis=1))
  starts = np.cumsum([0] + sizes[:-1])
  np.testing.assert_allclose(tape.gradient(loss, values).numpy(),
                             np.add.reduceat(upstream, starts, axis=1),
                             rtol=1e-5, atol=1e-5)
