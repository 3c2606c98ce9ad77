"""Imports TensorFlow without its CUDA-probing noise on machines with no CUDA.

Why: on a CPU-only machine every run of TF 2.21 prints
"Could not find cuda drivers on your machine" twice at import and "failed
call to cuInit: ... UNKNOWN ERROR (303)" when the devices are first listed.
They go straight to file descriptor 2 from C++ (before absl's logging is
set up), so ``TF_CPP_MIN_LOG_LEVEL`` does not hide them. This module runs the
import and the device listing with fd 2 captured, then writes back every
captured line except those probing messages. It only filters when no CUDA
driver library can be loaded: on a machine with one, nothing is captured and
every message (including a real cuInit failure) is shown as TF prints it.
``L2O_SCALE_SHOW_CUDA_PROBING=1`` turns the filter off.
"""

import ctypes
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


def drop_probing_lines(text):
  """``text`` without the CUDA-probing lines, and without a second copy of
  a log line TF printed already (the oneDNN note comes once per library
  TF loads); every other line kept."""
  kept, seen = [], set()
  for line in text.splitlines(keepends=True):
    if PROBING_LINE.search(line):
      continue
    message = LOG_PREFIX.sub("", line)
    if LOG_PREFIX.match(line):
      if message in seen:
        continue
      seen.add(message)
    kept.append(line)
  return "".join(kept)


def import_tensorflow():
  """Imports TensorFlow and lists its devices; returns the module.

  On a machine without a CUDA driver the probing lines are dropped from what
  TF writes to stderr meanwhile; everything else it writes (warnings, errors,
  a traceback's context) is written back, also when the import fails.
  """
  if (os.environ.get("L2O_SCALE_SHOW_CUDA_PROBING") == "1" or
      "tensorflow" in sys.modules or has_cuda_driver()):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      tf.config.list_physical_devices("GPU")
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      sys.stderr.write(drop_probing_lines(
          captured.read().decode("utf-8", errors="replace")))
      sys.stderr.flush()
  return tf
