"""One step of the learned optimizer on all of a Keras model's variables
together, for :class:`l2o_scale.keras_optimizer.LearnedOptimizer`.

The hierarchical RNN mixes information across tensors (the mean log
learning rate of the whole problem, the per-tensor RNN feeding the global
RNN), so the original ``apply_gradients`` (L2O-Scale-Evaluation
``optimizer/trainable_optimizer.py`` l.127-199, ``hierarchical_rnn.py``
``_compute_updates`` l.363-432) updates *all* variables in one call and
advances one shared global state; so does this step, through the learned
optimizer's pure ``compute_updates_packed``. The variables then take their
new values through the step transforms of :mod:`l2o_scale.steps` (held
coordinates, the learning rate's scale, the schedule head, the weight
decay), as metatest.py's step does.
"""

import tensorflow as tf

from l2o_scale.meta_testing import inner_step
from l2o_scale.steps import transform


def all_finite(tensors):
  """A scalar bool: whether every entry of every tensor is finite."""
  return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(t))
                                 for t in tensors]))


class JointStep(object):
  """The step of a Keras optimizer's variables and packed state.

  Args:
    learned_optimizer: the learned optimizer with the packed interface
      (``compute_updates_packed``, ``pack_state``, ``unpack_state``,
      ``problem_mean_log_lr``).
    state: the optimizer's
      :class:`~l2o_scale.keras_parts.packed_state.PackedState`.
    assign: the Keras optimizer's ``assign(variable, value)``.
  """

  def __init__(self, learned_optimizer, state, assign):
    self._learned = learned_optimizer
    self._state = state
    self._assign = assign

  def apply(self, variables, given, transforms, inputs, skip):
    """One step, or none where a gradient is not finite.

    Why a step is skipped: the hierarchical RNN mixes every gradient into
    every tensor's update (the per-tensor and global RNNs, the mean log
    learning rate), so one NaN or inf coordinate would make every
    coordinate of every variable and of the state NaN for the rest of the
    run. As Keras' ``LossScaleOptimizer`` does for a gradient that
    overflowed, such a step changes no variable and no state; ``skip()``
    runs in its place (it counts the step). One flag over all gradients
    chooses the branch inside the compiled step.

    Args:
      variables: all the model's trainable variables, in the optimizer's
        order.
      given: {index in ``variables``: its gradient}, not empty; the others
        take no part (:meth:`_subset_update`).
      transforms: ``transforms(variables)``, the step transform chain of
        those variables.
      inputs: this step's scalar inputs of the transforms (its scale and
        progress).
      skip: what runs in place of a step whose gradients are not all
        finite (returns nothing).
    """
    indices = sorted(given)
    # A gradient may lack a static shape where its variable has one (a
    # Dense kernel applied to a sequence: the gradient of a tensordot); the
    # packed step sizes its segments from the gradients' static shapes.
    grads = [tf.reshape(tf.cast(tf.convert_to_tensor(given[i]), tf.float32),
                        variables[i].shape) for i in indices]
    tf.cond(all_finite(grads),
            lambda: self._step(variables, indices, grads, transforms, inputs),
            skip)

  def _step(self, variables, indices, grads, transforms, inputs):
    """The step of :meth:`apply` with finite gradients."""
    params = [tf.cast(tf.convert_to_tensor(v), tf.float32)
              for v in variables]
    global_state = self._state.read_global()
    if len(self._state.passes) > 1 and len(indices) == len(variables):
      self._state.assign_global(self._step_in_passes(
          variables, params, grads, global_state, transforms, inputs))
      return
    packed = self._state.read_all()
    if len(indices) == len(variables):
      new_params, new_packed, new_global, new_attend, _ = \
          self._learned.compute_updates_packed(params, grads, packed,
                                               global_state)
    else:
      new_params, new_packed, new_global, new_attend = self._subset_update(
          params, indices, grads, packed, global_state)
    self._state.assign_global(new_global)
    self._state.assign_all(new_packed)
    self._assign_variables([variables[i] for i in indices],
                           [params[i] for i in indices], grads, new_params,
                           new_attend, transforms, inputs)

  def _step_in_passes(self, variables, params, grads, global_state,
                      transforms, inputs):
    """The step of all variables, one pass after the other, so that only one
    pass's intermediates exist at a time. Returns the new global state (of
    the last pass, which holds the last variable, the one the global RNN
    reads)."""
    # The variables, not their values: only the log learning rates are read.
    lr_mean = self._learned.problem_mean_log_lr(
        self._state.all_pass_variables())
    new_global, done = None, []
    for index, (first, last, _, _) in enumerate(self._state.passes):
      # Each pass's state is read once the pass before has computed its
      # results: without this the executor may run the passes side by side
      # (they share no variables) and hold all their intermediates at once.
      with tf.control_dependencies(done):
        packed = self._state.read(index)
      new_params, new_packed, new_global, new_attend, _ = \
          self._learned.compute_updates_packed(
              params[first:last], grads[first:last], packed, global_state,
              problem_lr_mean=lr_mean)
      done = tf.nest.flatten(new_packed) + list(new_params)
      self._state.assign(index, new_packed)
      self._assign_variables(variables[first:last], params[first:last],
                             grads[first:last], new_params, new_attend,
                             transforms, inputs)
    return new_global

  def _subset_update(self, params, indices, grads, packed, global_state):
    """The step on the variables with gradients only (``indices``): as the
    original's ``apply_gradients``, the others keep their state and take no
    part (not in the per-tensor means, not the last tensor the global RNN
    reads). Their state is taken out of the packed layout and put back."""
    opt = self._learned
    states = opt.unpack_state(packed, params)
    sub_params = [params[i] for i in indices]
    new_params, new_sub, new_global, new_attend, _ = \
        opt.compute_updates_packed(sub_params, grads,
                                   opt.pack_state([states[i] for i in indices]),
                                   global_state)
    for i, state in zip(indices, opt.unpack_state(new_sub, new_params)):
      states[i] = state
    return new_params, opt.pack_state(states), new_global, new_attend

  def _assign_variables(self, variables, old, grads, new_params, new_attend,
                        transforms, inputs):
    """The variables take their values after the step: the attended
    location with attention, otherwise the new parameter (original
    apply_gradients), through the step transforms."""
    values = inner_step.next_variables(self._learned, new_params, new_attend)
    if not inner_step.uses_attention(self._learned):
      values = transforms(variables).apply(
          old, values, {**inputs, transform.GRADIENTS: grads})
    for var, value in zip(variables, values):
      self._assign(var, tf.cast(tf.reshape(value, var.shape), var.dtype))
