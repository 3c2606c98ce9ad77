"""What a run of the task-suite benchmark runs: ``Config`` (the fields of
``python -m l2o_scale.benchmark``'s flags) and the ``--size`` presets.

Light to import (no TensorFlow or Keras): ``--help`` and ``--list_tasks``
need it and nothing that trains.
"""

import dataclasses
import os

from l2o_scale.benchmark import families
from l2o_scale.benchmark import optimizers
from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import tasks as task_registry
from l2o_scale.benchmark import untuned as untuned_lib
from l2o_scale.config import config_flags
from l2o_scale.config.config_flags import flag

# What each --size sets; the other fields keep Config's defaults, which are
# the medium size (all tasks, 2,000 steps, 1 seed).
SIZES = {
    "small": dict(tasks=("logreg_mnist", "regression_synthetic"),
                  budgets=(50,), seeds=1, grid="small", tiny=True,
                  eval_points=5, batch_size=32, jit_compile=False,
                  grid_extension=0, untuned=("schedule_free_adamw",)),
    "medium": dict(),
    "full": dict(budgets=(2000, 10000), seeds=3),
}


@dataclasses.dataclass
class Config:
  """What a suite runs. Each field declared with ``flag`` is a command-line
  flag of ``python -m l2o_scale.benchmark`` (its help, default and bounds
  live here); ``--size`` picks a preset from ``SIZES``, and a flag given on
  the command line overrides the preset's value."""
  optimizer: str = flag(
      "l2o-scale", "optimizer under test: a shipped name (l2o-scale, "
      "optionally NAME+hold_zero_gradients), checkpoint:PATH (either "
      "optionally ending in +head=HEAD.npz, a schedule head), a Keras "
      "optimizer NAME[:LR] (adam:1e-3) or import:module.attr", nonempty=True)
  bare: bool = flag(
      True, "also run a shipped optimizer whose card holds long-run settings "
      "(weight decay, step decay) bare, NAME+bare, without them, and report "
      "both")
  size: str = flag(
      "medium", "preset of the fields marked '--size sets it' (a flag given "
      "overrides its preset): small: 2 tiny tasks, 50 steps, 2 learning "
      "rates, 1 seed (CI); medium: all tasks, 2,000 steps, 1 seed (the "
      "defaults shown); full: all tasks, 2,000 and 10,000 steps, 3 seeds",
      choices=("small", "medium", "full"))
  # The defaults below are the medium size's: --size sets these fields.
  tasks: tuple = flag(task_registry.suite_names(), "comma-separated task "
                      "names (--size sets them; the held-out tasks run only "
                      "when named); --list_tasks lists them")
  budgets: tuple = flag((2000,), "steps per run, comma-separated, e.g. "
                        "2000,10000 (--size sets them)")
  seeds: int = flag(1, "seeds per task, 0..N-1 (--size sets it)", ge=1)
  grid: str = "full"
  tiny: bool = False
  eval_points: int = flag(50, "training-loss measurements per run, on the "
                          "whole training split (--size sets it)", ge=1)
  batch_size: int = flag(128, "minibatch size of every run (--size sets it)",
                         ge=1)
  select_on: str = flag(
      "metric", "what picks each baseline's learning rate on the validation "
      "split (ties of the metric: lower loss)", choices=scoring.SELECT_ON)
  baselines: tuple = flag(tuple(b.name for b in optimizers.BASELINES),
                          "subset of " + ",".join(
                              b.name for b in optimizers.BASELINES))
  untuned: tuple = flag(
      untuned_lib.NAMES, "baselines without tuning, each run once at its "
      "defaults beside the tuned ones (empty: none): subset of " +
      ",".join(untuned_lib.NAMES))
  data_dir: str = flag(None, "MNIST IDX files (default: "
                       "$L2O_SCALE_DATA_DIR)")
  out: str = flag("benchmark_results", "folder for results.json, the "
                  "stored runs (resume), the table, figures and results page",
                  nonempty=True)
  grid_extension: int = flag(
      2, "half-decade steps a baseline's learning-rate grid may grow past an "
      "end where the best learning rate lies (--size sets it)", ge=0)
  reuse_baselines: str = flag(
      None, "results.json of an earlier benchmark run (or several, "
      "separated by commas, asked in order): per task and budget, "
      "each tuned baseline it ran with the same settings is taken from it "
      "instead of run again (the optimizer under test always runs)")
  reuse_optimizer: bool = flag(
      False, "with --reuse_baselines: also take the optimizer under test's "
      "runs (and its bare variant's) from that file where it ran the same "
      "spec with the same settings, so that only what the file lacks runs "
      "(e.g. the baselines without tuning beside an earlier page)")
  jit_compile: bool = flag(
      True, "XLA-compile the training steps of the tasks that allow it "
      "(Task.jit_compile; the small size runs without: its runs are too "
      "short to repay the compile time)")

  @classmethod
  def for_size(cls, size, **overrides):
    """The ``size`` preset with ``overrides`` over it; ValueError with one
    line naming the flag for a value that names nothing or runs nothing."""
    if size not in SIZES:
      raise ValueError("--size must be one of {}, not {!r}".format(
          ", ".join(SIZES), size))
    values = dict(SIZES[size], size=size)
    values.update({k: v for k, v in overrides.items() if v is not None})
    config = cls(**values)
    for name, known in (("tasks", ", ".join(task_registry.REGISTRY)),
                        ("baselines", ", ".join(
                            b.name for b in optimizers.BASELINES)),
                        ("budgets", "step counts, e.g. 2000")):
      _nonempty_and_distinct(name, getattr(config, name), known)
    repeated = sorted({n for n in config.untuned
                       if list(config.untuned).count(n) > 1})
    if repeated:
      raise ValueError("--untuned names {} more than once".format(
          ", ".join(repeated)))
    for flag_name, names, get in (("tasks", config.tasks, families.get_task),
                                  ("baselines", config.baselines,
                                   optimizers.baseline),
                                  ("untuned", config.untuned,
                                   untuned_lib.get)):
      for name in names:
        try:
          get(name)
        except ValueError as e:
          raise ValueError("--{}: {}".format(flag_name, e)) from None
    if config.select_on not in scoring.SELECT_ON:
      raise ValueError("--select_on must be one of {}".format(
          ", ".join(scoring.SELECT_ON)))
    errors = config_flags.validate(cls, config)
    if errors:
      raise ValueError(errors[0])
    if min(config.budgets) < 1:
      raise ValueError("--budgets must be positive step counts, not {}".format(
          ",".join(str(b) for b in config.budgets)))
    if config.reuse_optimizer and not config.reuse_baselines:
      raise ValueError("--reuse_optimizer takes the runs from "
                       "--reuse_baselines's file: give it too")
    optimizers.parse(config.optimizer)
    return config


