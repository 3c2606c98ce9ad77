"""What a time-parallel unroll evaluates after its trajectory.

In the original's loop (``optimizer/trainable_optimizer.py`` l.282-350)
each step evaluates the objective on the whole mini dataset (for the
meta-objective) and, with ``reg_optimizer``, the regularizer on its batch;
neither feeds the trajectory, whose steps use batch gradients. A
time-parallel unroll records the parameters of every step and evaluates
both here at all steps at once, vectorized over the steps (one read of the
data, matmuls with T times wider right-hand sides), then applies the
original's stop rules to the result (:func:`stops_early`).

All steps at once keep the objective's activations on the mini dataset for
every step (T times those of one evaluation, and as much again for the
meta-gradient): for a convnet on a 10,000-row mini dataset, tens of GiB.
:func:`steps_per_chunk` estimates that size from the objective's graph;
above a memory budget the steps are evaluated a chunk at a time, each chunk
with its gradient with respect to its parameters right away, so that the
meta-gradient keeps one gradient per step instead of the activations
(:func:`objectives_at`). The values are the same; the meta-gradient differs
by float reassociation only.
"""

import contextlib
import logging
import math

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


# The meta-gradient of the objectives needs about as much again as their
# forward pass keeps.
_GRADIENT_FACTOR = 2


def _graph_bytes(problem, param_shapes, data_spec, labels_spec):
  """Bytes of the tensors the objective's graph computes from the
  parameters on the given shapes: what a pass vectorized over the steps
  holds once per step (the data and what depends on it alone are shared by
  all steps)."""
  def objective(params, data, labels):
    return problem.objective(list(params), data, labels)
  graph = tf.function(objective, autograph=False).get_concrete_function(
      [tf.TensorSpec(s, tf.float32) for s in param_shapes], data_spec,
      labels_spec).graph
  # Creation order is a topological order.
  variant = {t.ref() for t in graph.inputs[:len(param_shapes)]}
  total = 0
  for op in graph.get_operations():
    if not any(t.ref() in variant for t in op.inputs):
      continue
    variant.update(t.ref() for t in op.outputs)
    for out in op.outputs:
      if out.shape.is_fully_defined() and out.dtype.is_numpy_compatible:
        total += out.shape.num_elements() * out.dtype.size
  return total


def row_bytes(problem, param_shapes, data, labels):
  """Estimated bytes one evaluation of the objective keeps per row of
  ``data`` and step (the difference of :func:`_graph_bytes` on 2 rows and
  on 1); 0 when ``data`` has no rows (problems without data)."""
  if data.shape.rank is None or data.shape.rank < 2 or not data.shape[0]:
    return 0

  def spec(tensor, rows):
    return tf.TensorSpec([rows] + tensor.shape.as_list()[1:], tensor.dtype)

  two, one = [_graph_bytes(problem, param_shapes, spec(data, rows),
                           spec(labels, rows)) for rows in (2, 1)]
  return max(0, two - one)


