"""The optimizer's step as one XLA call forward and one in the meta-gradient.

What ``metarun.py --jit_compile`` runs inside each meta-training unroll
(:func:`l2o_scale.meta_training.unroll_method.optimizer_update`). The step is the
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

from l2o_scale.meta_training import step_update


class MetaSlots(object):
  """Where the optimizer's step reads its meta-variables: each attribute
  or list entry of the optimizer and its sub-modules that holds one, as
  ``tf.Module`` records its variables' paths (the ``meta`` registry of TF1
  names aside: the step does not read it). Listed once, when the step is
  made; :meth:`swapped` replaces them for a trace."""

  def __init__(self, optimizer):
    index = {v.ref(): i for i, v in enumerate(optimizer.meta_variables)}
    paths = optimizer._flatten(  # pylint: disable=protected-access
        predicate=lambda v: isinstance(v, tf.Variable) and v.ref() in index,
        with_path=True)
    # (container, key, position in meta_variables) per place holding one.
    self.slots = [(_container(optimizer, path[:-1]), path[-1],
                   index[variable.ref()])
                  for path, variable in paths if path[0] != "meta"]

  @contextlib.contextmanager
  def swapped(self, values):
    """Within the block, the step reads its meta-variables as ``values``
    (tensors, in the order of ``optimizer.meta_variables``); the variables
    are back on exit. Only tracing uses it (the slots are Python
    attributes)."""
    undo = []
    for container, key, i in self.slots:
      undo.append((container, key, _get(container, key)))
      _set(container, key, values[i])
    try:
      yield
    finally:
      for container, key, value in reversed(undo):
        _set(container, key, value)


def _container(root, path):
  """The object at ``path`` (attribute names and list indices) of ``root``."""
  for key in path:
    root = _get(root, key)
  return root


def _get(container, key):
  return container[key] if isinstance(key, int) else getattr(container, key)


def _set(container, key, value):
  if isinstance(key, int):
    container[key] = value
  else:
    setattr(container, key, value)


class FusedUpdate(step_update.StepUpdate):
  """``update(params, grads, states, global_state, mode_mt, teacher_steps)``
  as :func:`l2o_scale.meta_training.unroll_method.optimizer_update` returns it,
  compiled as described in the module doc. Call :meth:`bind` once per
  unroll, outside its loop, and use what it returns in the loop."""

  def __init__(self, optimizer, jit_compile=True):
    self.optimizer = optimizer
    self.jit_compile = jit_compile
    self.meta_slots = MetaSlots(optimizer)

  def __call__(self, *args):
    return self.bind()(*args)

  def bind(self):
    """The step for one unroll, with the meta-parameters read here."""
    meta_vars = list(self.optimizer.meta_variables)
    values = [tf.convert_to_tensor(v) for v in meta_vars]
    return _BoundUpdate(self, values)


class _BoundUpdate(step_update.StepUpdate):
  """The step on fixed meta-parameter values (see :class:`FusedUpdate`);
  it also runs the batch gradients in the same XLA calls
  (:meth:`with_gradients`)."""

  fuses_gradients = True

  def __init__(self, fused, values):
    self.optimizer = fused.optimizer
    self.meta_slots = fused.meta_slots
    self.values = values
    self.jit_compile = fused.jit_compile

  def bind(self):
    return self

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
    stay None) and the meta-parameters that recomputes it in one XLA call
    (:func:`_compiled_calls`). ``constants`` get no gradient."""
    layout = _Layout(args)
    constants = [tf.convert_to_tensor(c) for c in constants]
    meta_slots = self.meta_slots

    def call(tensors, values, constants):
      with meta_slots.swapped(values):
        return function(*layout.packed(tensors), *constants)

    forward, backward = _compiled_calls(call, layout.floats, self.jit_compile)
    structure = []
    count = len(layout.inputs)

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
        return layout.per_input(grads) + list(grads[len(layout.floats):])
      return outs, gradient

    outs = fused(*(layout.inputs + list(self.values)))
    _check_no_variables(forward, self.optimizer)
    return tf.nest.pack_sequence_as(structure[0], list(outs))


class _Layout(object):
  """A step's arguments ``args`` (a nest; None entries stay None),
  flattened: ``inputs``, its tensors, and ``floats``, the positions in
  ``inputs`` of those with a gradient (floating point)."""

  def __init__(self, args):
    self.args = args
    self.flat = tf.nest.flatten(args)
    self.slots = [i for i, t in enumerate(self.flat) if t is not None]
    self.inputs = [tf.convert_to_tensor(self.flat[i]) for i in self.slots]
    self.floats = [j for j, t in enumerate(self.inputs)
                   if t.dtype.is_floating]

  def packed(self, tensors):
    """``args`` with ``tensors`` in place of :attr:`inputs`."""
    full = list(self.flat)
    for j, i in enumerate(self.slots):
      full[i] = tensors[j]
    return tf.nest.pack_sequence_as(self.args, full)

  def per_input(self, grads):
    """Gradients of the floating-point inputs (the first of ``grads``), as
    one entry per input (None for the others)."""
    per_input = [None] * len(self.inputs)
    for k, j in enumerate(self.floats):
      per_input[j] = grads[k]
    return per_input


def _compiled_calls(call, floats, jit_compile):
  """(forward, backward): ``call(tensors, values, constants)`` compiled
  (with XLA if ``jit_compile``), and its vector-Jacobian product with
  respect to ``tensors[j]`` for ``j`` in ``floats`` and ``values``
  (the meta-parameters), recomputing the call in the same compiled
  function."""

  def forward(tensors, values, constants):
    return call(list(tensors), list(values), list(constants))

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

  return (tf.function(forward, jit_compile=jit_compile, autograph=False),
          tf.function(backward, jit_compile=jit_compile, autograph=False))


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
  """A meta-variable :class:`MetaSlots` missed would be read inside the
  step and get no meta-gradient: refuse loudly instead."""
  captured = {v.ref() for c in function._list_all_concrete_functions()  # pylint: disable=protected-access
              for v in c.graph.variables}
  missed = [v.name for v in optimizer.meta_variables if v.ref() in captured]
  if missed:
    raise ValueError("the fused step reads meta-variables it cannot "
                     "differentiate: {}".format(", ".join(missed)))
