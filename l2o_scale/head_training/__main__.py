"""``python -m l2o_scale.head_training --train_dir=DIR``: meta-trains a
schedule head over a frozen learned optimizer (docs/schedule-head.md).
Run again with the same flags to resume; a larger ``--estimates`` goes on
from where the run stopped."""

import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top

PROG = "python -m l2o_scale.head_training"
INTERRUPTED = "run the same command again to resume from the last estimate."
if __name__ == "__main__":
  entry_point.interrupt_while_starting(PROG, INTERRUPTED)
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top,g-bad-import-order
from absl import flags  # pylint: disable=g-import-not-at-top,g-bad-import-order

from l2o_scale.head_training import training  # pylint: disable=g-import-not-at-top
from l2o_scale.runs import dir_lock  # pylint: disable=g-import-not-at-top
from l2o_scale.config import config_flags  # pylint: disable=g-import-not-at-top
from l2o_scale.config import programs  # pylint: disable=g-import-not-at-top

flag = config_flags.flag


@dataclasses.dataclass(frozen=True)
class Folders:
  """Where the run keeps its state and where its data is (not settings a
  resume compares)."""
  train_dir: str = flag("", "where the run keeps its state, head and "
                        "summaries (resumed if it holds a run)",
                        nonempty=True)
  data_dir: str = flag("", "MNIST folder (default: $L2O_SCALE_DATA_DIR)")


CONFIG_CLASSES = (training.HeadTrainingConfig, Folders)


def define_flags(module_name=__name__):
  """This program's flags (the fields of :data:`CONFIG_CLASSES`), in a
  fresh ``FlagValues``."""
  values = flags.FlagValues()
  for cls in CONFIG_CLASSES:
    config_flags.define_flags(cls, module_name, values)
  return values


# This program's own flags, in their own FlagValues (run() adds them to
# absl's global ones, which app.run parses).
FLAGS = define_flags()


def config_from_flags(flag_values):
  """``(HeadTrainingConfig, Folders)`` of the parsed ``flag_values``, every
  flag read here, once; ValueError with the line of a flag out of
  bounds."""
  errors = config_flags.validate(Folders, flag_values)
  if errors:
    raise ValueError(errors[0])
  return (config_flags.from_flags(training.HeadTrainingConfig, flag_values),
          config_flags.from_flags(Folders, flag_values))


def main(argv):
  if len(argv) > 1:
    raise ValueError("unexpected arguments: {}".format(" ".join(argv[1:])))
  FLAGS.mark_as_parsed()  # app.run parsed them, as absl's global flags.
  config, folders = config_from_flags(FLAGS)
  config.check()
  # Before the train dir is made: a wrong --optimizer leaves nothing.
  frozen = training.load_optimizer(config.optimizer)
  os.makedirs(folders.train_dir, exist_ok=True)
  lock = dir_lock.acquire(folders.train_dir, " ".join(sys.argv))
  try:
    trainer = training.HeadTrainer(config, folders.train_dir,
                                   folders.data_dir or None, frozen)
    trainer.run()
    print("head written to {}".format(trainer.train_dir + "/" +
                                      training.HEAD_FILE))
  finally:
    dir_lock.release(lock)


def run():
  programs.install(FLAGS)
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main(PROG, run, interrupted=INTERRUPTED)
