"""What a time-parallel unroll evaluates after its trajectory.

In the original's loop (``optimizer/trainable_optimizer.py`` l.282-350)
each step evaluates the objective on the whole mini dataset (for the
meta-objective) and, with ``reg_optimizer``, the regularizer on its batch;
neither feeds the trajectory, whose steps use batch gradients. A
time-parallel unroll records the parameters of every step and evaluates
both here at all steps at once, vectorized over the steps (one read of the
data, matmuls with T times wider right-hand sides), then applies the
original's stop rules to the result (:func:`stops_early`).
"""

import contextlib
import logging

import tensorflow as tf

from l2o_scale.meta_training import regularizer


@contextlib.contextmanager
def _without_fallback_warnings():
  """While tracing: ``tf.vectorized_map`` warns for every op it has no
  vectorizing rule for (e.g. ``L2Loss`` of the quadratic problems) and runs
  that op in a loop instead; the result is the same, so the warning (once
  per op and trace) is only noise to a user."""
  logger = logging.getLogger("tensorflow")
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


def objectives_at(problem, params_stack, data, labels):
  """The objective on the mini dataset at each step's parameters, in one
  vectorized pass ([T]): one read of the data, matmuls with T times wider
  right-hand sides."""
  with _without_fallback_warnings():
    return tf.vectorized_map(
        lambda params: problem.objective(list(params), data, labels),
        list(params_stack))


def regularizer_at(problem, reg, eval_stack, inputs):
  """The regularizer of each step's batch at each step's gradient point
  ([T]), vectorized over the steps."""
  def one(args):
    params, rows = args
    return regularizer.regularizer_value(problem, list(params),
                             tf.gather(inputs.mini_data, rows),
                             tf.gather(inputs.mini_labels, rows), None, reg)
  with _without_fallback_warnings():
    return tf.vectorized_map(one, (list(eval_stack), inputs.batches))


def stops_early(objectives, weights, limit=None):
  """Whether the sequential loop would end before its last step, from the
  objectives before each step (``objectives``: [f(p_0), f(p_0), ...,
  f(p_T-1)] as the unroll returns them): a non-finite accumulated
  objective, or an objective not below ``limit`` (the
  ``obj_train_max_multiplier`` rule; None: off), at the check before some
  step."""
  num = tf.shape(weights)[0]
  at_steps = objectives[1:]
  accum_before = tf.math.cumsum(weights * at_steps, exclusive=True)
  stop = tf.logical_not(tf.math.is_finite(accum_before))
  if limit is not None:
    stop = tf.logical_or(stop, tf.logical_not(objectives[:num] < limit))
  return tf.reduce_any(stop)


def after_trajectory(problem, reg, inputs, start_obj, trail, num_params,
                     limit, regular):
  """(weighted sum of the objectives at all steps, the objectives
  ``[f(p_0), f(p_0), ..., f(p_T-1)]``, the accumulated regularizer, whether
  the stop rules would have fired) from the stacked ``trail``: the
  parameters before each step, then (for a deferred regularizer with
  attention) the gradient points. ``reg``: the deferred regularizer's
  configuration, or None (``regular`` is then the loop's)."""
  at_steps = objectives_at(problem, trail[:num_params],
                           *inputs.objective_data())
  obj_accum = tf.reduce_sum(inputs.obj_weights * at_steps)
  problem_objectives = tf.concat([[start_obj], at_steps], 0)
  early_stop = stops_early(problem_objectives, inputs.obj_weights, limit)
  if reg is not None:
    regular = tf.reduce_sum(reg.alpha * regularizer_at(
        problem, reg, trail[-num_params:], inputs))
  return obj_accum, problem_objectives, regular, early_stop
