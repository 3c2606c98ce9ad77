"""Loss curves and results table of the reproduction harness (reproduce/all.sh).

Why this file exists: the paper's claim (a flatness regularizer, curriculum
and imitation make L2O-Scale generalize better) is judged from two things,
the training-loss curves of every optimizer on the test problems and the
held-out accuracy they reach. This script turns the raw outputs of
``metatest.py`` into exactly those two artefacts, so that a reader can check
the claim from one command:

* one figure (PNG and PDF), one panel per test problem: the training loss of
  every optimizer against iterations, averaged over seeds, with a shaded band
  (standard deviation or min-max over seeds), log-scale loss axis;
* a Markdown table: final training loss (mean +- std over seeds) per optimizer
  and problem, and the held-out test accuracy where ``--heldout_every``
  recorded it.

Input layout (what all.sh writes; one folder per problem, the optimizer is the
``--model_name`` suffix of metatest's files)::

  <results_dir>/<problem>/seed<S>_eval_loss_record.pickle-<optimizer>
  <results_dir>/<problem>/seed<S>_heldout_record-<optimizer>.json   (optional)

Medium size (reproduce/medium.py has the details): ``<variant>.t<k>`` names
are runs of one learned variant meta-trained with training seed ``k`` and are
pooled per variant (mean ± std over training seeds of the per-training-seed
mean); ``<Opt>-lr<value>`` are tuned baselines, of which only the best per
optimizer and problem is drawn (all are listed in results.md's learning-rate
sweep). Further outputs: ``heldout_accuracy``, ``accuracy_flatness`` (held-out
accuracy, ``hessian_trace``, ``hessian_top_eigenvalue`` of the JSONs) and,
with ``--logs_dir`` (metarun logs ``train-<name>.log``), ``meta_training``;
results.md gains per-problem tables, the regularizer effect against
``l2o-scale`` and the learning-rate sweep.

The aggregation functions are plain numpy so they can be unit-tested on
synthetic pickles (tests/test_reproduce.py).
"""

import argparse
import glob
import json
import math
import os
import pickle
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import medium  # pylint: disable=g-import-not-at-top,wrong-import-position

# Display names and order of the optimizers and problems all.sh produces;
# unknown names are shown as they are, after the known ones.
OPTIMIZER_LABELS = {
    "l2o-scale": "L2O-Scale (no reg.)",
    "l2o-entropy-paper-cmd": "L2O-Scale + Hessian reg. (paper cmd: reg. off)",
    "l2o-entropy-reg": "L2O-Scale + Hessian reg. (active)",
    "l2o-entropy-reg-cl-mt": "L2O-Entropy (reg. + CL + MT)",
    "SGD": "SGD (lr 1e-3)",
    "Adam": "Adam (lr 1e-4)",
    "Adagrad": "Adagrad (lr 1e-5)",
}
SHORT_LABELS = {
    "l2o-scale": "L2O-Scale",
    "l2o-entropy-paper-cmd": "paper cmd",
    "l2o-entropy-reg": "reg. active",
    "l2o-entropy-reg-cl-mt": "reg.+CL+MT",
}
PROBLEM_LABELS = {
    "mnist-mlp-sigmoid": "MNIST MLP 784-20-10, sigmoid",
    "mnist-mlp-relu": "MNIST MLP 784-20-10, ReLU",
    "mnist-mlp-deeper": "MNIST MLP 784-20-20-10, sigmoid",
    "mnist-conv": "MNIST ConvNet",
}
# Learned optimizers solid, hand-designed ones dashed, fixed colours so the
# same optimizer looks the same in every panel and every run.
OPTIMIZER_STYLES = {
    "l2o-scale": ("tab:blue", "-"),
    "l2o-entropy-paper-cmd": ("tab:cyan", "-"),
    "l2o-entropy-reg": ("tab:orange", "-"),
    "l2o-entropy-reg-cl-mt": ("tab:red", "-"),
    "SGD": ("tab:gray", "--"),
    # Not green/orange/red: the medium size's regularized variants use those.
    "Adam": ("tab:purple", "--"),
    "Adagrad": ("tab:brown", "--"),
}
_EXTRA_COLORS = ["tab:pink", "tab:olive", "black", "tab:cyan"]

