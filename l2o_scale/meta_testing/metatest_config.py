"""What a meta-test run is asked to do: :class:`MetatestConfig`, and the one
:func:`validate` of it.

The fields declared with :func:`l2o_scale.config.config_flags.flag` are
``metatest.py``'s own flags (Evaluation metatest.py l.38-274, and the
port's new ones), with their defaults, help and bounds; the other fields
hold the flags it shares with ``metarun.py`` (``--train_dir``, the
optimizer's flags, the problem flags). ``metatest.py`` builds the config
from its parsed flags once; :func:`validate` holds every rule that combines
them, and :func:`l2o_scale.meta_testing.metatest_run.run` runs it, so a
caller of the library gets the refusals of the command line.
"""

import collections
import dataclasses
import os
import typing

from l2o_scale import pretrained
from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_testing import baselines
from l2o_scale.meta_testing import result_files
from l2o_scale.steps import learned_schedule
from l2o_scale.steps import settings as step_settings
from l2o_scale.steps import transform
from l2o_scale.steps import step_schedule
from problems import registry

flag = config_flags.flag

# (flag name, problem_sets function) in the order the original's main()
# extended its list (metatest.py l.300-395): the registered test problems
# (problems.registry), then the training sets, whose flags the original
# declared (with the calls commented out).
EVALUATION_PROBLEM_FLAGS = [(p.flag, p.problem_set) for p in registry.PROBLEMS]
TRAINING_PROBLEM_FLAGS = programs.metatest_training_sets()
UNAVAILABLE_PROBLEM_FLAGS = list(programs.UNAVAILABLE_PROBLEM_FLAGS)
PROBLEM_FLAGS = tuple(name for name, _ in EVALUATION_PROBLEM_FLAGS +
                      TRAINING_PROBLEM_FLAGS) + tuple(UNAVAILABLE_PROBLEM_FLAGS)
TEST_OPTIMIZERS = list(programs.TEST_OPTIMIZERS)
_TRAIN_DIR = next(f for f in config_flags.flag_fields(programs.MetarunConfig)
                  if f.name == "train_dir")


