"""The recipe that meta-trains a schedule head over a frozen learned
optimizer: antithetic evolution strategies over whole runs
(:mod:`l2o_scale.head_training.estimator`), an Adam learner on the head's
parameters, exact resume.

One estimate: ``tasks_per_estimate`` tasks drawn from ``tasks``; for each, a
run length drawn log-uniformly from a grid of ``length_grid`` lengths over
``[min_length, max_length]``, one of ``seeds_per_task`` seeds (the initial
parameters, the minibatches and the parameter-scale augmentation) and
``pairs`` antithetic pairs of perturbations of the head. Each run's objective
is ``log(validation loss at its end / reference)``, the reference the frozen
optimizer's own validation loss on the same task, seed and length (the head
at zero; cached in the training state, so each is run once). The estimate
is the mean over tasks and pairs.

What a run keeps in ``train_dir``: ``head_training.npz`` (the head's
parameters, the learner's moments, the number of estimates, the random
state, the reference cache; written atomically after every estimate, so a
run killed at any moment resumes from the last estimate and ends with the
head the uninterrupted run ends with), ``head.npz`` (the head,
:meth:`~l2o_scale.steps.learned_schedule.ScheduleHead.load`),
``head_training.json`` (the settings; a resume with other settings is
refused) and TensorBoard summaries.
"""

import dataclasses
import json
import os
import time
import zipfile

import numpy as np
import tensorflow as tf

from l2o_scale.config import config_flags
from l2o_scale.head_training import estimator
from l2o_scale.head_training import learner as learner_lib
from l2o_scale.head_training import tasks as task_lib
from l2o_scale import keras_optimizer
from l2o_scale.meta_training import reporting
from l2o_scale import pretrained
from l2o_scale.runs import atomic_file
from l2o_scale.runs import summaries
from l2o_scale.steps import learned_schedule

STATE_FILE = "head_training.npz"
SETTINGS_FILE = "head_training.json"
# Settings added after runs were started, with the value that runs whose
# settings file predates them were trained with.
ADDED_SETTINGS = {"task_data": "small", "task_models": "small",
                  "decay_scaled_by_multiplier": False}
HEAD_FILE = "head.npz"


flag = config_flags.flag


def snapshot_name(estimates):
  """The file of the head kept after ``estimates`` estimates."""
  return "head-{}.npz".format(estimates)


def snapshot_estimates(name):
  """The estimates of the kept head whose file is named ``name``
  (:func:`snapshot_name`), or None for any other file name."""
  digits = (name[len("head-"):-len(".npz")]
            if name.startswith("head-") and name.endswith(".npz") else "")
  return int(digits) if digits.isdigit() else None


