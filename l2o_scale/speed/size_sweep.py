"""(e) The learned step's cost across model sizes, against Adam in the same
run (``python -m l2o_scale.speed --sizes``).

Why: a learned optimizer does per-parameter work (the hierarchical RNN's
per-parameter GRU and its input features) where Adam does a few
elementwise operations, so one ratio measured on one model says little
about another. This times Keras ``fit``'s compiled train step (XLA, as
``model.compile(jit_compile=True)`` runs it) of MLPs 784-H-H-10 (ReLU,
sparse softmax cross-entropy, batch 128) for several widths H, with
``LearnedOptimizer.pretrained("l2o-scale")`` and with Keras Adam, the two
taking turns within each repeat, and reports per width the milliseconds
per step, their ratio and the learned step's nanoseconds per parameter.

The batch is fixed random data (the step's cost does not depend on the
values), so the sweep needs no data set.
"""

import collections
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.keras_optimizer import LearnedOptimizer
from l2o_scale.meta_testing import baselines
from l2o_scale.meta_testing import testing
from l2o_scale.runs import cpu_allocator as allocator_lib
from l2o_scale.speed import timing as core
from problems import datasets
from problems import problem_generator

# Widths H of 784-H-H-10: 26,506 / 118,282 / 269,322 / 669,706 / 3,581,962
# parameters.
DEFAULT_WIDTHS = (32, 128, 256, 512, 1536)
BATCH_SIZE = 128
INPUTS, CLASSES = 784, 10


def mlp_parameters(width):
  """Parameters of the 784-H-H-10 MLP."""
  return (INPUTS + 1) * width + (width + 1) * width + (width + 1) * CLASSES


def fixed_batch(seed=0):
  """The sweep's batch: random pixels and labels (the step's cost does not
  depend on the values), the same for every step builder."""
  rng = np.random.RandomState(seed)
  return (rng.rand(BATCH_SIZE, INPUTS).astype(np.float32),
          rng.randint(0, CLASSES, BATCH_SIZE).astype(np.int32))


