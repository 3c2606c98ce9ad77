"""The shipped optimizer with a learned schedule head (``l2o-scale-head``):
it is the shipped ``l2o-scale`` byte for byte with the head the
registered selection chose, and by name it runs with that head and no
hand-set setting, in Keras, in metatest.py and in the benchmark; a run's
length, where given, feeds the head's progress input."""

import filecmp
import json
import os
import shutil

import numpy as np
import pytest

from l2o_scale import pretrained
from l2o_scale.benchmark import optimizers as bench_optimizers
from l2o_scale.keras_optimizer import LearnedOptimizer
from l2o_scale.meta_testing import metatest_config
from l2o_scale.steps import learned_schedule
from tests import keras_steps

NAME = "l2o-scale-head"
BASE = "l2o-scale"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SELECTION = os.path.join(ROOT, "reproduce", "results", "head", "scaled-decay",
                         "selection.json")


def _chosen_head():
  """The head the registered order ships: among the chosen heads of the
  meta-training seeds, the one with the best validation score."""
  with open(SELECTION) as f:
    selection = json.load(f)
  best = min(selection["chosen_by_run"].values(),
             key=lambda path: selection["scores"][path])
  return os.path.join(ROOT, best)


def test_it_is_the_base_checkpoint_with_the_chosen_head():
  folder, base = pretrained.folder(NAME), pretrained.folder(BASE)
  for suffix in (".index", ".data-00000-of-00001"):
    assert filecmp.cmp(os.path.join(folder, "model.ckpt-0" + suffix),
                       os.path.join(base, "model.ckpt-0" + suffix),
                       shallow=False)
  assert pretrained.schedule_head(NAME) == os.path.join(
      folder, pretrained.HEAD_FILE)
  assert filecmp.cmp(pretrained.schedule_head(NAME), _chosen_head(),
                     shallow=False)
  assert pretrained.schedule_head(BASE) is None
  record = pretrained.record(NAME)
  assert record["optimizer_flags"] == pretrained.record(BASE)[
      "optimizer_flags"]
  card = record["card"]
  assert card["name"] == NAME and card["base"] == BASE
  assert pretrained.long_run_settings(NAME) is None  # nothing hand-set
  assert card["schedule_head_training"]["validation_score"] < 0
  assert "/work/" not in json.dumps(record)
  assert any(line.startswith("  schedule head ")
             for line in pretrained.describe(NAME))


def _weights(optimizer):
  return keras_steps.weights_after_steps(optimizer, steps=4)


def _same(a, b):
  return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def test_by_name_it_runs_with_its_head_and_no_setting():
  """pretrained(name) alone: the head, no weight decay, no schedule, the
  head's default run length; total_steps goes to the head's progress
  input and applies no card setting. Its steps are l2o-scale's with the
  head file, and not l2o-scale's without it."""
  plain = LearnedOptimizer.pretrained(NAME)
  assert isinstance(plain.schedule_head, learned_schedule.ScheduleHead)
  np.testing.assert_array_equal(
      plain.schedule_head.theta.numpy(),
      learned_schedule.ScheduleHead.load(_chosen_head()).theta.numpy())
  assert plain.total_steps is None and plain.weight_decay is None
  assert float(plain.learning_rate) == 1.
  sized = LearnedOptimizer.pretrained(NAME, total_steps=40)
  assert sized.total_steps == 40 and sized.weight_decay is None
  assert float(sized.learning_rate) == 1.

  headed = _weights(sized)
  by_hand = _weights(LearnedOptimizer.pretrained(
      BASE, schedule_head=_chosen_head(), total_steps=40))
  assert _same(headed, by_hand)
  assert not _same(headed, _weights(LearnedOptimizer.pretrained(BASE)))
  # The progress input: 4 of 40 steps is not 4 of the default 2,000.
  assert not _same(headed, _weights(LearnedOptimizer.pretrained(NAME)))
  # A head given by the caller takes the shipped one's place.
  zero = LearnedOptimizer.pretrained(
      NAME, schedule_head=learned_schedule.ScheduleHead(), total_steps=40)
  assert _same(_weights(zero), _weights(LearnedOptimizer.pretrained(BASE)))


