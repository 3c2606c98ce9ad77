"""TF1 ``tf.train`` update rules that the original training code relies on.

The original meta-optimizer is ``tf.train.RMSPropOptimizer`` and the
imitation teacher ``tf.train.AdamOptimizer`` / ``RMSPropOptimizer`` /
``MomentumOptimizer(use_nesterov=True)``. Keras' optimizers differ from them
in details that change the numbers (Keras RMSprop starts its mean square at 0
and adds epsilon outside the square root; TF1 starts it at 1 and adds epsilon
inside), so the TF1 rules are written out here, as pure functions of
(value, gradient, slots), plus checkpointable modules that apply them to
the meta-parameters: :class:`RMSProp` (the original meta-optimizer; its mean
square may also start at 0) and :class:`Adam` (an option), both with an
optional linear learning-rate warm-up
(:func:`l2o_scale.meta_training.meta_learner.build_meta_optimizer` picks one
from ``--meta_optimizer``/``--meta_lr_warmup``).
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


class _MetaOptimizer(tf.Module):
  """What every meta-optimizer here shares: the learning rate (a variable
  read by the compiled update, so a change needs no retrace), the update
  counter ``iterations`` and an optional linear warm-up of the learning rate
  over the first ``warmup_steps`` updates. Subclasses define their slots
  (``tf.Variable`` attributes, so checkpoints hold them) and ``_update``."""

  def __init__(self, variables, learning_rate, warmup_steps, name):
    super().__init__(name=name)
    # Held by closures, not attributes, so that checkpoints keep the slots
    # only: the variables are filed under their owner, and the learning rate
    # (lowered by rollbacks) lives in the resume state.
    learning_rate_var = tf.Variable(float(learning_rate), trainable=False,
                                    name="learning_rate")
    self._learning_rate_fn = lambda: learning_rate_var
    variables = list(variables)
    self._variables_fn = lambda: variables
    self.warmup_steps = int(warmup_steps)
    self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="iterations")
    self._apply = tf.function(self._apply_impl)

  def _apply_impl(self, grads):
    learning_rate = self.learning_rate_tensor()
    self._update(self._variables_fn(), grads, learning_rate)
    self.iterations.assign_add(1)

  def _update(self, variables, grads, learning_rate):
    raise NotImplementedError

  def apply_gradients(self, grads):
    """Applies one update with ``grads`` (same order as the variables)."""
    self._apply(list(grads))

  def slot_variables(self):
    """What a rollback restores together with the variables."""
    raise NotImplementedError

  @property
  def learning_rate(self):
    """The base learning rate (a Python float; eager only), before warm-up."""
    return float(self._learning_rate_fn().numpy())

  def learning_rate_tensor(self):
    """The learning rate of the next update as a tensor (inside compiled
    updates): the base rate times the warm-up factor
    ``min(1, (iterations + 1) / warmup_steps)`` when ``warmup_steps > 0``."""
    learning_rate = tf.convert_to_tensor(self._learning_rate_fn())
    if self.warmup_steps <= 0:
      return learning_rate
    step = tf.cast(self.iterations + 1, learning_rate.dtype)
    return learning_rate * tf.minimum(1., step / float(self.warmup_steps))

  def set_learning_rate(self, learning_rate):
    """Changes the base learning rate of the following updates."""
    self._learning_rate_fn().assign(float(learning_rate))


class RMSProp(_MetaOptimizer):
  """The original meta-optimizer, ``tf.train.RMSPropOptimizer`` semantics.

  Slots ``ms`` and ``mom`` per variable are ``tf.Variable``s so they go into
  checkpoints and a resumed run continues with the same state. ``ms`` starts
  at ``initial_mean_square``: 1 as TF1 does (the default; the first updates
  are then ~sqrt(ms) times smaller than RMSProp's nominal step, an implicit
  warm-up over ~1/(1-decay) updates per decade of gradient scale), or 0 as
  Keras' RMSprop does (epsilon stays inside the square root, TF1's rule).
  Either way the update is the TF1 ``ApplyRMSProp`` kernel's.
  """

  def __init__(self, variables, learning_rate, decay=0.9, momentum=0.,
               epsilon=1e-10, initial_mean_square=1., warmup_steps=0,
               name="RMSProp"):
    super().__init__(variables, learning_rate, warmup_steps, name)
    self.decay = float(decay)
    self.momentum = float(momentum)
    self.epsilon = float(epsilon)
    self.ms = [tf.Variable(tf.fill(tf.shape(v), float(initial_mean_square)),
                           trainable=False, name="ms")
               for v in self._variables_fn()]
    self.mom = [tf.Variable(tf.zeros_like(v), trainable=False, name="mom")
                for v in self._variables_fn()]

  def _update(self, variables, grads, learning_rate):
    for var, grad, ms, mom in zip(variables, grads, self.ms, self.mom):
      new_var, new_ms, new_mom = rmsprop_update(
          var, grad, ms, mom, learning_rate, self.decay, self.momentum,
          self.epsilon)
      ms.assign(new_ms)
      mom.assign(new_mom)
      var.assign(new_var)

  def slot_variables(self):
    """The ``ms`` and ``mom`` slots (what a rollback restores with the vars)."""
    return self.ms + self.mom


class Adam(_MetaOptimizer):
  """Adam with bias correction, ``tf.train.AdamOptimizer`` semantics (the
  ``ApplyAdam`` kernel's rule, :func:`adam_step`); not in the original.

  Slots ``m``, ``v`` per variable and ``step``, the number of updates in
  them (the 1-based step t of the bias correction is ``step + 1``). ``step``
  is a slot rather than ``iterations`` so that a rollback, which restores
  ``m`` and ``v``, restores the bias correction that goes with them.
  """

  def __init__(self, variables, learning_rate, beta1=0.9, beta2=0.999,
               epsilon=1e-8, warmup_steps=0, name="Adam"):
    super().__init__(variables, learning_rate, warmup_steps, name)
    self.beta1 = float(beta1)
    self.beta2 = float(beta2)
    self.epsilon = float(epsilon)
    self.m = [tf.Variable(tf.zeros_like(v), trainable=False, name="m")
              for v in self._variables_fn()]
    self.v = [tf.Variable(tf.zeros_like(v), trainable=False, name="v")
              for v in self._variables_fn()]
    self.step = tf.Variable(0., trainable=False, name="step")

  def beta_powers(self):
    """(beta1^t, beta2^t) of the next update (t = step + 1), as the
    ``beta1_power``/``beta2_power`` inputs of the ``ApplyAdam`` kernel."""
    t = self.step + 1.
    return tf.pow(self.beta1, t), tf.pow(self.beta2, t)

  def _update(self, variables, grads, learning_rate):
    beta1_power, beta2_power = self.beta_powers()
    for var, grad, m, v in zip(variables, grads, self.m, self.v):
      delta, new_m, new_v = adam_step(grad, m, v, beta1_power, beta2_power,
                                      learning_rate, self.beta1, self.beta2,
                                      self.epsilon)
      m.assign(new_m)
      v.assign(new_v)
      var.assign_sub(delta)
    self.step.assign_add(1.)

  def slot_variables(self):
    """``m``, ``v`` and ``step`` (what a rollback restores with the vars)."""
    return self.m + self.v + [self.step]
