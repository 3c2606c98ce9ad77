"""The optimizer's step as an unroll calls it: one interface, several
implementations that compute the same step.

:class:`PlainUpdate` is the original's step (the optimizer's packed
``compute_updates_packed``; its meta-gradient keeps the step's values);
:class:`~l2o_scale.meta_training.fused_step.FusedUpdate` runs it as one
compiled call forward and one in the meta-gradient, with XLA
(``--jit_compile``) or without (the step recomputed in the meta-gradient);
:class:`~l2o_scale.meta_training.recompute.BudgetedUpdate` picks between
the two by a memory budget. Their numbers agree up to float rounding.
:func:`l2o_scale.meta_training.unroll_method.optimizer_update` chooses one.
"""


class StepUpdate(object):
  """``update(params, grads, states, global_state, mode_mt, teacher_steps)
  -> (new_params, new_states, new_global_state, new_attend_params,
  update_steps)``, the optimizer's packed step.

  An unroll calls :meth:`bind` once, outside its loop, and calls what it
  returns in the loop. A bound update whose ``fuses_gradients`` is True
  also offers ``with_gradients(problem, eval_params, data, labels, params,
  states, global_state, mode_mt, teacher_steps)``: the batch gradients and
  the step in one call, which the unroll uses where nothing else acts on
  the gradients (no gradient noise, no regularizer in the loop)."""

  fuses_gradients = False

  def bind(self):
    """The update one unroll calls in its loop."""
    return self

  def __call__(self, params, grads, states, global_state, mode_mt=None,
               teacher_steps=None):
    raise NotImplementedError

  def with_gradients(self, problem, eval_params, data, labels, params,
                     states, global_state, mode_mt=None, teacher_steps=None):
    raise NotImplementedError(
        "{} does not fuse the batch gradients".format(type(self).__name__))


class PlainUpdate(StepUpdate):
  """The optimizer's own packed step (the original's)."""

  def __init__(self, optimizer):
    self.optimizer = optimizer

  def __call__(self, params, grads, states, global_state, mode_mt=None,
               teacher_steps=None):
    return self.optimizer.compute_updates_packed(
        params, grads, states, global_state, mode_mt, teacher_steps)
