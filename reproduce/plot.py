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
accuracy, ``hessian_trace``, ``hessian_top_eigenvalue`` of the JSONs;
figures.py) and, with ``--train_dir`` (one metarun train dir per learned
optimizer, with its events file),
``meta_training``. results.md has the sections "The run" (with
``--run_dir``: settings, machine, wall time), "Meta-training" (one row per
training run), "Regularizer verdicts", "All results" and "Per problem"
(flatness, the regularizer effect against ``l2o-scale``, the learning-rate
sweep). Names, colours and markers: styles.py.

The aggregation functions are plain numpy so they can be unit-tested on
synthetic pickles (tests/test_reproduce_plot.py).
"""

import glob
import json
import math
import os
import pickle
import re

from matplotlib import ticker
import numpy as np

from l2o_scale.runs import entry_point
from reproduce import figures
from reproduce import medium
from reproduce import run_log
from reproduce import styles
from reproduce.pipeline import problem_list as pipeline_problems

PROG = "python -m reproduce.plot"
PROBLEM_LABELS = pipeline_problems.labels()
# Markers on the loss curves: about this many per line, each line's
# shifted so that lines lying on top of each other still show theirs.
MARKERS_PER_LINE = 8

LOSS_PATTERN = re.compile(r"^seed(-?\d+)_eval_loss_record\.pickle-(.+)$")
HELDOUT_PATTERN = re.compile(r"^seed(-?\d+)_heldout_record-(.+)\.json$")

# The final loss of one seed is the mean of its last FINAL_WINDOW minibatch
# losses: a single minibatch loss is too noisy to compare optimizers.
FINAL_WINDOW = 10


def _ordered_problems(names):
  known = [n for n in PROBLEM_LABELS if n in names]
  return known + sorted(n for n in names if n not in PROBLEM_LABELS)


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
      "(mean ± std) | whole train split loss (mean ± std) | held-out test "
      "accuracy (mean ± std) |",
      "|---|---|---|---|---|---|---|",
  ]
  for problem in _ordered_problems(losses):
    for opt in styles.ordered(losses[problem]):
      curves = losses[problem][opt]
      agg = aggregate_curves(curves)
      records = heldout.get(problem, {}).get(opt, {})
      lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
          problem_label(problem), styles.label(opt), agg["num_seeds"],
          len(agg["steps"]), format_mean_std(final_losses(curves, window)),
          format_mean_std(final_heldout(records, "train_loss")),
          format_mean_std(final_heldout(records), "{:.4f}", "{:.4f}")))
  lines.append("")
  lines.append(
      "Final train loss: mean of the last {} minibatch losses of each seed, "
      "then mean ± std over seeds. Whole train split loss: the loss over the "
      "whole training split after the last step (a learned optimizer's rare "
      "late excursions can dominate a few minibatches, not this). Held-out "
      "accuracy: on the MNIST test split after the last step (metatest "
      "`--heldout_every`).".format(window))
  return "\n".join(lines) + "\n"


def identical_groups(curves_by_optimizer, rtol=1e-4):
  """Groups of optimizers whose mean curves coincide (relative ``rtol``).

  Needed because identical curves hide each other in the figure: with few
  meta-iterations at the default meta learning rate the learned variants
  barely leave their common initialization. Returns lists of >= 2 names.
  """
  names = styles.ordered(curves_by_optimizer)
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


def _curve(ax, opt, curves, place, with_band, band, smooth_window,
           handles):
  """One optimizer's mean curve (and band) in a panel; ``place``: (its
  index, the panel's optimizers), which shifts its markers. Returns the
  band's (lowest, highest) value and the moving-average window."""
  agg = aggregate_curves(curves)
  n = len(agg["steps"])
  window = (max(1, n // 100) if smooth_window is None
            else max(1, int(smooth_window)))
  mean = smooth(agg["mean"], window)
  if band == "minmax":
    lo, hi = smooth(agg["min"], window), smooth(agg["max"], window)
  else:
    lo = smooth(agg["mean"] - agg["std"], window)
    hi = smooth(agg["mean"] + agg["std"], window)
  floor = max(np.min(mean[mean > 0]) if np.any(mean > 0) else 1e-8,
              1e-12) * 0.5
  lo = np.maximum(lo, floor)
  kw = styles.line_kwargs(opt)
  every = max(1, n // MARKERS_PER_LINE)
  offset = (place[0] * every) // max(1, place[1])
  (line,) = ax.plot(agg["steps"], mean, linewidth=1.5, ms=5,
                    markevery=(offset, every),
                    label=styles.label(opt), **kw)
  if with_band:  # one band per group of identical curves
    ax.fill_between(agg["steps"], lo, hi, color=kw["color"], alpha=0.12,
                    linewidth=0)
  handles.setdefault(opt, line)
  return float(np.min(lo)), float(np.max(hi)), window


def _curves_panel(ax, problem, by_opt, band, smooth_window, handles):
  """Problem ``problem``'s panel: ``by_opt[optimizer][seed]`` curves;
  fills ``handles`` (one line per optimizer, for the legend). Returns the
  largest moving-average window used."""
  used_window = 1
  opts = styles.ordered(by_opt)
  y_lo, y_hi = np.inf, 0.
  groups = identical_groups(by_opt)
  hidden = {o for g in groups for o in g[1:]}
  for i, opt in enumerate(opts):
    lo, hi, window = _curve(ax, opt, by_opt[opt], (i, len(opts)),
                            opt not in hidden, band, smooth_window, handles)
    used_window = max(used_window, window)
    y_lo, y_hi = min(y_lo, lo), max(y_hi, hi)
  for k, group in enumerate(groups):
    ax.text(0.02, 0.03 + 0.07 * k, "identical (rel. diff. < 1e-4): " +
            " = ".join(styles.short_label(o) for o in group),
            transform=ax.transAxes, fontsize=8, color="0.25",
            va="bottom", ha="left",
            bbox=dict(facecolor="white", alpha=0.8, edgecolor="none"))
  counts = {o: figures.run_counts(by_opt[o]) for o in opts}
  ax.set_title("{}\n({})".format(problem_label(problem),
                                 figures.runs_text(counts)), fontsize=10)
  ax.set_yscale("log")
  if 0 < y_lo < y_hi < np.inf:
    figures.format_log_axis(ax, y_lo, y_hi)
  ax.xaxis.set_major_locator(ticker.MaxNLocator(6, integer=True))
  ax.set_xlabel("optimizee training step")
  ax.set_ylabel("training loss (minibatch)")
  ax.grid(True, which="major", alpha=0.3)
  ax.grid(True, which="minor", alpha=0.1)
  ax.set_xlim(1, max(len(aggregate_curves(by_opt[o])["steps"])
                     for o in opts))
  return used_window


def plot_curves(losses, out_prefix, band="std", smooth_window=None,
                title=None):
  """Draws one panel per problem; writes ``out_prefix``.png and .pdf.

  ``band``: 'std' (mean ± std, clipped to positive values for the log axis)
  or 'minmax'. ``smooth_window``: moving-average window applied to mean and
  band (None: 1% of the run length, at least 1).
  Returns the written paths.
  """
  plt = figures.pyplot()
  problems = _ordered_problems(losses)
  if not problems:
    raise ValueError("no results to plot")
  ncols = min(2, len(problems))
  nrows = int(math.ceil(len(problems) / ncols))
  fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.4 * nrows),
                           squeeze=False, layout="constrained")
  handles = {}
  used_window = 1
  for ax, problem in zip(axes.flat, problems):
    used_window = max(used_window, _curves_panel(
        ax, problem, losses[problem], band, smooth_window, handles))
  for ax in list(axes.flat)[len(problems):]:
    ax.axis("off")
  figures.legend(fig, handles, 4 if ncols > 1 else 2)
  band_text = ("min-max over runs" if band == "minmax"
               else "± 1 std over runs")
  subtitle = ("line: mean over runs (a run: one training seed of a learned "
              "optimizer tested on one test seed), band: {}{}; markers are "
              "spread along each line so that overlapping lines stay "
              "visible".format(band_text, "" if used_window <= 1 else
                               ", moving average over {} steps".format(
                                   used_window)))
  figures.suptitle(fig, title, subtitle, ncols)
  return figures.save_figure(fig, plt, out_prefix)


