"""The flags of ``metarun.py`` and ``metatest.py``, each program its own set.

Each program's flags are the fields of the configuration dataclasses
(:class:`MetarunConfig`, :class:`MetatestConfig`, and the shared
:class:`~l2o_scale.meta_training.config.Schedule`,
:class:`~l2o_scale.meta_training.config.TrainingConfig` and
:class:`~l2o_scale.config.optimizer_flags.OptimizerConfig`), plus the
problem flags (``problems.registry`` and ``problems.problem_sets``).
:func:`metarun_flags` / :func:`metatest_flags` define them into a fresh
``FlagValues``, so both programs can live in one process with their own
defaults (``--num_unroll_scale`` is 40 for metarun.py, 10 for metatest.py,
as in the original scripts); :func:`install` hands a program's flags to
absl's global registry when it runs, for ``--help`` and ``app.run``.
"""

import dataclasses
import os
import sys
import textwrap
import typing

from absl import flags

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import recipes
from l2o_scale.meta_training import config as training_config
from l2o_scale.meta_testing import step_schedule
from problems import problem_sets
from problems import registry

flag = config_flags.flag


@dataclasses.dataclass(frozen=True)
class MetarunConfig:
  """``metarun.py``'s own flags: the original's (metarun.py l.34-40,
  metaopt.py, problem_generator.py) and the port's new ones."""
  train_dir: str = flag("opt/", "Directory to store parameters and results.",
                        nonempty=True)
  task: int = flag(0, "Task id of the replica running the training.", ge=0)
  worker_tasks: int = flag(1, "Number of tasks in the worker job.", ge=1)
  ps_tasks: int = flag(0, "Number of tasks in the ps job (from TF_CONFIG in "
                       "distributed mode, see README).", ge=0)
  set_profiling: bool = flag(
      False, "Profile with the TF profiler into train_dir (TensorBoard).")
  l2_reg_scale: float = flag(
      1e-3, "Scaling factor for parameter value regularization in softmax "
      "classifier problems (unused, as in the original).")
  # New in the port.
  data_dir: typing.Optional[str] = flag(
      None, "Folder with the standard MNIST/CIFAR-10 files (default: "
      "$L2O_SCALE_DATA_DIR, else tensorflow-datasets).", kind=str)
  seed: typing.Optional[int] = flag(
      None, "Seed numpy, Python and TF random streams.", kind=int)
  resume: bool = flag(True,
                      "Continue from the latest checkpoint in the log dir.")
  summaries: bool = flag(True, "Write TensorBoard summaries.")
  recipe: typing.Optional[str] = flag(
      None, "A named set of metarun flags shipped with the package "
      "(l2o_scale/config/recipes/<name>.flags, an absl flagfile): " +
      " ".join("{}: {}".format(n, recipes.summary(n))
               for n in recipes.names()) +
      " A flag given on the command line wins over the recipe's; one "
      "--recipe per command.", recipes.names(), kind=str)
  overwrite: bool = flag(
      False, "With --resume=False, delete the earlier run's checkpoints and "
      "record in the log dir first (without it such a dir is refused).")
  allow_data_change: bool = flag(
      False, "Resume a train dir with another --data_dir than the one it "
      "was trained with (without it such a resume is refused, as it would "
      "train on other data than its run record says).")


# Flags of a run that are not part of its run record: they say how to
# treat the train dir, not what is trained.
NOT_RECORDED = ("allow_data_change",)

# The metarun flags metatest.py declared too (unused there), with the
# original metatest.py's defaults where they differ (Evaluation metatest.py
# l.39-85).
METATEST_UNUSED = ("task", "worker_tasks", "num_problems",
                   "num_meta_iterations", "num_unroll_scale",
                   "min_num_unrolls", "num_partial_unroll_itr_scale",
                   "min_num_itr_partial_unroll", "meta_learning_rate",
                   "gradient_clip_level")
METATEST_DEFAULTS = dict(num_unroll_scale=10, min_num_unrolls=4,
                         num_partial_unroll_itr_scale=50)

DEFAULT_SEEDS = ("6", "12", "18", "24", "30")
TEST_OPTIMIZERS = ("L2o", "SGD", "Adam", "Adagrad")


