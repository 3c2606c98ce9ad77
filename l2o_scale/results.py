"""Meta-test results side by side: ``python -m l2o_scale.results DIR...``.

Reads the files ``metatest.py`` writes into a ``--save_dir``
(``seed<S>_eval_loss_record.pickle-<model_name>``: the per-step training
loss, a pickled list; ``seed<S>_heldout_record-<model_name>.json``: held-out
loss and accuracy, with ``--heldout_every``; a ``-problem<K>`` suffix when
one run tested several problems) and prints one row per directory, model
name and problem: the number of seeds, the final training loss (mean of the
last ``--last`` recorded steps of each seed) and the last held-out accuracy
and loss, each as mean ± standard deviation over seeds. ``--figure out.png``
also draws the training loss (mean over seeds, min-max band, log scale) and,
where recorded, the held-out accuracy against iterations.

Only numpy (and matplotlib for ``--figure``): no TensorFlow import.
"""

import argparse
import collections
import json
import math
import os
import pickle
import re
import sys

import numpy as np

LOSS_FILE = re.compile(
    r"^seed(-?\d+)_eval_loss_record\.pickle-(.+?)(?:-problem(\d+))?$")
HELDOUT_FILE = re.compile(
    r"^seed(-?\d+)_heldout_record-(.+?)(?:-problem(\d+))?\.json$")

Run = collections.namedtuple("Run", ["directory", "model", "problem"])
Row = collections.namedtuple(
    "Row", ["run", "seeds", "steps", "final_loss", "heldout_accuracy",
            "heldout_loss"])


def read_dir(directory):
  """{Run: {seed: {"loss": array, "heldout": dict or None}}} of one dir."""
  runs = collections.defaultdict(dict)
  names = sorted(os.listdir(directory))
  for name in names:
    match = LOSS_FILE.match(name)
    if not match:
      continue
    seed, model, problem = match.groups()
    with open(os.path.join(directory, name), "rb") as f:
      loss = np.asarray(pickle.load(f), np.float64).reshape(-1)
    run = Run(directory, model, int(problem) if problem else None)
    runs[run][int(seed)] = {"loss": loss, "heldout": None}
  for name in names:
    match = HELDOUT_FILE.match(name)
    if not match:
      continue
    seed, model, problem = match.groups()
    run = Run(directory, model, int(problem) if problem else None)
    with open(os.path.join(directory, name)) as f:
      record = json.load(f)
    runs[run].setdefault(int(seed), {"loss": None})["heldout"] = record
  return dict(runs)


def _spread(values):
  """(mean, sample std or None for one value) of ``values``;
  (nan, None) when there are none."""
  values = np.asarray([v for v in values if v is not None], np.float64)
  if values.size == 0:
    return (math.nan, None)
  std = float(np.std(values, ddof=1)) if values.size > 1 else None
  return (float(np.mean(values)), std)


def summarize(runs, last=10):
  """One :class:`Row` per run, in the order directories and names sort."""
  rows = []
  for run in sorted(runs, key=lambda r: (r.directory, r.model,
                                         -1 if r.problem is None
                                         else r.problem)):
    seeds = runs[run]
    finals, accuracies, heldout_losses, steps = [], [], [], set()
    for seed in sorted(seeds):
      loss = seeds[seed].get("loss")
      if loss is not None and loss.size:
        finals.append(float(np.mean(loss[-last:])))
        steps.add(int(loss.size))
      heldout = seeds[seed].get("heldout")
      if heldout and heldout.get("heldout_accuracy"):
        accuracies.append(float(heldout["heldout_accuracy"][-1]))
        heldout_losses.append(float(heldout["heldout_loss"][-1]))
    rows.append(Row(run, sorted(seeds), sorted(steps), _spread(finals),
                    _spread(accuracies), _spread(heldout_losses)))
  return rows


def _cell(spread, digits):
  mean, std = spread
  if math.isnan(mean):
    return "-"
  text = ("{:.{d}g}".format(mean, d=digits) if digits
          else "{:.4f}".format(mean))
  if std is not None:
    text += " ± " + ("{:.2g}".format(std) if digits
                     else "{:.4f}".format(std))
  return text


