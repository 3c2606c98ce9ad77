"""One table from several ``python -m l2o_scale.tools.horizon_check`` reports.

Why: the long-horizon comparison in docs/reproduction.md puts optimizers
checked separately (each its own ``--out``) side by side: per optimizer,
problem and horizon, the mean over test seeds of the final train loss (the
last 100 minibatches, as the rules read it), of the loss on the whole train
split at that step and of the held-out accuracy, Adam's on the same runs,
and how many seeds hold every rule. Several folders under one label
(``LABEL=FOLDER1,FOLDER2,...``: one per training seed) pool their runs, so
the mean ± std and the count span training and test seeds.

  python -m reproduce.horizon_results --out=reproduce/results/horizon/results.md \\
      "l2o-scale (long recipe)=/tmp/hc/l2o-scale" \\
      "three training seeds=/tmp/hc/t1,/tmp/hc/t2,/tmp/hc/t3" ...

``--verdict VARIANT=FOLDER1,FOLDER2,...`` (one folder per training seed;
``l2o-scale`` and regularized variants such as ``l2o-entropy-reg``) writes
the regularizer verdicts at ``--verdict_horizon`` to ``--verdict_out``: the
medium run's rule (reproduce/medium.py ``compare``) on the per-training-seed
means over test seeds of held-out accuracy.
"""

import json
import os

import numpy as np

from l2o_scale.runs import entry_point
from reproduce import medium

PROG = "python -m reproduce.horizon_results"

# Mean ± std over test seeds: losses span decades, accuracies do not.
FORMATS = {"final": "{:.3g} ± {:.2g}", "split_loss": "{:.3g} ± {:.2g}",
           "accuracy": "{:.4f} ± {:.4f}"}


def rows_of(folders):
  """The rows of one report folder, or pooled from a list of them."""
  if isinstance(folders, str):
    folders = [folders]
  rows = []
  for folder in folders:
    with open(os.path.join(folder, "horizon_check.json")) as f:
      rows.extend(json.load(f))
  return rows


def summary(label, rows):
  """Lines of the table for one optimizer's report."""
  groups = {}
  for r in rows:
    groups.setdefault((r["problem"], r["horizon"]), []).append(r)
  lines = []
  for (problem, horizon), group in groups.items():
    def mean_std(who, key):
      values = np.array([g[who][key] for g in group])
      return FORMATS[key].format(values.mean(), values.std())
    held = sum(not g["failures"] for g in group)
    lines.append("| {} | {} | {:,} | {} | {} | {} | {} | {} | {} | {} of {} "
                 "|".format(label, problem, horizon,
                            mean_std("learned", "final"),
                            mean_std("adam", "final"),
                            mean_std("learned", "split_loss"),
                            mean_std("adam", "split_loss"),
                            mean_std("learned", "accuracy"),
                            mean_std("adam", "accuracy"), held, len(group)))
  return lines


def verdicts(variants, horizon):
  """The held-out accuracy of regularized variants against ``l2o-scale``
  at ``horizon``, from ``[(variant, [folder per training seed])]``
  (``medium.verdict_table`` over per-training-seed means)."""
  stats = {}
  for variant, folders in variants:
    for seed, folder in enumerate(folders, 1):
      for r in rows_of(folder):
        if r["horizon"] != horizon:
          continue
        per = stats.setdefault(r["problem"], {}).setdefault(
            variant, {"accuracy": {}})
        per["accuracy"].setdefault(seed, []).append(r["learned"]["accuracy"])
  stats = {p: {v: {m: medium.pooled_stats(d) for m, d in per.items()}
               for v, per in by_variant.items()}
           for p, by_variant in stats.items()}
  return medium.verdict_table(stats, lambda p: p, "accuracy")


def table(reports):
  lines = ["| optimizer | problem | steps | final train loss (last 100 "
           "minibatches) | Adam 1e-3 | whole train split loss | Adam 1e-3 | "
           "held-out accuracy | Adam 1e-3 | seeds holding every rule |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for label, folder in reports:
    lines.extend(summary(label, rows_of(folder)))
  return "\n".join(lines)


def main(argv=None):
  parser = entry_point.ArgumentParser(prog=PROG,
                                      description=__doc__.split("\n")[0])
  parser.add_argument("reports", nargs="+", help="LABEL=FOLDER: a "
                      "horizon_check --out folder and its row label "
                      "(LABEL=FOLDER1,FOLDER2,...: their runs pooled)")
  parser.add_argument("--out", required=True, help="Markdown file to write")
  parser.add_argument("--preamble", default="", help="text above the table")
  parser.add_argument("--verdict", action="append", default=[],
                      help="VARIANT=FOLDER1,FOLDER2,...: one folder per "
                      "training seed, for the regularizer verdicts")
  parser.add_argument("--verdict_horizon", type=int, default=10000)
  parser.add_argument("--verdict_out", help="Markdown file for the verdicts")
  args = parser.parse_args(argv)
  if bool(args.verdict) != bool(args.verdict_out):
    parser.error("--verdict and --verdict_out go together")
  reports = []
  for item in args.reports:
    label, sep, folders = item.rpartition("=")
    folders = folders.split(",")
    if not sep or not all(os.path.exists(os.path.join(
        folder, "horizon_check.json")) for folder in folders):
      parser.error("{!r} is not LABEL=FOLDER[,FOLDER...] with a "
                   "horizon_check.json in each FOLDER".format(item))
    reports.append((label, folders))
  text = table(reports)
  if args.preamble:
    text = args.preamble.strip() + "\n\n" + text
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    f.write(text + "\n")
  print(text)
  if args.verdict:
    variants = []
    for item in args.verdict:
      variant, sep, folders = item.partition("=")
      if not sep:
        parser.error("{!r} is not VARIANT=FOLDER[,FOLDER...]".format(item))
      variants.append((variant, folders.split(",")))
    text = verdicts(variants, args.verdict_horizon)
    with open(args.verdict_out, "w") as f:
      f.write(text)
    print(text)


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
