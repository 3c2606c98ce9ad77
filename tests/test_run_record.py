"""The run record and the train dir's lock."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from l2o_scale.runs import dir_lock
from l2o_scale.runs import run_record

from tests.paths import mnist_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBDIR = "HierarchicalRNN_GRUCell_20_2"
TINY = ["--num_meta_iterations=1", "--fix_unroll=True",
        "--fix_unroll_length=2", "--fix_num_steps=2", "--fix_num_steps_eval=2",
        "--evaluation_epochs=1", "--mini_batch_size=256", "--summaries=False"]


@pytest.fixture(scope="module")
def tiny_run(metarun, tmp_path_factory):
  """(train dir, CompletedProcess) of a TINY run of one meta-iteration
  (model.ckpt-0 and -1, the run record); tests change copies of it."""
  train_dir = tmp_path_factory.mktemp("tiny")
  first = metarun("--train_dir={}".format(train_dir),
                  "--data_dir={}".format(mnist_dir()), *TINY)
  assert first.returncode == 0, first.stderr[-2000:]
  return train_dir, first


def _copy(tiny_run, tmp_path):
  """A copy of the TINY run's train dir, as ``tmp_path/train``."""
  target = tmp_path / "train"
  shutil.copytree(tiny_run[0], target)
  return target