@dataclasses.dataclass(frozen=True)
class MetatestConfig:
  """``metatest.py``'s own flags: the original's (Evaluation metatest.py
  l.38-274) and the port's new ones."""
  save_dir: str = flag("opt/", "Directory to testing results.", nonempty=True)
  test_optimizer: str = flag(
      "L2o", "Optimizer to test: " + ", ".join(programs.TEST_OPTIMIZERS) +
      ".")
  num_testing_itrs: int = flag(100, "Number testing iterations.", ge=1)
  model_name: str = flag(
      "mt", "Suffix of the result files (seed<S>_eval_loss_record.pickle-"
      "<model_name>): letters, digits and . _ - + = , @, not ending in "
      "-problem<digits>.")
  restore_model_name: str = flag(
      "", "Checkpoint to restore in <train_dir>/<optimizer subdir>, e.g. "
      "model.ckpt-0. Empty: the latest checkpoint.")
  pretrained: typing.Optional[str] = flag(
      None, "Test a pretrained optimizer shipped with the package, by name "
      "(python -m l2o_scale.pretrained lists them): sets the checkpoint "
      "(instead of --train_dir/--restore_model_name) and its recorded "
      "optimizer flags.", kind=str)
  # New flags.
  data_dir: typing.Optional[str] = flag(
      None, "Folder with the datasets (MNIST IDX files / CIFAR-10 batches). "
      "Default: $L2O_SCALE_DATA_DIR, else tensorflow-datasets.", kind=str)
  seeds: tuple = flag(
      programs.DEFAULT_SEEDS, "Seeds of the test runs (one run and one "
      "result file per seed).")
  heldout_every: int = flag(
      0, "If > 0: every N steps record the optimizee's loss and accuracy "
      "on the held-out test split (and on the whole train split it trains "
      "on, with or without this flag); saved as "
      "seed<S>_heldout_record-<model_name>.json. 0: off (the original "
      "evaluation).", ge=0)
  optimizee_split: str = flag(
      "train", "The split an MNIST or CIFAR-10 optimizee trains on: train "
      "(whatever --heldout_every measures, so measuring changes nothing of "
      "the run), or test, as the original evaluation's problem sets do (no "
      "held-out split is then left: --heldout_every is refused).",
      choices=("train", "test"))
  baseline_learning_rate: typing.Optional[float] = flag(
      None, "Learning rate of the --test_optimizer=SGD/Adam/Adagrad "
      "baseline. Default: the original evaluation's (SGD 1e-3, Adam 1e-4, "
      "Adagrad 1e-5), which are small; tuned baselines (e.g. Adam 1e-3, "
      "SGD 0.1) are what a reader compares a learned optimizer with.",
      kind=float, gt=0)
  flatness_probes: int = flag(
      0, "With --heldout_every: also measure the flatness of the solution "
      "reached, the Hessian trace (Hutchinson, this many probes) and the "
      "top Hessian eigenvalue (20 power iterations) of the objective on "
      "the whole train split at the final parameters, saved in the "
      "held-out record. 0: off.", ge=0)
  assume_optimizer_flags: bool = flag(
      False, "For a checkpoint of this port without its run_record.json: "
      "build the optimizer from this command's optimizer flags (defaults "
      "where not given) instead of refusing. Without it such a checkpoint "
      "is refused, as flags other than those it was trained with run "
      "silently wrong.")
  step_schedule: str = flag(
      "none", "Scale every update of the tested optimizer (learned or "
      "baseline) by a decay over the --num_testing_itrs steps: cosine "
      "(1 + cos(pi t / T)) / 2 or linear 1 - t / T. none: constant steps "
      "(the original). The learned optimizers' steps never shrink by "
      "themselves; a decay removes their late excursions in long runs "
      "(docs/meta-testing.md).", step_schedule.SCHEDULES)
  step_decay_start: float = flag(
      0., "With --step_schedule: the share of the run (in [0, 1)) during "
      "which the steps stay whole; the decay spans the rest. 0: the decay "
      "spans the whole run.", ge=0, lt=1)
  weight_decay: float = flag(
      0., "Decoupled weight decay of every update of the tested optimizer "
      "(learned or baseline; Adam becomes AdamW): new = proposed - s * "
      "weight_decay * old, s the --step_schedule's scale (else 1), as "
      "Keras' weight_decay. 0: none (the original). With their fixed step "
      "size the learned optimizers keep growing the weights once the data "
      "is fit and lose held-out accuracy in long runs; the shipped "
      "optimizers' cards give a value for long runs (docs/meta-testing.md).",
      ge=0)
  hold_zero_gradients: bool = flag(
      False, "Leave every coordinate whose gradient in a step is exactly zero "
      "where it is (learned or baseline). False: every coordinate takes the "
      "optimizer's step (the original). The learned step goes on moving "
      "parameters the data no longer reaches (weights of always-zero "
      "inputs, of dead ReLU units), which held-out data can then excite "
      "(docs/meta-testing.md).")
  schedule_head: str = flag(
      None, "A trained schedule head (head.npz of python -m "
      "l2o_scale.head_training) on the learned optimizer: from the run's "
      "progress and gradient norms it scales each tensor's step and decays "
      "its weights (docs/schedule-head.md), so it goes without "
      "--step_schedule and --weight_decay. A --pretrained optimizer that "
      "ships with a head (l2o-scale-head) runs with its own unless this "
      "names another. Not in the original.")
  progress_every: int = flag(500, "Print progress every N steps (0: never).",
                             ge=0)
  jit_compile: bool = flag(
      False, "Compile the optimization loop with XLA: on a CPU about twice "
      "as fast per step for the learned optimizer on the MLP problems, but "
      "several times slower on the conv nets (XLA's CPU convolutions); same "
      "numbers up to float rounding. If XLA cannot compile a problem, the "
      "run says so and continues without it.")
  native_step: bool = flag(
      False, "With --jit_compile, run the per-coordinate part of the "
      "learned step (the hierarchical RNN with the shipped optimizers' "
      "options) as one native kernel, built once per machine with its C++ "
      "compiler: the same numbers up to float rounding, in less time on "
      "large problems (docs/performance.md). Where it cannot run, "
      "TensorFlow's ops do and the run says why. Not in the original.")
  overwrite: bool = flag(
      False, "Replace result files of the same --model_name already in "
      "--save_dir (without it such a run is refused before any work).")
  # Not metatest.py's own flags: those it shares with metarun.py.
  train_dir: str = _TRAIN_DIR.default
  optimizer_config: optimizer_flags.OptimizerConfig = dataclasses.field(
      default_factory=optimizer_flags.OptimizerConfig)
  # The include_* flags that are on (names from PROBLEM_FLAGS).
  problems: tuple = ()
  # (field, value) of the meta-training flags the original declared and
  # never used here: checked against their field's bounds only.
  unused: tuple = ()
  # Names of the flags given on the command line; None (a config built in
  # code): those whose value differs from their default.
  given: typing.Optional[frozenset] = None

  def is_given(self, name):
    """Whether flag ``name`` (own, ``train_dir`` or an optimizer flag) was
    given rather than left at its default."""
    if self.given is not None:
      return name in self.given
    if name == "train_dir":
      return self.train_dir != _TRAIN_DIR.default
    owner = self if name in _OWN else self.optimizer_config
    field = _OWN.get(name) or _OPTIMIZER[name]
    return getattr(owner, field.name) != config_flags.default(field)

  def seed_list(self):
    """The seeds as integers (after :func:`validate`)."""
    return [int(s) for s in self.seeds]

  def checkpoint_subdir(self):
    """``<optimizer>_<cell_cls>_<cell_size>_<num_cells>`` of the optimizer
    flags, the original's checkpoint folder name."""
    return optimizer_flags.checkpoint_subdir(self.optimizer_config)


