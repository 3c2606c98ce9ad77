"""When to recompute the optimizer's step in the meta-gradient instead of
keeping its values.

The meta-gradient of an unroll's while loop (the original's
``tf.gradients`` through the loop of ``optimizer/trainable_optimizer.py``
l.282-350) keeps, for every step, each value of the optimizer's step that
the step's gradient reads: for the hierarchical RNN about 180 floats per
optimizee parameter and step, 2.7 GiB for 20 steps of the MNIST MLP
784-256-10 (203,530 parameters). The fused step
(:class:`~l2o_scale.meta_training.fused_step.FusedUpdate`) keeps only the
step's inputs and runs the step once more in the backward pass; it is the
one mechanism for that, with XLA (``--jit_compile``) or without.
:func:`choose_update` takes it, without XLA, where the estimate of what the
kept step needs (:func:`step_bytes`, times steps and instances) exceeds a
budget (``--recompute_memory_gib``). The numbers are the kept step's up to
float rounding.
"""

import weakref

import tensorflow as tf

from l2o_scale.meta_training import step_update


def _spec(tensor):
  tensor = tf.convert_to_tensor(tensor)
  return tf.TensorSpec(tensor.shape, tensor.dtype)


def step_bytes(optimizer, params, grads, states, global_state):
  """Estimated bytes the meta-gradient keeps of one step on these inputs
  (tensors or specs of known shapes): the values of the step that its
  gradient reads (the step and its gradient traced on these shapes; the
  inputs, constants and meta-parameters aside). None if a shape is not
  known."""
  structure = (list(params), list(grads), states, list(global_state))
  specs = tf.nest.map_structure(_spec, structure)
  if not all(s.shape.is_fully_defined() for s in tf.nest.flatten(specs)):
    return None

  forward_ops = []

  def step(*flat):
    p, g, s, glob = tf.nest.pack_sequence_as(structure, flat)
    with tf.GradientTape() as tape:
      tape.watch(flat)
      out = optimizer.compute_updates_packed(p, g, s, glob)
    forward_ops.append(len(flat[0].graph.get_operations()))
    return tape.gradient(tf.nest.flatten(out),
                         list(flat) + optimizer.meta_variables)

  ops = tf.function(step, autograph=False).get_concrete_function(
      *tf.nest.flatten(specs)).graph.get_operations()
  forward = set(ops[:forward_ops[0]])
  kept = {t.ref() for op in ops[forward_ops[0]:] for t in op.inputs
          if t.op in forward and
          t.op.type not in ("Placeholder", "Const", "ReadVariableOp")}
  return sum(r.deref().shape.num_elements() * r.deref().dtype.size
             for r in kept if r.deref().shape.is_fully_defined())


# The kept values of a step are a few times its inputs (the hierarchical
# RNN: about 180 floats per parameter against 21 of parameters, gradients
# and packed state); below this many times the inputs' bytes the step
# surely fits and is kept without tracing its gradient for an estimate.
_SURELY_BELOW = 32

# optimizer -> estimated kept bytes per optimizee parameter (:func:`step_bytes`
# on the first problem that needed it), so that each optimizer traces it once.
_BYTES_PER_PARAM = weakref.WeakKeyDictionary()


def _nbytes(tensors):
  """Bytes of a nest of tensors; None if a shape is not known."""
  tensors = [tf.convert_to_tensor(t) for t in tf.nest.flatten(tensors)]
  if not all(t.shape.is_fully_defined() for t in tensors):
    return None
  return sum(t.shape.num_elements() * t.dtype.size for t in tensors)


def _kept_bytes(optimizer, params, grads, states, global_state):
  """:func:`step_bytes` of one step on these inputs, from the optimizer's
  bytes per parameter measured once (per-parameter work dominates: the
  per-tensor part is small); None if not known."""
  num_params = sum(tf.convert_to_tensor(p).shape.num_elements()
                   for p in params)
  if optimizer not in _BYTES_PER_PARAM:
    total = step_bytes(optimizer, params, grads, states, global_state)
    if total is None:
      return None
    _BYTES_PER_PARAM[optimizer] = total / max(num_params, 1)
  return _BYTES_PER_PARAM[optimizer] * num_params


def choose_update(kept, recomputed, optimizer, budget_bytes, copies):
  """The step the unroll calls: ``kept`` (the original's meta-gradient,
  which keeps the step's values), or a :class:`BudgetedUpdate` that takes
  ``recomputed`` (the step recomputed in the meta-gradient, a
  :class:`~l2o_scale.meta_training.fused_step.FusedUpdate`) where
  ``copies`` (steps x optimizee instances of the meta-gradient) times the
  step's estimated kept bytes (:func:`step_bytes`) exceed
  ``budget_bytes``. ``kept`` where ``recomputed`` or the budget is None,
  the budget <= 0 or the number of steps is not known while tracing."""
  if recomputed is None or not budget_bytes or budget_bytes <= 0 or (
      not copies):
    return kept
  return BudgetedUpdate(kept, recomputed, optimizer, budget_bytes, copies)


class BudgetedUpdate(step_update.StepUpdate):
  """:func:`choose_update`'s choice, made per step's inputs while tracing
  (where their shapes are known)."""

  def __init__(self, kept, recomputed, optimizer, budget_bytes, copies):
    self.kept = kept
    self.recomputed = recomputed
    self.optimizer = optimizer
    self.budget_bytes = budget_bytes
    self.copies = copies

  def __call__(self, params, grads, states, global_state, mode_mt=None,
               teacher_steps=None):
    inputs = (params, grads, states, global_state)
    chosen, size = self.kept, _nbytes(inputs)
    copies, budget = self.copies, self.budget_bytes
    if size is not None and copies * _SURELY_BELOW * size > budget:
      per_step = _kept_bytes(self.optimizer, *inputs)
      if per_step is not None and copies * per_step > budget:
        chosen = self.recomputed
    return chosen(params, grads, states, global_state, mode_mt,
                  teacher_steps)
