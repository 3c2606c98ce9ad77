"""The flatness study's figures: per endpoint and per flatness measure,
each arm's training seeds beside the control's
(:mod:`reproduce.study_report` writes them with the page).
"""

import math

import numpy as np

from reproduce import figures
from reproduce import plot
from reproduce import seed_stats
from reproduce import styles
from reproduce import study_analysis as analysis


# -------------------------------------------------------------- figures
def _seed_panel(ax, by_arm, arms, log=False, margin=None):
  """One point per training seed (seeds side by side in increasing order,
  left of each arm's place), the mean and its interval right of them;
  ``log``: values are log10 and drawn on a log axis; ``margin``: the
  equivalence band around the control's mean (in the values' units)."""
  back = (lambda v: 10. ** np.asarray(v)) if log else np.asarray
  for i, arm in enumerate(arms):
    seeds = sorted(by_arm.get(arm, {}))
    if not seeds:
      continue
    kw = styles.line_kwargs(arm)
    v = [by_arm[arm][t] for t in seeds]
    dx = np.linspace(-0.35, -0.05, len(seeds)) if len(seeds) > 1 else [-0.2]
    ax.plot(i + np.asarray(dx), back(v), linestyle="none",
            marker=kw["marker"], ms=4, color=kw["color"], alpha=0.7,
            mfc="white", mec=kw["color"])
    mean, lo, hi = seed_stats.mean_interval(v, analysis.LEVEL)
    err = ([[back(mean) - back(lo)], [back(hi) - back(mean)]]
           if math.isfinite(lo) else None)
    ax.errorbar(i + 0.15, back(mean), yerr=err, color=kw["color"],
                marker=kw["marker"], ms=8, capsize=5, linestyle="none",
                mfc=kw["color"], mec=kw["color"])
    if arm == analysis.CONTROL:
      ax.axhline(back(mean), color=kw["color"], lw=0.8, ls="--")
      if margin is not None:
        ax.axhspan(back(mean - margin), back(mean + margin),
                   color=kw["color"], alpha=0.08, lw=0)
  ax.set_xticks(range(len(arms)))
  ax.set_xticklabels(["{} ({})".format(a, len(by_arm.get(a, {})))
                      for a in arms], rotation=30, ha="right",
                     rotation_mode="anchor", fontsize=8)
  ax.set_xlim(-0.6, len(arms) - 0.4)
  if log and ax.has_data():
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    if 0 < lo < hi:
      figures.format_log_axis(ax, lo, hi)
  ax.grid(True, axis="y", alpha=0.3)


def plot_endpoints(values, arms, out_prefix):
  """endpoints.png: a panel per endpoint."""
  plt = figures.pyplot()
  fig, axes = figures.grid(plt, len(analysis.ENDPOINTS), 6.0, 4.2)
  for ax, e in zip(axes.flat, analysis.ENDPOINTS):
    by_arm = {a: analysis.endpoint_values(values, e, a) for a in arms}
    _seed_panel(ax, by_arm, arms, log=e.kind == "loss", margin=analysis.margin_of(e))
    ax.set_title("{} ({}): {}".format(e.name, "primary" if e.primary else
                                      "secondary",
                                      plot.problem_label(e.problem)),
                 fontsize=10)
    ax.set_ylabel("held-out accuracy (%)" if e.kind == "accuracy" else
                  "final training loss (mean of the last {} minibatches)"
                  .format(plot.FINAL_WINDOW), fontsize=8)
  figures.suptitle(fig, "The flatness study: endpoints at the end of "
                   "meta-testing", _FIGURE_NOTE + "; dashed: the control's "
                   "mean, shaded: the equivalence margin around it (±0.5 "
                   "points; a factor 1.25 in loss, means of log10 loss)",
                   axes.shape[1])
  return figures.save_figure(fig, plt, out_prefix, ("png",))


def plot_flatness(values, arms, out_prefix):
  """flatness.png: Hessian trace and top eigenvalue on both problems."""
  plt = figures.pyplot()
  fig, axes = figures.grid(plt, len(analysis.FLATNESS) * len(analysis.PROBLEMS), 6.0, 4.2)
  panels = [(k, n, p) for k, n in analysis.FLATNESS for p in analysis.PROBLEMS]
  for ax, (key, name, problem) in zip(axes.flat, panels):
    by_arm = {a: values.get(problem, {}).get(key, {}).get(a, {})
              for a in arms}
    _seed_panel(ax, by_arm, arms)
    ax.set_title("{}: {}".format(name, plot.problem_label(problem)),
                 fontsize=10)
  figures.suptitle(fig, "The flatness study: the optimizee's flatness at "
                   "the end of meta-testing", _FIGURE_NOTE +
                   "; dashed: the control's mean", axes.shape[1])
  return figures.save_figure(fig, plt, out_prefix, ("png",))


_FIGURE_NOTE = ("arm (training seeds); small open markers: one training "
                "seed each (its mean over test seeds), in increasing seed "
                "order from left to right; large marker and bar: the mean "
                "over training seeds and its 95% t-interval")
