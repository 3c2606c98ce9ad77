"""The benchmark's pieces every measurement shares: its settings, timing
(medians over repeats, functions taking turns), and the data and optimizer
it runs (:mod:`l2o_scale.speed.command` is the command)."""

import os
import statistics
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

import tensorflow as tf  # pylint: disable=g-import-not-at-top

from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top
from optimizer import hierarchical_rnn
from problems import datasets  # pylint: disable=g-import-not-at-top
from problems import problem_sets

UNROLL_LENGTH = 20
MINI_DATASET_SIZE = 10000
HRNN_LEVEL_SIZES = optimizer_flags.HRNN_CELL_SIZES
HRNN_OPTIONS = dict(use_problem_lr_mean=True, use_gradient_shortcut=True,
                    use_grad_products=True)

# The steps step_timing compiles with XLA; any of them may fail to compile,
# and the report then carries "<name>_error" instead of its timings.
XLA_STEPS = ("l2o_xla", "adam_xla", "gru_core_xla")

# (warm-up calls, repeats, steps per repeat) for the step benchmark and
# (repeats) for the unroll benchmark.
FULL = dict(step_warmup=20, step_repeats=30, step_inner=50, unroll_repeats=10)
QUICK = dict(step_warmup=10, step_repeats=10, step_inner=20, unroll_repeats=3)


# ------------------------------------------------------------------ timing
def measure(fn, warmup, repeats, inner=1, timer=time.perf_counter):
  """Times ``fn`` (which must block until its work is done).

  Calls ``fn`` ``warmup`` times untimed (the first call, which compiles, is
  timed separately), then ``repeats`` times ``inner`` calls; returns a dict
  with the per-call ``median``, ``min``, ``max`` (seconds), every sample and
  ``first_call_seconds``. ``timer`` is injectable for tests.
  """
  return measure_interleaved({"fn": fn}, warmup, repeats, inner, timer)["fn"]


def measure_interleaved(fns, warmup, repeats, inner=1,
                        timer=time.perf_counter):
  """:func:`measure` for several functions, taking turns.

  Each repeat times ``inner`` calls of every function in turn, so a change
  of machine speed during the run (this benchmark runs on shared VMs) hits
  all of them alike and their ratio stays meaningful. Returns a dict name ->
  the statistics of :func:`measure`.
  """
  first = {}
  for name, fn in fns.items():
    start = timer()
    fn()
    first[name] = timer() - start
    for _ in range(max(0, warmup - 1)):
      fn()
  samples = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      start = timer()
      for _ in range(inner):
        fn()
      samples[name].append((timer() - start) / inner)
  return {name: summarize(samples[name], first_call_seconds=first[name],
                          inner=inner) for name in fns}


def summarize(samples, **extra):
  """Median/min/max of per-call samples, plus ``extra`` fields."""
  if not samples:
    raise ValueError("no samples")
  out = dict(median=float(statistics.median(samples)),
             min=float(min(samples)), max=float(max(samples)),
             repeats=len(samples), samples=[float(s) for s in samples])
  out.update(extra)
  return out


# -------------------------------------------------------------------- data
def load_data(data_dir):
  """(train split, test split) of MNIST; the step uses a train batch, the
  unroll's 10,000-row mini dataset is the test split."""
  return (datasets.mnist(train=True, data_dir=data_dir),
          datasets.mnist(train=False, data_dir=data_dir))


def mlp_problem(data_dir):
  [(spec, dataset, batch_size)] = problem_sets.mnist_mlp_problems(data_dir)
  return spec, dataset, batch_size


def hrnn(**overrides):
  """The benchmark's HierarchicalRNN; ``overrides``: other options."""
  return hierarchical_rnn.HierarchicalRNN(
      HRNN_LEVEL_SIZES, **dict(HRNN_OPTIONS, **overrides))


def mini_dataset(data_dir):
  """The unroll's 10,000-row mini dataset: the MNIST test split."""
  test = datasets.mnist(train=False, data_dir=data_dir)
  n = min(MINI_DATASET_SIZE, len(test.data))
  return test, n


def mini_tensors(data_dir):
  """The mini dataset as the unroll reads it: (data, one-hot labels, rows)."""
  test, n = mini_dataset(data_dir)
  return (tf.constant(np.asarray(test.data[:n], np.float32)),
          tf.constant(datasets.one_hot_rows(test.labels[:n], 10)), n)
