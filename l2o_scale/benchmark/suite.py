"""Runs the suite: every task, budget and seed, the optimizer under test and
the tuned baselines; writes the JSON of everything.

Tuning (per task and budget, for each baseline): one run per learning rate
of the baseline's grid at the first seed; the learning rate with the best
final validation metric (ties: lower validation loss; ``--select_on=loss``:
the lowest final validation loss) is chosen, never looking at the test
split. Where it is at an end of the grid, the grid grows half a decade past
that end and the choice is made again (``grid_extension`` times at most).
The chosen learning rate then runs at every other seed (the first seed's
run is the grid run itself).

Each run's training-loss curve goes to TensorBoard
(``OUT/tensorboard/``). Every finished run is stored under ``OUT/runs/`` (one JSON file, written
atomically, named by a hash of what determines it), so a suite interrupted
at any moment resumes where it stopped, with the same numbers.
"""

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.benchmark import optimizers
from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import tasks as task_registry
from l2o_scale.benchmark import training
from l2o_scale.config import config_flags
from l2o_scale.config.config_flags import flag
from l2o_scale.runs import atomic_file
from l2o_scale.runs import summaries

FORMAT = "l2o-scale task-suite benchmark"
VERSION = 1
RUN_VERSION = 1  # Bump when a change alters what a stored run holds.

# What each --size sets; the other fields keep Config's defaults, which are
# the medium size (all tasks, 2,000 steps, 1 seed).
SIZES = {
    "small": dict(tasks=("logreg_mnist", "regression_synthetic"),
                  budgets=(50,), seeds=1, grid="small", tiny=True,
                  eval_points=5, batch_size=32, jit_compile=False,
                  grid_extension=0),
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
      "optionally NAME+hold_zero_gradients), checkpoint:PATH, a Keras "
      "optimizer NAME[:LR] (adam:1e-3) or import:module.attr", nonempty=True)
  size: str = flag(
      "medium", "preset of the fields marked '--size sets it' (a flag given "
      "overrides its preset): small: 2 tiny tasks, 50 steps, 2 learning "
      "rates, 1 seed (CI); medium: all tasks, 2,000 steps, 1 seed (the "
      "defaults shown); full: all tasks, 2,000 and 10,000 steps, 3 seeds",
      choices=("small", "medium", "full"))
  # The defaults below are the medium size's: --size sets these fields.
  tasks: tuple = flag(tuple(task_registry.REGISTRY), "comma-separated task "
                      "names (--size sets them); --list_tasks lists them")
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
  data_dir: str = flag(None, "MNIST IDX files (default: "
                       "$L2O_SCALE_DATA_DIR)")
  out: str = flag("benchmark_results", "folder for results.json, the "
                  "stored runs (resume), the table, figures and results page",
                  nonempty=True)
  grid_extension: int = flag(
      2, "half-decade steps a baseline's learning-rate grid may grow past an "
      "end where the best learning rate lies (--size sets it)", ge=0)
  jit_compile: bool = flag(
      True, "XLA-compile the training steps of the tasks that allow it "
      "(Task.jit_compile; the small size runs without: its runs are too "
      "short to repay the compile time)")

  @classmethod
  def for_size(cls, size, **overrides):
    if size not in SIZES:
      raise ValueError("--size must be one of {}, not {!r}".format(
          ", ".join(SIZES), size))
    values = dict(SIZES[size], size=size)
    values.update({k: v for k, v in overrides.items() if v is not None})
    config = cls(**values)
    for name in config.tasks:
      task_registry.get(name)
    for name in config.baselines:
      optimizers.baseline(name)
    if config.select_on not in scoring.SELECT_ON:
      raise ValueError("--select_on must be one of {}".format(
          ", ".join(scoring.SELECT_ON)))
    errors = config_flags.validate(cls, config)
    if errors:
      raise ValueError(errors[0])
    if not config.budgets or min(config.budgets) < 1:
      raise ValueError("--budgets must be positive step counts")
    return config