# What metatest.py attaches to the learned step: the schedule head's file
# (None: no head) and the chain of step transforms, the head last.
StepPlan = collections.namedtuple("StepPlan", "head_file transforms")


def head_file(config):
  """The schedule head's file: --schedule_head, else the head the
  --pretrained optimizer ships with (None: no head)."""
  if config.schedule_head or config.pretrained is None:
    return config.schedule_head
  return pretrained.schedule_head(config.pretrained)


def step_plan(config):
  """The :class:`StepPlan` of the flags, the head read once: the command
  builds it where it starts and every problem and seed uses it."""
  transforms = step_settings.step_transforms_from(
      weight_decay=config.weight_decay, step_schedule=config.step_schedule,
      step_decay_start=config.step_decay_start,
      hold_zero_gradients=config.hold_zero_gradients)
  head = head_file(config)
  if not head:
    return StepPlan(None, transforms)
  return StepPlan(head, transform.chain(transforms, step_settings.attach_head(
      head, _head_owner(config), config.step_schedule != "none",
      config.weight_decay, ("--step_schedule", "--weight_decay"))))


def _head_owner(config):
  """How the messages name the head: its flag, or the optimizer it ships
  with."""
  if config.schedule_head:
    return "--schedule_head"
  return "--pretrained={} has a learned schedule head, which".format(
      config.pretrained)


_OWN = {config_flags.flag_name(f): f
        for f in config_flags.flag_fields(MetatestConfig)}
_OPTIMIZER = {config_flags.flag_name(f): f for f in
              config_flags.flag_fields(optimizer_flags.OptimizerConfig)}


def flag_errors(config):
  """Error lines, one per flag, found without the problems or the
  optimizer: every numeric flag outside its declared bounds or non-finite
  (:mod:`l2o_scale.config.config_flags`), the seeds, the model name, the
  learned optimizer's flags and a --save_dir among the shipped optimizers."""
  errors = config_flags.validate(MetatestConfig, config)
  for field, value in config.unused:
    errors.extend(config_flags.field_errors(field, value))
  errors.extend(config_flags.validate(optimizer_flags.OptimizerConfig,
                                      config.optimizer_config))
  errors.extend(config_flags.field_errors(_TRAIN_DIR, config.train_dir))
  seeds = [str(s) for s in config.seeds]
  if not seeds or any(not s.strip().lstrip("-").isdigit() for s in seeds):
    errors.append("--seeds must be a comma-separated list of integers (got "
                  "{!r})".format(",".join(seeds)))
  model_name = result_files.model_name_problem(config.model_name)
  if model_name:
    errors.append(model_name)
  if config.test_optimizer == "L2o":
    errors.extend(optimizer_flags.check_optimizer_flags(
        config.optimizer_config))
  shipped = programs.shipped_folder_problem(config.save_dir, "save_dir")
  if shipped:
    errors.append(shipped)
  return list(dict.fromkeys(errors))


def validate(config):
  """Every rule about the flags of ``config`` and how they combine, before
  any work: raises ValueError (one line) for the first one broken (bounds
  and the lines of :func:`flag_errors` together, a --save_dir that is a
  file, the problem flags, the optimizer's choice), else returns the note
  lines of the combinations that are allowed but probably not meant."""
  errors = flag_errors(config)
  if errors:
    raise ValueError("invalid flags: " + "; ".join(errors))
  if config.flatness_probes and config.heldout_every <= 0:
    raise ValueError("--flatness_probes measures the solution of a "
                     "--heldout_every run; pass --heldout_every=N too.")
  if os.path.exists(config.save_dir) and not os.path.isdir(config.save_dir):
    raise ValueError("--save_dir={} is a file, not a folder; give a "
                     "folder.".format(config.save_dir))
  _check_problems(config)
  _check_optimizer_choice(config)
  _check_schedule_head(config)
  return [note for note in (_native_step_note(config), long_run_note(config),
                            _save_dir_note(config)) if note]


def _check_schedule_head(config):
  """--schedule_head (or the head of --pretrained): a head file, on the
  learned optimizer, without the hand-set schedule and decay it
  replaces."""
  hand_set = (config.step_schedule != "none", config.weight_decay,
              ("--step_schedule", "--weight_decay"))
  if not config.schedule_head:
    if config.pretrained and head_file(config):
      learned_schedule.check_no_hand_set_schedule(_head_owner(config),
                                                  *hand_set)
    return
  if config.test_optimizer != "L2o":
    raise ValueError("--schedule_head goes with the learned optimizer "
                     "(--test_optimizer=L2o), not --test_optimizer={}".format(
                         config.test_optimizer))
  learned_schedule.check_no_hand_set_schedule("--schedule_head", *hand_set)
  if not os.path.isfile(config.schedule_head):
    raise ValueError("--schedule_head={}: no such file (a head.npz of "
                     "python -m l2o_scale.head_training)".format(
                         config.schedule_head))


