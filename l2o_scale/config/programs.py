"""What ``metarun.py`` and ``metatest.py`` share about their flags.

Each program defines its flags from configuration dataclasses (this
module's :class:`MetarunConfig`, metatest.py's ``MetatestConfig``, and
:class:`~l2o_scale.meta_training.training_config.Schedule`,
:class:`~l2o_scale.meta_training.training_config.TrainingConfig` and
:class:`~l2o_scale.config.optimizer_flags.OptimizerConfig`) into a fresh
``FlagValues`` of its own, so both programs can live in one process with
their own defaults (``--num_unroll_scale`` is 40 for metarun.py, 10 for
metatest.py, as in the original scripts). Here: the problem flags
(:func:`define_problem_flags`), validation, the original's flag names (the
"New flags" of each program's help), and :func:`install`, which hands a
program's flags to absl's global registry when it runs, for ``--help``
and ``app.run``.
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

def define_training_set_flags(flag_values, module_name, skip=()):
  """The include_* flags of the training sets (problems.problem_sets), as
  metarun.py declares them (metatest.py: :func:`define_metatest_problem_flags`)."""
  config_flags.define_booleans(
      [(name, help_text) for name, _, help_text in
       problem_sets.TRAINING_SET_FLAGS if name not in skip],
      module_name, flag_values)


def define_metatest_problem_flags(flag_values, module_name):
  """metatest.py's problem flags: the registered test problems
  (problems.registry), the training sets, and those the original declared
  without a problem set."""
  config_flags.define_booleans(
      [(p.flag, "Include {} (problem_sets.{}).".format(p.label, p.problem_set))
       for p in registry.PROBLEMS] +
      [(name, "Include the problems of problem_sets.{}.".format(set_name))
       for name, set_name in metatest_training_sets()] +
      [(name, "Declared by the original; no problem set exists for it.")
       for name in UNAVAILABLE_PROBLEM_FLAGS], module_name, flag_values)


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
  for name in program_flags:
    item = program_flags[name]
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
  return sorted(n for n in program_flags if program_flags[n].name == n and
                n not in old and not n.startswith("include_"))


def new_flags_line(program_flags, original_names):
  """``--a, --b, ...`` of :func:`new_flags`, wrapped for a docstring."""
  return textwrap.fill(", ".join(
      "--" + n for n in new_flags(program_flags, original_names)), 76,
                       break_on_hyphens=False)
