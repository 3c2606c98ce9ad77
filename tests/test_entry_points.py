"""One output policy for every entry point (l2o_scale/runs/entry_point.py):
a refusal is one line and exit status 2, Ctrl-C one line and status 130,
in metarun.py, metatest.py and the python -m programs alike."""

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TensorFlow's own start-up lines (kept on purpose: not this policy's).
TF_LINE = ("I0000 ", "W0000 ", "To enable the following instructions")


def _env():
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (ROOT, env.get("PYTHONPATH")) if p)
  return env


def _start(args, **kwargs):
  # SIGINT's default action, as for a command typed at a terminal (a test
  # run in the background would hand its children SIGINT ignored).
  return subprocess.Popen(
      [sys.executable] + list(args), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
      **kwargs)


def _own_lines(stderr):
  return [l for l in stderr.splitlines() if not l.startswith(TF_LINE)]


REFUSALS = [
    # absl refused a flag with two lines and status 1.
    (["metarun.py", "--num_problems=abc"], "metarun.py: error: flag "
     "--num_problems=abc: invalid literal for int()"),
    # An argument absl cannot place: absl printed its whole --help, status 1.
    (["metatest.py", "stray"], "metatest.py: error: unexpected arguments: "
     "stray"),
    (["-m", "l2o_scale.benchmark", "--tasks=no_such_task"],
     "python -m l2o_scale.benchmark: error: "),
    # argparse printed its usage line first.
    (["-m", "l2o_scale.pretrained", "--bogus"], "python -m "
     "l2o_scale.pretrained: error: unrecognized arguments: --bogus"),
    (["-m", "l2o_scale.benchmark.report", "--bogus"], "python -m "
     "l2o_scale.benchmark.report: error: unrecognized arguments: --bogus"),
    (["-m", "l2o_scale.results", "/nonexistent/folder"],
     "python -m l2o_scale.results: error: /nonexistent/folder is not a "
     "directory"),
    # absl's app.run printed its whole --help for a UsageError, status 1.
    (["-m", "l2o_scale.tools.horizon_check", "--out=x"],
     "python -m l2o_scale.tools.horizon_check: error: give one of "
     "--train_dir and --pretrained"),
    (["-m", "reproduce.ship_pretrained", "--long_runs=x", "--name=y"],
     "python -m reproduce.ship_pretrained: error: the mode is a subcommand "
     "now: python -m reproduce.ship_pretrained long_runs"),
]


def test_a_refusal_is_one_line_and_status_2():
  """Each program refuses bad input in one line, exit status 2 (started
  side by side: most of their time is TensorFlow's import)."""
  procs = [(_start(args), line) for args, line in REFUSALS]
  for proc, line in procs:
    _, stderr = proc.communicate(timeout=300)
    own = _own_lines(stderr)
    assert proc.returncode == 2 and len(own) == 1, stderr[-3000:]
    assert own[0].startswith(line), own


