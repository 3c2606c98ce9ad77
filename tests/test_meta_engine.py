"""The meta-training engine's pieces: the meta-learner's update against its
closed form, and the speed options of the meta-step against the plain one
(a Python-bool regularizer switch, the XLA-compiled optimizer step) and the
resume state of earlier versions."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.steps import tf1_optimizers
from l2o_scale.meta_training import train_state
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import unroll as unroll_lib
from optimizer import hierarchical_rnn
from problems import problem_generator as pg


def test_meta_learner_zeroes_nonfinite_entries_clips_and_applies_rmsprop():
  var = tf.Variable([1., 2., 3., 4.])
  rms = tf1_optimizers.RMSProp([var], 0.1, decay=0.9, epsilon=1e-10)
  learner = meta_learner.MetaLearner(rms, gradient_clip=0.5)
  grads = [tf.constant([np.nan, 2., -0.25, np.inf])]
  update = learner.apply(grads)
  assert update.nonfinite == 2 and update.entries == 4
  clipped = np.array([0., 0.5, -0.25, 0.])  # NaN, inf -> 0, then clip
  np.testing.assert_array_equal(update.clipped[0].numpy(), clipped)
  # TF1 RMSProp: ms starts at 1.
  ms = 0.9 * 1. + 0.1 * clipped ** 2
  expected = np.array([1., 2., 3., 4.]) - 0.1 * clipped / np.sqrt(ms + 1e-10)
  np.testing.assert_allclose(var.numpy(), expected, rtol=1e-6)
  assert learner.last_grads[0] is not None
  assert int(rms.iterations.numpy()) == 1


def _mlp_setup(reg_option="hessian-esd", steps=4):
  np.random.seed(3)
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,), activation=tf.nn.sigmoid)
  reg = regularizer_lib.make_regularizer_config(problem, reg_optimizer=True,
                                           alpha=0.1, reg_option=reg_option,
                                           hessian_itrs=4)
  return problem, reg, _inputs_maker(problem, steps)


def _inputs_maker(problem, steps=4):
  """``inputs(switch)``: the next UnrollInputs of a fixed random stream (the
  same stream on every call of this function)."""
  rng = np.random.RandomState(0)
  data = tf.constant(rng.normal(size=(40, 6)).astype(np.float32))
  labels = tf.constant(np.eye(3, dtype=np.float32)[rng.randint(0, 3, 40)])

  def inputs(switch):
    return unroll_lib.UnrollInputs(
        obj_weights=tf.ones([steps]) / steps,
        batches=tf.constant(rng.randint(0, 40, (steps, 8)), tf.int32),
        mini_data=data, mini_labels=labels,
        init_tensors=[tf.constant(rng.normal(size=s).astype(np.float32))
                      for s in problem.param_shapes],
        jacob_switch=switch,
        mt_labels=unroll_lib.zero_mt_labels(problem.param_shapes, steps),
        first_unroll=True, reset_state=True)
  return inputs


def _hrnn():
  # A fixed initial learning rate: the unroll is then deterministic.
  return hierarchical_rnn.HierarchicalRNN(
      [4, 5, 5], init_lr_range=(1e-2, 1e-2), random_seed=5,
      use_gradient_shortcut=True, use_grad_products=True)


MetaSteps = collections.namedtuple(
    "MetaSteps", "problem reg make_inputs optimizer sequential parallel")


@pytest.fixture(scope="module")
def meta_steps():
  """``meta_steps(reg_option)``: the plain meta-step (``sequential``) and the
  time-parallel one (``parallel``) of ``_mlp_setup(reg_option)`` and
  ``_hrnn()``, with ``make_inputs`` starting the inputs' stream afresh.

  The meta-steps only compute (they change no meta-parameter), so the tests
  of a module share them: each is traced (seconds) once per worker, not once
  per test; each test's inputs are the ones of a fresh ``_mlp_setup``."""
  built = {}

  def get(reg_option):
    if reg_option not in built:
      problem, reg, _ = _mlp_setup(reg_option)
      optimizer = _hrnn()
      built[reg_option] = (problem, reg, optimizer,
                           meta_step_lib.make_meta_step(problem, optimizer,
                                                        reg),
                           meta_step_lib.make_meta_step(problem, optimizer,
                                                        reg,
                                                        time_parallel=True))
    problem, reg, optimizer, sequential, parallel = built[reg_option]
    return MetaSteps(problem, reg, _inputs_maker(problem), optimizer,
                     sequential, parallel)

  return get


