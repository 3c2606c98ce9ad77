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
_DEFAULTS = training.HeadTrainingConfig()
_HELP = {
    "optimizer": "the frozen learned optimizer: a pretrained name or a "
                 "checkpoint path",
    "tasks": "the tasks runs are drawn from (l2o_scale.benchmark task names, "
             "their small versions)",
    "estimates": "how many estimates (meta-updates) the run makes in all",
    "tasks_per_estimate": "tasks per estimate, each with its own length and "
                          "seed",
    "pairs": "antithetic pairs of perturbations per task",
    "sigma": "standard deviation of the perturbations of the head's "
             "parameters",
    "learning_rate": "Adam's learning rate on the head's parameters",
    "min_length": "shortest run, in steps",
    "max_length": "longest run, in steps",
    "length_grid": "number of log-spaced run lengths drawn from",
    "seeds_per_task": "seeds (initial parameters, minibatches, augmentation) "
                      "per task; the reference losses are cached per task, "
                      "seed and length",
    "batch_size": "minibatch size of the tasks",
    "augmentation": "parameter-scale augmentation: each tensor trained at a "
                    "scale 10**U(-a, a) (0: none)",
    "objective_clip": "bound of a run's objective, log(validation loss / "
                      "reference); a diverged run counts as this",
    "min_multiplier": "smallest multiplier of a step the head can give",
    "max_multiplier": "largest multiplier of a step the head can give",
    "max_weight_decay": "largest decoupled weight decay per step the head can "
                        "give",
    "seed": "random seed of the run (draws, the head's initial hidden layer)",
}
flags.DEFINE_string("train_dir", None, "where the run keeps its state, head "
                    "and summaries (resumed if it holds a run)")
flags.DEFINE_string("data_dir", None, "MNIST folder (default: "
                    "$L2O_SCALE_DATA_DIR)")
for _field in dataclasses.fields(training.HeadTrainingConfig):
  _default = getattr(_DEFAULTS, _field.name)
  if _field.name == "tasks":
    flags.DEFINE_list(_field.name, list(_default), _HELP[_field.name])
  elif isinstance(_default, str):
    flags.DEFINE_string(_field.name, _default, _HELP[_field.name])
  elif isinstance(_default, int):
    flags.DEFINE_integer(_field.name, _default, _HELP[_field.name])
  else:
    flags.DEFINE_float(_field.name, _default, _HELP[_field.name])
FLAGS = flags.FLAGS


def config_from_flags():
  values = {f.name: getattr(FLAGS, f.name)
            for f in dataclasses.fields(training.HeadTrainingConfig)}
  values["tasks"] = tuple(values["tasks"])
  return training.HeadTrainingConfig(**values)


def main(argv):
  if len(argv) > 1:
    raise ValueError("unexpected arguments: {}".format(" ".join(argv[1:])))
  if not FLAGS.train_dir:
    raise ValueError("--train_dir is required")
  config = config_from_flags()
  config.check()
  os.makedirs(FLAGS.train_dir, exist_ok=True)
  lock = dir_lock.acquire(FLAGS.train_dir, " ".join(sys.argv))
  try:
    trainer = training.HeadTrainer(config, FLAGS.train_dir, FLAGS.data_dir)
    trainer.run()
    print("head written to {}".format(trainer.train_dir + "/" +
                                      training.HEAD_FILE))
  finally:
    dir_lock.release(lock)


def run():
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main(PROG, run, interrupted=INTERRUPTED)