def machine():
  """Where the numbers come from."""
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      cpu = next((l.split(":", 1)[1].strip() for l in f
                  if l.startswith("model name")), cpu)
  except OSError:
    pass
  versions = {}
  for package in ("tensorflow", "keras"):
    try:
      versions[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      versions[package] = None
  return dict(cpu=cpu, cpu_count=os.cpu_count(), platform=platform.platform(),
              python=platform.python_version(),
              load_average_1min_at_start=os.getloadavg()[0], **versions)


def peak_memory_mib():
  """Peak resident memory of this process (Linux reports KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.


class RunStore:
  """Finished runs under ``folder``, one JSON file each."""

  def __init__(self, folder):
    self.folder = folder
    os.makedirs(folder, exist_ok=True)
    self.reused = 0
    self.wall_s_sum = 0.  # of every run returned, stored ones included

  def get_or_run(self, key, run):
    text = json.dumps(dict(key, run_version=RUN_VERSION), sort_keys=True)
    path = os.path.join(self.folder, hashlib.sha1(
        text.encode()).hexdigest()[:16] + ".json")
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        stored = json.load(f)
      if stored.get("key") == text:
        self.reused += 1
        self.wall_s_sum += stored["record"]["wall_s"]
        return stored["record"]
    record = _json_safe(run())
    self.wall_s_sum += record["wall_s"]
    with atomic_file.replace(path) as f:
      json.dump({"key": text, "record": record}, f)
    return record


def _json_safe(value):
  """Non-finite floats as None (JSON has no NaN), NumPy scalars as floats."""
  if isinstance(value, dict):
    return {k: _json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_json_safe(v) for v in value]
  if isinstance(value, (float, np.floating)):
    return float(value) if np.isfinite(value) else None
  return value


class TaskRunner:
  """The runs of one task at one budget."""

  def __init__(self, task, budget, config, store, log):
    self.task, self.budget, self.config = task, budget, config
    self.store, self.log = store, log
    self.splits = task.data(config.tiny, config.data_dir)
    n = len(self.splits.train[0])
    self.seeds = list(range(config.seeds))
    self.indices = {s: training.batch_indices(s, budget, config.batch_size, n)
                    for s in self.seeds}
    self.eval_every = max(1, budget // config.eval_points)
    self.initial = {s: training.initial_weights(task, s, config.tiny)
                    for s in self.seeds}
    self.jit_compile = task.jit_compile and config.jit_compile

  def key(self, optimizer, lr, seed):
    c = self.config
    return dict(task=self.task.name, budget=self.budget, optimizer=optimizer,
                lr=lr, seed=seed, tiny=c.tiny, batch_size=c.batch_size,
                data_dir=c.data_dir,
                eval_every=self.eval_every)

  def _train(self, trainer, seed, label):
    record = trainer.run(self.indices[seed], self.eval_every,
                         log=self._progress(label))
    self._summaries(record, "{} seed {}".format(label, seed))
    self.log("  {} seed {}: train loss {}, validation {} {}, {:.1f} s".format(
        label, seed, _fmt(record["final_train_loss"]), self.task.metric,
        _fmt(record["validation_metric"]), record["wall_s"]) +
             (" DIVERGED" if record["diverged"] else ""))
    return record

  def _summaries(self, record, run_name):
    """The run's training-loss curve for TensorBoard, under
    ``OUT/tensorboard/<task>_<budget>/<run>`` (a rerun of a run killed
    before it was stored replaces the killed one's events)."""
    logdir = os.path.join(self.config.out, "tensorboard", "{}_{}".format(
        self.task.name, self.budget), run_name.replace(" ", "_"))
    tf.io.gfile.makedirs(logdir)
    writer = summaries.create_writer(logdir)
    with writer.as_default():
      for step, loss in zip(record["steps"], record["train_loss"]):
        tf.summary.scalar("train_loss", loss, step=step)
      for key in ("validation_metric", "test_metric"):
        if record[key] is not None:
          tf.summary.scalar(key, record[key], step=record["steps"][-1])
    writer.close()

  def _progress(self, label):
    """A line at each quarter of a run of 2,000 steps or more."""
    if self.budget < 2000:
      return None
    quarter = self.budget // 4
    every = self.eval_every

    def log(step, loss):
      if step < self.budget and step // quarter > (step - every) // quarter:
        self.log("    {} step {}/{}: train loss {}".format(
            label, step, self.budget, _fmt(loss)))
    return log

  def under_test(self, factory, spec):
    def run(seed):
      keras.utils.set_random_seed(seed)
      model = self.task.build(self.config.tiny)
      model.set_weights(self.initial[seed])
      trainer = training.Trainer(self.task, self.splits, model,
                                 factory(self.budget), self.jit_compile)
      return self._train(trainer, seed, spec)
    name = optimizers.identity(spec)
    return [self.store.get_or_run(self.key(name, None, s),
                                  lambda s=s: run(s)) for s in self.seeds]

  def tuned(self, baseline):
    """Grid at the first seed, selection on validation, then every seed."""
    state = {}

    def run(lr, seed):
      if not state:  # Built on first need: a resumed suite may need none.
        model = self.task.build(self.config.tiny)
        optimizer, schedule = baseline.make(self.budget)
        trainer = training.Trainer(self.task, self.splits, model, optimizer,
                                   self.jit_compile)
        state.update(trainer=trainer, schedule=schedule, fresh=[
            v.numpy() for v in optimizer.variables])
      trainer = state["trainer"]
      trainer.model.set_weights(self.initial[seed])
      for var, value in zip(trainer.optimizer.variables, state["fresh"]):
        var.assign(value)
      state["schedule"].set_base(lr)
      return self._train(trainer, seed, "{} lr={:g}".format(baseline.name,
                                                             lr))
    get = lambda lr, s: self.store.get_or_run(
        self.key(baseline.name, lr, s), lambda: run(lr, s))
    lrs = baseline.small_grid if self.config.grid == "small" else \
        baseline.grid
    grid = {lr: get(lr, self.seeds[0]) for lr in lrs}
    chosen = self._select(grid)
    for _ in range(self.config.grid_extension):
      if chosen not in (min(grid), max(grid)):
        break
      lr = optimizers.next_half_decade(chosen, up=chosen == max(grid))
      grid[lr] = get(lr, self.seeds[0])
      chosen = self._select(grid)
    runs = [] if chosen is None else [grid[chosen]] + [
        get(chosen, s) for s in self.seeds[1:]]
    return dict(label=baseline.label, chosen_lr=chosen,
                at_grid_edge=chosen in (min(grid), max(grid)),
                grid=[dict(lr=lr, **{k: grid[lr][k] for k in (
                    "final_train_loss", "validation_loss",
                    "validation_metric", "diverged", "wall_s")})
                      for lr in sorted(grid)],
                runs=runs, summary=scoring.summarize(runs) if runs else None)

  def _select(self, grid):
    return scoring.select_lr(grid, self.task.higher_is_better,
                             self.config.select_on)


def _fmt(value):
  return "—" if value is None or not np.isfinite(value) else "{:.4g}".format(
      value)


def run_task(task, budget, config, factory, store, log):
  runner = TaskRunner(task, budget, config, store, log)
  learned = runner.under_test(factory, config.optimizer)
  baselines = {name: runner.tuned(optimizers.baseline(name))
               for name in config.baselines}
  entry = dict(task=task.name, family=task.family,
               description=task.description, budget=budget,
               metric=task.metric, higher_is_better=task.higher_is_better,
               loss=task.loss, eval_every=runner.eval_every,
               sizes=dict(train=len(runner.splits.train[0]),
                          validation=len(runner.splits.validation[0]),
                          test=len(runner.splits.test[0])),
               optimizer=dict(runs=learned,
                              summary=scoring.summarize(learned)),
               baselines=baselines)
  adam = baselines.get("adam")
  entry["speedup"] = scoring.task_speedup(learned, adam["runs"], budget) \
      if adam and adam["runs"] else None
  return entry


def run(config, log=print):
  """Runs the suite; writes and returns ``OUT/results.json``'s content."""
  start = time.perf_counter()
  factory = optimizers.factory(config.optimizer)
  store = RunStore(os.path.join(config.out, "runs"))
  results = dict(format=FORMAT, version=VERSION,
                 date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec="seconds"),
                 machine=machine(), command=" ".join(sys.argv),
                 config=dataclasses.asdict(config), entries=[])
  jobs = [(b, t) for b in config.budgets for t in config.tasks]
  for i, (budget, name) in enumerate(jobs):
    log("[{}/{}] {} at {} steps".format(i + 1, len(jobs), name, budget))
    results["entries"].append(run_task(task_registry.get(name), budget, config,
                                       factory, store, log))
  results.update(wall_time_s=time.perf_counter() - start,
                 runs_reused=store.reused, peak_memory_mib=peak_memory_mib(),
                 runs_wall_s_sum=store.wall_s_sum)
  results = _json_safe(results)
  with atomic_file.replace(os.path.join(config.out, "results.json")) as f:
    json.dump(results, f, indent=1)
  return results
