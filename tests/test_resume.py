"""Exact resume: a metarun killed with SIGKILL after checkpoint 1 and run again
ends exactly where the uninterrupted run ends."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing import plugin_event_accumulator
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = ["--num_meta_iterations=3", "--fix_unroll=True",
       "--fix_unroll_length=20", "--fix_num_steps=40",
       "--fix_num_steps_eval=20", "--evaluation_epochs=1",
       "--mini_batch_size=500", "--seed=1"]
SUBDIR = "HierarchicalRNN_GRUCell_20_2"


def _command(train_dir, data_dir):
  return [sys.executable, os.path.join(ROOT, "metarun.py"),
          "--train_dir={}".format(train_dir),
          "--data_dir={}".format(data_dir)] + RUN


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _evaluations(stdout):
  """evaluation number -> cost printed on the progress lines."""
  return {int(n): float(c) for n, c in
          re.findall(r"evaluation (\d+), cost=(\S+)", stdout)}


def _variables(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(("optimizer/", "meta_optimizer/"))}


def _summaries(logdir):
  """tag -> [(step, value)] as TensorBoard loads the folder (histograms by
  their step and bucket counts)."""
  acc = plugin_event_accumulator.EventAccumulator(
      str(logdir), size_guidance={plugin_event_accumulator.TENSORS: 0})
  acc.Reload()
  return {tag: [(e.step, tf.make_ndarray(e.tensor_proto).tolist())
                for e in acc.Tensors(tag)]
          for tag in acc.Tags()["tensors"]}


def _events_on_disk(logdir):
  """(total bytes, largest step) of the summary event files written so far."""
  size, step = 0, -1
  for path in logdir.glob("events.out.tfevents.*"):
    size += path.stat().st_size
    for event in event_file_loader.EventFileLoader(str(path)).Load():
      if event.HasField("summary"):
        step = max(step, event.step)
  return size, step


def _assert_same(a, b):
  assert sorted(a) == sorted(b)
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_kill_9_then_rerun_equals_uninterrupted_run(tmp_path, data_dir):
  straight = tmp_path / "straight"
  done = subprocess.run(_command(straight, data_dir), capture_output=True,
                        text=True, env=_env(), cwd=ROOT, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]

  killed = tmp_path / "killed"
  proc = subprocess.Popen(_command(killed, data_dir), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=_env(),
                          cwd=ROOT)
  marker = killed / SUBDIR / "model.ckpt-1.index"
  deadline = time.time() + 600
  while not marker.exists() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  # Killed once meta-iteration 2 has flushed summaries (the writer flushes
  # every 10 events), before its checkpoint: the resumed run writes those
  # steps again.
  size_at_1 = _events_on_disk(killed / SUBDIR)[0]
  while (_events_on_disk(killed / SUBDIR)[0] <= size_at_1 and
         proc.poll() is None and time.time() < deadline):
    time.sleep(0.005)
  assert proc.poll() is None, "run ended before it could be killed"
  os.kill(proc.pid, signal.SIGKILL)
  first_out = proc.communicate()[0]
  assert proc.returncode == -signal.SIGKILL
  assert not (killed / SUBDIR / "model.ckpt-3.index").exists()
  resumed_from = 2 if (killed / SUBDIR / "model.ckpt-2.index").exists() else 1
  # Steps are meta-updates, 2 per meta-iteration: the killed run left
  # summaries past its last checkpoint.
  assert _events_on_disk(killed / SUBDIR)[1] > 2 * resumed_from

  rerun = subprocess.run(_command(killed, data_dir), capture_output=True,
                         text=True, env=_env(), cwd=ROOT, timeout=600)
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert "Resuming from" in rerun.stdout

  evaluations = _evaluations(first_out)
  evaluations.update(_evaluations(rerun.stdout))
  assert evaluations == _evaluations(done.stdout)
  assert len(evaluations) == 3
  for number in (0, 3):
    _assert_same(_variables(str(killed / SUBDIR / "model.ckpt-{}".format(
        number))), _variables(str(straight / SUBDIR / "model.ckpt-{}".format(
            number))))
  # TensorBoard shows one value per step, the uninterrupted run's.
  expected, seen = _summaries(straight / SUBDIR), _summaries(killed / SUBDIR)
  assert len(expected["MetaObjective"]) == 6
  assert len(expected["EvaluationCost"]) == 3
  assert sorted(seen) == sorted(expected)
  for tag in expected:
    if tag == "PeakMemoryGiB":
      # A process's peak resident memory, not a number of the run: the
      # same steps, each a plausible peak (it differs between processes,
      # and the resumed process has its own).
      assert [s for s, _ in seen[tag]] == [s for s, _ in expected[tag]]
      assert all(0.1 < v < 64 for _, v in seen[tag]), seen[tag]
      continue
    assert seen[tag] == expected[tag], tag