def test_python_bool_switch_gives_the_tensor_switch_numbers(meta_steps):
  steps = meta_steps("hessian-esd")
  step = steps.sequential
  for switch in (True, False):
    base = steps.make_inputs(tf.constant(switch))
    out_t, grads_t = step(base, None, False)
    out_p, grads_p = step(base._replace(jacob_switch=switch), None, False)
    # The regularizer moves the meta-objective when (and only when) it is on.
    assert (float(out_t.regular) != 0.) == switch
    np.testing.assert_allclose(out_p.metaobj, out_t.metaobj, rtol=1e-6)
    np.testing.assert_allclose(out_p.regular, out_t.regular, rtol=1e-6)
    for a, b in zip(grads_p, grads_t):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_xla_compiled_optimizer_step_matches_the_plain_meta_step(meta_steps):
  # Time-parallel, the regularizer is evaluated after the loop, so the
  # batch gradients and the optimizer's step are one XLA call per step
  # (fused_step), whose gradient recomputes them.
  problem, reg, make_inputs, optimizer, _, plain = meta_steps("hessian-esd")
  inputs = make_inputs(True)
  compiled = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                          jit_compile=True,
                                          time_parallel=True)
  out_a, grads_a = plain(inputs, None, False)
  out_b, grads_b = compiled(inputs, None, False)
  np.testing.assert_allclose(out_b.problem_objectives,
                             out_a.problem_objectives, rtol=1e-5)
  np.testing.assert_allclose(out_b.metaobj, out_a.metaobj, rtol=1e-4)
  scale = max(float(np.max(np.abs(g))) for g in grads_a)
  assert scale > 0
  # Rounding moves entries by ~3e-7 of the largest; leaving out the second
  # derivatives through the batch gradients moves some by ~2e-4.
  for a, b in zip(grads_a, grads_b):
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * scale)
  # The carried state comes back in the optimizer's packed layout, and the
  # per-tensor view has the original's slot names.
  per_tensor = unroll_lib.per_tensor_states(optimizer, out_b.final_state)
  assert len(per_tensor) == len(problem.param_shapes)
  assert {"parameter", "ms1", "grad_accum1", "layer"} <= set(per_tensor[0])


def test_resume_state_of_the_per_tensor_layout_is_read_and_packed():
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,), activation=tf.nn.sigmoid)
  optimizer = _hrnn()
  carried = train_state.CarriedState(problem, optimizer)
  rng = np.random.RandomState(1)
  values = carried.value._replace(states=unroll_lib.per_tensor_states(
      optimizer, carried.value))
  old_layout = [rng.normal(size=t.shape).astype(np.float32)
                for t in tf.nest.flatten(values)]
  carried.load_arrays(old_layout)
  expected = tf.nest.pack_sequence_as(values, old_layout)
  back = unroll_lib.per_tensor_states(optimizer, carried.value)
  for got, want in zip(back, expected.states):
    for key in want:
      if key != "true_param":
        np.testing.assert_array_equal(got[key], want[key])
  # And the packed layout itself round-trips.
  saved = carried.to_arrays()
  carried.load_arrays(saved)
  for a, b in zip(carried.to_arrays(), saved):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="does not fit"):
    carried.load_arrays(saved[:-1])