@dataclasses.dataclass(frozen=True)
class MetatestConfig:
  """``metatest.py``'s own flags: the original's (Evaluation metatest.py
  l.38-274) and the port's new ones."""
  save_dir: str = flag("opt/", "Directory to testing results.", nonempty=True)
  test_optimizer: str = flag(
      "L2o", "Optimizer to test: " + ", ".join(TEST_OPTIMIZERS) + ".")
  num_testing_itrs: int = flag(100, "Number testing iterations.", ge=1)
  model_name: str = flag(
      "mt", "Suffix of the result files (seed<S>_eval_loss_record.pickle-"
      "<model_name>).")
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
      DEFAULT_SEEDS, "Seeds of the test runs (one run and one result file "
      "per seed).")
  heldout_every: int = flag(
      0, "If > 0: train the optimizee on the train split and every N steps "
      "record loss and accuracy on the held-out test split (and on the "
      "whole train split); saved as seed<S>_heldout_record-<model_name>"
      ".json. 0: off (the original evaluation).", ge=0)
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
  progress_every: int = flag(500, "Print progress every N steps (0: never).",
                             ge=0)
  jit_compile: bool = flag(
      False, "Compile the optimization loop with XLA: on a CPU about twice "
      "as fast per step for the learned optimizer on the MLP problems, but "
      "several times slower on the conv nets (XLA's CPU convolutions); same "
      "numbers up to float rounding. If XLA cannot compile a problem, the "
      "run says so and continues without it.")
  overwrite: bool = flag(
      False, "Replace result files of the same --model_name already in "
      "--save_dir (without it such a run is refused before any work).")


# Training sets metatest.py takes too (less those its registry evaluates).
def metatest_training_sets():
  """``[(flag, problem_sets function)]`` of the training sets."""
  evaluated = registry.by_flag()
  return [(name, set_name) for name, set_name, _ in
          problem_sets.TRAINING_SET_FLAGS if name not in evaluated]


# Declared by the original metatest.py without any problem set behind them.
UNAVAILABLE_PROBLEM_FLAGS = (
    "include_mnist_conv_wider_problems", "include_mnist_conv_4layers_problems",
    "include_cifar10_conv_4layers_problems", "include_vgg16_problems")

# The classes whose fields are each program's flags.
METARUN_CLASSES = (MetarunConfig, training_config.Schedule,
                   training_config.TrainingConfig,
                   optimizer_flags.OptimizerConfig)
METATEST_CLASSES = (MetatestConfig, training_config.Schedule,
                    optimizer_flags.OptimizerConfig, MetarunConfig)


def metarun_flags(module_name="metarun"):
  """A fresh ``FlagValues`` holding every ``metarun.py`` flag."""
  values = flags.FlagValues()
  for cls in METARUN_CLASSES:
    config_flags.define_flags(cls, module_name, values)
  for name, _, help_text in problem_sets.TRAINING_SET_FLAGS:
    flags.DEFINE_boolean(name, False, help_text, flag_values=values,
                         module_name=module_name)
  return values


def metatest_flags(module_name="metatest"):
  """A fresh ``FlagValues`` holding every ``metatest.py`` flag."""
  values = flags.FlagValues()
  common = dict(flag_values=values, module_name=module_name)
  config_flags.define_flags(MetatestConfig, module_name, values)
  config_flags.define_flags(MetarunConfig, module_name, values,
                            only=("train_dir",))
  config_flags.define_flags(MetarunConfig, module_name, values,
                            only=("task", "worker_tasks"),
                            help_suffix=" (unused by meta-testing)")
  config_flags.define_flags(training_config.Schedule, module_name, values,
                            overrides=METATEST_DEFAULTS,
                            only=METATEST_UNUSED,
                            help_suffix=" (unused by meta-testing)")
  optimizer_flags.define_optimizer_flags(values, module_name)
  for problem in registry.PROBLEMS:
    flags.DEFINE_boolean(problem.flag, False, "Include {} (problem_sets.{})."
                         .format(problem.label, problem.problem_set), **common)
  for name, set_name in metatest_training_sets():
    flags.DEFINE_boolean(name, False, "Include the problems of "
                         "problem_sets.{}.".format(set_name), **common)
  for name in UNAVAILABLE_PROBLEM_FLAGS:
    flags.DEFINE_boolean(name, False, "Declared by the original; no problem "
                         "set exists for it.", **common)
  return values


