"""A learned optimizer with a single global learning rate (plain SGD).

Port of ``optimizer/global_learning_rate.py`` (L2O-Scale-Training copy; the
Google original in ``tensorflow/models`` is the same). The class is l.27-38:
one scalar variable ``LOL/global_learning_rate`` (l.30-35) and the update
``param - learning_rate * grad`` (l.37-38).

Quirk kept: the learning rate is used *as is*, not through ``exp``; nothing
keeps it positive, so meta-training may drive it negative (gradient ascent).
"""

import tensorflow as tf

from optimizer import trainable_optimizer as opt


class GlobalLearningRate(opt.TrainableOptimizer):
  """SGD whose single learning rate is a meta-parameter.

  Args:
    initial_rate: initial value of ``LOL/global_learning_rate`` (1e-3).
    **kwargs: passed to :class:`TrainableOptimizer`.

  State: none (``state_keys == []``); the optimizer name is ``"GLR"``.
  """

  def __init__(self, initial_rate=1e-3, **kwargs):
    super().__init__("GLR", [], **kwargs)
    with self.name_scope:
      self.learning_rate = self._meta_variable(
          opt.OPTIMIZER_SCOPE + "/global_learning_rate",
          tf.constant(float(initial_rate), shape=()))

  def _compute_update(self, param, grad, state):
    # A sparse (IndexedSlices) gradient is densified, as TF1's implicit
    # conversion in ``param - IndexedSlices`` did.
    grad = tf.convert_to_tensor(grad)
    return param - tf.scalar_mul(self.learning_rate, grad), dict(state)
