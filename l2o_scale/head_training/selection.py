"""``python -m l2o_scale.head_training.selection``: chooses a schedule head
among the candidates of one or more meta-training runs, on validation tasks
named in advance (docs/schedule-head.md, "Choosing a head").

The candidates are the zero head (the frozen optimizer exactly: the warm
start is always a candidate), with ``--with_card`` and a shipped optimizer
whose card holds long-run settings the optimizer with them and no head
(:data:`CARD`: a head is then chosen only where it beats the hand-set
settings it would replace), and every head a run kept
(``head-<estimates>.npz``, ``--keep_every``; and its last ``head.npz``).
Each candidate trains every task of :data:`VALIDATION_TASKS` (the full
task-suite versions, not the small ones heads are meta-trained on) for
:data:`BUDGET` steps from the same initial weights and minibatches. Its
score is the mean over tasks of ``log(validation loss / the zero head's)``:
below 0 is better than the frozen optimizer. The lowest score wins; the zero
head wins ties. A diverged run scores ``inf``. The test splits are never
read: :data:`TEST_TASKS`, disjoint from these, are looked at once, after the
choice, by the task-suite benchmark.

Each candidate's numbers on each task are stored in ``--out`` (JSON, written
atomically after every run), so an interrupted selection resumes where it
stopped; the stored numbers are keyed by the candidate file's digest.
"""

import hashlib
import json
import math
import os

import numpy as np

from l2o_scale.benchmark import tasks
from l2o_scale import pretrained
from l2o_scale.runs import atomic_file
from l2o_scale.runs import entry_point
from problems import datasets

# TensorFlow, and the modules that load it (the head, the learned optimizer,
# the training), are imported inside the functions that run them: --help
# and a refused argument load none of it.

PROG = "python -m l2o_scale.head_training.selection"

# Named before any head was meta-trained, apart from the test tasks; both
# mix the small-data and the data-rich regime of the task suite.
VALIDATION_TASKS = ("logreg_mnist", "gru_mnist_rows",
                    "regression_synthetic_rich", "text_topics_rich")
TEST_TASKS = ("mlp_relu_bn_mnist", "cnn_mnist", "teacher_mlp_rich",
              "attention_topics_rich")
BUDGET = 2000
SEED = 0
BATCH_SIZE = 128
EVAL_POINTS = 10
ZERO = "zero head"
# The frozen optimizer with its card's hand-set long-run settings (weight
# decay, step decay) and no head: what a head must beat to be worth
# shipping, a candidate where the optimizer is a shipped one with a card.
CARD = "card"


def candidates(train_dirs):
  """[(label, path or None)]: the zero head (None), then each run's kept
  heads in the order of their estimates and its last ``head.npz`` (where it
  differs from the last kept one). FileNotFoundError naming a folder that
  holds no head."""
  from l2o_scale.head_training import training  # pylint: disable=g-import-not-at-top
  found = [(ZERO, None)]
  for folder in train_dirs:
    names = os.listdir(folder) if os.path.isdir(folder) else []
    kept = sorted((training.snapshot_estimates(name), name)
                  for name in names
                  if training.snapshot_estimates(name) is not None)
    paths = [os.path.join(folder, name) for _, name in kept]
    last = os.path.join(folder, training.HEAD_FILE)
    if os.path.exists(last) and not (paths and _digest(paths[-1]) ==
                                     _digest(last)):
      paths.append(last)
    if not paths:
      raise FileNotFoundError("{}: no schedule head there (head.npz or "
                              "head-<estimates>.npz of python -m "
                              "l2o_scale.head_training)".format(folder))
    found += [(path, path) for path in paths]
  return found


def card_settings(optimizer):
  """The long-run settings of a shipped optimizer's card; None for a
  checkpoint or a shipped optimizer without them."""
  if optimizer not in pretrained.names():
    return None
  return pretrained.long_run_settings(optimizer)


def _digest(path, optimizer=None):
  if path is None:
    return "zero"
  if path == CARD:
    return "card " + json.dumps(card_settings(optimizer), sort_keys=True)
  with open(path, "rb") as f:
    return hashlib.sha1(f.read()).hexdigest()[:12]


def validation_trainer(task_name, learned, budget=BUDGET, data_dir=None,
                       tiny=False, seed=SEED):
  """(trainer, minibatch indices) of one run of ``learned`` (a Keras
  optimizer) on a task, from the benchmark's initial weights of ``seed``
  and its minibatches, without the test split: the trainer measures a test
  split at the end, and gets one validation example in its place."""
  from l2o_scale.benchmark import training as bench_training  # pylint: disable=g-import-not-at-top
  task = tasks.get(task_name)
  splits = task.data(tiny, data_dir)
  splits = tasks.Splits(splits.train, splits.validation,
                        tuple(a[:1] for a in splits.validation))
  model = task.build(tiny)
  model.set_weights(bench_training.initial_weights(task, seed, tiny))
  trainer = bench_training.Trainer(task, splits, model, learned,
                                   jit_compile=task.jit_compile)
  indices = bench_training.batch_indices(
      seed, budget, min(BATCH_SIZE, len(splits.train[0])),
      len(splits.train[0]))
  return trainer, indices


