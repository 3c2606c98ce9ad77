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
for _cls in CONFIG_CLASSES:
  config_flags.define_flags(_cls, __name__)
FLAGS = flags.FLAGS


def config_from_flags():
  return config_flags.from_flags(training.HeadTrainingConfig, FLAGS)


def main(argv):
  if len(argv) > 1:
    raise ValueError("unexpected arguments: {}".format(" ".join(argv[1:])))
  errors = config_flags.validate(Folders, FLAGS)
  if errors:
    raise ValueError(errors[0])
  config = config_from_flags()
  config.check()
  # Before the train dir is made: a wrong --optimizer leaves nothing.
  frozen = training.load_optimizer(config.optimizer)
  os.makedirs(FLAGS.train_dir, exist_ok=True)
  lock = dir_lock.acquire(FLAGS.train_dir, " ".join(sys.argv))
  try:
    trainer = training.HeadTrainer(config, FLAGS.train_dir,
                                   FLAGS.data_dir or None, frozen)
    trainer.run()
    print("head written to {}".format(trainer.train_dir + "/" +
                                      training.HEAD_FILE))
  finally:
    dir_lock.release(lock)


def run():
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main(PROG, run, interrupted=INTERRUPTED)
