"""One output policy for every command-line entry point.

Every program (``metarun.py``, ``metatest.py``, each ``python -m`` module of
the packages and of ``reproduce/``; tests/test_entry_points.py checks)
ends through :func:`run_main`:

* a refusal (bad input: ``ValueError``; a file problem: ``OSError``; data
  not found, a locked train dir; a flag absl cannot parse) prints one line
  ``<prog>: error: <message>`` on stderr and exits with status 2;
* Ctrl-C (``KeyboardInterrupt``) prints one line ``<prog>: interrupted``
  (with the program's hint on what is kept) and exits with status 130,
  also where the interrupt reaches it wrapped in another error (a C
  function that was running when the signal's handler raised reports a
  ``SystemError`` whose cause is the ``KeyboardInterrupt``);
* anything else is a bug and keeps its traceback, as does an error that
  comes through TensorFlow or Keras (a shape that does not fit, found
  while a step is traced).

TensorFlow's start-up noise is filtered the same way in every one of them
(:func:`l2o_scale.runs.quiet_cuda.install`), whenever TensorFlow is first
imported.
"""

import argparse
import os
import signal
import sys

from l2o_scale.runs import quiet_cuda

# Every program imports this module first thing, before its Ctrl-C line is
# installed (interrupt_while_starting): the modules it needs only once a
# program has started (numpy's data and lock modules, absl) are imported
# inside the functions that use them.

REFUSAL_STATUS = 2
INTERRUPTED_STATUS = 130


class Refusal(Exception):
  """A refusal whose message is complete as it is (a program's own wording
  of a library error)."""


def _refusal_types():
  from l2o_scale.runs import dir_lock  # pylint: disable=g-import-not-at-top
  from problems import datasets  # pylint: disable=g-import-not-at-top
  return (Refusal, ValueError, OSError, datasets.DataNotFoundError,
          dir_lock.LockedError)


def message(error):
  """``error`` in one line: an ``OSError`` as 'file: reason' where it names
  a file, anything else its message with line breaks joined."""
  if isinstance(error, OSError) and error.filename and error.strerror:
    text = "{}: {}".format(error.filename, error.strerror)
  else:
    text = str(error) or type(error).__name__
  return " ".join(line.strip() for line in text.splitlines() if line.strip())


def run_main(prog, main, *args, interrupted=None):
  """Runs ``main(*args)`` and exits the process with its status (None: 0),
  under the policy of this module. ``interrupted``: what the interrupted
  line adds (e.g. 'resume with the same command.')."""
  quiet_cuda.install()
  if isinstance(signal.getsignal(signal.SIGINT), _StartInterrupt):
    signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    status = main(*args)
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    if _interrupted_by(e):
      _line(prog, _interrupted_line(interrupted))
      sys.exit(INTERRUPTED_STATUS)
    if (not isinstance(e, _refusal_types()) or
        _raised_inside(e, BUG_SOURCES)):
      raise
    _line(prog, "error: " + message(e))
    sys.exit(REFUSAL_STATUS)
  sys.exit(status)


def _interrupted_by(error):
  """Whether Ctrl-C is what ``error`` comes from: a ``KeyboardInterrupt``,
  itself or in its chain of causes and contexts. Python runs the signal's
  handler between bytecodes, so the interrupt can be raised inside a
  callback of a C function (numpy's ``__array__`` while TensorFlow converts
  a constant), which then reports a ``SystemError`` caused by it."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, KeyboardInterrupt):
      return True
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return False


# Packages through which an error comes from this project's bugs, not bad
# input (a shape that does not fit, found while TensorFlow traces a step):
# it keeps its traceback. Refusals come before any such work.
BUG_SOURCES = ("tensorflow", "keras")


def _raised_inside(error, packages):
  """Whether ``error`` came through the code of one of ``packages``
  (imported ones): a frame of its traceback is theirs (TensorFlow and
  Keras re-raise errors with their own frames filtered out, from a frame
  of theirs)."""
  if isinstance(error, Refusal):
    return False
  folders = tuple(os.path.dirname(sys.modules[name].__file__) + os.sep
                  for name in packages
                  if getattr(sys.modules.get(name), "__file__", None))
  frame = error.__traceback__
  while frame is not None:
    if folders and frame.tb_frame.f_code.co_filename.startswith(folders):
      return True
    frame = frame.tb_next
  return False


class _StartInterrupt:
  """SIGINT's handler while a program starts (imports), before
  :func:`run_main`: the one line and status 130, no import traceback."""

  def __init__(self, prog, interrupted):
    self.prog, self.interrupted = prog, interrupted

  def __call__(self, signum, frame):
    del signum, frame
    _line(self.prog, _interrupted_line(self.interrupted))
    raise SystemExit(INTERRUPTED_STATUS)


def interrupt_while_starting(prog, interrupted=None):
  """Ctrl-C while the program imports its modules (TensorFlow: seconds)
  ends it as in :func:`run_main`; call first thing in a script's
  ``__main__``. Where SIGINT is ignored (a background job) it stays so."""
  if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _StartInterrupt(prog, interrupted))


def _interrupted_line(interrupted):
  return "interrupted" + ("; " + interrupted if interrupted else ".")


class ArgumentParser(argparse.ArgumentParser):
  """argparse's parser, whose refusal of an argument is this policy's one
  line and status 2 (argparse's own prints its usage line first)."""

  def error(self, message):  # pylint: disable=arguments-renamed
    _line(self.prog, "error: " + message)
    sys.exit(REFUSAL_STATUS)


def parse_absl_flags(argv):
  """absl's flag parsing for ``app.run(main, flags_parser=...)``: a flag
  absl refuses is a refusal of this policy (absl itself prints two lines
  and exits with status 1)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    raise Refusal(message(e)) from None


def _line(prog, text):
  sys.stdout.flush()
  sys.stderr.write("{}: {}\n".format(prog, text))
  sys.stderr.flush()
