"""The hierarchical RNN's per-coordinate step as one native kernel in XLA.

Not in the original. Why: at large models the learned step in TensorFlow's
ops is bound by memory traffic, not arithmetic. XLA's CPU code writes each of the step's
~20 intermediate [k, N] arrays (features, the GRU's products, readouts) to
memory and reads it back, about 1 KB per parameter per step, because it
fuses no matrix product with the code around it. ``native/learned_step.cc``
takes 8 coordinates at a time from their state to their new state in
registers (:func:`optimizer.hrnn_step.packed_core`'s per-coordinate part:
accumulators, mean squares, input features, the per-parameter GRU,
readouts, learning rate) and returns the per-tensor sums the rest of the
step needs; the per-tensor RNN and the update's normalisation stay
TensorFlow ops.

Forward only (no gradient): the Keras optimizer
(``LearnedOptimizer(native_step=True)``) and the compiled meta-test loop use
it; meta-training differentiates the TensorFlow ops. It is written for the
configuration of every shipped optimizer (:func:`unsupported_options`).

The kernel is built on first use with the machine's C++ compiler (a few
seconds), into ``~/.cache/l2o_scale`` (``L2O_SCALE_CACHE`` moves
it), once per TensorFlow version and source. Where it cannot run (no AVX2
and FMA, no compiler, a GPU, a step not compiled by XLA) the TensorFlow ops
run instead; :func:`unavailable_reason` says why.
"""

import ctypes
import functools
import hashlib
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from optimizer import hrnn_variables

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native",
                      "learned_step.cc")
TARGET = "l2o_scale_learned_step"
UNITS, INPUTS, SCALES = 10, 12, 4
# The per-tensor sums the kernel returns: new state, inputs, squared update.
SUM_ROWS = UNITS + INPUTS + 1

# The options the kernel is written for (those of every shipped optimizer).
_OPTIONS = {"num_gradient_scales": SCALES, "use_grad_products": True,
            "use_log_means_squared": True, "use_relative_lr": True,
            "use_problem_lr_mean": True, "use_extreme_indicator": False,
            "use_lr_shortcut": False, "dynamic_output_scale": True,
            "use_gradient_shortcut": True, "use_attention": False,
            "use_multiple_scale_decays": False}


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


def library_path():
  """Where the kernel is built: one file per TensorFlow version and source
  in the cache folder."""
  with open(SOURCE, "rb") as f:
    source = f.read()
  tag = hashlib.sha1(source + tf.__version__.encode()).hexdigest()[:12]
  return os.path.join(_cache_dir(), "learned_step_{}.so".format(tag))


@functools.lru_cache(maxsize=None)
def _load():
  """(True, None) once the kernel is built and registered, else (False,
  why)."""
  if not sys.platform.startswith("linux"):
    return False, "the native step is built for Linux only"
  if not {"avx2", "fma"} <= _cpu_flags():
    return False, "this CPU lacks AVX2 or FMA"
  if tf.config.list_logical_devices("GPU"):
    return False, "a GPU is visible (the kernel is an XLA CPU custom call)"
  cache, library = _cache_dir(), library_path()
  import fcntl  # pylint: disable=g-import-not-at-top  (Unix only, as the kernel)
  try:
    os.makedirs(cache, exist_ok=True)
    # One build per machine: other processes wait for it (then load it).
    with open(library + ".lock", "w") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      if not os.path.exists(library):
        why = _build(library)
        if why:
          return False, why
  except OSError as e:
    # A folder that cannot be written (read-only, full, not a folder) still
    # serves a kernel built there before.
    if not os.path.exists(library):
      return False, ("the native step cannot be built in {} ({}; "
                     "L2O_SCALE_CACHE names another folder)".format(
                         cache, e.strerror or e))
  try:
    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
  except OSError as e:
    return False, ("loading the native step failed ({}); delete {} to "
                   "build it again".format(e, library))
  return True, None


def _build(library):
  """Compiles the kernel into ``library``; None, or why it failed."""
  partial = "{}.{}.tmp".format(library, os.getpid())
  # Not linked against TensorFlow: the two registry functions it calls
  # resolve, when it is loaded, to those of the TensorFlow in the process
  # (linking would take ~10 s of reading libtensorflow_cc's symbols).
  command = [os.environ.get("CXX", "g++"), "-std=c++17", "-O3", "-mavx2",
             "-mfma", "-fPIC", "-shared", SOURCE, "-lpthread", "-o", partial]
  print("Building the native learned step, once per machine (a few "
        "seconds): {}"
        .format(library), file=sys.stderr, flush=True)
  try:
    subprocess.run(command, check=True, capture_output=True, timeout=600)
  except (OSError, subprocess.SubprocessError) as e:
    detail = (getattr(e, "stderr", b"") or b"").decode(errors="replace")
    return "building the native step failed ({}): {}".format(
        command[0], detail.strip().splitlines()[-1] if detail.strip() else e)
  os.replace(partial, library)
  return None


def outside_xla_reason(learned):
  """One line saying why the native kernel, turned on in hierarchical RNN
  ``learned``, does not run in the step being traced because it is not
  compiled by XLA; None where it is, or where the kernel is off."""
  if not getattr(learned, "native_step", False) or _in_xla_context():
    return None
  return "the step is not compiled by XLA (jit_compile=False)"