def steps_per_chunk(problem, params_stack, data, labels, budget_bytes):
  """How many steps :func:`objectives_at` evaluates at once within
  ``budget_bytes``: all of them (the unchunked pass) when the estimated
  size of evaluating them at once fits, or the budget is None or <= 0, or
  the sizes are not known while tracing; else as many as fit, at least 1.
  The estimate: steps x rows x :func:`row_bytes` x 2 (the forward pass and
  the meta-gradient)."""
  num_steps = params_stack[0].shape[0]
  if not budget_bytes or budget_bytes <= 0 or num_steps is None:
    return num_steps
  rows = data.shape[0] if data.shape.rank else None
  if rows is None:
    return num_steps
  param_shapes = [p.shape[1:] for p in params_stack]
  per_step = rows * row_bytes(problem, param_shapes, data, labels) * (
      _GRADIENT_FACTOR)
  if per_step * num_steps <= budget_bytes:
    return num_steps
  return max(1, min(num_steps, int(budget_bytes // max(per_step, 1))))


def objectives_at(problem, params_stack, data, labels, chunk=None,
                  differentiable=True):
  """The objective on the mini dataset at each step's parameters ([T]).

  ``chunk`` None or >= T: in one vectorized pass (one read of the data,
  matmuls with T times wider right-hand sides). Else ``chunk`` steps at a
  time, one chunk after the other (:func:`_chunked_objectives`);
  ``differentiable``: whether the meta-gradient flows through the result
  (False: the chunks compute no gradients).
  """
  num_steps = params_stack[0].shape[0]
  if chunk is None or num_steps is None or chunk >= num_steps:
    return _vectorized(problem, list(params_stack), data, labels)
  return _chunked_objectives(problem, list(params_stack), data, labels,
                             chunk, differentiable)


def _vectorized(problem, params_stack, data, labels):
  """The objective at each step's parameters, vectorized over the steps."""
  with _without_fallback_warnings():
    return tf.vectorized_map(
        lambda params: problem.objective(list(params), data, labels),
        params_stack)


def _chunked_objectives(problem, params_stack, data, labels, chunk,
                        differentiable):
  """:func:`objectives_at` a chunk of steps at a time.

  The chunks run one after the other in a ``tf.map_fn`` (one iteration at a
  time), so only one chunk's activations are alive. With
  ``differentiable``, each chunk also computes the gradient of its
  objectives with respect to its parameters, and the result's gradient is
  ``upstream * that gradient`` (a ``tf.custom_gradient``): the
  meta-gradient then keeps one parameter-sized gradient per step instead of
  the activations, at the cost of the same forward and backward passes.
  Its gradient is first-order only (the meta-gradient takes one).
  """
  chunks = _Chunks(problem, data, labels, params_stack[0].shape[0], chunk)
  if not differentiable:
    return chunks.evaluate(params_stack, False)[0]

  @tf.custom_gradient
  def objectives(*stack):
    objs, grads = chunks.evaluate(stack, True)

    def gradient(upstream):
      return [g * tf.reshape(upstream, [-1] + [1] * (g.shape.rank - 1))
              for g in grads]
    return objs, gradient

  return objectives(*params_stack)


class _Chunks(object):
  """The ``num_steps`` steps in chunks of equal size (at most ``chunk``),
  the last step repeated to fill the last chunk."""

  def __init__(self, problem, data, labels, num_steps, chunk):
    self.problem, self.data, self.labels = problem, data, labels
    self.num_steps = num_steps
    self.num_chunks = math.ceil(num_steps / chunk)
    self.chunk = math.ceil(num_steps / self.num_chunks)
    self.padded = self.num_chunks * self.chunk

  def chunked(self, stack):
    """[num_chunks, chunk, ...]: the last step repeated up to ``padded``."""
    if self.padded > self.num_steps:
      stack = tf.concat([stack, tf.repeat(
          stack[-1:], self.padded - self.num_steps, axis=0)], 0)
    return tf.reshape(stack, [self.num_chunks, self.chunk] +
                      stack.shape.as_list()[1:])

  def unchunked(self, stack):
    return tf.reshape(stack, [self.padded] +
                      stack.shape.as_list()[2:])[:self.num_steps]

  def values(self, params):
    """The objectives of one chunk's steps."""
    if self.chunk == 1:
      return tf.reshape(self.problem.objective(
          [p[0] for p in params], self.data, self.labels), [1])
    return _vectorized(self.problem, params, self.data, self.labels)

  def with_gradients(self, params):
    """:meth:`values` and their gradients with respect to ``params``."""
    with tf.GradientTape() as tape:
      tape.watch(params)
      objs = self.values(params)
    # Of the sum: each step's objective depends on its own parameters only.
    grads = tape.gradient(objs, params)
    return objs, [tf.zeros_like(p) if g is None else g
                  for g, p in zip(grads, params)]

  def evaluate(self, stack, with_gradients):
    """(the objectives at all steps, their gradients with respect to the
    steps' parameters ``stack`` with ``with_gradients``, else None), a
    chunk at a time."""
    chunks = [self.chunked(s) for s in stack]
    if not with_gradients:
      objs = tf.map_fn(self.values, chunks, parallel_iterations=1,
                       fn_output_signature=tf.float32)
      return self.unchunked(objs), None
    objs, grads = tf.map_fn(
        self.with_gradients, chunks, parallel_iterations=1,
        fn_output_signature=(tf.float32, [tf.float32] * len(chunks)))
    return self.unchunked(objs), [self.unchunked(g) for g in grads]


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
                     limit, regular, budget_bytes=None, differentiable=True):
  """(weighted sum of the objectives at all steps, the objectives
  ``[f(p_0), f(p_0), ..., f(p_T-1)]``, the accumulated regularizer, whether
  the stop rules would have fired) from the stacked ``trail``: the
  parameters before each step, then (for a deferred regularizer with
  attention) the gradient points. ``reg``: the deferred regularizer's
  configuration, or None (``regular`` is then the loop's).
  ``budget_bytes``, ``differentiable``: see :func:`steps_per_chunk` and
  :func:`objectives_at`."""
  params_stack, data = trail[:num_params], inputs.objective_data()
  chunk = steps_per_chunk(problem, params_stack, *data, budget_bytes)
  at_steps = objectives_at(problem, params_stack, *data, chunk=chunk,
                           differentiable=differentiable)
  obj_accum = tf.reduce_sum(inputs.obj_weights * at_steps)
  problem_objectives = tf.concat([[start_obj], at_steps], 0)
  early_stop = stops_early(problem_objectives, inputs.obj_weights, limit)
  if reg is not None:
    regular = tf.reduce_sum(reg.alpha * regularizer_at(
        problem, reg, trail[-num_params:], inputs))
  return obj_accum, problem_objectives, regular, early_stop
