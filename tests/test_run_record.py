"""run_record.json: what metarun.py records beside the checkpoints, and how
metatest.py and LearnedOptimizer rebuild the optimizer from it."""

import io
import json
import os

from absl import flags
import pytest

import metarun  # noqa: F401  (defines the metarun flags)
import metatest  # noqa: F401  (defines the metatest flags)
from l2o_scale import checkpoints
from l2o_scale import keras_optimizer
from l2o_scale import optimizer_flags
from l2o_scale import run_record

FLAGS = flags.FLAGS


@pytest.fixture(autouse=True)
def _reset_flags():
  yield
  FLAGS.unparse_flags()


def _parse(*args):
  FLAGS.unparse_flags()
  FLAGS(["metarun.py"] + list(args))
  return FLAGS


def test_metarun_records_its_flags_and_refuses_other_optimizer_flags(
    tmp_path):
  logdir = str(tmp_path / "HierarchicalRNN_GRUCell_20_2")
  metarun.write_run_record(logdir, _parse("--max_log_lr=-4.6",
                                          "--meta_learning_rate=3e-3"))
  with open(os.path.join(logdir, "run_record.json")) as f:
    record = json.load(f)
  assert record["format"] == "l2o-scale run record"
  assert record["optimizer"] == "HierarchicalRNN"
  assert record["optimizer_flags"]["max_log_lr"] == -4.6
  assert record["optimizer_flags"]["num_gradient_scales"] == 4
  assert record["training_flags"]["meta_learning_rate"] == 3e-3
  assert "max_log_lr" not in record["training_flags"]
  # Resuming with another optimizer option is refused, the flag named, and
  # the record is left as it was.
  with pytest.raises(ValueError, match=r"was trained with --max_log_lr=-4\.6; "
                     r"this run gives --max_log_lr=33"):
    metarun.write_run_record(logdir, _parse("--meta_learning_rate=3e-3"))
  with open(os.path.join(logdir, "run_record.json")) as f:
    assert json.load(f) == record
  # --resume=False starts a new run: the new record replaces the old.
  metarun.write_run_record(logdir, _parse("--resume=False"))
  assert run_record.read(logdir)["optimizer_flags"]["max_log_lr"] == 33


def test_metatest_takes_the_recorded_options_unless_given(tmp_path):
  logdir = str(tmp_path)
  metarun.write_run_record(logdir, _parse("--max_log_lr=-4.6",
                                          "--use_attention=True"))
  record = run_record.read(logdir)
  out = io.StringIO()
  FLAGS.unparse_flags()
  FLAGS(["metatest.py", "--use_attention=False"])
  applied = run_record.apply_to_flags(record, FLAGS, out=out, where="D")
  assert applied == ["max_log_lr"] and FLAGS.max_log_lr == -4.6
  assert not FLAGS.use_attention  # given on the command line: it wins
  assert ("Note: --use_attention=False given; D was trained with "
          "--use_attention=True.") in out.getvalue()


def test_keras_optimizer_is_rebuilt_from_the_record(tmp_path):
  spec = optimizer_flags.optimizer_spec(_parse("--max_log_lr=-4.6",
                                               "--num_gradient_scales=3"))
  trained = spec.build()
  path = str(tmp_path / "model.ckpt-0")
  checkpoints.save_optimizer(path, trained)
  # Without the record the defaults (4 gradient scales) do not fit.
  with pytest.raises(checkpoints.CheckpointMismatchError):
    keras_optimizer.LearnedOptimizer.from_checkpoint(path)
  metarun.write_run_record(str(tmp_path), FLAGS)
  learned = keras_optimizer.LearnedOptimizer.from_checkpoint(path)
  assert learned.learned_optimizer.max_log_lr == -4.6
  assert learned.learned_optimizer.num_gradient_scales == 3


def test_corrupt_record_is_a_clear_error(tmp_path):
  (tmp_path / "run_record.json").write_text("{not json")
  with pytest.raises(run_record.RunRecordError, match="Cannot read the run "
                     "record .*run_record.json"):
    run_record.read(str(tmp_path))
  (tmp_path / "run_record.json").write_text("{}")
  with pytest.raises(run_record.RunRecordError, match="not an l2o-scale run"):
    run_record.read(str(tmp_path))
  (tmp_path / "empty").mkdir()
  assert run_record.read(str(tmp_path / "empty")) is None
  assert run_record.read(str(tmp_path / "empty" / "model.ckpt-0")) is None
