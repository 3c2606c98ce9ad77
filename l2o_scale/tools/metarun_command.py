"""``metarun.py``'s command as a library: its flags, the one
:class:`~l2o_scale.meta_training.training_config.RunConfig` they give and
the problems that config trains on.

A tool that runs what a metarun.py command describes (the regularizer's
calibration) declares these flags and builds this config at its own
boundary, then passes values; it never imports the ``metarun`` script,
whose ``FLAGS`` are another program's (tests/test_layers.py checks that no
package module does).
"""

import sys

from absl import flags

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_training import training_config as training_lib
from l2o_scale.meta_training import validation
from problems import problem_sets as ps

# The classes whose fields are metarun.py's flags.
CONFIG_CLASSES = (programs.MetarunConfig, training_lib.Schedule,
                  training_lib.TrainingConfig, optimizer_flags.OptimizerConfig)

# include_* flag -> problem set (original metarun.py main(), in its order).
INCLUDE_FLAGS = ps.TRAINING_SET_FLAGS

DEFAULT_SET = "mnist_mlp_problems"


def define_flags(module_name="metarun", flag_values=None):
  """Every metarun.py flag (the fields of :data:`CONFIG_CLASSES` and the
  training sets' include_* flags), defined in ``flag_values`` (a fresh
  ``FlagValues`` where None), which is returned."""
  values = flags.FlagValues() if flag_values is None else flag_values
  for cls in CONFIG_CLASSES:
    config_flags.define_flags(cls, module_name, values)
  programs.define_training_set_flags(values, module_name)
  return values


def flag_names():
  """The names of metarun.py's flags, sorted (no short names)."""
  values = define_flags()
  return sorted(n for n in values if values[n].name == n)


def run_config(flag_values, cluster=None):
  """The :class:`~l2o_scale.meta_training.training_config.RunConfig` of parsed
  metarun.py flags (``flag_values``: metarun.py's, or a set holding
  them): every flag is read here, once. ``cluster``: this process's
  :class:`~l2o_scale.meta_training.training_config.ClusterTask` (TF_CONFIG), None
  for a single process.

  The schedule's objective-growth stop is the optimizer's
  ``--objective_training_max_multiplier``; its problems are drawn at random
  unless this task is the chief of several workers (metarun.py l.405-436).
  A ``--selection_seeds`` that is not integers stays as given, for
  :func:`~l2o_scale.meta_training.validation.validate` to refuse.
  """
  optimizer = config_flags.from_flags(optimizer_flags.OptimizerConfig,
                                      flag_values)
  program = config_flags.from_flags(programs.MetarunConfig, flag_values)
  try:
    seeds = tuple(int(s) for s in flag_values.selection_seeds)
  except ValueError:
    seeds = tuple(flag_values.selection_seeds)
  schedule = config_flags.from_flags(
      training_lib.Schedule, flag_values,
      obj_train_max_multiplier=optimizer.objective_training_max_multiplier,
      select_random_problems=program.worker_tasks == 1 or program.task != 0)
  return training_lib.RunConfig(
      schedule=schedule, optimizer=optimizer, program=program,
      training=config_flags.from_flags(training_lib.TrainingConfig,
                                       flag_values, selection_seeds=seeds),
      problem_sets=tuple(name for name, _, _ in INCLUDE_FLAGS
                         if flag_values[name].value),
      given=frozenset(name for name in flag_values
                      if flag_values[name].present),
      cluster=cluster)


def errors(config):
  """Error lines of ``config`` (a RunConfig) in a single process: those of
  :func:`~l2o_scale.meta_training.validation.validate`."""
  return validation.validate(config)[0]


def selected_problems(config, out=sys.stdout):
  """The training problems chosen by the include_* flags of ``config`` (a
  RunConfig; original order)."""
  chosen, data_dir = set(config.problem_sets), config.program.data_dir
  problems_and_data = []
  for flag_name, set_name, _ in INCLUDE_FLAGS:
    if flag_name in chosen:
      problems_and_data.extend(ps.get(set_name, data_dir=data_dir))
      if (flag_name == "include_sparse_gradient_problems" and
          "include_fully_connected_random_2_class_problems" in chosen):
        problems_and_data.extend(ps.sparse_gradient_problems_mlp())
  if not problems_and_data:
    out.write("No --include_* flag given: training on the L2O-Entropy setting, "
              "{} (MNIST MLP 784-20-10, sigmoid, batch 128).\n".format(
                  DEFAULT_SET))
    problems_and_data = ps.get(DEFAULT_SET, data_dir=data_dir)
  return problems_and_data


def selection_problems(config):
  """The problems of ``config``'s ``--selection_set`` (None without one)."""
  if not config.training.selection_set:
    return None
  return ps.get_training_triples(config.training.selection_set,
                                 data_dir=config.program.data_dir)
