"""Distributed meta-training on a real loopback cluster (separate processes:
metarun.py defines absl flags globally, and TF servers cannot be stopped).

Every cluster is bounded by timeouts and its processes are killed in a
finally, so a hung cluster fails the test instead of hanging CI.
"""

import io
import os
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.runs import checkpoints
from l2o_scale.meta_training import distributed
from l2o_scale.meta_training import reporting
from l2o_scale.steps import tf1_optimizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBDIR = "HierarchicalRNN_GRUCell_20_2"
TINY = ["--fix_unroll=True", "--fix_unroll_length=10", "--fix_num_steps=10",
        "--fix_num_steps_eval=10", "--mini_batch_size=256"]
# The cluster's problem: a sparse softmax regression on a generated data set
# (a set of one problem; a restarted chief takes the problem its checkpoint
# says was drawn, tests/test_resume_problems.py). Its data reach the workers as MNIST's would (the per-worker dataset, mini-batch
# rows), and its unroll, which each process traces and each worker compiles,
# is smaller than the MNIST MLP's (measured: about 15 s less per cluster on
# 2 cores).
PROBLEMS = ["--include_sparse_softmax_problems"]
TIMEOUT = 240


def test_locked_rmsprop_on_ps_equals_the_ports_rmsprop():
  """The TF1 kernel used on the ps is the port's RMSProp, number for number."""
  rng = np.random.RandomState(0)
  values = [rng.normal(size=s).astype(np.float32) for s in [(3, 4), (5,)]]
  port_vars = [tf.Variable(v) for v in values]
  kernel_vars = [tf.Variable(v) for v in values]
  port = tf1_optimizers.RMSProp(port_vars, 1e-2, decay=0.9, epsilon=1e-20)
  kernel = tf1_optimizers.RMSProp(kernel_vars, 1e-2, decay=0.9, epsilon=1e-20)
  for _ in range(3):
    grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32))
             for v in values]
    port.apply_gradients(grads)
    tf.function(distributed.locked_rmsprop)(kernel, grads)
  for a, b in zip(port_vars + port.ms + port.mom,
                  kernel_vars + kernel.ms + kernel.mom):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=1e-7)
  assert not np.allclose(port_vars[0].numpy(), values[0])


def test_nonfinite_warning_follows_its_unroll_line_numbered_as_it():
  """The chief's report of a meta-iteration from a worker: the warning for
  an unroll with non-finite meta-gradient entries comes right after that
  unroll's progress line, with the single-process run's 1-based numbers."""
  meta = [tf.Variable(tf.zeros([3, 4])), tf.Variable(tf.zeros([5]))]
  out = io.StringIO()
  reporter = reporting.Reporter(
      out, None, "quadratic", types.SimpleNamespace(meta_variables=meta), 10)
  unroll = lambda nonfinite, done: dict(objective=1.5, nonfinite=nonfinite,
                                        first=2., last=1., done=done)
  result = {"start": 0., "unrolls": [unroll(0, 1.), unroll(3, 2.)]}
  plan = types.SimpleNamespace(num_unrolls=2, lengths=[20, 20])
  records = list(distributed.unroll_records(result, plan, 0))
  assert [r.step for r in records] == [1, 2]
  assert [r.seconds for r in records] == [1., 1.]
  warned = [reporter.unroll(4, r) for r in records]
  lines = out.getvalue().splitlines()
  assert warned == [False, True]
  assert lines[1].startswith("[meta-iteration 5/10] unroll 2/2 (20 steps)")
  assert lines[2] == ("warning: [meta-iteration 5] unroll 2: 3 of 17 "
                      "meta-gradient entries non-finite, replaced by zeros "
                      "as the original does.")
  assert len(lines) == 3


def _progress(path):
  return int(tf.train.load_checkpoint(path).get_tensor(
      "progress/meta_iteration/.ATTRIBUTES/VARIABLE_VALUE"))


def _variables(logdir, number, prefix):
  """Values of the checkpoint entries whose keys start with ``prefix``."""
  reader = tf.train.load_checkpoint(
      os.path.join(logdir, "model.ckpt-{}".format(number)))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.startswith(prefix)}