@dataclasses.dataclass
class HeadTrainingConfig:
  """The recipe's settings (the flags of ``python -m
  l2o_scale.head_training``)."""
  optimizer: str = flag("l2o-scale", "the frozen learned optimizer: a "
                        "pretrained name or a checkpoint path",
                        nonempty=True)
  tasks: tuple = flag(task_lib.DEFAULT_TASKS, "the tasks runs are drawn "
                      "from (l2o_scale.benchmark task names)")
  estimates: int = flag(100, "how many estimates (meta-updates) the run "
                        "makes in all", ge=1)
  tasks_per_estimate: int = flag(8, "tasks per estimate, each with its own "
                                 "length and seed", ge=1)
  pairs: int = flag(2, "antithetic pairs of perturbations per task", ge=1)
  sigma: float = flag(0.1, "standard deviation of the perturbations of the "
                      "head's parameters", gt=0)
  learning_rate: float = flag(0.01, "Adam's learning rate on the head's "
                              "parameters", gt=0)
  min_length: int = flag(100, "shortest run, in steps", ge=1)
  max_length: int = flag(2000, "longest run, in steps (at least "
                         "--min_length)", ge=1)
  length_grid: int = flag(12, "number of log-spaced run lengths drawn from",
                          ge=1)
  seeds_per_task: int = flag(4, "seeds (initial parameters, minibatches, "
                             "augmentation) per task; the reference losses "
                             "are cached per task, seed and length", ge=1)
  batch_size: int = flag(64, "minibatch size of the tasks", ge=1)
  task_data: str = flag(
      "small", "the tasks' data: 'small', their small versions' few hundred "
      "examples (a 2,000-step run passes over them hundreds of times); "
      "'full', the task suite's full splits under the same small models (tens "
      "of times, as the benchmark's small-data regime)",
      choices=task_lib.TASK_DATA)
  task_models: str = flag(
      "small", "the tasks' models: 'small', the task suite's small versions "
      "(fast); 'full', the suite's own models, the sizes the benchmark "
      "trains (slower per step)", choices=task_lib.TASK_MODELS)
  augmentation: float = flag(0.5, "parameter-scale augmentation: each "
                             "tensor trained at a scale 10**U(-a, a) (0: "
                             "none)", ge=0)
  objective_clip: float = flag(3., "bound of a run's objective, "
                               "log(validation loss / reference); a "
                               "diverged run counts as this", gt=0)
  min_multiplier: float = flag(1e-3, "smallest multiplier of a step the "
                               "head can give", gt=0)
  max_multiplier: float = flag(10., "largest multiplier of a step the head "
                               "can give", gt=0)
  max_weight_decay: float = flag(3e-3, "largest decoupled weight decay per "
                                 "step the head can give", ge=0)
  decay_scaled_by_multiplier: bool = flag(
      False, "multiply each tensor's weight decay by its step multiplier "
      "(the AdamW form of the card's decay), so that an annealed step "
      "takes its decay with it")
  seed: int = flag(0, "random seed of the run (draws, the head's initial "
                   "hidden layer)")
  keep_every: int = flag(20, "also keep the head after every this many "
                         "estimates, as head-<estimates>.npz: the candidates "
                         "of python -m l2o_scale.head_training.selection (0: "
                         "keep none)", ge=0)

  def check(self):
    """ValueError naming the first setting out of its range."""
    task_lib.check_names(self.tasks)
    errors = config_flags.validate(type(self), self)
    if errors:
      raise ValueError(errors[0])
    if self.max_length < self.min_length:
      raise ValueError("--max_length must be >= --min_length ({}), got "
                       "{}".format(self.min_length, self.max_length))
    learned_schedule.ScheduleHead(None, *self.bounds())

  def lengths(self):
    """The grid of run lengths, log-spaced over [min_length, max_length]."""
    grid = np.geomspace(self.min_length, self.max_length, self.length_grid)
    return sorted(set(int(round(x)) for x in grid))

  def bounds(self):
    """The trailing arguments of ``learned_schedule.head_outputs``."""
    return (self.min_multiplier, self.max_multiplier, self.max_weight_decay,
            self.decay_scaled_by_multiplier)

  def settings(self):
    """The settings a resume must share (all but ``estimates``), as JSON
    values."""
    values = dataclasses.asdict(self)
    values.pop("estimates")
    values.pop("keep_every")
    values["tasks"] = list(values["tasks"])
    return values


def _saved_settings(train_dir):
  """The settings file of the run in ``train_dir`` (None where there is
  none), a setting added since the run started holding the value it was
  trained with (:data:`ADDED_SETTINGS`)."""
  path = os.path.join(train_dir, SETTINGS_FILE)
  if not tf.io.gfile.exists(path):
    return None
  try:
    with open(path) as f:
      saved = json.load(f)
    if not isinstance(saved, dict):
      raise ValueError("not a mapping of settings")
  except ValueError as e:
    raise damaged(path, e) from None
  return {**ADDED_SETTINGS, **saved}


def damaged(path, error):
  """The one-line refusal of a file of a run that cannot be read
  (truncated, not what the run writes): a resume would otherwise start
  over or fail with the reader's own error."""
  reason = str(error).splitlines()[0] if str(error) else ""
  return ValueError(
      "{} is damaged ({}{}): restore it from a copy, or start the head "
      "training over in another --train_dir".format(
          path, type(error).__name__, ": " + reason if reason else ""))


def saved_config(train_dir):
  """The :class:`HeadTrainingConfig` a run in ``train_dir`` was started
  with (its settings file). FileNotFoundError naming the folder when it
  holds no run."""
  saved = _saved_settings(train_dir)
  if saved is None:
    raise FileNotFoundError("{}: no head training there ({} of python -m "
                            "l2o_scale.head_training)".format(train_dir,
                                                              SETTINGS_FILE))
  saved["tasks"] = tuple(saved["tasks"])
  return HeadTrainingConfig(**saved)