def validate(classes, flag_values):
  """Error lines (one per flag) for every numeric flag of ``classes``
  outside its bounds or non-finite, and every empty path flag."""
  errors = []
  seen = set()
  for cls in classes:
    for line in config_flags.validate(cls, flag_values):
      if line not in seen:
        seen.add(line)
        errors.append(line)
  return errors


# The optimizers shipped with the package (l2o_scale/pretrained).
SHIPPED_FOLDER = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "pretrained")


def shipped_folder_problem(path, flag_name):
  """The error line for ``--<flag_name>=path`` inside the package's
  shipped optimizers (a run there would replace one), or None."""
  if not path:
    return None
  shipped = os.path.realpath(SHIPPED_FOLDER)
  target = os.path.realpath(path)
  if target != shipped and not target.startswith(shipped + os.sep):
    return None
  return ("--{}={} is inside the package's shipped optimizers ({}); writing "
          "there would replace them. Give a folder outside it.".format(
              flag_name, path, SHIPPED_FOLDER))


def install(program_flags, argv0=None):
  """Adds a program's flags to absl's global ``flags.FLAGS`` (filed under
  the running script, as absl files a script's own flags), so that
  ``app.run`` parses them and ``--help`` / ``--helpfull`` list them. Run
  once, by the program that runs; values stay shared with
  ``program_flags``."""
  module_name = argv0 or sys.argv[0]
  global_flags = flags.FLAGS
  for name, item in program_flags._flags().items():  # pylint: disable=protected-access
    if name != item.name or (name in global_flags and
                             global_flags[name] is item):
      continue
    global_flags[name] = item  # absl refuses a name it holds already.
    global_flags.register_flag_by_module(module_name, item)
  return global_flags


# The original scripts' own flags (besides the optimizer's and the
# include_* problem flags, which are all the original's): L2O-Entropy
# Training metarun.py with metaopt.py, trainable_optimizer.py and
# problem_generator.py; Evaluation metatest.py.
ORIGINAL_METARUN_FLAGS = (
    "alpha", "beta", "data_freeze", "evaluation_epochs", "evaluation_period",
    "fix_num_steps", "fix_num_steps_eval", "fix_unroll", "fix_unroll_length",
    "gradient_clip_level", "hessian_itrs", "if_cl", "if_mt", "l2_reg",
    "l2_reg_scale", "meta_learning_rate", "min_num_itr_partial_unroll",
    "min_num_unrolls", "mini_batch_size", "mt_k", "mt_ratio", "nan_l2_reg",
    "num_meta_iterations", "num_partial_unroll_itr_scale", "num_problems",
    "num_unroll_scale", "ps_tasks", "reg_optimizee", "reg_optimizer",
    "reg_option", "reg_scale", "regularize_time", "reset_rnn_params",
    "rms_decay", "rms_epsilon", "save_period", "set_profiling", "task",
    "train_dir", "worker_tasks")
ORIGINAL_METATEST_FLAGS = ("save_dir", "test_optimizer", "num_testing_itrs",
                           "model_name", "restore_model_name",
                           "train_dir") + METATEST_UNUSED


def new_flags(program_flags, original_names):
  """The flags of ``program_flags`` that the original script did not have,
  sorted (the "New flags" line of a program's help): all but
  ``original_names``, the optimizer's flags and the include_* problem
  flags."""
  old = set(original_names) | set(optimizer_flags.optimizer_flag_names())
  return sorted(n for n, f in program_flags._flags().items()  # pylint: disable=protected-access
                if n == f.name and n not in old and
                not n.startswith("include_"))


def new_flags_line(program_flags, original_names):
  """``--a, --b, ...`` of :func:`new_flags`, wrapped for a docstring."""
  return textwrap.fill(", ".join(
      "--" + n for n in new_flags(program_flags, original_names)), 76,
                       break_on_hyphens=False)
