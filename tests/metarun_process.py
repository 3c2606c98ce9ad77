"""metarun.py run as a user runs it, several commands in one process.

Each ``python metarun.py ...`` a test starts spends seconds importing
TensorFlow before the program does anything. :class:`MetarunProcess` starts
one Python process that imports ``metarun`` once and then runs the
program's own entry point (``metarun.run()``: absl parses the command line,
then ``main``) once per command, as ``python metarun.py ARGS`` would: with
``sys.argv`` set to the command, every flag back at its default first, the
program's file descriptors 1 and 2 sent to files of their own, and the
status ``sys.exit`` is given (an uncaught exception: its traceback on stderr
and status 1, as Python's). A command gets a
:class:`subprocess.CompletedProcess` (returncode, stdout, stderr) as from
``subprocess.run``.

The program runs in another process than the test, so a lock file naming
the test's pid is held by another live process, as in a real second run.
What one command leaves in the process (TensorFlow's caches, imported
modules) is what a resumed run in a fresh process would not have: tests that
depend on a fresh process (exit through a signal, a kill, start-up) start
``metarun.py`` themselves.
"""

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METARUN = os.path.join(ROOT, "metarun.py")


class MetarunProcess:
  """One process that runs metarun.py commands one after the other."""

  def __init__(self, timeout=600):
    self._timeout = timeout
    self._folder = tempfile.mkdtemp(prefix="metarun_process_")
    self._log = os.path.join(self._folder, "process.log")
    self._count = 0
    with open(self._log, "w") as log:
      self._proc = subprocess.Popen(
          [sys.executable, "-m", "tests.metarun_process"], cwd=ROOT,
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
          text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

  def __call__(self, *args, env=None):
    """Runs ``python metarun.py *args`` (with ``env`` added to the
    environment); returns its CompletedProcess."""
    self._count += 1
    out = os.path.join(self._folder, "{}.out".format(self._count))
    err = os.path.join(self._folder, "{}.err".format(self._count))
    request = dict(args=list(args), env=env or {}, stdout=out, stderr=err)
    self._proc.stdin.write(json.dumps(request) + "\n")
    self._proc.stdin.flush()
    ready, _, _ = select.select([self._proc.stdout], [], [], self._timeout)
    line = self._proc.stdout.readline() if ready else ""
    if not line:
      self.close()
      with open(self._log) as f:
        raise RuntimeError("the metarun process {} (command {}): {}".format(
            "timed out" if not ready else "ended", args, f.read()[-3000:]))
    with open(out) as f_out, open(err) as f_err:
      return subprocess.CompletedProcess(
          [sys.executable, METARUN] + list(args), json.loads(line)["rc"],
          f_out.read(), f_err.read())

  def close(self):
    if self._proc.poll() is None:
      self._proc.stdin.close()
      try:
        self._proc.wait(timeout=60)
      except subprocess.TimeoutExpired:
        self._proc.kill()
        self._proc.wait()
    shutil.rmtree(self._folder, ignore_errors=True)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


@contextlib.contextmanager
def _environment(extra):
  saved = {name: os.environ.get(name) for name in extra}
  os.environ.update(extra)
  try:
    yield
  finally:
    for name, value in saved.items():
      if value is None:
        os.environ.pop(name, None)
      else:
        os.environ[name] = value


@contextlib.contextmanager
def _descriptors(stdout_path, stderr_path):
  """File descriptors 1 and 2 (and sys.stdout/err, which write to them) go
  to the two files."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = os.dup(1), os.dup(2)
  with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
      yield
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved[0], 1)
      os.dup2(saved[1], 2)
      os.close(saved[0])
      os.close(saved[1])


def _status(code):
  """The exit status of ``sys.exit(code)``."""
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  sys.stderr.write("{}\n".format(code))
  return 1


def _serve():
  """The process's side: one JSON request a line on stdin, one reply a line
  on the stdout it started with (the program's own output never goes
  there)."""
  replies = os.fdopen(os.dup(1), "w")
  os.dup2(2, 1)
  from absl import flags  # pylint: disable=g-import-not-at-top
  import metarun  # pylint: disable=g-import-not-at-top
  for line in sys.stdin:
    request = json.loads(line)
    with _environment(request["env"]), _descriptors(request["stdout"],
                                                    request["stderr"]):
      flags.FLAGS.unparse_flags()
      metarun.FLAGS.unparse_flags()
      sys.argv = [METARUN] + request["args"]
      try:
        metarun.run()
        rc = 0
      except SystemExit as e:
        rc = _status(e.code)
      except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        rc = 1
    replies.write(json.dumps(dict(rc=rc)) + "\n")
    replies.flush()
  # Input closed: the test is done with the process; TensorFlow's slow
  # clean-up at interpreter exit would only cost time.
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)  # pylint: disable=protected-access


if __name__ == "__main__":
  _serve()