LOSS_PATTERN = re.compile(r"^seed(-?\d+)_eval_loss_record\.pickle-(.+)$")
HELDOUT_PATTERN = re.compile(r"^seed(-?\d+)_heldout_record-(.+)\.json$")

# The final loss of one seed is the mean of its last FINAL_WINDOW minibatch
# losses: a single minibatch loss is too noisy to compare optimizers.
FINAL_WINDOW = 10


def _ordered(names, reference):
  known = [n for n in reference if n in names]
  rest = [n for n in names if n not in reference]
  if reference is OPTIMIZER_LABELS:  # learned first, then baselines
    rest = medium.ordered_variants(rest)
    learned = [n for n in known + rest if not medium.is_baseline(n)]
    return learned + [n for n in known + rest if n not in learned]
  return known + sorted(rest)


def optimizer_label(name):
  if name in OPTIMIZER_LABELS:
    return OPTIMIZER_LABELS[name]
  return medium.variant_label(name)


def problem_label(name):
  return PROBLEM_LABELS.get(name, name)


def load_results(results_dir):
  """Reads metatest outputs.

  Returns ``(losses, heldout)``: ``losses[problem][optimizer][seed]`` is a
  1-D float array of per-step training losses; ``heldout`` has the same keys
  and the parsed held-out JSON record as value.
  """
  losses, heldout = {}, {}
  for problem_dir in sorted(glob.glob(os.path.join(results_dir, "*"))):
    if not os.path.isdir(problem_dir):
      continue
    problem = os.path.basename(problem_dir)
    for path in sorted(os.listdir(problem_dir)):
      full = os.path.join(problem_dir, path)
      m = LOSS_PATTERN.match(path)
      if m:
        with open(full, "rb") as f:
          values = np.asarray(pickle.load(f), dtype=np.float64).reshape(-1)
        losses.setdefault(problem, {}).setdefault(m.group(2), {})[
            int(m.group(1))] = values
        continue
      m = HELDOUT_PATTERN.match(path)
      if m:
        with open(full) as f:
          heldout.setdefault(problem, {}).setdefault(m.group(2), {})[
              int(m.group(1))] = json.load(f)
  return losses, heldout


def aggregate_curves(curves_by_seed):
  """Mean, std, min and max over seeds, step by step.

  Runs of different lengths (an interrupted seed) are cut to the shortest
  one so every statistic uses every seed. Returns a dict of 1-D arrays
  (``mean``, ``std``, ``min``, ``max``, ``steps``) and ``num_seeds``.
  """
  if not curves_by_seed:
    raise ValueError("no curves to aggregate")
  curves = [np.asarray(c, np.float64).reshape(-1)
            for _, c in sorted(curves_by_seed.items())]
  n = min(len(c) for c in curves)
  if n == 0:
    raise ValueError("empty loss curve")
  stacked = np.stack([c[:n] for c in curves])
  return {
      "steps": np.arange(1, n + 1),
      "mean": stacked.mean(axis=0),
      "std": stacked.std(axis=0),
      "min": stacked.min(axis=0),
      "max": stacked.max(axis=0),
      "num_seeds": len(curves),
  }


def final_losses(curves_by_seed, window=FINAL_WINDOW):
  """Per seed, the mean of the last ``window`` losses (seed order)."""
  out = []
  for _, c in sorted(curves_by_seed.items()):
    c = np.asarray(c, np.float64).reshape(-1)
    out.append(float(np.mean(c[-min(window, len(c)):])))
  return np.asarray(out)


def final_heldout(records_by_seed, key="heldout_accuracy"):
  """Per seed, the last recorded value of ``key`` (seed order)."""
  return np.asarray([float(r[key][-1]) for _, r in
                     sorted(records_by_seed.items()) if r.get(key)])


