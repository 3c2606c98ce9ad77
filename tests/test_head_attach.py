"""One way to attach a schedule head (l2o_scale/steps/settings.py's
``attach_head``): the Keras optimizer, metatest.py and the benchmark's
``+head=`` read a head's file once per command and refuse a hand-set
schedule beside it with the same rule."""

import pytest

from l2o_scale import pretrained
from l2o_scale.benchmark import optimizers
from l2o_scale.keras_optimizer import LearnedOptimizer
from l2o_scale.meta_testing import metatest_config
from l2o_scale.steps import learned_schedule as ls
from l2o_scale.steps import settings

HEADED = "l2o-scale-head"


@pytest.fixture
def loads(monkeypatch):
  """The paths ScheduleHead.load reads, in order."""
  calls = []
  original = ls.ScheduleHead.load.__func__

  def counted(cls, path):
    calls.append(str(path))
    return original(cls, path)
  monkeypatch.setattr(ls.ScheduleHead, "load", classmethod(counted))
  return calls


def test_the_benchmark_reads_a_head_once_for_all_its_runs(tmp_path, loads):
  path = str(tmp_path / "head.npz")
  ls.ScheduleHead().save(path)
  make, _ = optimizers.factory("l2o-scale+head=" + path)
  runs = [make(steps) for steps in (10, 20, 30)]
  assert loads == [path]
  # Each run has a head of its own (its per-run state), equal in value.
  assert len({id(opt.schedule_head) for opt in runs}) == 3
  assert all(opt.schedule_head.get_config() == ls.ScheduleHead().get_config()
             for opt in runs)


def test_metatest_reads_its_optimizers_head_once(loads):
  plan = metatest_config.step_plan(
      metatest_config.MetatestConfig(pretrained=HEADED))
  assert loads == [pretrained.schedule_head(HEADED)] == [plan.head_file]


def test_keras_reads_the_shipped_head_once(loads):
  opt = LearnedOptimizer.pretrained(HEADED, total_steps=100)
  assert loads == [pretrained.schedule_head(HEADED)]
  assert isinstance(opt.schedule_head, ls.ScheduleHead)


def test_one_rule_refuses_a_hand_set_schedule_beside_a_head():
  with pytest.raises(ValueError, match="^X decides the step's scale and the "
                     "weight decay: drop a and b$"):
    settings.attach_head(ls.ScheduleHead(), "X", True, 0., ("a", "b"))
  assert isinstance(settings.attach_head(None, "X", True, 1.),
                    ls.transform.Identity)