def _check_problems(config):
  """The problem flags: known, with a problem set, at least one, and with
  a held-out split where --heldout_every asks for one."""
  unknown = [name for name in config.problems if name not in PROBLEM_FLAGS]
  if unknown:
    raise ValueError("{} is not a problem flag of metatest.py; choose from: "
                     "{}".format(unknown[0], ", ".join(PROBLEM_FLAGS)))
  for name in UNAVAILABLE_PROBLEM_FLAGS:
    if name in config.problems:
      raise ValueError(
          "--{} was declared by the original metatest.py but has no problem "
          "set (its code was commented out there). Choose one of: {}".format(
              name, ", ".join("--" + n for n, _ in EVALUATION_PROBLEM_FLAGS)))
  if not config.problems:
    raise ValueError(
        "No test problem selected. Pass one of: {}".format(", ".join(
            "--" + n for n, _ in EVALUATION_PROBLEM_FLAGS)))
  if config.heldout_every > 0 and config.optimizee_split == "test":
    raise ValueError("--heldout_every measures the test split, which "
                     "--optimizee_split=test trains on: drop one of them")
  if config.heldout_every > 0:
    for name, _ in selected_problem_sets(config):
      if registry.by_flag().get(name) is None:
        raise ValueError(
            "--heldout_every needs a problem trained on a dataset with a "
            "held-out split (MNIST or CIFAR-10 problem sets); {} has "
            "none.".format(name))


def _check_optimizer_choice(config):
  """--test_optimizer against --pretrained, --baseline_learning_rate and
  the flags naming a checkpoint."""
  name = config.test_optimizer
  if config.pretrained is not None and name != "L2o":
    raise ValueError("--pretrained tests a learned optimizer; it does not go "
                     "with --test_optimizer={}".format(name))
  if name in baselines.BASELINES:
    return
  if config.baseline_learning_rate is not None:
    raise ValueError("--baseline_learning_rate sets the learning rate of the "
                     "SGD/Adam/Adagrad baselines; --test_optimizer={} has "
                     "none.".format(name))
  if name != "L2o":
    raise ValueError("Unknown --test_optimizer={!r}; choose one of {}".format(
        name, ", ".join(TEST_OPTIMIZERS)))
  given = [n for n in ("train_dir", "restore_model_name")
           if config.pretrained is not None and config.is_given(n)]
  if given:
    raise ValueError("--pretrained={} names the checkpoint; drop {}".format(
        config.pretrained, " and ".join("--" + n for n in given)))


def selected_problem_sets(config):
  """``[(flag, problem_sets function)]`` of the selected problems, in the
  original's order (a sparse-gradient set with
  --include_fully_connected_random_2_class_problems also in its MLP form)."""
  chosen = []
  for name, fn in EVALUATION_PROBLEM_FLAGS + TRAINING_PROBLEM_FLAGS:
    if name in config.problems:
      chosen.append((name, fn))
      if (fn == "sparse_gradient_problems" and
          "include_fully_connected_random_2_class_problems" in
          config.problems):
        chosen.append((name, "sparse_gradient_problems_mlp"))
  return chosen


def _native_step_note(config):
  """--native_step without --jit_compile: the kernel would never run."""
  if config.test_optimizer != "L2o" or not config.native_step or (
      config.jit_compile):
    return None
  return ("--native_step: it runs in steps compiled by XLA only "
          "(--jit_compile); TensorFlow's ops run instead.")


def long_run_note(config):
  """A note line when ``--pretrained``'s card gives settings for long runs
  that this command does not use (None otherwise): without them the
  learned steps never shrink and held-out accuracy falls in long runs. A
  schedule head replaces those settings: no note then."""
  if config.pretrained is None or head_file(config):
    return None
  settings = pretrained.long_run_settings(config.pretrained)
  used = {k: getattr(config, k) for k in settings or ()}
  if not settings or used == settings:
    return None
  return ("Note: the card of {} gives settings for runs of thousands of "
          "steps: {} (docs/meta-testing.md); this run uses {}.".format(
              config.pretrained,
              " ".join(pretrained.long_run_flags(settings)),
              " ".join(pretrained.long_run_flags(used))))


def _save_dir_note(config):
  """The results folder when --save_dir is left at the original's default."""
  if config.is_given("save_dir"):
    return None
  return ("results go to --save_dir={} (the original's default; pass "
          "--save_dir to choose)".format(config.save_dir))