def smooth(values, window):
  """Trailing moving average (window 1 or less: unchanged).

  The first ``window - 1`` points average what is there so the curve starts
  at step 1 like the raw one.
  """
  values = np.asarray(values, np.float64)
  if window <= 1 or len(values) < 2:
    return values
  window = min(int(window), len(values))
  csum = np.cumsum(np.insert(values, 0, 0.))
  out = np.empty_like(values)
  out[window - 1:] = (csum[window:] - csum[:-window]) / window
  counts = np.arange(1, window)
  out[:window - 1] = csum[1:window] / counts
  return out


def format_mean_std(values, fmt="{:.4g}", std_fmt="{:.2g}"):
  """``mean ± std`` of a 1-D array (std over seeds, ddof=0); '—' if empty."""
  values = np.asarray(values, np.float64)
  if values.size == 0:
    return "—"
  mean, std = float(np.mean(values)), float(np.std(values))
  if not math.isfinite(mean):
    return "nan"
  return (fmt + " ± " + std_fmt).format(mean, std)


def results_table(losses, heldout, window=FINAL_WINDOW):
  """The Markdown results table (one row per problem and optimizer)."""
  lines = [
      "| problem | optimizer | seeds | steps | final train loss "
      "(mean ± std) | held-out test accuracy (mean ± std) |",
      "|---|---|---|---|---|---|",
  ]
  for problem in _ordered(losses, PROBLEM_LABELS):
    for opt in _ordered(losses[problem], OPTIMIZER_LABELS):
      curves = losses[problem][opt]
      agg = aggregate_curves(curves)
      acc = final_heldout(heldout.get(problem, {}).get(opt, {}))
      lines.append("| {} | {} | {} | {} | {} | {} |".format(
          problem_label(problem), optimizer_label(opt), agg["num_seeds"],
          len(agg["steps"]), format_mean_std(final_losses(curves, window)),
          format_mean_std(acc, "{:.4f}", "{:.4f}")))
  lines.append("")
  lines.append(
      "Final train loss: mean of the last {} minibatch losses of each seed, "
      "then mean ± std over seeds. Held-out accuracy: on the MNIST test split "
      "after the last step (metatest `--heldout_every`).".format(window))
  return "\n".join(lines) + "\n"


def identical_groups(curves_by_optimizer, rtol=1e-4):
  """Groups of optimizers whose mean curves coincide (relative ``rtol``).

  Needed because identical curves hide each other in the figure: with few
  meta-iterations at the default meta learning rate the learned variants
  barely leave their common initialization. Returns lists of >= 2 names.
  """
  names = _ordered(curves_by_optimizer, OPTIMIZER_LABELS)
  means = {n: aggregate_curves(curves_by_optimizer[n])["mean"] for n in names}
  groups, seen = [], set()
  for i, a in enumerate(names):
    if a in seen:
      continue
    group = [a]
    for b in names[i + 1:]:
      if b not in seen and len(means[a]) == len(means[b]) and np.allclose(
          means[a], means[b], rtol=rtol, atol=0):
        group.append(b)
    if len(group) > 1:
      groups.append(group)
      seen.update(group)
  return groups


def _style(opt, index):
  if opt in OPTIMIZER_STYLES:
    return OPTIMIZER_STYLES[opt]
  if opt in medium.VARIANT_COLORS or medium.is_baseline(opt):
    return medium.variant_style(opt)
  return _EXTRA_COLORS[index % len(_EXTRA_COLORS)], "-."


