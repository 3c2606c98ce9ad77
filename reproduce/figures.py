"""Figures of the reproduction beyond the loss curves: held-out accuracy over
the run, final accuracy and flatness per optimizer, and meta-training
progress; plus the helpers every figure shares (saving, panel grid, the
sentence that says how many runs a line averages).

Looks and names come from styles.py, so an optimizer is drawn alike in
every figure. Points that would hide each other are told apart by marker
shape (and, where points are sparse, a small sideways shift that the
caption states).
"""

import math
import os
import textwrap

from matplotlib import ticker
import numpy as np

from reproduce import medium
from reproduce import styles


def pyplot():
  # pyplot's backend is chosen before pyplot loads: here, first thing.
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def save_figure(fig, plt, out_prefix, exts=("png", "pdf")):
  """Writes ``out_prefix``.png and .pdf (or the ``exts`` given), closes
  ``fig``; returns the paths."""
  os.makedirs(os.path.dirname(os.path.abspath(out_prefix)), exist_ok=True)
  paths = []
  for ext in exts:
    path = "{}.{}".format(out_prefix, ext)
    fig.savefig(path, dpi=110 if ext == "png" else None)
    paths.append(path)
  plt.close(fig)
  return paths


def grid(plt, n, width=6.0, height=4.0, ncols=2):
  """``n`` panels in rows of ``ncols``; unused panels switched off."""
  ncols = min(ncols, n)
  nrows = int(math.ceil(n / ncols))
  fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols,
                                                  height * nrows),
                           squeeze=False, layout="constrained")
  for ax in list(axes.flat)[n:]:
    ax.axis("off")
  return fig, axes


def suptitle(fig, title, subtitle, panels_across):
  """The run's title and what the figure shows, wrapped to the figure's
  width."""
  width = 75 * panels_across
  text = textwrap.fill(subtitle, width)
  if title:
    text = textwrap.fill(title, width) + "\n" + text
  fig.suptitle(text, fontsize=10)


def legend(fig, handles, columns):
  """One legend under the panels, entries in styles.ordered order."""
  names = styles.ordered(handles)
  fig.legend([handles[n] for n in names], [styles.label(n) for n in names],
             loc="outside lower center", ncol=min(columns, len(names)),
             frameon=False, fontsize=9)


def format_log_axis(ax, lo, hi):
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


def run_counts(keys):
  """``(training seeds, test seeds)`` of one line from its run keys:
  ``(training seed, test seed)`` pairs, or bare test seeds."""
  keys = list(keys)
  if keys and isinstance(keys[0], tuple):
    by_train = {}
    for t, s in keys:
      by_train.setdefault(t, set()).add(s)
    return len(by_train), min(len(s) for s in by_train.values())
  return 1, len(set(keys))


def _count_text(counts):
  counts = sorted(set(counts))
  if len(counts) > 1:
    runs = sorted(t * s for t, s in counts)
    return "{}–{} runs".format(runs[0], runs[-1])
  t, s = counts[0]
  seeds = "{} test seed{}".format(s, "" if s == 1 else "s")
  return seeds if t == 1 else "{} training × {}".format(t, seeds)


def runs_text(counts_by_name):
  """What a line averages, e.g. ``learned: 3 training × 3 test seeds;
  baselines: 3 test seeds`` (``counts_by_name``: {name: (training seeds,
  test seeds)})."""
  learned = [c for n, c in counts_by_name.items() if not styles.is_baseline(n)]
  base = [c for n, c in counts_by_name.items() if styles.is_baseline(n)]
  if learned and base and sorted(set(learned)) == sorted(set(base)):
    return "each line: " + _count_text(learned)
  parts = []
  if learned:
    parts.append("learned: " + _count_text(learned))
  if base:
    parts.append("baselines: " + _count_text(base))
  return "per line, " + "; ".join(parts)