def make_fit_step(width, optimizer, jit_compile=True, seed=0):
  """The train function of ``fit`` for a 784-H-H-10 ReLU MLP: returns
  ``step()``, one blocking train step on a fixed batch."""
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([
      keras.Input((INPUTS,)),
      keras.layers.Dense(width, activation="relu"),
      keras.layers.Dense(width, activation="relu"),
      keras.layers.Dense(CLASSES)])
  model.compile(optimizer=optimizer, jit_compile=jit_compile,
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  x, y = fixed_batch(seed)
  batches = iter(tf.data.Dataset.from_tensors((x, y)).repeat())
  model.train_on_batch(x, y)  # Builds model and optimizer.
  train = model.make_train_function()

  def step():
    logs = train(batches)
    return float(logs["loss"])

  return step


# Steps per call of the compiled meta-test loop (make_loop_step).
LOOP_CHUNK = 10


def make_loop_step(width, optimizer, jit_compile=True, seed=0):
  """:data:`LOOP_CHUNK` steps of the compiled meta-test loop
  (``metatest.py --jit_compile``: steps in one ``tf.while_loop``, no Python
  between them) on the same MLP and batch as :func:`make_fit_step`:
  returns ``step()``, blocking, with ``step.steps_per_call``. ``optimizer``:
  a learned optimizer from ``optimizer/`` or a baseline of
  :mod:`l2o_scale.meta_testing.baselines`."""
  problem = problem_generator.FullyConnected(
      INPUTS, CLASSES, hidden_sizes=(width, width), activation=tf.nn.relu,
      random_seed=seed)
  batch = datasets.Dataset(*fixed_batch(seed), BATCH_SIZE)
  run_chunk, schedule = testing.chunk_runner(
      optimizer, problem, LOOP_CHUNK, batch, seed=seed,
      batch_size=BATCH_SIZE, jit_compile=jit_compile)
  rows = tf.constant(schedule)

  def step():
    return float(run_chunk(rows)[-1])

  step.steps_per_call = LOOP_CHUNK
  return step


def learned_optimizer(native_step=False):
  return LearnedOptimizer.pretrained("l2o-scale", native_step=native_step)


def adam():
  return keras.optimizers.Adam()


def loop_learned_optimizer(native_step=False):
  """The shipped optimizer's learned optimizer, as the meta-test loop runs
  it."""
  return learned_optimizer(native_step).learned_optimizer


def loop_adam():
  return baselines.build("Adam")


# What a sweep times: its step builder, the factories of the learned
# optimizer and of the baseline, and how the report names the three.
Sweep = collections.namedtuple(
    "Sweep", ["build", "learned", "baseline", "model", "learned_name",
              "baseline_name"])

SWEEPS = {
    "fit": Sweep(make_fit_step, learned_optimizer, adam,
                 "MLP 784-H-H-10 (ReLU), Keras fit train step, XLA",
                 'LearnedOptimizer.pretrained("l2o-scale")',
                 "keras.optimizers.Adam()"),
    "loop": Sweep(make_loop_step, loop_learned_optimizer, loop_adam,
                  "MLP 784-H-H-10 (ReLU), steps of the compiled meta-test "
                  "loop (metatest.py --jit_compile), {} per call".format(
                      LOOP_CHUNK),
                  'the learned optimizer of LearnedOptimizer.pretrained('
                  '"l2o-scale")', "the meta-test Adam baseline"),
}


def inner_calls(params, budget=2e6):
  """Steps per timed repeat: about ``budget`` parameter-steps, 2 to 50."""
  return max(2, min(50, int(budget // params)))


QUICK_BUDGET = 2e4  # --quick: a few steps per repeat.


def bench_sizes(widths=DEFAULT_WIDTHS, repeats=7, warmup=3,
                timer=time.perf_counter, sweep="fit", budget=2e6,
                native_step=False):
  """Times the learned and the Adam step at each width, in ``fit``
  (``sweep="fit"``) or in the compiled meta-test loop (``"loop"``);
  returns ``{"rows": [...], "batch_size", "model"}``, one row per width
  with the ``params``, ``adam_ms``, ``learned_ms`` (medians per step),
  ``ratio`` (the median over repeats of learned / Adam, each repeat timing
  both in turn), ``learned_ns_per_param``, ``extra_ns_per_param`` (learned
  minus Adam, per parameter) and both steps' ``first_call_seconds``.
  ``native_step``: the learned step with its per-coordinate part as one
  native kernel (:mod:`optimizer.native_step`)."""
  timed = SWEEPS[sweep]
  rows = []
  for width in widths:
    params = mlp_parameters(width)
    steps = {"learned": timed.build(width, timed.learned(native_step)),
             "adam": timed.build(width, timed.baseline())}
    per_call = getattr(steps["learned"], "steps_per_call", 1)
    inner = max(2, inner_calls(params, budget) // per_call)
    stats = core.measure_interleaved(steps, warmup, repeats, inner, timer)
    learned, adam_ = stats["learned"], stats["adam"]
    for stat in (learned, adam_):
      stat["median"] /= per_call
    ratios = [a / b for a, b in zip(learned["samples"], adam_["samples"])]
    rows.append(dict(
        width=int(width), params=int(params),
        adam_ms=adam_["median"] * 1e3, learned_ms=learned["median"] * 1e3,
        ratio=float(statistics.median(ratios)),
        ratio_min=float(min(ratios)), ratio_max=float(max(ratios)),
        learned_ns_per_param=learned["median"] / params * 1e9,
        extra_ns_per_param=(learned["median"] - adam_["median"]) / params
        * 1e9,
        repeats=int(repeats), steps_per_repeat=inner * per_call,
        first_call_seconds=dict(learned=learned["first_call_seconds"],
                                adam=adam_["first_call_seconds"])))
    print(format_row(rows[-1]), flush=True)
  return {"rows": rows, "batch_size": BATCH_SIZE, "sweep": sweep,
          "cpu_allocator": allocator_lib.in_use(), "model": timed.model,
          "learned": timed.learned_name + (
              " with native_step=True" if native_step else ""),
          "native_step": bool(native_step),
          "baseline": timed.baseline_name}


TABLE_HEADER = ("| parameters | Adam ms/step | learned ms/step | learned / Adam "
                "(min-max over repeats) | learned ns per parameter | learned "
                "minus Adam, ns per parameter |\n|---|---|---|---|---|---|")


def format_row(row):
  return "| {:,} | {:.2f} | {:.2f} | {:.1f}x ({:.1f}-{:.1f}) | {:.0f} | {:.0f} |".format(
      row["params"], row["adam_ms"], row["learned_ms"], row["ratio"],
      row["ratio_min"], row["ratio_max"], row["learned_ns_per_param"],
      row["extra_ns_per_param"])


def format_markdown(report):
  """The results page: what ran, where, then the table."""
  info = report.get("machine", {})
  lines = [
      "# The learned step's cost across model sizes",
      "",
      "`python -m l2o_scale.speed --sizes{}{}`: {}, batch {}, {} against "
      "{}, taking turns in one process; medians over {} repeats.".format(
          " --sizes_in=loop" if report.get("sweep") == "loop" else "",
          " --native_step" if report.get("native_step") else "",
          report["model"], report["batch_size"], report["learned"],
          report["baseline"], report["rows"][0]["repeats"] if report["rows"]
          else 0),
      "",
      "Measured {} on {} ({} CPUs, load average {} before the run, {} "
      "after), TensorFlow's {} CPU allocator.".format(
          report.get("date", "?"), info.get("cpu", "?"),
          info.get("cpu_count", "?"), _load(report.get("load_before")),
          _load(report.get("load_after")),
          report.get("cpu_allocator", "default")),
      "", TABLE_HEADER]
  lines += [format_row(row) for row in report["rows"]]
  return "\n".join(lines) + "\n"


def _load(values):
  if not values:
    return "?"
  return " / ".join("{:.1f}".format(v) for v in values)
