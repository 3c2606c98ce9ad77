"""Meta-training of the controlled AdamW's controller
(:mod:`l2o_scale.steps.controlled_adamw`): antithetic evolution strategies
over whole runs (:mod:`l2o_scale.head_training.estimator`'s estimator), on
tasks drawn from task families (:mod:`l2o_scale.benchmark.families`), with
an Adam learner on the controller's parameters and exact resume.

One estimate draws ``tasks_per_estimate`` tasks, each a family (uniformly),
one of its model configurations, a fresh data set, its splits' size, a run
length log-uniform over ``[min_length, max_length]``, a parameter scale per
tensor, a loss scale, and ``pairs`` antithetic perturbations of the
controller. The runs of one task (the ``2 * pairs`` perturbed controllers
and the zero controller, AdamW with the cosine decay at the base settings)
share their initial parameters, minibatches and length; each perturbed
run's objective is ``log(validation loss at its end / the zero
controller's)``, clipped, so that every task counts on one scale.

What a run keeps in ``train_dir`` (each file written atomically, the state
after every estimate, so a run killed at any moment resumes from its last
estimate and ends as the uninterrupted run ends): ``controller_training.npz``
(the controller's parameters, the learner's moments, the number of
estimates, the random state), ``controller.npz`` (the controller,
:func:`l2o_scale.learned_adamw.load_controller`) and every
``keep_every`` estimates ``controller-<N>.npz``, ``controller_training.json``
(the settings; a resume with other settings is refused),
``estimates.jsonl`` (one line per estimate) and TensorBoard summaries.
"""

import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.benchmark import families as family_lib
from l2o_scale.config import config_flags
from l2o_scale.controller_training import runs as runs_lib
from l2o_scale.head_training import estimator
from l2o_scale.head_training import learner as learner_lib
from l2o_scale.meta_training import reporting
from l2o_scale.runs import atomic_file
from l2o_scale.runs import summaries
from l2o_scale.steps import controlled_adamw as rule

STATE_FILE = "controller_training.npz"
SETTINGS_FILE = "controller_training.json"
CONTROLLER_FILE = "controller.npz"
LOG_FILE = "estimates.jsonl"
DEFAULT_FAMILIES = ("mlp_blobs", "mlp_fourier", "mlp_autoencoder",
                    "bag_majority")

flag = config_flags.flag


def snapshot_name(estimates):
  """The file of the controller kept after ``estimates`` estimates."""
  return "controller-{}.npz".format(estimates)


@dataclasses.dataclass
class ControllerTrainingConfig:
  """The recipe's settings (the flags of ``python -m
  l2o_scale.controller_training``)."""
  families: tuple = flag(DEFAULT_FAMILIES, "the task families runs are "
                         "drawn from (l2o_scale.benchmark.families)")
  estimates: int = flag(150, "how many estimates (meta-updates) the run "
                        "makes in all", ge=1)
  tasks_per_estimate: int = flag(8, "tasks per estimate, each with its own "
                                 "model, data, length and augmentation",
                                 ge=1)
  pairs: int = flag(2, "antithetic pairs of perturbations per task", ge=1)
  sigma: float = flag(0.1, "standard deviation of the perturbations of the "
                      "controller's parameters", gt=0)
  learning_rate: float = flag(0.01, "Adam's learning rate on the "
                              "controller's parameters", gt=0)
  min_length: int = flag(100, "shortest run, in steps", ge=1)
  max_length: int = flag(5000, "longest run, in steps (at least "
                         "--min_length)", ge=1)
  batch_size: int = flag(128, "minibatch size of the tasks", ge=1)
  parameter_scale: float = flag(0.5, "parameter-scale augmentation: each "
                                "tensor trained at a scale 10**U(-a, a) "
                                "(0: none)", ge=0)
  loss_scale: float = flag(1., "loss-scale augmentation: the loss whose "
                           "gradient the optimizer sees is multiplied by "
                           "10**U(-a, a) (0: none)", ge=0)
  objective_clip: float = flag(3., "bound of a run's objective, "
                               "log(validation loss / the zero "
                               "controller's); a diverged run counts as "
                               "this", gt=0)
  base_learning_rate: float = flag(1e-3, "the base rule's learning rate "
                                   "(the cosine decays from it)", gt=0)
  base_weight_decay: float = flag(0.004, "the base rule's decoupled weight "
                                  "decay (Keras's meaning)", ge=0)
  seed: int = flag(1, "random seed of the run (every draw, the controller's "
                   "hidden layer)")
  keep_every: int = flag(25, "also keep the controller after every this "
                         "many estimates, as controller-<N>.npz, the "
                         "candidates of the selection (0: none)", ge=0)

  def check(self):
    """ValueError naming the first setting out of its range."""
    if not self.families:
      raise ValueError("--families: name at least one task family")
    for name in self.families:
      try:
        family_lib.get_family(name)
      except ValueError as e:
        raise ValueError("--families: {}".format(e)) from None
    errors = config_flags.validate(type(self), self)
    if errors:
      raise ValueError(errors[0])
    if self.max_length < self.min_length:
      raise ValueError("--max_length must be >= --min_length ({}), got "
                       "{}".format(self.min_length, self.max_length))

  def settings(self):
    """The settings a resume must share (all but ``estimates`` and
    ``keep_every``), as JSON values."""
    values = dataclasses.asdict(self)
    values.pop("estimates")
    values.pop("keep_every")
    values["families"] = list(values["families"])
    return values

  def base(self):
    """The base rule's settings."""
    return rule.Settings(self.base_learning_rate, self.base_weight_decay)


