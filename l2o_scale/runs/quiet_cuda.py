"""Imports TensorFlow without its CUDA-probing noise on machines with no CUDA.

Why: on a CPU-only machine every run of TF 2.21 prints
"Could not find cuda drivers on your machine" twice at import and "failed
call to cuInit: ... UNKNOWN ERROR (303)" when the devices are first listed.
They go straight to file descriptor 2 from C++ (before absl's logging is
set up), so ``TF_CPP_MIN_LOG_LEVEL`` does not hide them. This module runs the
import and the device listing with fd 2 captured, then writes back every
captured line except those probing messages. It only drops them when no
CUDA driver library can be loaded: on a machine with one, every message
(including a real cuInit failure) is shown as TF prints it.
``L2O_SCALE_SHOW_CUDA_PROBING=1`` turns that filter off.

The same capture applies the user's ``TF_CPP_MIN_LOG_LEVEL`` to the info
lines TF prints before its logging starts (the level does not reach them):
at level 1 or more, the oneDNN note that CPUs with oneDNN on print at
every start is dropped too, on any machine.
"""

import contextlib
import ctypes
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

# The lines TF prints while looking for a GPU it cannot have (no driver).
PROBING_LINE = re.compile(
    r"cudart_stub\.cc.*Could not find cuda drivers"
    r"|cuda_platform\.cc.*failed call to cuInit"
    r"|cuda_executor\.cc.*(?:could not find|no NVIDIA GPU)"
    r"|^WARNING: All log messages before absl::InitializeLog\(\) is called"
    r" are written to STDERR")


def has_cuda_driver():
  """Whether the CUDA driver library (what cuInit lives in) can be loaded."""
  try:
    ctypes.CDLL("libcuda.so.1")
  except OSError:
    return False
  return True


# TF's C++ log prefix: "I0000 00:00:1795577665.032223     653 ".
LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ ")


def drop_probing_lines(text, probing=True, info=False):
  """``text`` without the CUDA-probing lines (``probing``), without TF's
  info lines (``info``: those it prints before its logging starts, which
  ``TF_CPP_MIN_LOG_LEVEL`` does not reach, such as the oneDNN note on CPUs
  where oneDNN is on), and without a second copy of a log line TF printed
  already (the oneDNN note comes once per library TF loads); every other
  line kept."""
  kept, seen = [], set()
  for line in text.splitlines(keepends=True):
    if probing and PROBING_LINE.search(line):
      continue
    if info and line.startswith("I") and LOG_PREFIX.match(line):
      continue
    message = LOG_PREFIX.sub("", line)
    if LOG_PREFIX.match(line):
      if message in seen:
        continue
      seen.add(message)
    kept.append(line)
  return "".join(kept)


def _dropping():
  """What is dropped from TF's start-up lines here: (the probing lines,
  where no CUDA driver can be loaded and the filter is not turned off;
  the info lines, where ``TF_CPP_MIN_LOG_LEVEL`` hides info)."""
  try:
    level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL") or 0)
  except ValueError:
    level = 0
  return (os.environ.get("L2O_SCALE_SHOW_CUDA_PROBING") != "1" and
          not has_cuda_driver(), level >= 1)


def _filtering():
  """Whether TF's start-up lines are to be filtered here."""
  return any(_dropping())


@contextlib.contextmanager
def _probing_lines_dropped():
  """Captures fd 2 meanwhile, then writes back what was written to it
  without the probing lines (also when the block fails)."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      probing, info = _dropping()
      sys.stderr.write(drop_probing_lines(
          captured.read().decode("utf-8", errors="replace"), probing, info))
      sys.stderr.flush()


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
  """Finds ``tensorflow`` with the finders after it and runs its import,
  and the first listing of its devices, under :func:`_probing_lines_dropped`;
  leaves ``sys.meta_path`` once it has found it."""

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name != "tensorflow":
      return None
    _remove_finder()
    spec = importlib.util.find_spec(name)
    loader = getattr(spec, "loader", None)
    if not hasattr(loader, "exec_module"):
      return spec
    run = loader.exec_module

    def exec_module(module):
      del loader.exec_module  # The loader's own method again.
      with _probing_lines_dropped():
        run(module)
        module.config.list_physical_devices("GPU")
    loader.exec_module = exec_module
    return spec


def _remove_finder():
  sys.meta_path[:] = [f for f in sys.meta_path
                      if not isinstance(f, _QuietTensorFlowImport)]


def install():
  """Filters TF's start-up lines whenever TensorFlow is first imported
  (by this process's code or a library's), on a machine without a CUDA
  driver and where TensorFlow is not imported yet; otherwise does
  nothing. For programs that import TensorFlow late, or not at all (a
  listing)."""
  if ("tensorflow" not in sys.modules and _filtering() and
      not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path)):
    sys.meta_path.insert(0, _QuietTensorFlowImport())


def hide_info_lines():
  """Hides TensorFlow's and XLA's info lines (the CPU instructions it was
  built for, the XLA service, "Compiled cluster using XLA!") by setting
  ``TF_CPP_MIN_LOG_LEVEL=1`` where the environment sets no level and
  TensorFlow is not imported yet (it reads the variable then); its
  warnings and errors are kept. For a library imported by the user's own
  program, whose start should print nothing but what needs reading (the
  command-line programs set level 2 themselves)."""
  if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def import_tensorflow():
  """Imports TensorFlow and lists its devices; returns the module.

  On a machine without a CUDA driver the probing lines are dropped from what
  TF writes to stderr meanwhile; everything else it writes (warnings, errors,
  a traceback's context) is written back, also when the import fails.
  Where TensorFlow is imported already, only its device listing is (the
  cuInit failure, if it has not come yet).
  """
  imported = "tensorflow" in sys.modules
  install()
  # This module's job: TensorFlow's first import, under the filter.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _remove_finder()
  if imported and _filtering():
    # Imported before (its import's lines are out): the first listing of
    # its devices, where the cuInit failure is printed, may still come.
    with _probing_lines_dropped():
      tf.config.list_physical_devices("GPU")
  return tf