def plot_heldout_accuracy(heldout, out_prefix, problem_label, title=None):
  """Held-out accuracy vs step, one panel per problem: mean over all runs
  of an optimizer (best tuned learning rate only) with a ± 1 std band, a
  marker at every evaluation. Returns the paths, or [] without data."""
  problems = [p for p in heldout if heldout[p]]
  if not problems:
    return []
  plt = pyplot()
  fig, axes = grid(plt, len(problems))
  handles = {}
  shifted = False
  for ax, problem in zip(axes.flat, problems):
    series, counts = _accuracy_series(medium.group_runs(heldout[problem]))
    # Evaluations are far apart: shift each optimizer's points sideways by
    # a fraction of the interval so that equal values do not hide each
    # other.
    spacing = min((float(np.median(np.diff(s))) for _, s, _ in series
                   if len(s) > 1), default=0.)
    width = 0.4 * spacing / max(1, len(series) - 1)
    for i, (v, steps, acc) in enumerate(series):
      dx = (i - (len(series) - 1) / 2.) * width
      shifted = shifted or dx != 0
      kw = styles.line_kwargs(v)
      mean, std = acc.mean(0), acc.std(0)
      (line,) = ax.plot(steps + dx, mean, lw=1.3, ms=5, **kw)
      ax.errorbar(steps + dx, mean, yerr=std, color=kw["color"],
                  linestyle="none", elinewidth=0.8, alpha=0.6)
      handles.setdefault(v, line)
    ax.set_title("{}\n({})".format(problem_label(problem), runs_text(counts)),
                 fontsize=10)
    ax.set_xlabel("optimizee training step")
    ax.set_ylabel("held-out test accuracy")
    ax.grid(True, alpha=0.3)
  legend(fig, handles, 2 * axes.shape[1])
  sub = ("held-out accuracy on the MNIST test split: mean over runs, error "
         "bars ± 1 std")
  if shifted:
    sub += ("; points of different optimizers shifted sideways by up to "
            "± 20% of the evaluation interval so that none hides another")
  suptitle(fig, title, sub, axes.shape[1])
  return save_figure(fig, plt, out_prefix)


def _accuracy_series(grouped):
  """``([(optimizer, steps, accuracy per run and evaluation)], {optimizer:
  run counts})`` of one problem's held-out records, in the figures'
  order; every run cut to the fewest evaluations."""
  series, counts = [], {}
  for v in styles.ordered(grouped):
    recs = [(t, s, r) for t, runs in grouped[v].items()
            for s, r in runs.items() if r.get("heldout_accuracy")]
    if not recs:
      continue
    n = min(len(r["heldout_accuracy"]) for _, _, r in recs)
    acc = np.asarray([r["heldout_accuracy"][:n] for _, _, r in recs],
                     np.float64)
    steps = np.asarray(recs[0][2].get("iteration", list(range(n)))[:n],
                       np.float64)
    series.append((v, steps, acc))
    counts[v] = run_counts([(t, s) for t, s, _ in recs])
  return series, counts

def _meta_training_panel(plt, ax, v, runs):
  """Variant ``v``'s panel, ``runs``: {training seed: events}. Returns
  whether it shows a rollback or a divergence (the subtitle explains
  them)."""
  cmap = plt.get_cmap("viridis")
  notes = False
  seeds = sorted(runs, key=lambda s: -1 if s is None else s)
  finite_max = 0.
  infs = []
  for j, s in enumerate(seeds):
    log = runs[s]
    color = cmap(j / max(1, len(seeds) - 1) * 0.85)
    lab = "training seed {}".format(s if s is not None else log["seed"])
    for pts, style, what in ((log["selections"], "-", "selection"),
                             ([(k, c) for k, _, c in log["evaluations"]],
                              ":", "evaluation")):
      if not pts:
        continue
      k = np.asarray([p[0] for p in pts], np.float64)
      y = np.asarray([p[1] for p in pts], np.float64)
      ok = np.isfinite(y) & (y > 0)
      # One marker shape per training seed: equal scores stay visible.
      ax.plot(k[ok], y[ok], style, marker="os^Dv"[j % 5], ms=3.5,
              color=color, lw=1.2, label="{}, {}".format(lab, what))
      if np.any(ok):
        finite_max = max(finite_max, float(np.max(y[ok])))
      infs += [(kk, color) for kk in k[~np.isfinite(y)]]
    for r in log["rollbacks"]:
      ax.axvline(r, color=color, ls=":", lw=0.8, alpha=0.7)
      notes = True
  ax.set_yscale("log")
  lo, hi = ax.get_ylim()
  if 0 < lo < hi:
    format_log_axis(ax, lo, hi)
  if infs and finite_max > 0:
    top = finite_max * 2
    for kk, color in infs:
      ax.plot([kk], [top], "x", color=color, ms=7, clip_on=False)
    ax.set_ylim(top=top * 1.2)
    notes = True
  ax.set_title("{}\n({} training seed{})".format(
      styles.label(v), len(seeds), "" if len(seeds) == 1 else "s"),
               fontsize=10)
  ax.xaxis.set_major_locator(plt.MaxNLocator(6, integer=True))
  ax.set_xlabel("meta-iteration")
  ax.set_ylabel("score (lower is better)")
  ax.grid(True, which="major", alpha=0.3)
  ax.legend(fontsize=6.5, frameon=False)
  return notes


