"""Runs stages as subprocesses, a few side by side, resumably.

Each stage writes its output to ``logs/<name>.log`` (the first line: ``+ ``
and its command as it ran). A finished stage leaves ``.stages/<name>.done``
(a JSON record: command as the plan names it, kind, wall time, when) and a line in ``timings.tsv``; a
stage whose marker exists is skipped. A stage starts once the stages it
names in ``after`` are done (the first such stage in the given order takes
a free slot); one whose prerequisite failed does not run. While a stage
runs, its pid is in ``.running/<name>.pid`` and a line every
``heartbeat`` seconds says it still runs, with the last line of its log.
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import time

from . import plan
from . import progress


class Interrupted(Exception):
  """Ctrl-C or a SIGTERM: the running stages were stopped."""


class Runner(object):
  """Runs the stages of one output folder. ``counted``: the stages the
  progress lines count (in plan order), ``kind_of``: name -> kind (also
  for names of earlier runs in timings.tsv). ``python``: the interpreter
  a command that starts with ``plan.PYTHON`` runs with (None: as named)."""

  def __init__(self, out, root, counted, kind_of, jobs=2, heartbeat=15,
               env=None, say=None, poll=0.5, python=None):
    self.out, self.root = out, root
    self.python = python
    self.logs = os.path.join(out, "logs")
    self.marks = os.path.join(out, ".stages")
    self.running_dir = os.path.join(out, ".running")
    self.times = os.path.join(out, "timings.tsv")
    for d in (self.logs, self.marks, self.running_dir):
      os.makedirs(d, exist_ok=True)
    self.counted, self.kind_of = list(counted), kind_of
    self.jobs, self.heartbeat, self.poll = max(1, int(jobs)), heartbeat, poll
    self.env = env if env is not None else dict(os.environ)
    self.say = say or (lambda text: print(text, flush=True))
    self.running = {}  # name -> (stage, Popen, start time, next heartbeat)

  # ------------------------------------------------------------ state
  def marker(self, name):
    return os.path.join(self.marks, name + ".done")

  def done(self, name):
    return os.path.exists(self.marker(name))

  def done_count(self):
    return sum(self.done(s.name) for s in self.counted)

  def finished_times(self):
    """(kind, seconds) of every line of timings.tsv."""
    out = []
    if os.path.exists(self.times):
      with open(self.times) as f:
        for line in f:
          name, _, secs = line.rstrip("\n").partition("\t")
          try:
            out.append((self.kind_of(name), float(secs)))
          except ValueError:
            continue
    return out

  def progress_text(self):
    todo = [s.kind for s in self.counted if not self.done(s.name)]
    left = progress.remaining_seconds(todo, self.finished_times(), self.jobs)
    return progress.progress_text(len(self.counted) - len(todo),
                                  len(self.counted), left)

  # ------------------------------------------------------------ running
  def command(self, stage):
    """What runs for ``stage``: its command, with the given interpreter
    where it names ``plan.PYTHON``."""
    argv = list(stage.argv)
    if self.python and argv and argv[0] == plan.PYTHON:
      argv[0] = self.python
    return argv

  def _start(self, stage):
    log = os.path.join(self.logs, stage.name + ".log")
    self.say("[run ] {}  (log: {})".format(stage.name,
                                           os.path.relpath(log, self.out)))
    argv = self.command(stage)
    with open(log, "w") as f:
      f.write("+ " + " ".join(argv) + "\n")
      f.flush()
      # Its own session: Ctrl-C reaches the pipeline, which stops it.
      proc = subprocess.Popen(argv, stdout=f,
                              stderr=subprocess.STDOUT, cwd=self.root,
                              env=self.env, start_new_session=True)
    with open(os.path.join(self.running_dir, stage.name + ".pid"), "w") as f:
      f.write("{}\n".format(proc.pid))
    now = time.monotonic()
    self.running[stage.name] = (stage, proc, now, self.heartbeat)

  def _finish(self, name, returncode):
    stage, _, start, _ = self.running.pop(name)
    secs = time.monotonic() - start
    os.remove(os.path.join(self.running_dir, name + ".pid"))
    log = os.path.join(self.logs, name + ".log")
    if returncode != 0:
      with open(log, errors="replace") as f:
        tail = f.readlines()[-20:]
      print("[FAIL] {}; last lines of {}:\n{}".format(
          name, log, "".join(tail).rstrip("\n")), file=sys.stderr, flush=True)
      return False
    secs = float("%.1f" % secs)
    with open(self.times, "a") as f:
      f.write("{}\t{:.1f}\n".format(name, secs))
    record = dict(name=name, kind=stage.kind, argv=list(stage.argv),
                  seconds=secs, finished=datetime.datetime.now(
                      datetime.timezone.utc).isoformat(timespec="seconds"))
    tmp = self.marker(name) + ".tmp"
    with open(tmp, "w") as f:
      json.dump(record, f, indent=1)
    os.replace(tmp, self.marker(name))
    text = (self.progress_text() if any(s.name == name for s in self.counted)
            else "figures and tables")
    self.say("[done] {} in {:.1f} s ({})".format(name, secs, text))
    return True

  def _beat(self, name):
    stage, proc, start, due = self.running[name]
    now = int(time.monotonic() - start)
    if now >= due:
      self.say("[... ] {} running for {}: {}".format(
          name, progress.format_seconds(now), progress.last_news(
              os.path.join(self.logs, name + ".log"))))
      self.running[name] = (stage, proc, start, due + self.heartbeat)

  def _poll(self):
    """Waits one poll, then collects the stages that ended; the names of
    those that failed."""
    time.sleep(self.poll)
    failed = []
    for name in list(self.running):
      code = self.running[name][1].poll()
      if code is not None:
        if not self._finish(name, code):
          failed.append(name)
      else:
        self._beat(name)
    return failed

  def run(self, stages):
    """Runs ``stages``, at most ``jobs`` at a time: a free slot takes the
    first stage (in the given order) whose ``after`` stages are done; a
    stage whose marker exists is skipped. After a failure the others still
    run (their work is kept), except the stages that need the failed one.
    Returns whether every stage succeeded."""
    failed = set()
    try:
      waiting = []
      for stage in stages:
        if self.done(stage.name):
          self.say("[skip] {} (done earlier)".format(stage.name))
        else:
          waiting.append(stage)
      while waiting or self.running:
        for stage in list(waiting):
          blocked = [n for n in stage.after if n in failed or not (
              self.done(n) or n in self.running or
              any(w.name == n for w in waiting))]
          if blocked:
            self.say("[skip] {} (needs {}, {})".format(
                stage.name, blocked[0], "which failed" if blocked[0] in
                failed else "which is not done and not part of this run"))
            failed.add(stage.name)
            waiting.remove(stage)
          elif (len(self.running) < self.jobs and
                all(self.done(n) for n in stage.after)):
            self._start(stage)
            waiting.remove(stage)
        if self.running:
          failed.update(self._poll())
      return not failed
    except (KeyboardInterrupt, Interrupted):
      self.stop()
      raise Interrupted()

  def stop(self):
    """Stops the running stages (their markers are never written)."""
    for name, (_, proc, _, _) in list(self.running.items()):
      try:
        os.killpg(proc.pid, signal.SIGTERM)
      except OSError:
        pass
    for name, (_, proc, _, _) in list(self.running.items()):
      try:
        proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
      pid_file = os.path.join(self.running_dir, name + ".pid")
      if os.path.exists(pid_file):
        os.remove(pid_file)
    self.running.clear()


def raise_on_sigterm():
  """A SIGTERM stops the run as Ctrl-C does."""
  def handler(signum, frame):
    del signum, frame
    raise Interrupted()
  signal.signal(signal.SIGTERM, handler)
