"""Meta-testing: evaluates a learned (or hand-designed) optimizer.

Port of the evaluation script ``L2O-Scale/L2O-Scale-Evaluation/metatest.py``
(VITA-Group/Open-L2O; flags l.38-274, ``main`` l.290-400). Same flags, names
and defaults, same outputs: for every selected problem and every seed, the
optimizer runs ``--num_testing_itrs`` steps from a fresh start and the list of
per-step objectives is pickled to
``<save_dir>/seed<S>_eval_loss_record.pickle-<model_name>`` (readable by the
original plotting scripts).

Example::

  python metatest.py --train_dir=runs/mlp --restore_model_name=model.ckpt-0 \\
      --include_mnist_mlp_relu_problems --model_name=mnist-relu \\
      --num_testing_itrs=10000 --save_dir=results --data_dir=data/mnist

``--test_optimizer`` picks ``L2o`` (the learned optimizer restored from
``<train_dir>/<optimizer>_<cell_cls>_<cell_size>_<num_cells>/<restore_model_name>``,
a TF1 checkpoint of the original code or a TF2 one of this port's
``metarun.py``) or a baseline with the original's learning rate: ``SGD``
(1e-3), ``Adam`` (1e-4), ``Adagrad`` (1e-5).

New flags (not in the original):
NEW_FLAGS.
Among them ``--seeds`` (the
original hard-coded 6, 12, 18, 24, 30), ``--heldout_every``
(generalization of the optimizee: every N steps measure loss and accuracy
on the held-out test split, saved as
``<save_dir>/seed<S>_heldout_record-<model_name>.json``), ``--pretrained``
(a pretrained optimizer shipped with the package, by name) and
``--overwrite`` (result files of the same ``--model_name`` are otherwise
kept and the run refused).

Differences: the optimizee of an MNIST or CIFAR-10 problem trains on the
dataset's train split, with or without ``--heldout_every`` (the original
trained it on the test split, which leaves no held-out split to measure).
The flags of meta-training that the original declared but never
used here (``task``, ``num_problems``, ``meta_learning_rate``...) are kept so
old command lines still parse. With more than one selected problem the
original wrote every problem to the same file names (later ones overwrote
earlier ones); here the file names then get ``-problem<k>`` after the model
name. Each run also writes ``metatest_record-<model_name>.json``, naming
its problems for ``python -m l2o_scale.results``
(:mod:`l2o_scale.meta_testing.result_files`).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
# What Ctrl-C's line adds; from the start on (TensorFlow loads for seconds).
INTERRUPTED = ("the result files written so far are complete: run "
               "the same command with --overwrite to test everything.")
if __name__ == "__main__":
  entry_point.interrupt_while_starting("metatest.py", INTERRUPTED)
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_testing import metatest_config
from l2o_scale.meta_testing import metatest_run
from l2o_scale.meta_training import training_config as training_lib

MetatestConfig = metatest_config.MetatestConfig


def define_flags(module_name="metatest"):
  """A fresh ``FlagValues`` holding every metatest.py flag: the fields of
  MetatestConfig, metarun's --train_dir, the unused metarun flags the
  original declared (with its own defaults), the optimizer's flags and the
  problem flags."""
  values = flags.FlagValues()
  config_flags.define_flags(MetatestConfig, module_name, values)
  config_flags.define_flags(programs.MetarunConfig, module_name, values,
                            only=("train_dir",))
  config_flags.define_flags(programs.MetarunConfig, module_name, values,
                            only=("task", "worker_tasks"),
                            help_suffix=" (unused by meta-testing)")
  config_flags.define_flags(training_lib.Schedule, module_name, values,
                            overrides=programs.METATEST_DEFAULTS,
                            only=programs.METATEST_UNUSED,
                            help_suffix=" (unused by meta-testing)")
  optimizer_flags.define_optimizer_flags(values, module_name)
  programs.define_metatest_problem_flags(values, module_name)
  return values


# This program's own flags, in their own FlagValues: importing metarun.py
# too changes none of them.
FLAGS = define_flags()
__doc__ = __doc__.replace("NEW_FLAGS", programs.new_flags_line(
    FLAGS, programs.ORIGINAL_METATEST_FLAGS))

# The fields declaring the meta-training flags metatest.py takes unused.
UNUSED_FIELDS = tuple(
    field for cls in (training_lib.Schedule, programs.MetarunConfig)
    for field in config_flags.flag_fields(cls)
    if config_flags.flag_name(field) in programs.METATEST_UNUSED)


def build_config(flag_values):
  """The :class:`MetatestConfig` of the parsed flags: the one place
  metatest.py reads their values (what was given included)."""
  return config_flags.from_flags(
      MetatestConfig, flag_values, train_dir=flag_values.train_dir,
      optimizer_config=config_flags.from_flags(
          optimizer_flags.OptimizerConfig, flag_values),
      problems=tuple(name for name in metatest_config.PROBLEM_FLAGS
                     if flag_values[name].value),
      unused=tuple((field, config_flags.flag_value(field, flag_values))
                   for field in UNUSED_FIELDS),
      given=frozenset(name for name in flag_values
                      if flag_values[name].present))


def main(argv):
  """The program's work, under absl's flags; its refusals and Ctrl-C end
  as in every entry point (:func:`l2o_scale.runs.entry_point.run_main`)."""
  FLAGS.mark_as_parsed()
  if len(argv) > 1:
    raise ValueError("unexpected arguments: {}".format(" ".join(argv[1:])))
  config = build_config(FLAGS)
  try:
    metatest_run.run(config)
  except metatest_run.SaveDirError as e:
    raise entry_point.Refusal(
        "writing {} failed: {}. Give another --save_dir (or free space if "
        "the disk is full).".format(e.filename, e.strerror)) from None
  return 0


def run_program():
  """The program: its flags join absl's registry (for --help and
  parsing), then :func:`main`."""
  programs.install(FLAGS)
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main("metatest.py", run_program, interrupted=INTERRUPTED)