def _tree_hash(folder):
  digest = hashlib.sha256()
  for base, _, files in sorted(os.walk(folder)):
    for name in sorted(files):
      full = os.path.join(base, name)
      digest.update(full.encode())
      with open(full, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


def test_record_round_trip_ignores_unknown_keys_and_names_mismatches(tmp_path):
  run_record.write(str(tmp_path), "HierarchicalRNN", {"max_log_lr": 33.},
                   {"seed": 1, "train_dir": "a"}, "metarun.py", card={"x": 1})
  record = run_record.read(str(tmp_path))
  assert record["format"] == "l2o-scale run record" and record["version"] == 1
  assert run_record.optimizer_flag_values(record) == {"max_log_lr": 33.}
  assert run_record.mismatches(record, {"max_log_lr": 33., "seed": 1,
                                        "train_dir": "b"}) == []
  assert run_record.mismatches(record, {"max_log_lr": -4.6, "seed": 2}) == [
      ("max_log_lr", 33., -4.6), ("seed", 1, 2)]
  assert run_record.read(str(tmp_path / "none")) is None
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_lock_refuses_a_live_holder_and_takes_over_a_stale_one(tmp_path):
  held = dir_lock.acquire(str(tmp_path), "first")
  try:
    dir_lock.acquire(str(tmp_path), "second")
    raise AssertionError("second lock granted")
  except dir_lock.LockedError as e:
    assert "pid {}".format(os.getpid()) in str(e) and "first" in str(e)
  dir_lock.release(held)
  assert not os.path.exists(held)
  dead = subprocess.run([sys.executable, "-c", "import os;print(os.getpid())"],
                        capture_output=True, text=True).stdout.strip()
  with open(held, "w") as f:
    json.dump(dict(pid=int(dead), host=os.uname().nodename,
                   started="earlier"), f)
  os.utime(held, (0, 0))
  assert dir_lock.acquire(str(tmp_path)) == held


def test_metarun_record_mismatch_resume_false_overwrite_and_lock(
    tmp_path, data_dir, metarun, tiny_run):
  """A train dir (a copy of the TINY run's) refuses, with one line and
  status 2 and without changing a file: other optimizer flags,
  --resume=False without --overwrite, and a lock held by another live
  process (this test's, while metarun runs in its own); --resume=False
  --overwrite starts over and records the new flags."""
  train_dir = _copy(tiny_run, tmp_path)
  args = ["--train_dir={}".format(train_dir), "--data_dir={}".format(data_dir)]
  record = run_record.read(str(train_dir / SUBDIR))
  assert record["optimizer"] == "HierarchicalRNN"
  assert record["optimizer_flags"]["max_log_lr"] == 33
  assert record["training_flags"]["fix_num_steps"] == 2
  assert "max_log_lr" not in record["training_flags"]
  before = _tree_hash(train_dir)

  other = metarun(*args, *TINY, "--max_log_lr=-4.6")
  assert other.returncode == 2
  assert other.stderr.strip().splitlines()[-1] == (
      "metarun.py: {} was trained with --max_log_lr=33.0; this run gives "
      "--max_log_lr=-4.6. Use the same flags, another --train_dir, or "
      "--resume=False --overwrite to start over.".format(train_dir))
  fresh = metarun(*args, *TINY, "--resume=False")
  assert fresh.returncode == 2
  assert "--overwrite" in fresh.stderr.strip().splitlines()[-1]
  with open(train_dir / dir_lock.FILENAME, "w") as f:
    json.dump(dict(pid=os.getpid(), host=os.uname().nodename,
                   started="now", command="pytest"), f)
  locked = metarun(*args, *TINY)
  assert locked.returncode == 2
  assert "in use by another run (pid {}".format(os.getpid()) in locked.stderr
  os.remove(train_dir / dir_lock.FILENAME)
  assert _tree_hash(train_dir) == before

  over = metarun(*args, *TINY, "--resume=False", "--overwrite",
                 "--max_log_lr=-4.6", "--num_meta_iterations=2")
  assert over.returncode == 0, over.stderr[-2000:]
  record = run_record.read(str(train_dir / SUBDIR))
  assert record["optimizer_flags"]["max_log_lr"] == -4.6
  assert not os.path.exists(train_dir / dir_lock.FILENAME)


@pytest.mark.parametrize("section,other", [
    ("optimizer_flags", "--max_log_lr=-4.6"),
    ("training_flags", "--fix_num_steps=3")])
def test_a_record_without_a_section_is_refused_by_a_resume_and_metatest(
    tmp_path, data_dir, metarun, tiny_run, section, other):
  """A run record without its optimizer_flags (or training_flags) would
  read as "no flags recorded": metatest would rebuild the optimizer with
  the defaults and a resume with other flags would go on. Both refuse it
  in one line naming the file, and nothing changes."""
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import tested_optimizer  # pylint: disable=g-import-not-at-top
  train_dir = _copy(tiny_run, tmp_path)
  path = run_record.path(str(train_dir / SUBDIR))
  with open(path) as f:
    record = json.load(f)
  del record[section]
  with open(path, "w") as f:
    json.dump(record, f)
  before = _tree_hash(train_dir)
  line = ("{} is damaged: it has no {} (the flags the run was trained "
          "with); restore it".format(path, section))
  resumed = metarun("--train_dir={}".format(train_dir),
                    "--data_dir={}".format(data_dir), *TINY,
                    "--num_meta_iterations=2", other)
  assert resumed.returncode == 2, resumed.stdout[-2000:]
  assert resumed.stderr.strip().splitlines()[-1] == "metarun.py: " + line
  assert _tree_hash(train_dir) == before
  flag_values = metatest.FLAGS
  try:
    flag_values(["metatest.py", "--train_dir={}".format(train_dir),
                 "--restore_model_name=model.ckpt-1",
                 "--include_mnist_mlp_problems"])
    with pytest.raises(ValueError) as refused:
      tested_optimizer.build(metatest.build_config(flag_values))
  finally:
    flag_values.unparse_flags()
  assert str(refused.value) == line


def test_finished_curriculum_run_is_not_retrained(tmp_path, data_dir, metarun):
  args = ["--train_dir={}".format(tmp_path), "--data_dir={}".format(data_dir),
          "--if_cl=True", "--num_meta_iterations=2", "--fix_unroll_length=10",
          "--evaluation_epochs=1", "--mini_batch_size=256",
          "--summaries=False"]
  first = metarun(*args)
  assert first.returncode == 0, first.stderr[-2000:]
  assert "[meta-iteration 2/2]" in first.stdout  # what a rerun must not do
  before = _tree_hash(tmp_path)
  again = metarun(*args)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "Training already complete (the curriculum run ended at " \
         "meta-iteration 2)" in again.stdout
  assert "[meta-iteration" not in again.stdout
  assert _tree_hash(tmp_path) == before


def test_damaged_checkpoint_is_one_line_and_temp_folders_are_cleaned(
    tmp_path, data_dir, metarun, tiny_run):
  """Resuming from a truncated checkpoint (in a copy of the TINY run's train
  dir) is status 2 and one line naming the file, no traceback; a left-over
  ``_temp`` checkpoint folder is removed."""
  tiny_dir, first = tiny_run
  assert "Best model: {}".format(tiny_dir / SUBDIR / "model.ckpt-0") in (
      first.stdout)
  train_dir = _copy(tiny_run, tmp_path)
  args = ["--train_dir={}".format(train_dir), "--data_dir={}".format(data_dir)]
  logdir = train_dir / SUBDIR
  (logdir / "model.ckpt-7_temp").mkdir()
  data = [f for f in os.listdir(logdir) if f.startswith("model.ckpt-1.data")]
  with open(logdir / data[0], "r+b") as f:
    f.truncate(10)
  again = metarun(*args, *TINY, "--num_meta_iterations=2")
  assert again.returncode == 2
  last = again.stderr.strip().splitlines()[-1]
  assert last.startswith(
      "metarun.py: cannot resume: checkpoint {} is damaged: {} is truncated "
      "(".format(logdir / "model.ckpt-1", logdir / data[0])), again.stderr
  assert "--resume=False --overwrite" in last
  assert "Traceback" not in again.stderr
  assert not (logdir / "model.ckpt-7_temp").exists()


def test_help_lists_the_optimizer_flags():
  for script in ("metarun.py", "metatest.py"):
    result = subprocess.run([sys.executable, script, "--helpshort"],
                            capture_output=True, text=True, cwd=ROOT,
                            timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert "--num_gradient_scales" in result.stdout, script
    assert "--max_log_lr" in result.stdout, script


def test_atomic_replace_keeps_the_old_file_when_writing_fails(tmp_path):
  from l2o_scale.runs import atomic_file  # pylint: disable=g-import-not-at-top
  target = str(tmp_path / "record.json")
  with atomic_file.replace(target) as f:
    f.write("old")
  with pytest.raises(ValueError):
    with atomic_file.replace(target) as f:
      f.write("half of the new")
      raise ValueError("interrupted")
  with open(target) as f:
    assert f.read() == "old"
  assert os.listdir(str(tmp_path)) == ["record.json"]
