"""``python -m reproduce.head_objective``: what the head's meta-training
objective rewards (docs/schedule-head-results.md, "What the objective
rewards").

Scores schedule heads on the objective a run of ``python -m
l2o_scale.head_training`` meta-trains them on (``--run``: its settings file
holds the tasks, data, models, bounds and seed; ``--task_models`` scores
on other models): per task of the recipe and run length, ``log(validation
loss at the end of the run / the frozen optimizer's)``, from the recipe's
initial parameters, minibatches and parameter-scale augmentation of one
seed index (:class:`~l2o_scale.head_training.training.HeadTrainer`'s own
runs, so the numbers are those an estimate sees, without the
perturbations). Beside the heads given, :func:`card_like_theta` builds a
head by hand that imitates ``l2o-scale``'s card (a decoupled weight decay of
1e-3 per step and a step that shrinks over the last fifth of the run), so
that one reads whether meta-training falls short of what the card does on
its own objective, or the objective does not reward it.

The runs read the tasks' training and validation splits only. The page
(``--out``, JSON) holds every number; the log prints one line per task and
length and each head's mean over all lengths, the short runs (at most 400
steps) and the long ones (at least 1,000).
"""

import dataclasses
import json
import math
import os
import tempfile

import numpy as np

from l2o_scale.runs import atomic_file
from l2o_scale.runs import entry_point
from problems import datasets

# The head, its training and its tasks load TensorFlow; they are imported
# inside the functions that run them, so that --help and a refused argument
# do without it.

PROG = "python -m reproduce.head_objective"
CARD_LIKE = "card-like"
SHORT, LONG = 400, 1000

# The card's settings the hand-built head imitates.
CARD_WEIGHT_DECAY = 1e-3
CARD_HALF_STEP_AT = 0.9  # the cosine decay over the last fifth halves here
# The progress centre the hand-built head reads (one of the head's
# PROGRESS_CENTRES; its multiplier is 1/2 there) and how sharply it turns.
_CENTRE = CARD_HALF_STEP_AT
_SHARPNESS = 3.


def card_like_theta(seed, min_multiplier, max_weight_decay):
  """A head's parameters (float32 [NUM_PARAMETERS]) that imitate
  ``l2o-scale``'s card: weight decay :data:`CARD_WEIGHT_DECAY` per step on
  every tensor, and a multiplier of about 1 up to 80% of the run, 1/2 at
  90% and about 1/4 at the end (the card's cosine goes to 0). Only hidden
  unit 0 is used: it reads the progress embedding centred at 0.9; the
  others keep ``seed``'s initial weights and have no output weight."""
  from l2o_scale.steps import learned_schedule as ls  # pylint: disable=g-import-not-at-top
  if not 0 < CARD_WEIGHT_DECAY < max_weight_decay:
    raise ValueError("the card's weight decay {} is outside the head's "
                     "range (0, {})".format(CARD_WEIGHT_DECAY,
                                            max_weight_decay))
  inputs, hidden = ls.NUM_INPUTS, ls.HIDDEN_UNITS
  theta = np.array(ls.initial_theta(seed), np.float32)
  w1 = theta[:inputs * hidden].reshape(inputs, hidden)
  w1[:, 0] = 0.
  w1[ls.PROGRESS_CENTRES.index(_CENTRE), 0] = _SHARPNESS
  theta[:inputs * hidden] = w1.reshape(-1)
  # Unit 0 is tanh(3 tanh(10 (p - 0.9))): 0 at p = 0.9, its least value
  # -tanh(3) before the run starts. The multiplier's pre-activation
  # -c (unit + tanh(3)) is then 0 at p = 0 and at 0.9 gives exp(tanh(a)
  # log(min_multiplier)) = 1/2.
  a_half = math.atanh(math.log(0.5) / math.log(1. / min_multiplier))
  c = -a_half / math.tanh(_SHARPNESS)
  w2 = np.zeros((hidden, ls.NUM_OUTPUTS), np.float32)
  w2[0, 0] = -c
  b2 = np.array([-c * math.tanh(_SHARPNESS),
                 math.atanh(CARD_WEIGHT_DECAY / max_weight_decay)],
                np.float32)
  start = inputs * hidden + hidden
  theta[start:start + hidden * ls.NUM_OUTPUTS] = w2.reshape(-1)
  theta[start + hidden * ls.NUM_OUTPUTS:] = b2
  return theta


