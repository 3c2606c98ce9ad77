"""Adam with learnable scalar hyper-parameters.

Port of ``optimizer/trainable_adam.py`` (L2O-Scale copy of Open-L2O, the same
as the Google original). Line numbers refer to that file: variables l.35-87,
state l.89-93, update l.95-167, helpers l.169-205.

Meta-parameters (scalars, scope ``LOL``)::

    LOL/log_learning_rate = log(learning_rate)   lr   = exp(.)
    LOL/beta1_logit       = logit(beta1)         b1   = sigmoid(.)
    LOL/beta2_logit       = logit(beta2)         b2   = sigmoid(.)
    LOL/log_epsilon       = log(epsilon)         eps  = exp(.) + 1e-10

Per coordinate (state ``m``, ``v``, ``t``, all [N, 1], starting at 0)::

    t' = t + 1
    m' = b1 m + (1 - b1) g
    v' = v / (1 - (g^2) ** b2)                       <-- see below
    update = lr (m' / (1 - b1^t')) / (sqrt(v' / (1 - b2^t') + 1e-10) + eps)

QUIRK (reproduced): the original computes the new second moment with
``self._debias_adam_estimate(second_moment, tf.square(grad_values), beta2)``
(l.133-134) -- the *debiasing* helper with its arguments shifted -- instead
of ``_update_adam_estimate``. So ``v' = v / (1 - (g^2)^b2)``: starting from
``v = 0`` the second moment stays 0 for ever, and the optimizer is really
bias-corrected momentum SGD with step ``lr / (1e-5 + eps + 1e-10)``
(about ``1e5 * lr`` with the default epsilon). If a gradient coordinate is
exactly +-1 the denominator is 0, ``v`` becomes ``0/0 = NaN`` and stays NaN.
The textbook rule is kept as :meth:`TrainableAdam._textbook_second_moment`
for reference and tests; :meth:`_second_moment_update` is the hook that
selects the faithful rule.

Sparse (``tf.IndexedSlices``) gradients only touch the indexed rows of the
parameter and of the state (l.147-156), using the sparse helpers ported in
:mod:`optimizer.coordinatewise_rnn`.
"""

import numpy as np
import tensorflow as tf

from optimizer import coordinatewise_rnn as crnn
from optimizer import trainable_optimizer as opt

_LOL = opt.OPTIMIZER_SCOPE


def _inv_sigmoid(x):
  return np.log(x / (1.0 - x))


