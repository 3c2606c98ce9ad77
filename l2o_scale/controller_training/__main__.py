"""``python -m l2o_scale.controller_training --train_dir=DIR``: meta-trains
the controller of the controlled AdamW (docs/learned-adamw.md); run again
with the same flags to resume, a larger ``--estimates`` goes on from where
the run stopped. ``python -m l2o_scale.controller_training base_setting
--out=DIR``: the protocol's search for the best single base setting on the
validation tasks (resumable). ``python -m l2o_scale.controller_training
select --train_dirs=A,B,C --out=DIR``: the protocol's selection of a
controller over those runs on the validation tasks (resumable)."""

import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top

PROG = "python -m l2o_scale.controller_training"
INTERRUPTED = "run the same command again to resume from the last estimate."
if __name__ == "__main__":
  entry_point.interrupt_while_starting(PROG, INTERRUPTED)
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top,g-bad-import-order
from absl import flags  # pylint: disable=g-import-not-at-top,g-bad-import-order

from l2o_scale.config import config_flags  # pylint: disable=g-import-not-at-top
from l2o_scale.controller_training import base_setting  # pylint: disable=g-import-not-at-top
from l2o_scale.controller_training import selection  # pylint: disable=g-import-not-at-top
from l2o_scale.controller_training import training  # pylint: disable=g-import-not-at-top
from l2o_scale.runs import dir_lock  # pylint: disable=g-import-not-at-top

flag = config_flags.flag


@dataclasses.dataclass(frozen=True)
class Folders:
  """Where the run keeps its state and where its data is (not settings a
  resume compares)."""
  train_dir: str = flag("", "where the meta-training keeps its state, "
                        "controllers and summaries (resumed if it holds a "
                        "run)")
  out: str = flag("", "base_setting: where the sweep keeps its runs and "
                  "result (resumed if it holds some)")
  data_dir: str = flag("", "MNIST folder (default: $L2O_SCALE_DATA_DIR)")
  train_dirs: tuple = flag((), "select: the meta-training runs whose kept "
                           "controllers are the candidates")


COMMANDS = ("train", "base_setting", "select")
CONFIG_CLASSES = (training.ControllerTrainingConfig, Folders)
for _cls in CONFIG_CLASSES:
  config_flags.define_flags(_cls, __name__)


def main(argv):
  """The program, from the arguments absl left and the parsed flags (read
  here once)."""
  if len(argv) > 2 or (len(argv) == 2 and argv[1] not in COMMANDS):
    raise ValueError("unexpected arguments: {} (the commands: {})".format(
        " ".join(argv[1:]), ", ".join(COMMANDS)))
  command = argv[1] if len(argv) == 2 else "train"
  folders = config_flags.from_flags(Folders, flags.FLAGS)
  config = config_flags.from_flags(training.ControllerTrainingConfig,
                                   flags.FLAGS)
  if command == "base_setting":
    if not folders.out:
      raise ValueError("base_setting: give --out, the sweep's folder")
    result = base_setting.run(folders.out, folders.data_dir or None)
    print("chosen base setting: learning rate {learning_rate:g}, weight "
          "decay {weight_decay:g}".format(**result["chosen"]))
    return
  if command == "select":
    if not (folders.out and folders.train_dirs):
      raise ValueError("select: give --train_dirs (the runs) and --out (the "
                       "selection's folder)")
    result = selection.run(list(folders.train_dirs), folders.out,
                           folders.data_dir or None)
    print("noise {:.4f}; chosen: {}".format(result["threshold"],
                                            result["shipped"]))
    return
  if not folders.train_dir:
    raise ValueError("--train_dir: give the run's folder")
  config.check()
  os.makedirs(folders.train_dir, exist_ok=True)
  lock = dir_lock.acquire(folders.train_dir, " ".join(sys.argv))
  try:
    training.ControllerTrainer(config, folders.train_dir).run()
    print("controller written to {}".format(os.path.join(
        folders.train_dir, training.CONTROLLER_FILE)))
  finally:
    dir_lock.release(lock)


def run():
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main(PROG, run, interrupted=INTERRUPTED)