def write_results(path, title, sections):
  """results.md: the title, then each (heading, Markdown) section that has
  text."""
  with open(path, "w") as f:
    if title:
      f.write("{}\n".format(title))
    for heading, text in sections:
      if text:
        f.write("\n## {}\n\n{}".format(heading, text.lstrip("\n")))


def write_manifest(out_dir, paths):
  """``outputs.json``: the names of the files written, results.md first
  (the pipeline's last line names them)."""
  # A stable sort: the figures keep the order they were drawn in.
  names = sorted((os.path.basename(p) for p in paths),
                 key=lambda n: n != "results.md")
  with open(os.path.join(out_dir, "outputs.json"), "w") as f:
    json.dump(names, f)
    f.write("\n")


def _parser():
  parser = entry_point.ArgumentParser(prog=PROG,
                                      description=__doc__.split("\n\n")[0])
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
  parser.add_argument("--train_dir", default=None,
                      help="folder with one metarun train dir per learned "
                      "optimizer (<name>/<subdir>/"
                      "meta_training_events.jsonl): "
                      "draws meta_training.png/.pdf and tabulates each "
                      "meta-training run")
  parser.add_argument("--run_dir", default=None,
                      help="all.sh output folder: results.md states its "
                      "settings, machine and wall time (config.txt, "
                      "invocations.tsv, timings.tsv)")
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
  raw_losses, raw_heldout = load_results(args.results_dir)
  if not raw_losses:
    raise ValueError("no seed*_eval_loss_record.pickle-* files under "
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
  stats = {p: stats[p] for p in _ordered_problems(stats)}
  best_heldout = {p: {n: r for n, r in raw_heldout[p].items()
                      if styles.split_name(n)[0] in losses.get(p, {})}
                  for p in _ordered_problems(raw_heldout)}
  paths += figures.plot_heldout_accuracy(best_heldout, out("heldout_accuracy"),
                                         problem_label, args.title)
  paths += figures.plot_accuracy_flatness(stats, out("accuracy_flatness"),
                                          problem_label, args.title)
  logs = (run_log.load_train_records(args.train_dir) if args.train_dir
          else {})
  if logs:
    paths += figures.plot_meta_training(logs, out("meta_training"),
                                        args.title)
  table_path = out("results.md")
  write_results(table_path, args.title,
                _sections(args.run_dir, logs, stats, losses, heldout))
  paths.append(table_path)
  for p in paths:
    print("wrote", p)
  write_manifest(args.out_dir, paths)
  return 0


def _sections(run_dir, logs, stats, losses, heldout):
  """results.md's sections: (heading, Markdown)."""
  timings = run_log.read_timings(
      os.path.join(run_dir, "timings.tsv") if run_dir else None)
  verdicts = medium.arm_verdicts(stats, problem_label)
  if verdicts:
    verdicts = ("Every learned optimizer at the end of meta-testing: "
                "held-out accuracy, final train loss and the flatness of "
                "the optimizee's solution (Hessian trace, top eigenvalue; "
                "— where not measured), each the mean over training seeds "
                "of the per-training-seed mean over test seeds; " +
                medium.INTERVAL_RULE + ". Δ: mean(variant) − "
                "mean(L2O-Scale, no reg.); " + medium.VERDICT_RULE +
                ". The per-problem differences of every metric are under "
                "\"Per problem\".\n\n" + verdicts)
  return [
      ("The run", run_log.run_section(run_dir) if run_dir else ""),
      ("Meta-training", run_log.training_table(logs, timings) if logs else ""),
      ("Regularizer verdicts", verdicts),
      ("All results", results_table(losses, heldout)),
      ("Per problem", medium.medium_tables(stats, problem_label)),
  ]


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
