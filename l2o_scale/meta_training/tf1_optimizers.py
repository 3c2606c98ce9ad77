"""TF1 ``tf.train`` update rules that the original training code relies on.

The original meta-optimizer is ``tf.train.RMSPropOptimizer`` and the
imitation teacher ``tf.train.AdamOptimizer`` / ``RMSPropOptimizer`` /
``MomentumOptimizer(use_nesterov=True)``. Keras' optimizers differ from them
in details that change the numbers (Keras RMSprop starts its mean square at 0
and adds epsilon outside the square root; TF1 starts it at 1 and adds epsilon
inside), so the TF1 rules are written out here, as pure functions of
(value, gradient, slots) plus a small checkpointable module for RMSProp.
Formulas: TF1 ``training_ops`` ApplyAdam / ApplyRMSProp / ApplyMomentum.
"""

import tensorflow as tf


def adam_step(grad, m, v, beta1_power, beta2_power, learning_rate,
              beta1=0.9, beta2=0.999, epsilon=1e-8):
  """The TF1 Adam rule (``ApplyAdam``): returns (step to subtract, m, v).

  ``beta1_power``/``beta2_power`` are b1^t, b2^t of the 1-based step t (TF1
  keeps them as running products); lr_t = lr sqrt(1-b2^t) / (1-b1^t).
  """
  lr_t = learning_rate * tf.sqrt(1. - beta2_power) / (1. - beta1_power)
  m = beta1 * m + (1. - beta1) * grad
  v = beta2 * v + (1. - beta2) * tf.square(grad)
  return lr_t * m / (tf.sqrt(v) + epsilon), m, v


def adam_update(var, grad, m, v, step, learning_rate, beta1=0.9, beta2=0.999,
                epsilon=1e-8):
  """TF1 Adam (``tf.train.AdamOptimizer``) at step number ``step``
  (1-based): returns (var, m, v)."""
  step = tf.cast(step, tf.float32)
  delta, m, v = adam_step(grad, m, v, beta1 ** step, beta2 ** step,
                          learning_rate, beta1, beta2, epsilon)
  return var - delta, m, v


def rmsprop_update(var, grad, ms, mom, learning_rate, decay=0.9, momentum=0.,
                   epsilon=1e-10):
  """TF1 RMSProp: ms starts at ones; returns (var, ms, mom)."""
  ms = decay * ms + (1. - decay) * tf.square(grad)
  mom = momentum * mom + learning_rate * grad / tf.sqrt(ms + epsilon)
  return var - mom, ms, mom


def nesterov_update(var, grad, accum, learning_rate, momentum=0.9):
  """TF1 MomentumOptimizer(use_nesterov=True): returns (var, accum)."""
  accum = momentum * accum + grad
  return var - learning_rate * (grad + momentum * accum), accum


class RMSProp(tf.Module):
  """The original meta-optimizer, ``tf.train.RMSPropOptimizer`` semantics.

  Slots ``ms`` (initialised to 1, as TF1 does) and ``mom`` per variable are
  ``tf.Variable``s so they go into checkpoints and a resumed run continues
  with the same state. Gradients are applied inside a ``tf.function``.
  """

  def __init__(self, variables, learning_rate, decay=0.9, momentum=0.,
               epsilon=1e-10, name="RMSProp"):
    super().__init__(name=name)
    # Read by the compiled update, so a change (set_learning_rate) needs no
    # retrace; held by a closure, not an attribute, so that checkpoints keep
    # the original's slots only.
    learning_rate_var = tf.Variable(float(learning_rate), trainable=False,
                                    name="learning_rate")
    self._learning_rate_fn = lambda: learning_rate_var
    self.decay = float(decay)
    self.momentum = float(momentum)
    self.epsilon = float(epsilon)
    variables = list(variables)
    # Not an attribute: checkpoints must file the variables under their
    # owner, not under the meta-optimizer.
    self._variables_fn = lambda: variables
    self.ms = [tf.Variable(tf.ones_like(v), trainable=False, name="ms")
               for v in variables]
    self.mom = [tf.Variable(tf.zeros_like(v), trainable=False, name="mom")
                for v in variables]
    self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="iterations")
    self._apply = tf.function(self._apply_impl)

  def _apply_impl(self, grads):
    for var, grad, ms, mom in zip(self._variables_fn(), grads, self.ms,
                                  self.mom):
      new_var, new_ms, new_mom = rmsprop_update(
          var, grad, ms, mom, self._learning_rate_fn(), self.decay,
          self.momentum, self.epsilon)
      ms.assign(new_ms)
      mom.assign(new_mom)
      var.assign(new_var)
    self.iterations.assign_add(1)

  def apply_gradients(self, grads):
    """Applies one update with ``grads`` (same order as the variables)."""
    self._apply(list(grads))

  def slot_variables(self):
    """The ``ms`` and ``mom`` slots (what a rollback restores with the vars)."""
    return self.ms + self.mom

  @property
  def learning_rate(self):
    """The current learning rate (a Python float; eager only)."""
    return float(self._learning_rate_fn().numpy())

  def learning_rate_tensor(self):
    """The current learning rate as a tensor (inside compiled updates)."""
    return tf.convert_to_tensor(self._learning_rate_fn())

  def set_learning_rate(self, learning_rate):
    """Changes the learning rate of the following updates."""
    self._learning_rate_fn().assign(float(learning_rate))