class TrainableAdam(opt.TrainableOptimizer):
  """Adam whose learning rate, betas and epsilon are meta-parameters.

  Args:
    learning_rate, beta1, beta2, epsilon: initial values (1e-3, 0.9, 0.999,
      1e-8), stored as log / logit as in the module docstring.
    **kwargs: passed to :class:`TrainableOptimizer`.

  Raises:
    ValueError: if learning_rate or epsilon <= 0, or a beta is not in (0, 1).

  State keys ``m``, ``v``, ``t`` ([N, 1] float32); the name is ``"Adam"``.
  """

  def __init__(self, learning_rate=1e-3, beta1=0.9, beta2=0.999,
               epsilon=1e-8, **kwargs):
    if learning_rate <= 0:
      raise ValueError("Learning rate must be positive.")
    if epsilon <= 0:
      raise ValueError("Epsilon must be positive.")
    if not 0 < beta1 < 1 or not 0 < beta2 < 1:
      raise ValueError("Beta values must be between 0 and 1, exclusive.")
    # Key names follow Algorithm 1 of arXiv:1412.6980.
    super().__init__("Adam", ["m", "v", "t"], **kwargs)
    with self.name_scope:
      self.log_learning_rate = self._meta_variable(
          _LOL + "/log_learning_rate", tf.constant(np.log(learning_rate),
                                                   tf.float32))
      self.beta1_logit = self._meta_variable(
          _LOL + "/beta1_logit", tf.constant(_inv_sigmoid(beta1), tf.float32))
      self.beta2_logit = self._meta_variable(
          _LOL + "/beta2_logit", tf.constant(_inv_sigmoid(beta2), tf.float32))
      self.log_epsilon = self._meta_variable(
          _LOL + "/log_epsilon", tf.constant(np.log(epsilon), tf.float32))

  def initialize_state(self, var, seed=None):
    """``m``, ``v`` and ``t`` start at zero, shape [N, 1] (l.89-93)."""
    del seed  # Deterministic.
    n = tf.TensorShape(var.shape).num_elements()
    return {key: tf.zeros([n, 1]) for key in self.state_keys}

  def _compute_update(self, param, grad, state):
    """One Adam step on one tensor (l.95-167)."""
    (grad_values, first_moment, second_moment, timestep,
     grad_indices) = self._extract_gradients_and_internal_state(
         grad, state, tf.shape(param))

    beta1 = tf.nn.sigmoid(self.beta1_logit)
    beta2 = tf.nn.sigmoid(self.beta2_logit)
    epsilon = tf.exp(self.log_epsilon) + 1e-10
    learning_rate = tf.exp(self.log_learning_rate)

    old_grad_shape = tf.shape(grad_values)
    grad_values = tf.reshape(grad_values, [-1, 1])

    new_timestep = timestep + 1
    new_first_moment = self._update_adam_estimate(first_moment, grad_values,
                                                  beta1)
    new_second_moment = self._second_moment_update(
        second_moment, tf.square(grad_values), beta2)

    debiased_first = self._debias_adam_estimate(new_first_moment, beta1,
                                                new_timestep)
    debiased_second = self._debias_adam_estimate(new_second_moment, beta2,
                                                 new_timestep)
    # The original adds 1e-10 under the root: sqrt'(0) is infinite.
    update = (learning_rate * debiased_first /
              (tf.sqrt(debiased_second + 1e-10) + epsilon))
    update = tf.reshape(update, old_grad_shape)

    if grad_indices is not None:
      param_shape = tf.shape(param)
      update = crnn.stack_tensor(update, grad_indices, param, param_shape[:1])
      new_first_moment = crnn.update_slices(new_first_moment, grad_indices,
                                            state["m"], param_shape)
      new_second_moment = crnn.update_slices(new_second_moment, grad_indices,
                                             state["v"], param_shape)
      new_timestep = crnn.update_slices(new_timestep, grad_indices,
                                        state["t"], param_shape)

    new_param = param - update
    return new_param, {"m": new_first_moment, "v": new_second_moment,
                       "t": new_timestep}

  def _second_moment_update(self, second_moment, grad_squared, beta2):
    """The original's (mistaken) second-moment rule, l.133-134 (see module)."""
    return self._debias_adam_estimate(second_moment, grad_squared, beta2)

  def _textbook_second_moment(self, second_moment, grad_squared, beta2):
    """What Adam intends: ``beta2 v + (1 - beta2) g^2``. Not used by default."""
    return self._update_adam_estimate(second_moment, grad_squared, beta2)

  def _update_adam_estimate(self, estimate, value, beta):
    """``beta * estimate + (1 - beta) * value`` (l.169-171)."""
    return (beta * estimate) + ((1 - beta) * value)

  def _debias_adam_estimate(self, estimate, beta, t_step):
    """``estimate / (1 - beta ** t_step)`` (l.173-175)."""
    return estimate / (1 - tf.pow(beta, t_step))

  def _extract_gradients_and_internal_state(self, grad, state, param_shape):
    """Dense gradient and state, or the touched rows of both (l.177-205)."""
    first_moment = state["m"]
    second_moment = state["v"]
    timestep = state["t"]
    if isinstance(grad, tf.IndexedSlices):
      grad_indices, grad_values = crnn.accumulate_sparse_gradients(grad)
      first_moment = crnn.slice_tensor(first_moment, grad_indices, param_shape)
      second_moment = crnn.slice_tensor(second_moment, grad_indices,
                                        param_shape)
      timestep = crnn.slice_tensor(timestep, grad_indices, param_shape)
      return grad_values, first_moment, second_moment, timestep, grad_indices
    return grad, first_moment, second_moment, timestep, None