def _wait_for_reader(fifo, proc, timeout=240):
  """Opens ``fifo`` for writing once a process reads it (then its reader
  blocks in read() until data comes): a point every machine reaches."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    try:
      return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
      if e.errno != errno.ENXIO:  # ENXIO: no reader yet.
        raise
    assert proc.poll() is None, proc.communicate()
    time.sleep(0.05)
  raise AssertionError("{} was not opened".format(fifo))


def _interrupted(proc, writer):
  time.sleep(0.2)  # The reader is in read(), or about to be.
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  os.close(writer)
  return proc.returncode, _own_lines(stderr), stderr


def test_ctrl_c_in_results_is_one_line_and_status_130(tmp_path):
  """Ctrl-C while results reads a result file (a FIFO that never
  delivers): one line, status 130, no traceback."""
  fifo = tmp_path / "seed6_eval_loss_record.pickle-m"
  os.mkfifo(fifo)
  proc = _start(["-m", "l2o_scale.results", str(tmp_path)])
  status, own, stderr = _interrupted(proc, _wait_for_reader(fifo, proc))
  assert status == 130 and own == [
      "python -m l2o_scale.results: interrupted."], stderr[-3000:]


def _interrupted_at(module, patch):
  """``python -m module`` in a process that sends itself SIGINT where
  ``patch`` (code run before it starts) says: a point every machine
  reaches, in milliseconds."""
  code = textwrap.dedent("""
      import os, runpy, signal, sys
      def interrupt(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
      {patch}
      sys.argv = ["python -m {module}"]
      runpy.run_module("{module}", run_name="__main__")
      """).format(module=module, patch=patch)
  proc = _start(["-c", code])
  _, stderr = proc.communicate(timeout=120)
  return proc.returncode, _own_lines(stderr), stderr


@pytest.mark.parametrize("module,patch", [
    # While the benchmark reads its configuration.
    ("l2o_scale.benchmark", "from l2o_scale.benchmark import config\n"
     "config.Config.for_size = interrupt"),
    # While the listing of the shipped optimizers is made.
    ("l2o_scale.pretrained", "import l2o_scale.pretrained as pretrained\n"
     "pretrained.listing = interrupt"),
    # While the report reads its arguments.
    ("l2o_scale.benchmark.report", "import argparse\n"
     "argparse.ArgumentParser.parse_args = interrupt")])
def test_ctrl_c_in_a_python_m_program(module, patch):
  status, own, stderr = _interrupted_at(module, patch)
  assert status == 130 and own == [
      "python -m {}: interrupted.".format(module)], stderr[-3000:]


def test_ctrl_c_while_a_script_starts():
  """Ctrl-C before run_main (while TensorFlow loads): the same line and
  status, no import traceback."""
  code = textwrap.dedent("""
      import os, signal, time
      from l2o_scale.runs import entry_point
      entry_point.interrupt_while_starting("prog.py", "resume it.")
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(60)
      """)
  proc = _start(["-c", code])
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 130 and stderr == (
      "prog.py: interrupted; resume it.\n"), stderr


def test_run_main_maps_refusals_not_bugs(capsys):
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top

  def refuse(error):
    raise error

  for error, line in (
      (ValueError("--x must be > 0\n(got -1)"), "p: error: --x must be > 0 "
       "(got -1)"),
      (PermissionError(13, "Permission denied", "/a/file"),
       "p: error: /a/file: Permission denied"),
      (entry_point.Refusal("as it is"), "p: error: as it is")):
    with pytest.raises(SystemExit) as exit_:
      entry_point.run_main("p", refuse, error)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == line + "\n"
  with pytest.raises(KeyError):  # A bug keeps its traceback.
    entry_point.run_main("p", refuse, KeyError("x"))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def traced_shape_bug():
    tf.function(lambda a, b: a * b)(tf.ones([1, 195]), tf.ones([1, 0]))

  with pytest.raises(ValueError, match="Dimensions must be equal"):
    entry_point.run_main("p", traced_shape_bug)
  assert "p: error" not in capsys.readouterr().err
  with pytest.raises(SystemExit):  # numpy is no bug source: a refusal.
    entry_point.run_main("p", np.reshape, np.zeros(5000), (28, 28))
  assert capsys.readouterr().err.startswith("p: error: cannot reshape")
  with pytest.raises(SystemExit) as exit_:
    entry_point.run_main("p", lambda: 3)
  assert exit_.value.code == 3


def test_run_main_knows_an_interrupt_wrapped_by_c_code(capsys):
  """Ctrl-C whose handler runs inside a C function's callback reaches
  run_main as the SystemError CPython builds around it (cause: the
  KeyboardInterrupt): the interrupted line and 130, no traceback; an error
  raised while handling an interrupt is one too; a SystemError of its own
  stays a bug."""
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top

  def wrapped_by_c():
    try:
      raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
      raise SystemError("<built-in method __array__ of numpy.ndarray "
                        "object> returned a result with an exception "
                        "set") from interrupt

  def fails_while_stopping():
    try:
      raise KeyboardInterrupt
    except KeyboardInterrupt:
      raise OSError("flush failed")  # pylint: disable=raise-missing-from

  for main in (wrapped_by_c, fails_while_stopping):
    with pytest.raises(SystemExit) as exit_:
      entry_point.run_main("p", main, interrupted="resume it.")
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "p: interrupted; resume it.\n"

  def own_system_error():
    raise SystemError("a bug")

  with pytest.raises(SystemError, match="a bug"):
    entry_point.run_main("p", own_system_error)
  assert capsys.readouterr().err == ""


def _main_blocks(path):
  """The ``if __name__ == "__main__":`` blocks of the file ``path``."""
  import ast  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  return [node for node in ast.walk(tree) if isinstance(node, ast.If) and
          "__name__" in ast.unparse(node.test) and
          "__main__" in ast.unparse(node.test)]


def test_every_entry_point_ends_through_run_main():
  """Every module that runs as a program (metarun.py, metatest.py, each
  ``python -m`` module of the packages and of reproduce/) ends through
  entry_point.run_main."""
  files = ["metarun.py", "metatest.py"]
  for package in ("l2o_scale", "optimizer", "problems", "reproduce"):
    for folder, _, names in os.walk(os.path.join(ROOT, package)):
      files += [os.path.relpath(os.path.join(folder, n), ROOT)
                for n in names if n.endswith(".py")]
  programs = [f for f in files if _main_blocks(os.path.join(ROOT, f))]
  assert len(programs) > 20
  assert [f for f in sorted(programs) if not any(
      "run_main(" in __import__("ast").unparse(block)
      for block in _main_blocks(os.path.join(ROOT, f)))] == []