def table(rows, last=10):
  """The rows as a Markdown table (a header line explains the columns)."""
  show_dir = len({row.run.directory for row in rows}) > 1
  show_problem = any(row.run.problem is not None for row in rows)
  header = ((["directory"] if show_dir else []) + ["model"] +
            (["problem"] if show_problem else []) +
            ["seeds", "steps", "final training loss", "held-out accuracy",
             "held-out loss"])
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for row in rows:
    cells = ([row.run.directory] if show_dir else []) + [row.run.model]
    if show_problem:
      cells.append("-" if row.run.problem is None
                   else str(row.run.problem))
    cells += [str(len(row.seeds)),
              "/".join(str(s) for s in row.steps) or "-",
              _cell(row.final_loss, 4), _cell(row.heldout_accuracy, 0),
              _cell(row.heldout_loss, 4)]
    lines.append("| " + " | ".join(cells) + " |")
  note = ("mean ± std over seeds; final training loss: mean of the last {} "
          "steps of each seed; held-out: the last record.".format(last))
  return "\n".join(lines + ["", note])


def figure(runs, path):
  """Training loss (and held-out accuracy where recorded) per run."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  has_heldout = any(s.get("heldout") for seeds in runs.values()
                    for s in seeds.values())
  fig, axes = plt.subplots(1, 2 if has_heldout else 1,
                           figsize=(11 if has_heldout else 6, 4),
                           squeeze=False)
  show_dir = len({run.directory for run in runs}) > 1
  for run in sorted(runs):
    label = run.model + ("" if run.problem is None else
                         " problem {}".format(run.problem))
    if show_dir:
      label = "{} ({})".format(label, run.directory)
    losses = [s["loss"] for s in runs[run].values()
              if s.get("loss") is not None]
    if losses:
      n = min(loss.size for loss in losses)
      stacked = np.stack([loss[:n] for loss in losses])
      line, = axes[0, 0].plot(np.arange(n), stacked.mean(0), label=label)
      axes[0, 0].fill_between(np.arange(n), stacked.min(0),
                              stacked.max(0), color=line.get_color(),
                              alpha=0.2)
    records = [s["heldout"] for s in runs[run].values()
               if s.get("heldout")]
    if has_heldout and records:
      n = min(len(r["heldout_accuracy"]) for r in records)
      acc = np.array([r["heldout_accuracy"][:n] for r in records])
      axes[0, 1].plot(records[0]["iteration"][:n], acc.mean(0),
                      marker="o", label=label)
  axes[0, 0].set(xlabel="step", ylabel="training loss", yscale="log",
                 title="training loss (mean, min-max over seeds)")
  axes[0, 0].legend(fontsize=8)
  if has_heldout:
    axes[0, 1].set(xlabel="step", ylabel="held-out accuracy",
                   title="held-out accuracy (mean over seeds)")
    axes[0, 1].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(
      prog="python -m l2o_scale.results",
      description="Shows the meta-test results of metatest.py save dirs "
      "side by side: per model name, the final training loss "
      "and held-out accuracy, mean ± std over seeds.")
  parser.add_argument("dirs", nargs="+", metavar="DIR",
                      help="a metatest.py --save_dir")
  parser.add_argument("--last", type=int, default=10,
                      help="steps averaged for the final training loss "
                      "(default 10)")
  parser.add_argument("--figure", metavar="PATH",
                      help="also draw the curves into this image file")
  args = parser.parse_args(argv)
  if args.last < 1:
    parser.error("--last must be >= 1 (got {})".format(args.last))
  runs = {}
  for directory in args.dirs:
    if not os.path.isdir(directory):
      parser.error("{} is not a directory".format(directory))
    found = read_dir(directory)
    if not found:
      parser.error("no seed<S>_eval_loss_record.pickle-<name> files in "
                   "{}".format(directory))
    runs.update(found)
  print(table(summarize(runs, args.last), args.last))
  if args.figure:
    figure(runs, args.figure)
    print("figure: {}".format(args.figure))
  return 0


if __name__ == "__main__":
  sys.exit(main())
