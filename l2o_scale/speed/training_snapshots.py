"""One meta-training process of the time-to-trained benchmark
(:mod:`l2o_scale.speed.time_to_trained`), its snapshots scored while it is
paused.

:func:`run_job` starts the training, and each time the ``checkpoint`` state
file lists a new ``model.ckpt-K`` (K >= 1) it pauses the process group
(SIGSTOP), scores the snapshot with the :class:`Yardstick` (the robust score
of ``--selection=robust`` with fixed settings, the same for every recipe)
and resumes it (SIGCONT); the pauses are left out of the elapsed times. The
rules that turn snapshots into times (:func:`time_to_threshold`,
:func:`active_elapsed`, :func:`seconds_per_meta_iteration`) need no
TensorFlow.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

from l2o_scale.runs import run_record

# The yardstick's modules load TensorFlow; they are imported inside its
# methods, so that the timing rules and their tests do without it.

THRESHOLD = 0.05
YARDSTICK_STEPS = 1000
YARDSTICK_SEEDS = (1001, 1002, 1003)
# The robust score's initial parameters are TF draws with op seeds 1001-1003,
# which also depend on TF's global seed (metarun --seed): the yardstick's are
# those of a training run with --seed=1.
YARDSTICK_GLOBAL_SEED = 1
YARDSTICK_PROBLEMS = "mnist_mlp_problems"
CHECKPOINT = re.compile(r'"model\.ckpt-(\d+)"')
META_ITERATION_LINE = re.compile(r"^\[meta-iteration (\d+)/\d+\]")
FIRST_UNROLL_LINE = re.compile(r"^\[meta-iteration 1/\d+\] unroll 1/")
SELECTION_LINE = re.compile(r"robust score=(\S+)")


# ------------------------------------------------------------------ rules
def time_to_threshold(snapshots, threshold):
  """The first snapshot (in meta-iteration order) whose score is <=
  ``threshold``: ``(elapsed seconds, meta-iteration)``, or None."""
  for snap in sorted(snapshots, key=lambda s: s["meta_iteration"]):
    if snap["score"] is not None and snap["score"] <= threshold:
      return snap["elapsed"], snap["meta_iteration"]
  return None


def active_elapsed(moment, start, pauses):
  """Seconds from ``start`` to ``moment`` without the ``(stop, cont)``
  pauses that ended before ``moment`` (the paused process writes nothing,
  so no pause straddles a file's modification time)."""
  return moment - start - sum(cont - stop for stop, cont in pauses
                              if cont <= moment)


def seconds_per_meta_iteration(snapshots):
  """Mean seconds per meta-iteration between the first and the last
  snapshot (start-up and tracing, before the first, left out); None with
  fewer than two snapshots."""
  snaps = sorted(snapshots, key=lambda s: s["meta_iteration"])
  if len(snaps) < 2:
    return None
  first, last = snaps[0], snaps[-1]
  return ((last["elapsed"] - first["elapsed"]) /
          (last["meta_iteration"] - first["meta_iteration"]))


# ---------------------------------------------------------------- training
def _listed_checkpoints(logdir):
  """Numbers K of the ``model.ckpt-K`` the ``checkpoint`` state file lists
  (written after the checkpoint itself: a listed checkpoint is complete)."""
  try:
    with open(os.path.join(logdir, "checkpoint")) as f:
      return {int(k) for k in CHECKPOINT.findall(f.read())}
  except OSError:
    return set()


def _find_logdir(train_dir):
  """The folder metarun writes checkpoints to (``<train_dir>/<optimizer
  subdir>``), once it has a ``checkpoint`` state file."""
  try:
    names = sorted(os.listdir(train_dir))
  except OSError:
    return None
  for name in names:
    if os.path.exists(os.path.join(train_dir, name, "checkpoint")):
      return os.path.join(train_dir, name)
  return None


class _Output(object):
  """Reads the training's output in a thread: each line with its time,
  copied to a log file."""

  def __init__(self, stream, log_path):
    self.lines = []
    self._thread = threading.Thread(target=self._read,
                                    args=(stream, log_path), daemon=True)
    self._thread.start()

  def _read(self, stream, log_path):
    with open(log_path, "w") as log:
      for line in stream:
        self.lines.append((time.time(), line.rstrip("\n")))
        log.write(line)
        log.flush()

  def join(self):
    self._thread.join(timeout=30)


def own_selection_scores(lines):
  """meta-iteration -> the recipe's own robust score printed after it."""
  scores, k = {}, None
  for _, line in lines:
    m = META_ITERATION_LINE.match(line)
    if m:
      k = int(m.group(1))
    m = SELECTION_LINE.search(line)
    if m and k is not None:
      scores[k] = float(m.group(1))
  return scores


class _Watch(object):
  """The bookkeeping of one :func:`run_job`: the snapshots scored so far, the
  pauses, and whether the training was stopped at the threshold."""

  def __init__(self, train_dir, score, threshold, stop_at_threshold):
    self.train_dir, self.score = train_dir, score
    self.threshold, self.stop_at_threshold = threshold, stop_at_threshold
    self.pauses, self.snapshots, self.seen = [], [], set()
    self.logdir = None
    self.stopped_at_threshold = False
    self.start = time.time()

  def poll(self, proc):
    """One look at the train dir: scores the new snapshots with ``proc``
    paused. Returns whether to keep watching."""
    running = proc.poll() is None
    self.logdir = self.logdir or _find_logdir(self.train_dir)
    new = (sorted(_listed_checkpoints(self.logdir) - self.seen - {0})
           if self.logdir else [])
    if new and running:
      stop = time.time()
      os.killpg(proc.pid, signal.SIGSTOP)
    self._score(new)
    if new and running:
      if self.stopped_at_threshold:
        os.killpg(proc.pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGCONT)
      else:
        os.killpg(proc.pid, signal.SIGCONT)
        self.pauses.append((stop, time.time()))
    return not (self.stopped_at_threshold or (not running and not new))

  def _score(self, new):
    """Scores snapshots ``new`` in order, up to the first at or below the
    threshold when the training stops there."""
    for k in new:
      self.seen.add(k)
      prefix = os.path.join(self.logdir, "model.ckpt-{}".format(k))
      written = os.stat(prefix + ".index").st_mtime
      scored = time.time()
      value = self.score(prefix)
      self.snapshots.append(dict(
          meta_iteration=k,
          elapsed=active_elapsed(written, self.start, self.pauses),
          score=value, score_seconds=time.time() - scored))
      if (value is not None and value <= self.threshold and
          self.stop_at_threshold):
        self.stopped_at_threshold = True
        return


def run_job(command, train_dir, score, threshold=THRESHOLD,
            stop_at_threshold=True, poll_seconds=0.05, log_path=None,
            env=None):
  """Runs one training ``command`` (which writes checkpoints under
  ``train_dir``), scoring each new ``model.ckpt-K`` (K >= 1) with
  ``score(path) -> float`` while the process is paused.

  Returns a dict: ``snapshots`` ([{meta_iteration, elapsed, score,
  score_seconds}]), ``seconds_to_trained`` / ``meta_iterations_to_trained``
  (None if never), ``seconds_per_meta_iteration``, ``stopped_at_threshold``,
  ``returncode``, ``total_active_seconds`` (the whole training, pauses
  left out), ``first_unroll_elapsed`` (start-up, tracing and the first
  unroll) and the recipe's own selection scores.
  """
  log_path = log_path or os.path.join(train_dir + ".log")
  os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
  watch = _Watch(train_dir, score, threshold, stop_at_threshold)
  proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env,
                          start_new_session=True)
  output = _Output(proc.stdout, log_path)
  while watch.poll(proc):
    time.sleep(poll_seconds)
  end = time.time()
  proc.wait()
  output.join()
  return _job_report(command, log_path, proc.returncode, watch, output.lines,
                     end)