def validation_run(task_name, head_path, optimizer, budget=BUDGET,
                   data_dir=None, tiny=False, seed=SEED):
  """One candidate on one task: (final validation loss, validation metric,
  diverged). ``head_path``: a saved head, None for the zero head, or
  :data:`CARD` for the optimizer with its card's settings and no head. The
  test split is not evaluated."""
  from l2o_scale.keras_optimizer import LearnedOptimizer  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  if head_path == CARD:
    learned = LearnedOptimizer.pretrained(optimizer, total_steps=budget)
  else:
    head = (learned_schedule.ScheduleHead() if head_path is None else
            learned_schedule.ScheduleHead.load(head_path))
    build = (LearnedOptimizer.pretrained if optimizer in pretrained.names()
             else LearnedOptimizer.from_checkpoint)
    learned = build(optimizer, schedule_head=head, total_steps=budget)
  trainer, indices = validation_trainer(task_name, learned, budget, data_dir,
                                        tiny, seed)
  record = trainer.run(indices, max(1, budget // EVAL_POINTS))
  return dict(validation_loss=record["validation_loss"],
              validation_metric=record["validation_metric"],
              diverged=record["diverged"])


def score(runs, zero_runs):
  """Mean over tasks of log(validation loss / the zero head's); inf where
  a run diverged or its loss is not finite."""
  terms = []
  for task, run in runs.items():
    loss, ref = run["validation_loss"], zero_runs[task]["validation_loss"]
    if run["diverged"] or loss is None or not math.isfinite(loss):
      return math.inf
    terms.append(math.log(loss / ref))
  return float(np.mean(terms))


def choose(scores):
  """The label with the lowest score; the zero head on a tie with it."""
  best = min(scores.values())
  if scores.get(ZERO) == best:
    return ZERO
  return min(scores, key=scores.get)


def choose_by_run(train_dirs, found, scores):
  """{run folder: its choice}: among each run's own heads, the zero head and
  (where it is a candidate) the card, for the test of each meta-training
  seed apart."""
  return {folder: choose({label: scores[label] for label, path in found
                          if path in (None, CARD) or
                          os.path.dirname(path) == folder})
          for folder in train_dirs}


def select(train_dirs, out, optimizer="l2o-scale", tasks=VALIDATION_TASKS,
           budget=BUDGET, data_dir=None, tiny=False, log=print,
           with_card=False):
  """Runs every candidate on every validation task (resuming from
  ``out``), writes and returns the choice: ``{"chosen": label, "scores":
  {label: score}, "runs": {label: {task: numbers}}, "chosen_by_run":
  {folder: label}, ...}``: the choice among all candidates, and each run's
  among its own heads, the zero head and (``with_card``) the card."""
  overlap = sorted(set(tasks) & set(TEST_TASKS))
  if overlap:
    raise ValueError("--tasks: {} are test tasks, looked at once after the "
                     "choice; choose on others".format(", ".join(overlap)))
  found = candidates(train_dirs)
  if with_card and card_settings(optimizer):
    found.insert(1, (CARD, CARD))
  stored = {}
  if os.path.exists(out):
    with open(out, encoding="utf-8") as f:
      stored = json.load(f).get("stored", {})
  results = dict(optimizer=optimizer, tasks=list(tasks), budget=budget,
                 seed=SEED, tiny=tiny, stored=stored)
  runs = {}
  for label, path in found:
    runs[label] = {}
    digest = _digest(path, optimizer)
    for task in tasks:
      key = json.dumps([digest, optimizer, task, budget, SEED, tiny])
      if key not in stored:
        stored[key] = validation_run(task, path, optimizer, budget, data_dir,
                                     tiny)
        with atomic_file.replace(out) as f:
          json.dump(results, f, indent=1)
        log("{} on {}: validation loss {:.4g}".format(
            label, task, stored[key]["validation_loss"] or float("nan")))
      runs[label][task] = stored[key]
  scores = {label: score(r, runs[ZERO]) for label, r in runs.items()}
  results.update(runs=runs, scores=scores, chosen=choose(scores),
                 chosen_by_run=choose_by_run(train_dirs, found, scores))
  with atomic_file.replace(out) as f:
    json.dump(results, f, indent=1)
  from l2o_scale.meta_training import reporting  # pylint: disable=g-import-not-at-top
  log("chosen: {} (score {:+.4f}; the zero head scores 0); peak memory "
      "{:.2f} GiB".format(results["chosen"], scores[results["chosen"]],
                          reporting.peak_memory_gib()))
  if len(train_dirs) > 1:
    for folder, label in results["chosen_by_run"].items():
      log("  of {}: {} (score {:+.4f})".format(folder, label, scores[label]))
  return results


def main(argv=None):
  p = entry_point.ArgumentParser(
      prog=PROG, description="Chooses a schedule head among the heads "
      "kept by meta-training runs and the zero head, on the validation "
      "splits of named validation tasks (docs/schedule-head.md).")
  p.add_argument("train_dirs", nargs="+", help="folders of python -m "
                 "l2o_scale.head_training runs")
  p.add_argument("--out", required=True, help="JSON file of the selection "
                 "(resumed when it exists)")
  p.add_argument("--optimizer", default="l2o-scale", help="the frozen "
                 "learned optimizer the heads were trained over")
  datasets.add_data_dir_argument(p)
  p.add_argument("--with_card", action="store_true", help="also a "
                 "candidate: the shipped optimizer with its card's long-run "
                 "settings and no head, so that a head is chosen only where "
                 "it beats them on validation")
  args = p.parse_args(argv)
  select(args.train_dirs, args.out, args.optimizer, data_dir=args.data_dir,
         with_card=args.with_card)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
