"""The flatness study across model families: its best regularized arm and
``l2o-scale`` on the task-suite benchmark (docs/flatness-study.md, "Across
model families").

Why: the study's endpoints are two MNIST MLPs; whether what it finds holds
for other model families is the benchmark's question. The protocol fixes
what runs: the best arm (the highest mean over the two primary endpoints
among the regularized arms) and the control, each its training seed with
the best validation score, bare, 2,000 steps, 3 seeds, against the tuned
baselines of the shipped optimizers' benchmark (taken from its
results.json, ``--reuse_baselines``), so the two are compared with the same
baselines as every shipped optimizer.

  python -m reproduce.study_benchmark --data_dir=../shared/data/mnist

It runs once the study is finished (every arm with all its training
seeds); ``--dry_run`` prints the choice and the commands at any time.
Each benchmark resumes from its stored runs, so the command can be
interrupted and run again.
"""

import os
import subprocess
import sys

from l2o_scale.runs import entry_point
from problems import datasets
from reproduce import run_log
from reproduce import study_analysis

ROOT = study_analysis.ROOT
PROG = "python -m reproduce.study_benchmark"
# The shipped optimizers' small-data benchmark: the same task list, budget,
# seeds and measurement points; its tuned baselines are reused.
BASELINES = "reproduce/results/benchmark/l2o-scale/results.json"
TASKS = ("logreg_mnist", "mlp_sigmoid_mnist", "mlp_tanh_mnist",
         "mlp_relu_bn_mnist", "cnn_mnist", "gru_mnist_rows",
         "autoencoder_mnist", "regression_synthetic", "text_topics",
         "attention_topics")
BENCHMARK_FLAGS = ("--size=full", "--budgets=2000", "--seeds=3",
                   "--eval_points=25", "--grid_extension=2",
                   "--tasks=" + ",".join(TASKS))


def choose(values, train_records, arms):
  """``(best regularized arm, {arm: training seed})`` for the best arm and
  the control; ValueError naming what is missing."""
  regularized = [a for a in arms if a != study_analysis.CONTROL and
                 study_analysis.complete_seeds(values, a)]
  if not regularized:
    raise ValueError("no regularized arm has a finished training seed")
  best = max(regularized, key=lambda a: study_analysis.primary_mean(values, a))
  seeds = {}
  for arm in (best, study_analysis.CONTROL):
    chosen = study_analysis.best_validation(train_records, arm)
    if chosen is None:
      raise ValueError("no validation score recorded for {}".format(arm))
    seeds[arm] = chosen[1]
  return best, seeds


def checkpoint(study_dir, arm, seed):
  """The optimizer meta-testing used: the best evaluated checkpoint
  (``model.ckpt-0``) of the arm's run at ``seed``."""
  run = os.path.join(study_dir, "train", "{}.t{}".format(arm, seed))
  found = [os.path.join(run, d) for d in sorted(os.listdir(run))
           if os.path.exists(os.path.join(run, d, "model.ckpt-0.index"))]
  if not found:
    raise ValueError("no model.ckpt-0 under {}".format(run))
  return os.path.join(found[0], "model.ckpt-0")


def _shown(path):
  """``path`` relative to the repository (the commands run there), so the
  results name no folder of this machine."""
  rel = os.path.relpath(os.path.abspath(path), ROOT)
  return path if rel.startswith("..") else rel


def commands(study_dir, out_root, data_dir, best, seeds, python=None):
  """One benchmark command per chosen optimizer, ``{arm: argv}``."""
  out = {}
  for arm, seed in seeds.items():
    out[arm] = [python or sys.executable, "-m", "l2o_scale.benchmark",
                "--optimizer=checkpoint:" + _shown(checkpoint(
                    study_dir, arm, seed)),
                "--reuse_baselines=" + BASELINES,
                "--out=" + _shown(os.path.join(out_root, arm))] + list(
                    BENCHMARK_FLAGS) + (
                        ["--data_dir=" + data_dir] if data_dir else [])
  return out


def _parser():
  parser = entry_point.ArgumentParser(
      prog=PROG,
      description=__doc__.split("\n\n")[0])
  parser.add_argument("--study_dir", default=os.path.join(
      ROOT, study_analysis.sizes.STUDY_OUT), help="the study's output folder")
  parser.add_argument("--out", default=os.path.join(
      ROOT, "reproduce/results/study/benchmark"),
                      help="one benchmark folder per optimizer goes here")
  datasets.add_data_dir_argument(parser)
  parser.add_argument("--dry_run", action="store_true",
                      help="print the choice and the commands, run nothing "
                      "(allowed before the study is finished)")
  return parser


def main(argv=None):
  parser = _parser()
  args = parser.parse_args(argv)
  test_dir = os.path.join(args.study_dir, "test")
  if not os.path.isdir(test_dir):
    parser.error("no meta-tests under {}: run the study first".format(
        test_dir))
  values, runs = study_analysis.collect(test_dir)
  arms = study_analysis.arms_of(runs)
  unfinished = study_analysis.unfinished_arms(values, study_analysis.ARMS)
  if unfinished and not args.dry_run:
    parser.error("the study is unfinished ({} without all {} training "
                 "seeds): the protocol picks the best arm from the "
                 "finished study; --dry_run shows the current choice".format(
                     ", ".join(unfinished), study_analysis.SEEDS_PER_ARM))
  train_records = run_log.load_train_records(os.path.join(args.study_dir,
                                                         "train"))
  try:
    best, seeds = choose(values, train_records, arms)
    argvs = commands(args.study_dir, args.out,
                     datasets.resolve_data_dir(args.data_dir), best, seeds)
  except ValueError as e:
    parser.error(str(e))
  print("best arm: {} (mean over the primary endpoints {:.2f}); control "
        "{}{}".format(best, study_analysis.primary_mean(values, best),
                      study_analysis.CONTROL,
                      " (provisional: the study is unfinished)"
                      if unfinished else ""))
  for arm, argv in argvs.items():
    print("{} (training seed {}):\n  {}".format(arm, seeds[arm],
                                               " ".join(argv)))
    if not args.dry_run:
      subprocess.run(argv, check=True, cwd=ROOT)
  # The best arm's page holds its comparison with the control.
  out = _shown(args.out)
  compare = [sys.executable, "-m", "l2o_scale.benchmark.report",
             os.path.join(out, best, "results.json"), "--against",
             os.path.join(out, study_analysis.CONTROL, "results.json"),
             "--out", os.path.join(out, best)]
  print("comparison:\n  " + " ".join(compare))
  if not args.dry_run:
    subprocess.run(compare, check=True, cwd=ROOT)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
