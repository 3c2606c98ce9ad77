"""The step transforms of metatest.py's flags and of a pretrained
optimizer's card for long runs, in the order they apply.

A new step transform is one module in :mod:`l2o_scale.steps` (a
:class:`~l2o_scale.steps.transform.StepTransform`) plus its tests, and one
argument here if a flag or a card names it.
"""

from l2o_scale.steps import learned_schedule
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


def attach_head(head, owner, step_scaled=False, weight_decay=0.,
                names=("learning_rate", "weight_decay")):
  """The one way a schedule head joins a step (the Keras optimizer's
  ``schedule_head``, metatest.py's ``--schedule_head`` or its
  ``--pretrained`` optimizer's own head, the benchmark's ``+head=``): the
  head as a step transform, read once (a
  :class:`~l2o_scale.steps.learned_schedule.ScheduleHead`, the path of a
  saved one or its config; None gives the identity), after the rule that
  nothing else sets the step's scale or the weight decay
  (:func:`~l2o_scale.steps.learned_schedule.check_no_hand_set_schedule`,
  ``owner`` naming the head in its message, ``names`` the two settings as
  the caller spells them). A path that is not a head raises
  FileNotFoundError or a one-line
  :class:`~l2o_scale.steps.learned_schedule.HeadFileError`."""
  if head is not None:
    learned_schedule.check_no_hand_set_schedule(owner, step_scaled,
                                                weight_decay, names)
  return learned_schedule.schedule_head(head)
