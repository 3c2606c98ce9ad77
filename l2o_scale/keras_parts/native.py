"""The switch of the native kernel (``native_step``) of
:class:`l2o_scale.keras_optimizer.LearnedOptimizer`: turned on in the
learned optimizer where asked, with a warning saying why where it cannot
run (:mod:`optimizer.native_step`)."""

import warnings

from optimizer import native_step as native_step_lib


class NativeStep(object):
  """Whether the native kernel runs in the learned optimizer's steps.

  Args:
    learned_optimizer: the hierarchical RNN whose kernel it turns on.
    native_step: True or False (ValueError otherwise).
  """

  def __init__(self, learned_optimizer, native_step):
    if not isinstance(native_step, bool):
      raise ValueError("native_step must be True or False, got {!r}".format(
          native_step))
    self._learned = learned_optimizer
    # Whether the kernel can run, until a step not compiled by XLA says why
    # it does not (once).
    self.ready = native_step
    if native_step:
      why = native_step_lib.enable(learned_optimizer)
      if why:
        _warn(why, stacklevel=4)  # The caller of LearnedOptimizer(...).
        self.ready = False

  def check_traced_step(self):
    """Warns, once, where the step being traced is not compiled by XLA and
    the kernel therefore does not run in it."""
    if self.ready:
      why = native_step_lib.outside_xla_reason(self._learned)
      if why:
        self.ready = False
        _warn(why, stacklevel=3)  # The optimizer's step, as Keras calls it.


def _warn(why, stacklevel):
  warnings.warn("native_step=True: {}; TensorFlow's ops run instead."
                .format(why), stacklevel=stacklevel)
