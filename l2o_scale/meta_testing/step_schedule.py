"""The step schedule's public path of earlier releases: the schedule lives
in :mod:`l2o_scale.steps.step_schedule` (a step transform, below both
meta-testing and meta-training)."""

from l2o_scale.steps.step_schedule import SCHEDULES  # pylint: disable=unused-import
from l2o_scale.steps.step_schedule import step_scales  # pylint: disable=unused-import