def _nonempty_and_distinct(name, values, known):
  """A list flag runs nothing when empty and the same thing twice with a
  repeated entry: both are refused."""
  if not values:
    raise ValueError("--{} is empty: give at least one ({})".format(
        name, known))
  repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
  if repeated:
    raise ValueError("--{} names {} more than once".format(
        name, ", ".join(repeated)))


class OutError(OSError):
  """``--out`` cannot hold the results (a file, a folder that cannot be
  written): one line naming it."""


def check_out(out):
  """Creates ``out`` if needed and makes sure files can be written there
  (a probe file, removed); :class:`OutError` naming it otherwise."""
  advice = "give another --out"
  if os.path.exists(out) and not os.path.isdir(out):
    raise OutError("--out={} is a file, not a folder: {}".format(out, advice))
  probe = os.path.join(out, ".write-probe-{}".format(os.getpid()))
  try:
    os.makedirs(out, exist_ok=True)
    with open(probe, "w", encoding="utf-8") as f:
      f.write("probe")
    os.remove(probe)
  except OSError as e:
    raise OutError("--out={}: cannot write there ({}): {}".format(
        out, e.strerror or e, advice)) from None


def write_failed(path, e):
  """The one line for a write that failed (a full disk)."""
  return OutError("cannot write {} ({}); nothing half-written is kept: free "
                  "space or give another --out, and run again to resume from "
                  "the stored runs".format(path, e.strerror or e))
