"""The optimizer's step as one XLA call forward and one in the meta-gradient.

What ``metarun.py --jit_compile`` runs inside each meta-training unroll
(:func:`l2o_scale.meta_training.unroll.optimizer_update`). The step is the
packed ``compute_updates_packed`` of the optimizer (for the hierarchical
RNN, ``hierarchical_rnn.py`` l.395-730 of the original), unchanged; what
differs is how TensorFlow runs it.

Why: at the sizes meta-training uses (the MNIST MLP: 15,910 parameters)
the step's ~100 element-wise operations on ``[k, N]`` rows cost dispatch,
not arithmetic, and so do the ~100 intermediates that a ``tf.while_loop``
keeps for the meta-gradient (one push per intermediate and step forward,
one pop backward). A ``tf.function(jit_compile=True)`` step alone fuses the
operations but still hands every intermediate to the loop. Here the step's
gradient is a ``tf.custom_gradient`` that recomputes the step inside one
XLA call (forward and vector-Jacobian product together), so the loop keeps
only the step's inputs; the recomputation costs less than the dispatch it
saves. The meta-parameters are read once per unroll, outside the loop
(:meth:`FusedUpdate.bind`), and enter both calls as tensors: a
``custom_gradient`` inside a while loop cannot capture variables.

The numbers differ from the plain step's by float rounding (XLA's fusion
and operation order); the meta-training fixtures replay within their
tolerances either way.
"""

import contextlib

import tensorflow as tf


@contextlib.contextmanager
def meta_values(optimizer, values):
  """Within the block, the optimizer reads its meta-variables as ``values``
  (tensors, in the order of ``optimizer.meta_variables``).

  Swaps every attribute (and list entry) of the optimizer's own objects that
  holds a meta-variable for the matching tensor, and restores them on exit.
  Only tracing uses it (the swapped objects are Python objects).
  """
  by_ref = {v.ref(): t for v, t in zip(optimizer.meta_variables, values)}
  undo, seen = [], set()

  def owned(obj):
    return (type(obj).__module__ or "").split(".")[0] == "optimizer"

  def swap(container, key, value, setter):
    if isinstance(value, tf.Variable) and value.ref() in by_ref:
      undo.append((container, key, value, setter))
      setter(container, key, by_ref[value.ref()])
    elif isinstance(value, list) or owned(value):
      walk(value)

  def walk(obj):
    if id(obj) in seen:
      return
    seen.add(id(obj))
    if isinstance(obj, list):
      for i, item in enumerate(obj):
        swap(obj, i, item, lambda c, k, v: c.__setitem__(k, v))
      return
    for name, value in list(vars(obj).items()):
      if name != "meta":  # The registry of names keeps its variables.
        swap(obj, name, value, setattr)

  walk(optimizer)
  try:
    yield
  finally:
    for container, key, value, setter in reversed(undo):
      setter(container, key, value)


class FusedUpdate(object):
  """``update(params, grads, states, global_state, mode_mt, teacher_steps)``
  as :func:`l2o_scale.meta_training.unroll.optimizer_update` returns it,
  compiled as described in the module doc. Call :meth:`bind` once per
  unroll, outside its loop, and use what it returns in the loop."""

  def __init__(self, optimizer, jit_compile=True):
    self.optimizer = optimizer
    self.jit_compile = jit_compile

  def __call__(self, *args):
    return self.bind()(*args)

  def bind(self):
    """The step for one unroll, with the meta-parameters read here."""
    meta_vars = list(self.optimizer.meta_variables)
    values = [tf.convert_to_tensor(v) for v in meta_vars]
    return _BoundUpdate(self.optimizer, values, self.jit_compile)