def load_optimizer(name_or_path):
  """The frozen learned optimizer: a pretrained name or a checkpoint (a
  ``model.ckpt-K`` prefix or a folder holding one); a ValueError naming
  the shipped names for anything else."""
  if name_or_path in pretrained.names():
    return keras_optimizer.LearnedOptimizer.pretrained(
        name_or_path).learned_optimizer
  if not (os.path.isdir(name_or_path) or
          tf.io.gfile.exists(name_or_path + ".index")):
    raise ValueError(
        "--optimizer={} is neither a shipped optimizer ({}) nor a "
        "checkpoint (a model.ckpt-K of metarun.py, or its folder)".format(
            name_or_path, ", ".join(pretrained.names())))
  return keras_optimizer.LearnedOptimizer.from_checkpoint(
      name_or_path).learned_optimizer


class HeadTrainer:
  """The recipe's loop over estimates (see the module docstring)."""

  def __init__(self, config, train_dir, data_dir=None, optimizer=None,
               log=print, traced=None):
    """``optimizer``: the frozen learned optimizer (default: loaded from
    ``config.optimizer``); ``traced``: a dict shared by trainers of the same
    optimizer and settings, which then reuse each other's tasks and traced
    runs (a resume in the same process)."""
    config.check()
    self.config = config
    self.train_dir = train_dir
    self.data_dir = data_dir
    self.log = log
    self.optimizer = (load_optimizer(config.optimizer) if optimizer is None
                      else optimizer)
    traced = {} if traced is None else traced
    self._tasks = traced.setdefault("tasks", {})  # name -> task, built once
    self._runs = traced.setdefault("runs", {})  # (name, heads) -> its runs
    # Where an estimate's time goes (reset by each estimate).
    self.seconds = {"tracing": 0., "references": 0.}
    tf.io.gfile.makedirs(train_dir)
    learner_lib.keep_settings(train_dir, SETTINGS_FILE, config.settings(),
                              _saved_settings(train_dir), "head training")
    self._restore_or_start()

  # ------------------------------------------------------------- state
  def _restore_or_start(self):
    path = os.path.join(self.train_dir, STATE_FILE)
    self.resumed = tf.io.gfile.exists(path)
    if not self.resumed:
      self.learner = learner_lib.LearnerState.start(
          learned_schedule.initial_theta(self.config.seed), self.config.seed)
      self.references = {}
      return
    try:
      with np.load(path) as saved:
        self.learner = learner_lib.LearnerState.from_arrays(saved)
        self.references = {
            tuple(json.loads(key)): float(value)
            for key, value in zip(saved["reference_keys"],
                                  saved["reference_values"])}
    except (zipfile.BadZipFile, EOFError, KeyError, TypeError,
            ValueError) as e:
      raise damaged(path, e) from None

  def save(self):
    """Writes the training state, then the head (both atomically)."""
    keys = sorted(self.references)
    with atomic_file.replace(os.path.join(self.train_dir, STATE_FILE),
                             "wb") as f:
      np.savez(f, **self.learner.arrays(),
               reference_keys=np.array([json.dumps(list(k)) for k in keys]),
               reference_values=np.array([self.references[k] for k in keys],
                                         np.float64))
    kept = [HEAD_FILE]
    every = self.config.keep_every
    if every and self.learner.done % every == 0:
      kept.append(snapshot_name(self.learner.done))
    for name in kept:
      with atomic_file.replace(os.path.join(self.train_dir, name), "wb") as f:
        self.head().save(f)

  def head(self):
    """The head with the current parameters."""
    return learned_schedule.ScheduleHead(self.learner.theta,
                                         *self.config.bounds())

  # --------------------------------------------------------- estimates
  def _task(self, name):
    if name not in self._tasks:
      self._tasks[name] = task_lib.build(name, self.data_dir,
                                         seed=self.config.seed,
                                         data=self.config.task_data,
                                         models=self.config.task_models)
    return self._tasks[name]

  def _task_runs(self, name, heads):
    key = (name, heads)
    if key not in self._runs:
      start = time.time()
      runs = estimator.TaskRuns(self._task(name), self.optimizer, heads,
                                self.config.batch_size, self.config.bounds())
      # A run of no steps traces it, so that the time of runs is theirs.
      runs(np.zeros((heads, learned_schedule.NUM_PARAMETERS), np.float32),
           0, np.ones(len(runs.task.initial)), 0)
      self._runs[key] = runs
      self.seconds["tracing"] += time.time() - start
    return self._runs[key]

  def draw(self):
    """The draws of one estimate, all from the run's random state: [(task
    name, seed index, length)] and the perturbations [tasks, pairs, P]."""
    c = self.config
    names = list(c.tasks)
    replace = c.tasks_per_estimate > len(names)
    rng = self.learner.rng
    picks = rng.choice(len(names), c.tasks_per_estimate, replace=replace)
    lengths = c.lengths()
    # Log-uniform over [min_length, max_length], on the grid.
    runs = [(names[i], int(rng.integers(c.seeds_per_task)),
             lengths[int(rng.integers(len(lengths)))]) for i in picks]
    epsilons = rng.standard_normal(
        (c.tasks_per_estimate, c.pairs, learned_schedule.NUM_PARAMETERS))
    return runs, epsilons.astype(np.float32)

  def reference(self, name, seed_index, length):
    """The frozen optimizer's validation loss at the end of this run (the
    head at zero), cached."""
    key = (name, seed_index, length)
    if key not in self.references:
      task = self._task(name)
      self._task_runs(name, 1)
      start = time.time()
      seed = self._run_seed(name, seed_index)
      val, _ = self._task_runs(name, 1)(
          np.zeros((1, learned_schedule.NUM_PARAMETERS), np.float32), seed,
          self._scales(task, seed), length)
      self.references[key] = float(val[0])
      self.seconds["references"] += time.time() - start
    return self.references[key]

  def _run_seed(self, name, seed_index):
    names = list(self.config.tasks)
    return (self.config.seed * 1000 + names.index(name)) * 100 + seed_index

  def _scales(self, task, seed):
    return task_lib.augmentation_scales(len(task.initial), seed,
                                        self.config.augmentation)

  def objectives(self, name, seed_index, length, thetas):
    """The objective of each head of ``thetas`` [K, P] on one run (task
    ``name``, its seed ``seed_index``, ``length`` steps): ``log(validation
    loss at the end / the frozen optimizer's)``, clipped (float64 [K])."""
    reference = self.reference(name, seed_index, length)
    task = self._task(name)
    seed = self._run_seed(name, seed_index)
    val, _ = self._task_runs(name, len(thetas))(
        thetas, seed, self._scales(task, seed), length)
    return estimator.normalized_objective(val, reference,
                                          self.config.objective_clip)

  def estimate(self):
    """One antithetic estimate at the current head: (gradient [P], mean
    objective, per-task objectives)."""
    c = self.config
    runs, epsilons = self.draw()
    gradients, objectives = [], []
    for (name, seed_index, length), eps in zip(runs, epsilons):
      f = self.objectives(name, seed_index, length,
                          estimator.perturbed(self.learner.theta, eps, c.sigma))
      gradients.append(estimator.antithetic_gradient(
          f[:c.pairs], f[c.pairs:], eps, c.sigma))
      objectives.append((name, float(np.mean(f))))
    return (np.mean(gradients, 0), float(np.mean([o for _, o in objectives])),
            objectives)

  def run(self):
    """Estimates until ``config.estimates`` are done, saving after each;
    returns the head."""
    writer = summaries.create_writer(
        self.train_dir, self.learner.done if self.resumed else None)
    if self.resumed:
      self.log("resuming {} after estimate {}".format(self.train_dir,
                                                      self.learner.done))
    with writer.as_default():
      while self.learner.done < self.config.estimates:
        start = time.time()
        self.seconds = {"tracing": 0., "references": 0.}
        gradient, objective, per_task = self.estimate()
        self.learner.step(gradient, self.config.learning_rate)
        self.save()
        seconds = time.time() - start
        norm = float(np.linalg.norm(gradient))
        self.log("estimate {}: objective {:+.4f} (log of validation loss "
                 "over the frozen optimizer's), |gradient| {:.3g}, |head| "
                 "{:.3g}, {:.1f} s ({:.1f} s tracing, {:.1f} s reference "
                 "runs), peak memory {:.2f} GiB".format(
                     self.learner.done, objective, norm,
                     float(np.linalg.norm(self.learner.theta)), seconds,
                     self.seconds["tracing"], self.seconds["references"],
                     reporting.peak_memory_gib()))
        tf.summary.scalar("head/objective", objective, step=self.learner.done)
        tf.summary.scalar("head/gradient_norm", norm, step=self.learner.done)
        tf.summary.scalar("head/seconds_per_estimate", seconds,
                          step=self.learner.done)
        for name, value in per_task:
          tf.summary.scalar("head/objective_" + name, value,
                            step=self.learner.done)
        writer.flush()
    return self.head()

