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
(``OUT/tensorboard/``). Every finished run is stored under ``OUT/runs/``
(one JSON file, written atomically, named by a hash of what determines it:
the task and its settings, a digest of the data it trains on, the optimizer
with a digest of its checkpoint or source, :func:`optimizers.identity`), so
a suite interrupted at any moment resumes where it stopped, with the same
numbers, and a changed checkpoint or data file is run again. A stored run
that cannot be read (damaged, or missing a key) is run again, with a line
saying so.

A shipped optimizer whose card holds hand-set long-run settings also runs
bare (``NAME+bare``, :func:`optimizers.bare_variant`; ``--nobare`` skips it):
each entry then holds a ``bare`` block beside ``optimizer``, with its runs,
summary and speedup.

``--reuse_baselines`` takes tuned baselines from an earlier run's
results.json where it ran a task with the same settings (:mod:`reuse`).

The configuration (:class:`l2o_scale.benchmark.config.Config`) is checked
before any work: the optimizer, the tasks' data, then the output folder
(``--out``: a folder that can be written).
"""

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.benchmark import config as config_module
from l2o_scale.benchmark import optimizers
from l2o_scale.benchmark import results_format
from l2o_scale.benchmark import reuse
from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import families
from l2o_scale.benchmark import training
from l2o_scale.benchmark import untuned as untuned_lib
from l2o_scale.meta_training import reporting
from l2o_scale.runs import atomic_file
from l2o_scale.runs import summaries

RUN_VERSION = 1  # Bump when a change alters what a stored run holds.

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
  """Peak resident memory of this process, in MiB."""
  return reporting.peak_memory_gib() * 1024.


class RunStore:
  """Finished runs under ``folder``, one JSON file each."""

  def __init__(self, folder, log=print):
    self.folder, self.log = folder, log
    os.makedirs(folder, exist_ok=True)
    self.reused = 0
    self.rerun = []  # stored runs that could not be read, run again
    self.wall_s_sum = 0.  # of every run returned, stored ones included

  def _stored(self, path, text):
    """The stored record at ``path`` when it is the run of key ``text``,
    None when there is none (or another key's); a damaged one is logged
    and None."""
    if not os.path.exists(path):
      return None
    try:
      with open(path, encoding="utf-8") as f:
        stored = json.load(f)
      if not isinstance(stored, dict) or "key" not in stored:
        raise ValueError("not a stored run: no 'key'")
      if stored["key"] != text:
        return None
      record = stored.get("record")
      missing = [k for k in training.RECORD_KEYS
                 if not isinstance(record, dict) or k not in record]
      if missing:
        raise ValueError("its record lacks {}".format(", ".join(missing)))
      if not isinstance(record["wall_s"], (int, float)):
        raise ValueError("its wall_s is not a number")
      if not (isinstance(record["steps"], list) and isinstance(
          record["train_loss"], list) and record["steps"] and
              len(record["steps"]) == len(record["train_loss"])):
        raise ValueError("its training-loss curve is damaged")
      return record
    except (OSError, ValueError, TypeError) as e:
      self.log("  stored run {} is damaged ({}): running it again".format(
          path, str(e).splitlines()[0] if str(e) else type(e).__name__))
      self.rerun.append(path)
      return None

  def get_or_run(self, key, run):
    text = json.dumps(dict(key, run_version=RUN_VERSION), sort_keys=True)
    path = os.path.join(self.folder, hashlib.sha1(
        text.encode()).hexdigest()[:16] + ".json")
    stored = self._stored(path, text)
    if stored is not None:
      self.reused += 1
      self.wall_s_sum += stored["wall_s"]
      return stored
    record = _json_safe(run())
    self.wall_s_sum += record["wall_s"]
    try:
      with atomic_file.replace(path) as f:
        json.dump({"key": text, "record": record}, f)
    except OSError as e:
      raise config_module.write_failed(path, e) from None
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
    self.data = data_digest(self.splits)

  def key(self, optimizer, lr, seed):
    """What determines a run: the task and its settings, the data's digest
    (not its folder: the same files elsewhere reuse the run, changed files
    do not), the optimizer (:func:`optimizers.identity`), its learning
    rate and the seed."""
    c = self.config
    return dict(task=self.task.name, budget=self.budget, optimizer=optimizer,
                lr=lr, seed=seed, tiny=c.tiny, batch_size=c.batch_size,
                data=self.data, eval_every=self.eval_every,
                jit_compile=self.jit_compile,
                **({"train_eval_size": self.task.train_eval_size}
                   if self.task.train_eval_size else {}))

  def _train(self, trainer, seed, label):
    record = trainer.run(self.indices[seed], self.eval_every,
                         log=self._progress(label))
    self._summaries(record, "{} seed {}".format(label, seed))
    self.log("  {} seed {}: train loss {}, validation {} {}, {:.1f} s".format(
        label, seed, _fmt(record["final_train_loss"]), self.task.metric,
        _fmt(record["validation_metric"]), record["wall_s"]) +
             (" DIVERGED" if record["diverged"] else "") +
             (" COLLAPSED" if scoring.collapsed(record) else ""))
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

  def under_test(self, factory, spec, name):
    def run(seed):
      keras.utils.set_random_seed(seed)
      model = self.task.build(self.config.tiny)
      model.set_weights(self.initial[seed])
      trainer = training.Trainer(self.task, self.splits, model,
                                 factory(self.budget), self.jit_compile)
      return self._train(trainer, seed, spec)
    return [self.store.get_or_run(self.key(name, None, s),
                                  lambda s=s: run(s)) for s in self.seeds]

  def untuned(self, baseline):
    """A baseline without tuning (:mod:`untuned`) at every seed, one run
    each: {name: block}, schedule-free's runs also read at y."""
    name = untuned_lib.identity(baseline)

    def run(seed):
      model = self.task.build(self.config.tiny)
      model.set_weights(self.initial[seed])
      trainer = training.Trainer(self.task, self.splits, model,
                                 baseline.make(self.budget), self.jit_compile,
                                 averaged=baseline.averaged)
      return self._train(trainer, seed, baseline.name)
    runs = [self.store.get_or_run(self.key(name, None, s),
                                  lambda s=s: run(s)) for s in self.seeds]
    blocks = {baseline.name: dict(label=baseline.label, runs=runs)}
    if baseline.averaged:
      blocks[untuned_lib.AT_Y] = dict(label=untuned_lib.AT_Y_LABEL,
                                      runs=[r["at_y"] for r in runs])
    return blocks

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


def data_digest(splits):
  """A digest of the arrays a task trains and is measured on."""
  digest = hashlib.sha1()
  for x, y in (splits.train, splits.validation, splits.test):
    for array in (x, y):
      array = np.ascontiguousarray(array)
      digest.update("{}{}".format(array.dtype, array.shape).encode())
      digest.update(array.data)
  return digest.hexdigest()[:16]


def check_data(task, config):
  """Loads the task's data (a missing MNIST folder is refused before any
  work); ValueError for a batch larger than its training split."""
  n = len(task.data(config.tiny, config.data_dir).train[0])
  if config.batch_size > n:
    raise ValueError("--batch_size={} is larger than the training split of "
                     "{} ({} examples{})".format(
                         config.batch_size, task.name, n,
                         ", the small size's tiny data" if config.tiny
                         else ""))


def run_task(task, budget, config, factories, store, log, stored=None):
  """One task at one budget: ``factories`` maps each optimizer under test's
  spec to its :func:`optimizers.factory` (the first the optimizer under
  test, a second its bare variant); ``stored``, a
  :class:`reuse.StoredBaselines`, supplies tuned baselines run earlier."""
  runner = TaskRunner(task, budget, config, store, log)
  sizes = dict(train=len(runner.splits.train[0]),
               validation=len(runner.splits.validation[0]),
               test=len(runner.splits.test[0]))
  entry_key = dict(task=task.name, budget=budget, eval_every=runner.eval_every,
                   loss=task.loss, metric=task.metric)
  under_test = {}
  for spec, (make, name) in factories.items():
    taken = (stored and config.reuse_optimizer and stored.under_test_runs(
        spec, entry_key, config, sizes, runner.data))
    if taken:
      log("  {}: taken from {}".format(spec, stored.last))
    under_test[spec] = taken or runner.under_test(make, spec, name)
  baselines = {}
  for name in config.baselines:
    block = stored and stored.block(name, entry_key, config, sizes,
                                    runner.data)
    if block:
      log("  {}: taken from {} (learning rate {})".format(
          block["label"], stored.last, block["chosen_lr"]))
    baselines[name] = block or runner.tuned(optimizers.baseline(name))
  untuned = {}
  for name in config.untuned:
    taken = stored and stored.untuned_blocks(name, entry_key, config, sizes,
                                             runner.data)
    if taken:
      log("  {}: taken from {}".format(name, stored.last))
    untuned.update(taken or runner.untuned(untuned_lib.get(name)))
  return _entry(task, budget, runner, sizes, under_test, baselines, untuned)


def _entry(task, budget, runner, sizes, under_test, baselines, untuned):
  """The results' entry of one task and budget: the runs of the optimizers
  under test (``under_test``, spec -> runs), the tuned ``baselines`` and the
  ``untuned`` blocks, each summarized with its speedup over tuned Adam."""
  adam = baselines.get("adam")

  def speedup(runs):
    return (scoring.task_speedup(runs, adam["runs"], budget)
            if adam and adam["runs"] else None)

  def block(spec, runs):
    return dict(spec=spec, runs=runs, summary=scoring.summarize(runs),
                speedup=speedup(runs))
  for value in untuned.values():
    value.update(summary=scoring.summarize(value["runs"]),
                 speedup=speedup(value["runs"]))
  blocks = [block(spec, runs) for spec, runs in under_test.items()]
  entry = dict(task=task.name, family=task.family, regime=task.regime,
               description=task.description, budget=budget,
               metric=task.metric, higher_is_better=task.higher_is_better,
               loss=task.loss, eval_every=runner.eval_every,
               sizes=dict(sizes, train_loss_measured_on=task.train_eval_size
                          or sizes["train"]), data=runner.data,
               optimizer=blocks[0], baselines=baselines, untuned=untuned,
               speedup=blocks[0]["speedup"])
  if len(blocks) > 1:
    entry["bare"] = blocks[1]
  return entry


def factories_of(config):
  """The optimizers under test, spec -> :func:`optimizers.factory`: the
  configured one, and its bare variant when ``config.bare`` and it has
  one."""
  specs = [config.optimizer]
  bare = optimizers.bare_variant(config.optimizer) if config.bare else None
  if bare:
    specs.append(bare)
  return {spec: optimizers.factory(spec) for spec in specs}


def run(config, log=print):
  """Runs the suite; writes and returns ``OUT/results.json``'s content.

  Checks the optimizer, the tasks' data and ``--out`` before any work
  (ValueError, OSError with one line); a write that fails later (a full disk) raises
  :class:`config.OutError` naming the file, with nothing half-written left."""
  start = time.perf_counter()
  factories = factories_of(config)
  stored = reuse.load(config.reuse_baselines)
  for name in config.tasks:
    check_data(families.get_task(name), config)
  config_module.check_out(config.out)
  store = RunStore(os.path.join(config.out, "runs"), log)
  results = dict(format=results_format.FORMAT,
                 version=results_format.VERSION,
                 date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec="seconds"),
                 machine=machine(), command=" ".join(sys.argv),
                 config=dataclasses.asdict(config), entries=[])
  jobs = [(b, t) for b in config.budgets for t in config.tasks]
  for i, (budget, name) in enumerate(jobs):
    log("[{}/{}] {} at {} steps".format(i + 1, len(jobs), name, budget))
    results["entries"].append(run_task(families.get_task(name), budget,
                                       config, factories, store, log, stored))
  if stored:
    results["baselines_from"] = stored.source()
  results.update(wall_time_s=time.perf_counter() - start,
                 runs_reused=store.reused, runs_rerun=store.rerun,
                 peak_memory_mib=peak_memory_mib(),
                 runs_wall_s_sum=store.wall_s_sum)
  results = _json_safe(results)
  path = os.path.join(config.out, "results.json")
  try:
    with atomic_file.replace(path) as f:
      json.dump(results, f, indent=1)
  except OSError as e:
    raise config_module.write_failed(path, e) from None
  return results