def _metatest(**flags):
  return metatest_config.MetatestConfig(
      pretrained=NAME, problems=("include_mnist_mlp_problems",),
      save_dir="/tmp/l2o-head-unused", **flags)


def test_metatest_by_name_runs_its_head_and_refuses_hand_set_settings():
  config = _metatest()
  assert config.head_file() == pretrained.schedule_head(NAME)
  head, = config.step_transforms().transforms
  np.testing.assert_array_equal(
      head.theta.numpy(),
      learned_schedule.ScheduleHead.load(_chosen_head()).theta.numpy())
  assert metatest_config.long_run_note(config) is None
  for flags in (dict(weight_decay=1e-3), dict(step_schedule="cosine")):
    with pytest.raises(ValueError, match="^--pretrained=l2o-scale-head has "
                       "a learned schedule head, which decides the step's "
                       "scale and the weight decay: drop --step_schedule "
                       "and --weight_decay$"):
      metatest_config.validate(_metatest(**flags))
  other = _chosen_head()
  assert _metatest(schedule_head=other).head_file() == other
  assert metatest_config.MetatestConfig(pretrained=BASE).head_file() is None


def test_the_benchmark_runs_it_as_shipped_and_has_no_bare_variant():
  make, identity = bench_optimizers.factory(NAME)
  built = make(300)
  assert isinstance(built.schedule_head, learned_schedule.ScheduleHead)
  assert built.total_steps == 300 and built.weight_decay is None
  assert bench_optimizers.bare_variant(NAME) is None
  with pytest.raises(ValueError, match="l2o-scale-head has no hand-set "
                     r"settings to leave out: .*it is l2o-scale\+bare"):
    bench_optimizers.parse(NAME + "+bare")
  # Stored runs of the headed optimizer are never taken for the base's.
  assert identity.split("@")[1] != bench_optimizers.identity(
      BASE + "+bare").split("@")[1].split("+")[0]


def test_a_missing_head_file_is_a_damaged_shipped_optimizer(tmp_path,
                                                             monkeypatch):
  root = tmp_path / "pretrained"
  shutil.copytree(pretrained.ROOT, root,
                  ignore=shutil.ignore_patterns("*.py", "__pycache__"))
  monkeypatch.setattr(pretrained, "ROOT", str(root))
  head = os.path.join(pretrained.folder(NAME), pretrained.HEAD_FILE)
  os.remove(head)
  with pytest.raises(pretrained.DamagedError,
                     match="the shipped file {} is missing: reinstalling"
                     .format(head)):
    LearnedOptimizer.pretrained(NAME)
  assert any(line.startswith(NAME + ": cannot be used")
             for line in pretrained.listing(width=1000))


def test_metatest_py_by_name_records_the_shipped_head(data_dir, tmp_path):
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import metatest_run  # pylint: disable=g-import-not-at-top
  metatest.FLAGS.unparse_flags()
  metatest.FLAGS(["metatest.py", "--pretrained=" + NAME,
                  "--include_mnist_mlp_problems", "--num_testing_itrs=40",
                  "--heldout_every=20", "--seeds=6", "--data_dir=" + data_dir,
                  "--save_dir=" + str(tmp_path), "--model_name=h"])
  try:
    metatest_run.run(metatest.build_config(metatest.FLAGS))
  finally:
    metatest.FLAGS.unparse_flags()
    metatest.FLAGS(["metatest.py"])
  records = [p for p in os.listdir(tmp_path) if "heldout_record" in p]
  assert records, os.listdir(tmp_path)
  with open(os.path.join(tmp_path, records[0])) as f:
    record = json.load(f)
  assert record["schedule_head"] == pretrained.schedule_head(NAME)
  assert record["weight_decay"] == 0 and record["step_schedule"] == "none"
  assert all(np.isfinite(record["train_loss"]))
