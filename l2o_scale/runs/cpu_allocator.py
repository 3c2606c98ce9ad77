"""TensorFlow's CPU allocator: the package's default and which one runs.

Why: XLA evaluates a learned step in one temporary buffer of about 210
bytes per parameter (docs/performance.md, "Where the time goes"). With
TensorFlow's default CPU allocator that buffer comes from the C library's
``malloc`` at every step, which returns buffers of more than 32 MiB to the
system when they are freed, so from about 150,000 parameters on every step
faults the buffer's pages in again: about half the step's time at 670,000
parameters. TensorFlow's BFC allocator (``TF_CPU_ALLOCATOR_USE_BFC=true``)
keeps freed buffers for the next step. TensorFlow reads that variable when
it creates its CPU allocator, at its first operation, so importing
``l2o_scale`` before TensorFlow runs anything (as a script's imports do)
selects it; a value the user sets wins.
"""

import os

# TensorFlow is imported inside the functions that ask it: the allocator's
# environment variable is set before TensorFlow starts (select_bfc), so
# this module must not start it.

ENV = "TF_CPU_ALLOCATOR_USE_BFC"
# Above this many parameters the default allocator's page faults cost a
# large share of a learned step (docs/performance.md).
LARGE_MODEL_PARAMS = 150_000


def choose_default():
  """Selects the BFC allocator unless the environment already says."""
  os.environ.setdefault(ENV, "true")


def in_use():
  """"BFC" or "default": the allocator TensorFlow's CPU device runs with
  (only the BFC allocator keeps the statistics that
  ``get_memory_info`` reads). Starts TensorFlow if it has not started."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.experimental.get_memory_info("CPU:0")
  except ValueError:
    return "default"
  return "BFC"


def slow_allocator_note(num_params):
  """A one-line note when a model this large runs its learned step on the
  CPU with the default allocator, else None."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if (num_params < LARGE_MODEL_PARAMS or tf.config.list_logical_devices("GPU")
      or in_use() == "BFC"):
    return None
  return ("TensorFlow runs with its default CPU allocator, which makes a "
          "learned step of {:,} parameters about twice as slow: import "
          "l2o_scale before TensorFlow runs its first operation, or set "
          "{}=true in the environment (docs/performance.md).".format(
              num_params, ENV))
