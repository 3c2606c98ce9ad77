"""The per-parameter GRU cell as one native kernel inside XLA (opt-in).

Not in the original. Why: at large models the learned step's cost is the
per-parameter GRU (:meth:`optimizer.rnn_cells.BiasGRUCell.call_feature_major`),
and XLA's CPU code writes its [30, N] product and two [10, N] intermediates
to memory and reads them back, because it fuses no matrix product with the
code around it. ``native/fused_gru_cell.cc`` computes the cell for 8
coordinates at a time with the gate sums in registers, as an XLA custom
call. Forward only: the Keras optimizer (``fit`` with ``jit_compile=True``)
and the compiled meta-test loop use it; meta-training differentiates the
TensorFlow ops.

The kernel is built on first use with the machine's C++ compiler against
TensorFlow's headers, into ``~/.cache/l2o_scale`` (``L2O_SCALE_CACHE`` moves
it), once per TensorFlow version and source. Where it cannot be used (no
AVX2/FMA, no compiler, a cell of other sizes, a step not compiled by XLA)
the TensorFlow ops run instead; :func:`unavailable_reason` says why.
"""

import ctypes
import functools
import hashlib
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native",
                      "fused_gru_cell.cc")
TARGET = "l2o_scale_fused_gru_cell"
# The one cell the kernel is written for: 12 features, 10 units (every
# shipped optimizer's per-parameter cell).
INPUTS, UNITS = 22, 10


def _cpu_flags():
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()


def _cache_dir():
  return os.environ.get("L2O_SCALE_CACHE") or os.path.join(
      os.path.expanduser("~"), ".cache", "l2o_scale")


@functools.lru_cache(maxsize=None)
def _load():
  """(True, None) once the kernel is built and registered, else (False,
  why)."""
  if not sys.platform.startswith("linux"):
    return False, "the native kernel is built for Linux only"
  if not {"avx2", "fma"} <= _cpu_flags():
    return False, "this CPU lacks AVX2 or FMA"
  with open(SOURCE, "rb") as f:
    source = f.read()
  tag = hashlib.sha1(source + tf.__version__.encode()).hexdigest()[:12]
  library = os.path.join(_cache_dir(), "fused_gru_cell_{}.so".format(tag))
  if not os.path.exists(library):
    os.makedirs(_cache_dir(), exist_ok=True)
    partial = "{}.{}.tmp".format(library, os.getpid())
    command = [os.environ.get("CXX", "g++"), "-std=c++17", "-O3", "-mavx2",
               "-mfma", "-fPIC", "-shared", SOURCE,
               "-I" + tf.sysconfig.get_include(),
               "-L" + tf.sysconfig.get_lib(), "-l:libtensorflow_cc.so.2",
               "-l:libtensorflow_framework.so.2", "-lpthread", "-o", partial]
    try:
      subprocess.run(command, check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
      detail = getattr(e, "stderr", b"") or b""
      return False, "building the native kernel failed ({}): {}".format(
          " ".join(command[:1]), detail.decode(errors="replace")[-300:]
          or e)
    os.replace(partial, library)
  try:
    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
  except OSError as e:
    return False, "loading the native kernel failed: {}".format(e)
  return True, None


def unavailable_reason():
  """None where the kernel can run on this machine, else why not (one
  line). Builds it on first call."""
  return _load()[1]


def _in_xla_context():
  # The custom call exists only inside an XLA compilation; TensorFlow's
  # own check of the graph being traced (no public equivalent).
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  from tensorflow.python.ops import control_flow_util  # pylint: disable=g-import-not-at-top
  return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


def applies(rows, units, activation):
  """Whether :func:`gru_cell` runs here: the cell's sizes, a step being
  compiled by XLA, and a kernel built for this machine."""
  return (int(rows.shape[0]) == INPUTS and units == UNITS and
          activation is tf.tanh and rows.shape[1] is not None and
          _in_xla_context() and _load()[0])


def gru_cell(rows, weights, bias_cols, state_weights, sizes):
  """The new state [10, N] of :meth:`BiasGRUCell.call_feature_major`.

  ``weights`` [22, 30] (reset, update, candidate input part), ``bias_cols``
  [30, T] (cell bias plus each tensor's injected bias), ``state_weights``
  [10, 10], ``sizes`` the T tensors' coordinate counts (Python ints)."""
  n = int(rows.shape[1])
  ends = tf.constant(np.cumsum(sizes, dtype=np.int64))
  from tensorflow.compiler.tf2xla.ops import gen_xla_ops  # pylint: disable=g-import-not-at-top
  (state,) = gen_xla_ops.xla_custom_call_v2(
      operands=[rows, weights, bias_cols, state_weights, ends,
                tf.constant([n, len(sizes)], tf.int64)],
      call_target_name=TARGET, backend_config="", has_side_effect=False,
      result_dtypes=[tf.float32], result_shapes=[tf.TensorShape([UNITS, n])])
  return state