class _BoundUpdate(object):
  """The step on fixed meta-parameter values (see :class:`FusedUpdate`)."""

  def __init__(self, optimizer, values, jit_compile):
    self.optimizer = optimizer
    self.values = values
    self.jit_compile = jit_compile

  def __call__(self, params, grads, states, global_state, mode_mt=None,
               teacher_steps=None):
    args = (list(params), list(grads), states, list(global_state), mode_mt,
            teacher_steps)
    return self._fused(self.optimizer.compute_updates_packed, args, ())

  def with_gradients(self, problem, eval_params, data, labels, params,
                     states, global_state, mode_mt=None, teacher_steps=None):
    """The batch gradients at ``eval_params`` on (``data``, ``labels``),
    then the step, in the same XLA calls: the unroll's loop body without
    its gradient noise and regularizer (the caller uses it only where
    neither applies)."""
    optimizer = self.optimizer
    attends = eval_params is not params

    def step(params, eval_params, states, global_state, mode_mt,
             teacher_steps, data, labels):
      at = eval_params if attends else params
      _, grads = problem.objective_and_clean_gradients(at, data, labels)
      if not optimizer.use_second_derivatives:
        grads = [tf.stop_gradient(g) for g in grads]
      return optimizer.compute_updates_packed(params, grads, states,
                                              global_state, mode_mt,
                                              teacher_steps)

    args = (list(params), list(eval_params) if attends else None, states,
            list(global_state), mode_mt, teacher_steps)
    return self._fused(step, args, (data, labels))

  def _fused(self, function, args, constants):
    """``function(*args, *constants)`` as one XLA call, with a gradient with
    respect to the floating-point tensors of ``args`` (a nest; None entries
    stay None) and the meta-parameters that recomputes it in one XLA call.
    ``constants`` get no gradient.

    Long on purpose: the forward call, the recomputing backward call and
    the custom gradient share the flattened layout of ``args``; apart they
    would hand it around."""
    optimizer = self.optimizer
    flat = tf.nest.flatten(args)
    slots = [i for i, t in enumerate(flat) if t is not None]
    inputs = [tf.convert_to_tensor(flat[i]) for i in slots]
    floats = [j for j, t in enumerate(inputs) if t.dtype.is_floating]
    constants = [tf.convert_to_tensor(c) for c in constants]

    def call(tensors, values, constants):
      full = list(flat)
      for j, i in enumerate(slots):
        full[i] = tensors[j]
      with meta_values(optimizer, values):
        return function(*tf.nest.pack_sequence_as(args, full), *constants)

    def forward(tensors, values, constants):
      return call(list(tensors), list(values), list(constants))

    jit_compile = self.jit_compile

    def backward(tensors, values, constants, upstream):
      tensors, values = list(tensors), list(values)
      if not jit_compile:
        tensors, values = _after(upstream, tensors, values)
      sources = [tensors[j] for j in floats] + values
      with tf.GradientTape() as tape:
        tape.watch(sources)
        outs = tf.nest.flatten(call(tensors, values, list(constants)))
      return tape.gradient(outs, sources, output_gradients=list(upstream),
                           unconnected_gradients=tf.UnconnectedGradients.ZERO)

    forward = tf.function(forward, jit_compile=self.jit_compile,
                          autograph=False)
    backward = tf.function(backward, jit_compile=self.jit_compile,
                           autograph=False)
    structure = []
    count = len(inputs)

    @tf.custom_gradient
    def fused(*tensors):
      tensors, values = list(tensors[:count]), list(tensors[count:])
      nested = forward(tensors, values, constants)
      structure.append(nested)
      outs = tf.nest.flatten(nested)

      def gradient(*upstream):
        upstream = [tf.zeros_like(o) if u is None else u
                    for u, o in zip(upstream, outs)]
        grads = backward(tensors, values, constants, upstream)
        per_input = [None] * count
        for k, j in enumerate(floats):
          per_input[j] = grads[k]
        return per_input + list(grads[len(floats):])
      return outs, gradient

    outs = fused(*(inputs + list(self.values)))
    _check_no_variables(forward, optimizer)
    return tf.nest.pack_sequence_as(structure[0], list(outs))


def _after(upstream, tensors, values):
  """``tensors`` and ``values`` made to depend on the upstream gradient (plus
  a zero computed from it), as ``tf.recompute_grad`` does: without that
  dependency TensorFlow's graph optimizations run the recomputation as soon
  as its inputs exist, in the forward loop, and the loop keeps its values
  for every step (uncompiled, 20 steps of 784-256-10: a peak of 2.9 GiB
  against 2.05).
  XLA's call needs none of this: it runs as one operation."""
  first = tf.reshape(upstream[0], [-1])[:1]
  probe = tf.reduce_max(tf.cast(first, tf.float32))
  zero = tf.where(tf.math.is_nan(probe), 0., 0.)

  def tie(t):
    return t + tf.cast(zero, t.dtype) if t.dtype.is_floating else t
  return [tie(t) for t in tensors], [tie(v) for v in values]


def _check_no_variables(function, optimizer):
  """A meta-variable the swap missed would be read inside the step and get
  no meta-gradient: refuse loudly instead."""
  captured = {v.ref() for c in function._list_all_concrete_functions()  # pylint: disable=protected-access
              for v in c.graph.variables}
  missed = [v.name for v in optimizer.meta_variables if v.ref() in captured]
  if missed:
    raise ValueError("the fused step reads meta-variables it cannot "
                     "differentiate: {}".format(", ".join(missed)))