def saved_config(train_dir):
  """The :class:`ControllerTrainingConfig` a run in ``train_dir`` was
  started with; FileNotFoundError naming the folder when it holds none."""
  saved = _saved_settings(train_dir)
  if saved is None:
    raise FileNotFoundError("{}: no controller training there ({} of "
                            "python -m l2o_scale.controller_training)".format(
                                train_dir, SETTINGS_FILE))
  saved["families"] = tuple(saved["families"])
  return ControllerTrainingConfig(**saved)


def _saved_settings(train_dir):
  """The settings file of the run in ``train_dir``, None where there is
  none."""
  path = os.path.join(train_dir, SETTINGS_FILE)
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    return json.load(f)


@dataclasses.dataclass
class Draw:
  """One task of an estimate: what the runs of its controllers share."""
  family: str
  config_index: int
  splits: str
  data_seed: int
  length: int
  run_seed: int
  loss_scale: float
  epsilons: np.ndarray  # [pairs, P]


class ControllerTrainer:
  """The recipe's loop over estimates (module doc)."""

  def __init__(self, config, train_dir, log=print, traced=None):
    """``traced``: a dict shared by trainers of the same settings, which
    then reuse each other's traced runs (a resume in the same process)."""
    config.check()
    self.config, self.train_dir, self.log = config, train_dir, log
    self.settings = config.base()
    # (family, config index) -> (task, TaskRuns)
    self._runs = {} if traced is None else traced
    self.seconds = dict(tracing=0.)
    os.makedirs(train_dir, exist_ok=True)
    learner_lib.keep_settings(train_dir, SETTINGS_FILE, config.settings(),
                              _saved_settings(train_dir),
                              "controller training")
    self._restore_or_start()

  # ------------------------------------------------------------- state
  def _restore_or_start(self):
    path = os.path.join(self.train_dir, STATE_FILE)
    self.resumed = os.path.isfile(path)
    if not self.resumed:
      self.learner = learner_lib.LearnerState.start(
          rule.initial_theta(self.config.seed), self.config.seed)
      return
    try:
      with np.load(path, allow_pickle=False) as saved:
        self.learner = learner_lib.LearnerState.from_arrays(saved)
      rule.check_theta(self.learner.theta, path)
    except (OSError, ValueError, KeyError, EOFError) as e:
      raise ValueError("{} is damaged ({}); restore it from where the run's "
                       "state was kept, or start in another --train_dir"
                       .format(path, str(e).splitlines()[0] if str(e)
                               else type(e).__name__)) from None
    except Exception as e:  # zipfile.BadZipFile: a truncated file
      raise ValueError("{} is damaged ({}); restore it from where the run's "
                       "state was kept, or start in another --train_dir"
                       .format(path, type(e).__name__)) from None
    self._trim_log()

  def _trim_log(self):
    """Drops log lines of estimates after the saved state (a run killed
    between its state and its log line, or a log copied later than the
    state), so that the resumed run's lines follow on."""
    path = os.path.join(self.train_dir, LOG_FILE)
    if not os.path.isfile(path):
      return
    with open(path) as f:
      lines = [l for l in f if l.strip()]
    kept = [l for l in lines if json.loads(l)["estimate"] <= self.learner.done]
    if len(kept) != len(lines):
      with atomic_file.replace(path) as f:
        f.writelines(kept)

  def save(self):
    """Writes the training state, then the controller (atomically)."""
    with atomic_file.replace(os.path.join(self.train_dir, STATE_FILE),
                             "wb") as f:
      np.savez(f, **self.learner.arrays())
    kept = [CONTROLLER_FILE]
    every = self.config.keep_every
    if every and self.learner.done % every == 0:
      kept.append(snapshot_name(self.learner.done))
    for name in kept:
      with atomic_file.replace(os.path.join(self.train_dir, name), "wb") as f:
        np.savez(f, theta=self.learner.theta)

  # --------------------------------------------------------- estimates
  def draw(self):
    """The draws of one estimate, all from the run's random state."""
    c, rng = self.config, self.learner.rng
    out = []
    for _ in range(c.tasks_per_estimate):
      family = family_lib.get_family(
          c.families[int(rng.integers(len(c.families)))])
      index = int(rng.integers(len(family.configs)))
      splits = sorted(family_lib.SPLITS)[int(rng.integers(
          len(family_lib.SPLITS)))]
      length = int(round(math.exp(rng.uniform(
          math.log(c.min_length), math.log(c.max_length)))))
      out.append(Draw(
          family=family.name, config_index=index, splits=splits,
          data_seed=int(rng.integers(1 << 30)), length=length,
          run_seed=int(rng.integers(1 << 30)),
          loss_scale=float(10. ** rng.uniform(-c.loss_scale, c.loss_scale)),
          epsilons=rng.standard_normal(
              (c.pairs, rule.NUM_PARAMETERS)).astype(np.float32)))
    return out

  def _task_runs(self, family, index):
    key = (family, index)
    if key not in self._runs:
      start = time.time()
      task = family_lib.get_family(family).task(index, 0)
      keras.utils.set_random_seed(0)
      model = task.build(False)
      runs = runs_lib.TaskRuns(model, task.loss, self.settings,
                               2 * self.config.pairs + 1,
                               self.config.batch_size)
      splits = task.data()
      # A run of no steps traces it, so that the runs' times are theirs.
      runs(np.zeros((runs.num_controllers, rule.NUM_PARAMETERS)),
           [v.numpy() for v in model.trainable_variables], splits.train,
           splits.validation, np.ones(len(model.trainable_variables)), 1.,
           0, 0)
      self._runs[key] = (task, runs)
      self.seconds["tracing"] += time.time() - start
    return self._runs[key]

  def objectives(self, draw, thetas):
    """The objectives of ``thetas`` [K, P] on the runs of ``draw``, and the
    zero controller's validation loss (float64 [K], float)."""
    _, runs = self._task_runs(draw.family, draw.config_index)
    task = family_lib.get_family(draw.family).task(
        draw.config_index, draw.data_seed, draw.splits)
    keras.utils.set_random_seed(draw.run_seed % (1 << 31))
    initial = [v.numpy() for v in task.build(False).trainable_variables]
    rng = np.random.default_rng([draw.run_seed, 3])
    scales = 10. ** rng.uniform(-self.config.parameter_scale,
                                self.config.parameter_scale, len(initial))
    splits = task.data()
    everything = np.concatenate([thetas, np.zeros((1, rule.NUM_PARAMETERS),
                                                  np.float32)])
    val, _ = runs(everything, initial, splits.train, splits.validation,
                  scales, draw.loss_scale, draw.run_seed % (1 << 31),
                  draw.length)
    reference = float(val[-1])
    return (estimator.normalized_objective(val[:-1], reference,
                                           self.config.objective_clip),
            reference)

  def estimate(self):
    """One antithetic estimate at the current controller: (gradient [P],
    mean objective, per-task records)."""
    c = self.config
    gradients, records = [], []
    for draw in self.draw():
      f, reference = self.objectives(draw, estimator.perturbed(
          self.learner.theta, draw.epsilons, c.sigma))
      gradients.append(estimator.antithetic_gradient(
          f[:c.pairs], f[c.pairs:], draw.epsilons, c.sigma))
      records.append(dict(family=draw.family, config=draw.config_index,
                          splits=draw.splits, length=draw.length,
                          objective=float(np.mean(f)),
                          reference_validation_loss=reference))
    return (np.mean(gradients, 0),
            float(np.mean([r["objective"] for r in records])), records)

  def _append_log(self, record):
    with open(os.path.join(self.train_dir, LOG_FILE), "a") as f:
      f.write(json.dumps(record, sort_keys=True) + "\n")

  def run(self):
    """Estimates until ``config.estimates`` are done, saving after each;
    returns the controller's parameters."""
    writer = summaries.create_writer(
        self.train_dir, self.learner.done if self.resumed else None)
    if self.resumed:
      self.log("resuming {} after estimate {}".format(self.train_dir,
                                                      self.learner.done))
    with writer.as_default():
      while self.learner.done < self.config.estimates:
        start = time.time()
        self.seconds = dict(tracing=0.)
        gradient, objective, records = self.estimate()
        self.learner.step(gradient, self.config.learning_rate)
        self.save()
        seconds = time.time() - start
        norm = float(np.linalg.norm(gradient))
        self._append_log(dict(estimate=self.learner.done, objective=objective,
                              gradient_norm=norm, seconds=seconds,
                              tasks=records))
        self.log("estimate {}/{}: objective {:+.4f} (log of validation loss "
                 "over AdamW with the cosine decay), |gradient| {:.3g}, "
                 "{:.0f} s ({:.0f} s tracing), peak memory {:.2f} GiB".format(
                     self.learner.done, self.config.estimates, objective, norm,
                     seconds, self.seconds["tracing"],
                     reporting.peak_memory_gib()))
        step = self.learner.done
        tf.summary.scalar("controller/objective", objective, step=step)
        tf.summary.scalar("controller/gradient_norm", norm, step=step)
        tf.summary.scalar("controller/seconds_per_estimate", seconds,
                          step=step)
        writer.flush()
    return self.learner.theta