def unavailable_reason():
  """None where the kernel can run on this machine, else why not (one
  line). Builds it on first call."""
  return _load()[1]


def unsupported_options(learned):
  """The options of hierarchical RNN ``learned`` the kernel is not written
  for, as 'name=value' strings (empty: it applies)."""
  found = ["{}={!r}".format(k, getattr(learned, k)) for k, v in
           _OPTIONS.items() if getattr(learned, k, None) != v]
  if learned.level_sizes[0] != UNITS:
    found.append("level_sizes[0]={}".format(learned.level_sizes[0]))
  if learned.cells[0]._activation is not tf.tanh:  # pylint: disable=protected-access
    found.append("a per-parameter cell activation other than tanh")
  return found


def enable(learned):
  """Turns the kernel on in hierarchical RNN ``learned`` (its steps compiled
  by XLA then use it where :func:`applies`). Returns None, or one line
  saying why TensorFlow's ops will run instead."""
  if not hasattr(learned, "native_step"):
    raise ValueError("the native step needs the hierarchical RNN, got "
                     "{}".format(type(learned).__name__))
  learned.native_step = True
  unsupported = unsupported_options(learned)
  if unsupported:
    return "it is written for the shipped optimizers' options, not {}".format(
        ", ".join(unsupported))
  return unavailable_reason()


def _in_xla_context():
  # The custom call exists only inside an XLA compilation; TensorFlow's
  # own check of the graph being traced (no public equivalent), imported
  # where used: a TensorFlow that moved its private modules fails this
  # check only, not the import of this module.
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  from tensorflow.python.ops import control_flow_util  # pylint: disable=g-import-not-at-top
  return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


def applies(learned):
  """Whether :func:`per_coordinate_step` runs in the step being traced."""
  return (_in_xla_context() and not unsupported_options(learned) and
          _load()[0])


def per_coordinate_step(learned, grads, packed, injected_bias, lr_mean):
  """The per-coordinate part of hierarchical RNN ``learned``'s packed step.

  ``grads``: the T gradients; ``packed``: the packed state;
  ``injected_bias``: [T, 30] (or [1, 30], or None) added to the
  per-parameter cell's gates and candidate; ``lr_mean``: the problem's mean
  log learning rate. Returns a dict of the new ``grad_accum``, ``ms``,
  ``decays``, ``log_learning_rate``, ``parameter`` rows, the update
  direction ``delta`` [1, N], the step's learning rate ``lr`` [1, N] and
  ``sums`` [23, T] (per tensor: of the new state rows, of the 12 inputs, of
  the squared update direction).

  Why long: the inputs, the cell and the update of every coordinate in one pass,
  in the order the native kernel computes them.
  """
  loaded, why = _load()
  if not loaded:
    raise RuntimeError("the native step cannot run here: " + why)
  sizes = [int(g.shape.num_elements()) for g in grads]
  n, count = sum(sizes), len(sizes)
  cell = learned.cells[0]
  gates_w, cand_w = cell.gates.matrix, cell.candidate.matrix
  weights = tf.concat([gates_w, tf.pad(cand_w[:INPUTS], [[0, UNITS], [0, 0]])],
                      1)
  bias = tf.concat([cell.gates.bias, cell.candidate.bias], 0)[tf.newaxis]
  if injected_bias is not None:
    bias = bias + injected_bias
  bias = tf.transpose(tf.broadcast_to(bias, [count, 3 * UNITS]))
  readout, readout_bias, _, _ = hrnn_variables.stacked_readout(learned)
  scalars = tf.stack([
      tf.cast(lr_mean, tf.float32),
      tf.nn.sigmoid(tf.reshape(learned.lr_momentum_logit, [])),
      tf.constant(learned.max_log_lr, tf.float32),
      tf.reshape(learned.param_stepsize_offset, [])])
  operands = [packed["grad_accum"], packed["ms"], packed["decays"],
              packed["log_learning_rate"], packed["parameter"], weights,
              cand_w[INPUTS:], bias, readout, tf.reshape(readout_bias, [-1]),
              tf.reshape(learned.grads_to_delta.matrix, [-1]), scalars,
              tf.constant([n, count], tf.int64),
              tf.constant(np.cumsum(sizes), tf.int64)]
  operands += [tf.reshape(tf.cast(g, tf.float32), [-1]) for g in grads]
  names = ["grad_accum", "ms", "decays", "log_learning_rate", "parameter",
           "delta", "lr", "sums"]
  rows = [SCALES, SCALES, 2, 1, UNITS, 1, 1]
  shapes = [tf.TensorShape([k, n]) for k in rows] + [
      tf.TensorShape([SUM_ROWS, count])]
  # TensorFlow's private XLA ops module, imported where used (as above).
  from tensorflow.compiler.tf2xla.ops import gen_xla_ops  # pylint: disable=g-import-not-at-top
  results = gen_xla_ops.xla_custom_call_v2(
      operands=operands, call_target_name=TARGET, backend_config="",
      has_side_effect=False, result_dtypes=[tf.float32] * len(shapes),
      result_shapes=shapes)
  for result, shape in zip(results, shapes):
    result.set_shape(shape)
  return dict(zip(names, results))
