"""A learned optimizer that learns a learning-rate schedule (SGD).

Port of ``optimizer/learning_rate_schedule.py`` (L2O-Scale copy of Open-L2O;
the Google original is the same). The class is l.27-59: a vector variable
``LOL/learning_rates`` of ``n_steps`` rates (l.30-39), a per-tensor iteration
counter ``itr`` (l.41-45) and the update (l.47-59)::

    lr_k  = learning_rates[min(itr_k, n_steps - 1)]
    x_k+1 = x_k - lr_k * g_k,      itr_k+1 = itr_k + 1

Quirks kept:

* the default ``initial_rate`` is 0.0: untrained, the optimizer does not
  move the parameters at all;
* the rates are used as they are (no ``exp``), so they may become negative;
* each tensor has its own ``itr`` counter (an int32 scalar), they just all
  advance together; past the end of the schedule the last rate is reused.
"""

import tensorflow as tf

from optimizer import trainable_optimizer as opt


class LearningRateSchedule(opt.TrainableOptimizer):
  """SGD with a learned per-iteration learning rate.

  Args:
    initial_rate: initial value of every entry of ``LOL/learning_rates``.
    n_steps: length of the schedule (shape of ``LOL/learning_rates``).
    **kwargs: passed to :class:`TrainableOptimizer`.

  State key: ``itr`` (int32 scalar). The optimizer name is ``"LRS"``.
  """

  def __init__(self, initial_rate=0.0, n_steps=1000, **kwargs):
    super().__init__("LRS", ["itr"], **kwargs)
    self.n_steps = int(n_steps)
    self.max_index = tf.constant(self.n_steps - 1, dtype=tf.int32)
    with self.name_scope:
      self.learning_rates = self._meta_variable(
          opt.OPTIMIZER_SCOPE + "/learning_rates",
          tf.fill([self.n_steps], float(initial_rate)))

  def initialize_state(self, var, seed=None):
    """The iteration counter starts at 0 (original l.41-45)."""
    del var, seed  # Deterministic.
    return {"itr": tf.constant(0, dtype=tf.int32)}

  def _compute_update(self, param, grad, state):
    """One SGD step with the rate of the current iteration (l.47-59)."""
    itr = state["itr"]
    index = tf.minimum(itr, self.max_index)
    learning_rate = tf.gather(self.learning_rates, index)
    # Sparse gradients are densified, like TF1's implicit conversion.
    grad = tf.convert_to_tensor(grad)
    new_param = param - tf.scalar_mul(learning_rate, grad)
    return new_param, {"itr": itr + 1}