def _assert_same_meta_step(a, b, rtol=1e-4):
  (out_a, grads_a), (out_b, grads_b) = a, b
  np.testing.assert_allclose(out_b.problem_objectives,
                             out_a.problem_objectives, rtol=1e-5)
  np.testing.assert_allclose(out_b.metaobj, out_a.metaobj, rtol=rtol)
  np.testing.assert_allclose(out_b.regular, out_a.regular, rtol=rtol)
  scale = max(float(np.max(np.abs(g))) for g in grads_a)
  assert scale > 0
  for ga, gb in zip(grads_a, grads_b):
    np.testing.assert_allclose(gb, ga, rtol=1e-3, atol=1e-5 * scale)


# A switched-off regularizer (switch False) is the plain unroll, which the
# TF1 fixtures replay time-parallel.
@pytest.mark.parametrize("reg_option,switch", [
    ("hessian-esd", True), ("jacob", True), ("hessian-ev", True)])
def test_time_parallel_unroll_gives_the_sequential_numbers(reg_option, switch,
                                                          meta_steps):
  """The objective (and a meta-objective-only regularizer) evaluated at all
  steps after the trajectory give the step-by-step meta-objective,
  objectives, regularizer and meta-gradients ('hessian-ev' draws random
  start vectors, so it stays in the loop: same numbers too)."""
  (problem, reg, make_inputs, optimizer, sequential,
   parallel) = meta_steps(reg_option)
  inputs = make_inputs(switch)
  if reg_option == "hessian-ev":
    tf.random.set_seed(0)
    a = sequential(inputs, None, False)
    tf.random.set_seed(0)
    b = parallel(inputs, None, False)
  else:
    a, b = sequential(inputs, None, False), parallel(inputs, None, False)
  assert not bool(a[0].early_stop) and not bool(b[0].early_stop)
  assert (float(a[0].regular) != 0.) == switch
  _assert_same_meta_step(a, b)
  evaluated = meta_step_lib.make_eval_unroll(problem, optimizer, reg,
                                             time_parallel=True)(inputs, None)
  np.testing.assert_allclose(evaluated.problem_objectives,
                             a[0].problem_objectives, rtol=1e-5)


def test_time_parallel_unroll_falls_back_where_the_stop_rules_fire(
    meta_steps):
  """Where the original's loop ends early (here obj_train_max_multiplier=1:
  the first objective is not below the limit; and non-finite initial
  parameters), the time-parallel meta-step gives the sequential unroll's
  result: the loop stopped before its first step."""
  problem, reg, make_inputs = _mlp_setup("jacob")
  optimizer = _hrnn()
  optimizer.obj_train_max_multiplier = 1.
  inputs = make_inputs(True)
  parallel = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                          time_parallel=True)
  sequential = meta_step_lib.make_meta_step(problem, optimizer, reg)
  a, b = sequential(inputs, None, False), parallel(inputs, None, False)
  assert bool(a[0].early_stop) and bool(b[0].early_stop)
  assert b[0].problem_objectives.shape[0] == 1
  np.testing.assert_array_equal(b[0].problem_objectives,
                                a[0].problem_objectives)
  np.testing.assert_allclose(b[0].metaobj, a[0].metaobj, rtol=1e-6)
  for ga, gb in zip(a[1], b[1]):
    np.testing.assert_allclose(gb, ga, rtol=1e-5, atol=1e-8)
  # Without the multiplier (-1, as _hrnn()), on the same problem: the
  # module's meta-steps of "jacob".
  unlimited = meta_steps("jacob")
  assert unlimited.optimizer.obj_train_max_multiplier == -1
  parallel, sequential = unlimited.parallel, unlimited.sequential
  nan_inputs = unlimited.make_inputs(True)._replace(init_tensors=[
      np.full(s, np.nan, np.float32)
      for s in unlimited.problem.param_shapes])
  out, _ = parallel(nan_inputs, None, False)
  assert bool(out.early_stop)
  # The accumulated objective turns non-finite after the first step.
  assert out.problem_objectives.shape[0] == 2
  np.testing.assert_array_equal(
      out.problem_objectives,
      sequential(nan_inputs, None, False)[0].problem_objectives)