def summary(rows, labels):
  """{label: {"all", "short", "long"}}: the mean objective over every row,
  the runs of at most :data:`SHORT` steps and those of at least
  :data:`LONG`."""
  out = {}
  for i, label in enumerate(labels):
    values = np.array([r["objectives"][i] for r in rows])
    lengths = np.array([r["length"] for r in rows])
    def mean(mask):
      return float(values[mask].mean()) if mask.any() else None
    out[label] = dict(all=mean(lengths > 0), short=mean(lengths <= SHORT),
                      long=mean(lengths >= LONG))
  return out


def measure(heads, config, seed_index=0, every=1, data_dir=None, log=print):
  """{"labels", "rows": [{task, length, objectives}], "summary"}: the
  card-like head and each of ``heads`` (paths) on every task of ``config``
  (a :class:`~l2o_scale.head_training.training.HeadTrainingConfig`) and
  every ``every``-th length of its grid."""
  from l2o_scale.head_training import training  # pylint: disable=g-import-not-at-top
  labels = [CARD_LIKE] + list(heads)
  thetas = [card_like_theta(config.seed, config.min_multiplier,
                            config.max_weight_decay)]
  for path in heads:
    with np.load(path) as saved:
      thetas.append(np.asarray(saved["theta"], np.float32))
  thetas = np.stack(thetas)
  rows = []
  with tempfile.TemporaryDirectory() as scratch:
    trainer = training.HeadTrainer(config, scratch, data_dir,
                                   log=lambda *_: None)
    for task in config.tasks:
      for length in config.lengths()[::every]:
        objectives = trainer.objectives(task, seed_index, length, thetas)
        rows.append(dict(task=task, length=length,
                         objectives=[float(v) for v in objectives]))
        log("{} {}: {}".format(task, length, ", ".join(
            "{} {:+.3f}".format(os.path.basename(label), value)
            for label, value in zip(labels, objectives))))
  result = dict(labels=labels, seed_index=seed_index, every=every,
                settings=config.settings(), rows=rows,
                summary=summary(rows, labels))
  for label, s in result["summary"].items():
    log("{}: all {:+.3f}, runs <= {} steps {}, >= {} steps {}".format(
        label, s["all"], SHORT, _signed(s["short"]), LONG,
        _signed(s["long"])))
  return result


def _signed(x):
  return "—" if x is None else "{:+.3f}".format(x)


def main(argv=None):
  from l2o_scale.head_training import training  # pylint: disable=g-import-not-at-top
  from l2o_scale.head_training import tasks as task_lib  # pylint: disable=g-import-not-at-top
  p = entry_point.ArgumentParser(
      prog=PROG, description="Scores schedule heads, beside a hand-built "
      "head that imitates l2o-scale's card, on the head's meta-training "
      "objective per task and run length.")
  p.add_argument("heads", nargs="*", help="saved heads (head.npz files)")
  p.add_argument("--run", required=True, help="folder of a python -m "
                 "l2o_scale.head_training run: its settings (tasks, data, "
                 "bounds, seed) define the objective")
  p.add_argument("--out", required=True, help="JSON file of the numbers")
  p.add_argument("--task_models", default=None,
                 choices=task_lib.TASK_MODELS, help="score on these models "
                 "instead of the run's own")
  p.add_argument("--seed_index", type=int, default=0, help="which of the "
                 "recipe's seeds per task the runs take")
  p.add_argument("--every", type=int, default=1, help="take every this "
                 "many lengths of the recipe's grid")
  datasets.add_data_dir_argument(p)
  args = p.parse_args(argv)
  if args.every < 1:
    p.error("--every must be >= 1, got {}".format(args.every))
  try:
    config = training.saved_config(args.run)
  except FileNotFoundError as e:
    p.error(str(e))
  if args.task_models:
    config = dataclasses.replace(config, task_models=args.task_models)
  if not 0 <= args.seed_index < config.seeds_per_task:
    p.error("--seed_index must be in [0, {}), got {}".format(
        config.seeds_per_task, args.seed_index))
  for path in args.heads:
    if not os.path.isfile(path):
      p.error("{}: no such head".format(path))
  result = measure(args.heads, config, args.seed_index, args.every,
                   args.data_dir)
  with atomic_file.replace(args.out) as f:
    json.dump(result, f, indent=1)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