def plot_meta_training(logs, out_prefix, title=None):
  """One panel per variant: robust selection score (or evaluation cost)
  against the meta-iteration it was taken at, one colour per training
  seed, log y; rollbacks as vertical dotted lines; diverged (inf) scores as
  x at the top edge."""
  variants = [v for v in styles.ordered(logs)
              if any(l["evaluations"] or l["selections"]
                     for l in logs[v].values())]
  if not variants:
    return []
  plt = pyplot()
  fig, axes = grid(plt, len(variants), 5.0, 3.4, ncols=3)
  notes = False
  for ax, v in zip(axes.flat, variants):
    notes = _meta_training_panel(plt, ax, v, logs[v]) or notes
  kinds = []
  if any(l["selections"] for v in variants for l in logs[v].values()):
    kinds.append("solid: robust selection score (mean final objective of "
                 "meta-test runs)")
  kinds.append("dotted: evaluation cost (the original's selection value)")
  sub = "; ".join(kinds)
  if notes:
    sub += "; x at top: diverged (inf); vertical dotted: rolled back"
  suptitle(fig, title, sub, axes.shape[1])
  return save_figure(fig, plt, out_prefix)


FLATNESS_MISSING = ("not measured for this problem\n(metatest.py ran without "
                    "--flatness_probes;\nreproduce/all.sh measures "
                    "flatness\non the MLPs only)")


def _flatness_row(row, st, metrics, problem_label):
  """One problem's panels (one per metric): a point per optimizer shown
  (tuned baselines: the best learning rate only)."""
  best = set(medium.best_tuned({v: st[v]["loss"]["values"]
                                for v in st}).values())
  shown = [v for v in styles.ordered(st)
           if not styles.tuned_lr(v) or v in best]
  for ax, (metric, name, log) in zip(row, metrics):
    for x, v in enumerate(shown):
      s = st[v][metric]
      if not (s["n_train"] and math.isfinite(s["mean"])):
        continue
      kw = styles.line_kwargs(v)
      over_training_seeds = s["n_train"] >= 2
      # Points, not bars: the axes zoom in on the differences.
      ax.errorbar(x, s["mean"], yerr=s["std"], color=kw["color"],
                  capsize=4, marker=kw["marker"], ms=7, mew=1.5,
                  mec=kw["color"], linestyle="none",
                  mfc=kw["color"] if over_training_seeds else "white")
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([styles.label(v) for v in shown], rotation=45,
                       ha="right", rotation_mode="anchor", fontsize=7.5)
    if not ax.has_data():
      ax.set_yticks([])
      ax.text(0.5, 0.5, FLATNESS_MISSING if metric != "accuracy" else
              "no held-out accuracy recorded", transform=ax.transAxes,
              ha="center", va="center", fontsize=9, color="0.35")
    elif log:
      ax.set_yscale("log")
      lo, hi = ax.get_ylim()
      if 0 < lo < hi:
        format_log_axis(ax, lo, hi)
    ax.set_title("{}: {}".format(problem_label, name), fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def plot_accuracy_flatness(stats, out_prefix, problem_label, title=None):
  """Per problem a row: final held-out accuracy, Hessian trace, top
  eigenvalue per optimizer (mean, error bar = the pooled std); without any
  flatness value in the run, accuracy only. Filled markers: std over
  training seeds; open markers: one training run, std over test seeds."""
  problems = [p for p in stats if any(
      stats[p][v]["accuracy"]["n_train"] for v in stats[p])]
  if not problems:
    return []
  metrics = [("accuracy", "final held-out accuracy", False)]
  flatness = any(stats[p][v][m]["n_train"] for p in problems
                 for v in stats[p] for m in ("trace", "top_eig"))
  if flatness:
    metrics += [("trace", "Hessian trace (Hutchinson)", True),
                ("top_eig", "top Hessian eigenvalue", True)]
  plt = pyplot()
  if flatness:  # a row per problem
    fig, axes = plt.subplots(len(problems), len(metrics), squeeze=False,
                             figsize=(5.5 * len(metrics),
                                      4.8 * len(problems)),
                             layout="constrained")
    rows = list(axes)
  else:  # accuracy only: a panel per problem
    fig, axes = grid(plt, len(problems), 6.0, 4.8)
    rows = [[ax] for ax in axes.flat]
  for row, problem in zip(rows, problems):
    _flatness_row(row, stats[problem], metrics,
                  problem_label(problem))
  sub = ("mean ± 1 std; filled markers: std over training seeds of the "
         "per-training-seed mean; open markers: one training run (the "
         "baselines, and learned optimizers tested with one training seed), "
         "std over test seeds")
  if not flatness:
    sub += "; flatness (Hessian trace, top eigenvalue) not measured in this run"
  suptitle(fig, title, sub, axes.shape[1] * 0.8)
  return save_figure(fig, plt, out_prefix)