def _format_log_axis(ax, ticker, lo, hi):
  """Readable ticks on the log loss axis: plain numbers, and linear-spaced
  ticks when the curves span less than a decade (matplotlib would otherwise
  label only 10^0 and crowd the minor ticks with 2.31x10^0-style labels)."""
  if hi / lo < 10:
    # Enough decimals to tell ~6 linear-spaced ticks apart.
    digits = max(0, int(math.ceil(-math.log10((hi - lo) / 6.))))
    ax.yaxis.set_major_locator(ticker.MaxNLocator(6))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(
        lambda v, _: "{:.{d}f}".format(v, d=digits)))
    return

  class _Plain(ticker.LogFormatter):  # LogFormatter's choice of labels
    def _num_to_string(self, x, vmin, vmax):
      return "{:.3g}".format(x)

  ax.yaxis.set_major_formatter(_Plain(labelOnlyBase=False))
  ax.yaxis.set_minor_formatter(_Plain(labelOnlyBase=False,
                                      minor_thresholds=(2, 0.5)))


def plot_curves(losses, out_prefix, band="std", smooth_window=None,
                title=None):
  """Draws one panel per problem; writes ``out_prefix``.png and .pdf.

  ``band``: 'std' (mean ± std, clipped to positive values for the log axis)
  or 'minmax'. ``smooth_window``: moving-average window applied to mean and
  band (None: 1% of the run length, at least 1).
  Returns the written paths.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  import textwrap  # pylint: disable=g-import-not-at-top

  problems = _ordered(losses, PROBLEM_LABELS)
  if not problems:
    raise ValueError("no results to plot")
  ncols = min(2, len(problems))
  nrows = int(math.ceil(len(problems) / ncols))
  fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.2 * nrows),
                           squeeze=False, layout="constrained")
  handles = {}
  used_window = 1
  for ax, problem in zip(axes.flat, problems):
    opts = _ordered(losses[problem], OPTIMIZER_LABELS)
    y_lo, y_hi = np.inf, 0.
    groups = identical_groups(losses[problem])
    hidden = {o for g in groups for o in g[1:]}
    for i, opt in enumerate(opts):
      agg = aggregate_curves(losses[problem][opt])
      n = len(agg["steps"])
      window = (max(1, n // 100) if smooth_window is None
                else max(1, int(smooth_window)))
      used_window = max(used_window, window)
      mean = smooth(agg["mean"], window)
      if band == "minmax":
        lo, hi = smooth(agg["min"], window), smooth(agg["max"], window)
      else:
        lo = smooth(agg["mean"] - agg["std"], window)
        hi = smooth(agg["mean"] + agg["std"], window)
      floor = max(np.min(mean[mean > 0]) if np.any(mean > 0) else 1e-8,
                  1e-12) * 0.5
      lo = np.maximum(lo, floor)
      color, linestyle = _style(opt, i)
      (line,) = ax.plot(agg["steps"], mean, color=color, linestyle=linestyle,
                        linewidth=1.6, label=optimizer_label(opt))
      if opt not in hidden:  # one band per group of identical curves
        ax.fill_between(agg["steps"], lo, hi, color=color, alpha=0.15,
                        linewidth=0)
      handles.setdefault(opt, line)
      y_lo = min(y_lo, float(np.min(lo)))
      y_hi = max(y_hi, float(np.max(hi)))
    for k, group in enumerate(groups):
      ax.text(0.02, 0.03 + 0.07 * k, "identical (rel. diff. < 1e-4): " +
              " = ".join(SHORT_LABELS.get(o, optimizer_label(o))
                                    for o in group),
              transform=ax.transAxes, fontsize=8, color="0.25",
              va="bottom", ha="left",
              bbox=dict(facecolor="white", alpha=0.8, edgecolor="none"))
    seeds = sorted({len(losses[problem][o]) for o in opts})
    # Pooled variants (keys (training seed, test seed)): runs, not seeds.
    word = "run" if any(isinstance(k, tuple) for o in opts
                        for k in losses[problem][o]) else "seed"
    ax.set_title("{} ({} {}{})".format(
        problem_label(problem), "/".join(str(s) for s in seeds), word,
        "" if seeds == [1] else "s"), fontsize=11)
    ax.set_yscale("log")
    if 0 < y_lo < y_hi < np.inf:
      _format_log_axis(ax, ticker, y_lo, y_hi)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(6, integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss (minibatch)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    ax.set_xlim(1, max(len(aggregate_curves(losses[problem][o])["steps"])
                       for o in opts))
  for ax in list(axes.flat)[len(problems):]:
    ax.axis("off")
  order = _ordered(handles, OPTIMIZER_LABELS)
  band_text = ("min-max over runs" if band == "minmax"
               else "± 1 std over runs")
  legend_cols = min(len(order), 4 if ncols > 1 else 2)
  fig.legend([handles[o] for o in order], [optimizer_label(o) for o in order],
             loc="outside lower center", ncol=legend_cols, frameon=False,
             fontsize=9.5)
  subtitle = "line: mean over runs (test seeds × training seeds), band: {}{}".format(
      band_text, "" if used_window <= 1 else
      ", moving average over {} steps".format(used_window))
  width_chars = 60 * ncols
  head = textwrap.fill(title, width_chars) + "\n" if title else ""
  fig.suptitle(head + subtitle, fontsize=10.5)
  return medium.save_figure(fig, plt, out_prefix)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--results_dir", required=True,
                      help="folder with one sub-folder of metatest outputs "
                      "per problem")
  parser.add_argument("--out_dir", required=True,
                      help="where loss_curves.png/.pdf and results.md go")
  parser.add_argument("--band", choices=("std", "minmax"), default="std")
  parser.add_argument("--smooth", type=int, default=None,
                      help="moving-average window in steps (default: 1%% of "
                      "the run length; 1 = raw)")
  parser.add_argument("--title", default=None)
  parser.add_argument("--name", default="loss_curves",
                      help="file name of the figure, without extension")
  parser.add_argument("--logs_dir", default=None,
                      help="folder with metarun logs train-<name>.log: "
                      "draws meta_training.png/.pdf")
  args = parser.parse_args(argv)
  raw_losses, raw_heldout = load_results(args.results_dir)
  if not raw_losses:
    sys.exit("plot.py: error: no seed*_eval_loss_record.pickle-* files under "
             "{}/<problem>/".format(args.results_dir))
  os.makedirs(args.out_dir, exist_ok=True)
  out = lambda name: os.path.join(args.out_dir, name)
  # Curves and the first table: all runs of a variant (<variant>.t<k>)
  # pooled, of the tuned learning rates only the best per optimizer.
  finals = lambda problem, v: np.concatenate([final_losses(c) for c in
                                              medium.group_runs(raw_losses[
                                                  problem])[v].values()])
  losses = medium.pool_losses(raw_losses, finals=finals)
  heldout = medium.pool_losses(raw_heldout, keep_all_tuned=True)
  heldout = {p: {v: r for v, r in by.items() if v in losses.get(p, {})}
             for p, by in heldout.items()}
  paths = plot_curves(losses, out(args.name), band=args.band,
                      smooth_window=args.smooth, title=args.title)
  stats = medium.variant_stats(raw_losses, raw_heldout, final_losses)
  stats = {p: stats[p] for p in _ordered(stats, PROBLEM_LABELS)}
  best_heldout = {p: {n: r for n, r in raw_heldout[p].items()
                      if medium.split_name(n)[0] in losses.get(p, {})}
                  for p in _ordered(raw_heldout, PROBLEM_LABELS)}
  paths += medium.plot_heldout_accuracy(best_heldout, out("heldout_accuracy"),
                                        problem_label, args.title)
  paths += medium.plot_accuracy_flatness(stats, out("accuracy_flatness"),
                                         problem_label, args.title)
  if args.logs_dir:
    paths += medium.plot_meta_training(
        medium.load_train_logs(args.logs_dir), out("meta_training"),
        args.title)
  table = results_table(losses, heldout)
  table += "\n## Per problem\n" + medium.medium_tables(stats, problem_label)
  table_path = os.path.join(args.out_dir, "results.md")
  with open(table_path, "w") as f:
    if args.title:
      f.write("{}\n\n".format(args.title))
    f.write(table)
  paths.append(table_path)
  print(table)
  for p in paths:
    print("wrote", p)
  return 0


if __name__ == "__main__":
  sys.exit(main())
