"""The step transforms of metatest.py's flags and of a pretrained
optimizer's card for long runs, in the order they apply.

A new step transform is one module in :mod:`l2o_scale.steps` (a
:class:`~l2o_scale.steps.transform.StepTransform`) plus its tests, and one
argument here if a flag or a card names it.
"""

from l2o_scale.steps import step_schedule as step_schedule_lib
from l2o_scale.steps import transform
from l2o_scale.steps import weight_decay as weight_decay_lib
from l2o_scale.steps import zero_gradient_hold


def step_transforms_from(weight_decay=0., step_schedule="none",
                         step_decay_start=0., hold_zero_gradients=False):
  """The chain of ``--hold_zero_gradients``, ``--step_schedule``/
  ``--step_decay_start`` then ``--weight_decay`` (the argument names are the
  flags' and the card's keys, so ``step_transforms_from(**card_settings)``
  works): coordinates without a gradient are held, the step is scaled,
  then decayed by the scaled rate. Defaults give the identity (the
  original's step). A bad value raises a one-line ValueError."""
  return transform.chain(
      zero_gradient_hold.hold_zero_gradients(hold_zero_gradients),
      step_schedule_lib.scale_by_schedule(step_schedule, step_decay_start),
      weight_decay_lib.decoupled_weight_decay(weight_decay))