class _Launcher(object):
  """``python -m l2o_scale.cluster`` in the background, its output collected."""

  def __init__(self, args):
    self.lines = []
    self.proc = subprocess.Popen(
        [sys.executable, "-m", "l2o_scale.cluster"] + args, cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    self.reader = threading.Thread(target=self._read, daemon=True)
    self.reader.start()

  def _read(self):
    for line in self.proc.stdout:
      self.lines.append(line)

  def wait_for(self, text, deadline):
    while not any(text in line for line in self.lines):
      if time.time() > deadline or self.proc.poll() is not None:
        raise AssertionError("no {!r} in:\n{}".format(text,
                                                      "".join(self.lines)))
      time.sleep(0.2)
    return next(line for line in self.lines if text in line)

  def finish(self, deadline):
    """Waits for the launcher to succeed by ``deadline``; its output."""
    self.proc.wait(timeout=max(1, deadline - time.time()))
    self.reader.join(timeout=10)
    output = "".join(self.lines)
    assert self.proc.returncode == 0, output
    return output

  def stop(self):
    """Ctrl-C to the launcher (it stops its cluster); if it hangs, kill it
    and the tasks it reported starting that still run metarun.py."""
    if self.proc.poll() is None:
      self.proc.send_signal(signal.SIGINT)
      try:
        self.proc.wait(timeout=20)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    for line in list(self.lines):
      if ": pid " in line:
        _kill_if_metarun(int(line.split(": pid ")[1].split(",")[0]))


def _kill_if_metarun(pid):
  try:
    with open("/proc/{}/cmdline".format(pid), "rb") as f:
      if b"metarun.py" in f.read():
        os.kill(pid, signal.SIGKILL)
  except (OSError, ProcessLookupError):
    pass


def _launch(tmp_path, workers, total):
  return _Launcher(
      ["--workers={}".format(workers),
       "--log_dir={}".format(tmp_path / "logs{}".format(total)), "--",
       "--train_dir={}".format(tmp_path),
       "--num_meta_iterations={}".format(total),
       "--evaluation_epochs=2"] + PROBLEMS + TINY)


def test_cluster_survives_a_killed_worker_and_resumes_after_restart(
    tmp_path):
  """2 workers; worker 1 is killed -9 once meta-iteration 1 has reported:
  both meta-iterations complete, on the ps, with the usual checkpoints and
  summaries, and the run names the lost worker. A restarted cluster (its
  chief and ps are new: nothing survives but the checkpoints) continues at
  meta-iteration 3 instead of starting over."""
  deadline = time.time() + TIMEOUT
  first = _launch(tmp_path, 2, 2)
  try:
    worker = first.wait_for("worker 1 at", deadline)
    first.wait_for("[meta-iteration 1/2] unroll 1/1", deadline)
    os.kill(int(worker.split("pid ")[1].split(",")[0]), signal.SIGKILL)
    output = first.finish(deadline)
  finally:
    first.stop()
  assert "on /job:ps/replica:0/task:0" in output
  assert "lost worker /job:worker/replica:0/task:1" in output
  assert "[meta-iteration 2/2] unroll 1/1" in output
  logdir = str(tmp_path / SUBDIR)
  assert [_progress(os.path.join(logdir, "model.ckpt-{}".format(k)))
          for k in (1, 2)] == [1, 2]
  assert any(f.startswith("events.out.tfevents") and f.endswith(".v2")
             for f in os.listdir(logdir))

  second = _launch(tmp_path, 1, 3)
  try:
    output = second.finish(deadline)
  finally:
    second.stop()
  assert "model.ckpt-2 (TF2 checkpoint) at meta-iteration 2 of 3" in output
  assert "[meta-iteration 2/3]" not in output
  assert "[meta-iteration 3/3] unroll 1/1" in output
  assert _progress(os.path.join(logdir, "model.ckpt-3")) == 3
  # Closures run ahead of the chief's reports, so a checkpoint may already
  # hold later updates; what it must show is that updates happened: RMSProp's
  # momentum starts at 0 and each update moves a variable by it.
  meta = _variables(logdir, 3, checkpoints.TF2_ROOT + "/meta/")
  mom = _variables(logdir, 3, "meta_optimizer/mom/")
  assert len(meta) == len(mom) == 31
  assert all(np.all(np.isfinite(v)) for v in list(meta.values()) +
             list(mom.values()))
  assert sum(np.count_nonzero(v) for v in mom.values()) > 1000
  assert _variables(logdir, 3, "meta_optimizer/iterations/")[
      "meta_optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE"] >= 3


def test_the_chief_reports_the_share_its_workers_measured():
  """A worker's unroll carries the regularizer share it measured (-1 where
  the term did not act); the chief's records hold it as the single-process
  run's do, and its unroll lines show it."""
  unroll = lambda share, done: dict(objective=1.5, nonfinite=0, first=2.,
                                    last=1., done=done, share=share)
  result = {"start": 0., "unrolls": [unroll(-1., 1.), unroll(0.042, 2.)]}
  plan = types.SimpleNamespace(num_unrolls=2, lengths=[20, 20])
  records = list(distributed.unroll_records(result, plan, 0))
  assert [r.regularizer_share for r in records] == [None,
                                                    pytest.approx(0.042)]
  meta = [tf.Variable(tf.zeros([2]))]
  out = io.StringIO()
  reporter = reporting.Reporter(
      out, None, "quadratic", types.SimpleNamespace(meta_variables=meta), 10)
  for record in records:
    reporter.unroll(0, record)
  lines = [l for l in out.getvalue().splitlines() if l.startswith("[meta")]
  assert "regularizer share" not in lines[0]
  assert "regularizer share 0.042" in lines[1]
