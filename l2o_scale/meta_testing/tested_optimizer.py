"""The optimizer a meta-test run tests, from its :class:`MetatestConfig`:
a baseline with the evaluation's learning rate, or a learned optimizer
restored from ``<train_dir>/<optimizer subdir>/<restore_model_name>`` (the
original's checkpoint path, Evaluation metatest.py l.290-300) or from a
shipped one (``--pretrained``), built with the flags of its run record.

For a config that :func:`l2o_scale.meta_testing.metatest_config.validate`
accepted (:func:`l2o_scale.meta_testing.metatest_run.run` checks first).
"""

import os
import types

from l2o_scale import pretrained
from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.meta_testing import baselines
from l2o_scale.runs import checkpoints
from l2o_scale.runs import run_record
from optimizer import native_step


def build(config):
  """The optimizer to test, restored if learned. Returns (optimizer, path)."""
  name = config.test_optimizer
  if name in baselines.BASELINES:
    opt = baselines.build(name, config.baseline_learning_rate)
    print("using optimizer {} (learning rate {:g}{})".format(
        name, opt.learning_rate,
        "" if config.baseline_learning_rate is None
        else ", --baseline_learning_rate"))
    return opt, None
  if config.pretrained is not None:
    return restored(config, pretrained.checkpoint(config.pretrained))
  return restored(config, checkpoints.checkpoint_in(
      checkpoint_dir(config), config.restore_model_name))


def checkpoint_dir(config):
  """``<train_dir>/<optimizer>_<cell_cls>_<cell_size>_<num_cells>``, once
  found there (FileNotFoundError saying which flags name it otherwise)."""
  subdir = config.checkpoint_subdir()
  logdir = os.path.join(config.train_dir, subdir)
  misplaced = checkpoints.checkpoint_folder_given(config.train_dir, subdir)
  if misplaced:
    raise FileNotFoundError(misplaced)
  if not os.path.isdir(logdir):
    raise FileNotFoundError(
        "No checkpoint folder {}: --train_dir must hold the {} folder that "
        "metarun.py writes (optimizer flags --optimizer/--cell_cls/"
        "--cell_size/--num_cells choose its name).{}".format(
            logdir, subdir,
            " For the shipped optimizer, pass --pretrained={}.".format(
                config.train_dir)
            if config.train_dir in pretrained.names() else ""))
  return logdir


def restored(config, path):
  """The learned optimizer of checkpoint ``path``, built with the flags of
  its run record (:func:`recorded_flags`). Returns (optimizer, path)."""
  values = recorded_flags(config, path, checkpoints.checkpoint_format(path))
  opt = optimizer_flags.optimizer_spec(values).build()
  checkpoints.restore_optimizer(path, opt)
  if config.native_step and config.jit_compile:
    # Without XLA the kernel would never run (a note of validate).
    why = native_step.enable(opt)
    if why:
      print("--native_step: {}; TensorFlow's ops run instead.".format(why))
  print("using optimizer L2o ({}) restored from {}".format(
      values.optimizer, path))
  return opt, path


def recorded_flags(config, checkpoint_path, checkpoint_format):
  """The optimizer flags to rebuild the trained optimizer with: the run
  record's (``run_record.json`` next to the checkpoint), except those given
  on the command line. Without a record: a TF1 checkpoint of the original
  takes the flags (noted); a TF2 one is refused unless
  ``--assume_optimizer_flags`` (run_record.record_for_checkpoint)."""
  given = {config_flags.flag_name(field): getattr(config.optimizer_config,
                                                  field.name)
           for field in config_flags.flag_fields(
               optimizer_flags.OptimizerConfig)}
  record, note = run_record.record_for_checkpoint(
      checkpoint_path, checkpoint_format, config.assume_optimizer_flags,
      "give the optimizer flags it was trained with and "
      "--assume_optimizer_flags")
  if note:
    print(note)
  if record is None:
    return types.SimpleNamespace(**given)
  values, notes = run_record.merge_optimizer_flags(
      record, given, {name for name in given if config.is_given(name)})
  for note in notes:
    print(note)
  return types.SimpleNamespace(**values)