def _job_report(command, log_path, returncode, watch, lines, end):
  """What :func:`run_job` returns, from its :class:`_Watch` and the
  training's output ``lines`` (``(time, line)``); ``end``: when the
  watching ended."""
  snapshots, start, pauses = watch.snapshots, watch.start, watch.pauses
  reached = time_to_threshold(snapshots, watch.threshold)
  first_unroll = next((t for t, line in lines
                       if FIRST_UNROLL_LINE.match(line)), None)
  return dict(
      command=command, log=log_path, returncode=returncode,
      stopped_at_threshold=watch.stopped_at_threshold,
      snapshots=sorted(snapshots, key=lambda s: s["meta_iteration"]),
      seconds_to_trained=reached[0] if reached else None,
      meta_iterations_to_trained=reached[1] if reached else None,
      seconds_per_meta_iteration=seconds_per_meta_iteration(snapshots),
      total_active_seconds=active_elapsed(end, start, pauses),
      paused_seconds=sum(c - s for s, c in pauses),
      first_unroll_elapsed=(
          active_elapsed(first_unroll, start, pauses) if first_unroll
          else None),
      own_selection_scores=own_selection_scores(lines),
      output_tail=[line for _, line in lines[-5:]])


# --------------------------------------------------------------- yardstick
class Yardstick(object):
  """The robust score of ``--selection=robust`` with fixed settings, for
  checkpoints of any recipe (the optimizer is rebuilt from the run record
  next to the checkpoint; one per configuration, compiled once)."""

  def __init__(self, data_dir, steps=YARDSTICK_STEPS, seeds=YARDSTICK_SEEDS,
               problems=YARDSTICK_PROBLEMS, growth_limit=100.):
    from problems import problem_sets  # pylint: disable=g-import-not-at-top
    spec, self.dataset, self.batch_size = problem_sets.get(
        problems, data_dir=data_dir)[0]
    self.problem = spec.build()
    self.steps, self.seeds, self.growth_limit = steps, tuple(seeds), growth_limit
    self._optimizers = {}

  def _optimizer(self, logdir):
    from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top
    from l2o_scale.meta_testing import testing  # pylint: disable=g-import-not-at-top
    from l2o_scale.meta_training import selection  # pylint: disable=g-import-not-at-top
    from optimizer import hierarchical_rnn  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    kwargs = optimizer_flags.optimizer_kwargs_from_values(
        run_record.optimizer_flag_values(run_record.read(logdir)))
    key = json.dumps(kwargs, sort_keys=True, default=str)
    if key not in self._optimizers:
      opt = hierarchical_rnn.HierarchicalRNN(
          list(optimizer_flags.HRNN_CELL_SIZES), **kwargs)
      # TF's draws with an op seed depend on the global seed and on the
      # draws before: reset, every configuration gets the runs that a
      # training run with --seed=YARDSTICK_GLOBAL_SEED scores.
      tf.random.set_seed(YARDSTICK_GLOBAL_SEED)
      runs = selection.make_runs(self.problem, opt, len(self.dataset.data),
                                 self.batch_size, self.steps, self.seeds)
      self._optimizers[key] = (opt, runs, testing.RunCache())
    return self._optimizers[key]

  def __call__(self, checkpoint):
    from l2o_scale.meta_training import selection  # pylint: disable=g-import-not-at-top
    from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
    opt, runs, cache = self._optimizer(os.path.dirname(checkpoint))
    checkpoints.restore_optimizer(checkpoint, opt)
    return selection.robust_score(opt, self.problem, self.dataset,
                                  self.batch_size, runs, self.growth_limit,
                                  run_cache=cache).score
