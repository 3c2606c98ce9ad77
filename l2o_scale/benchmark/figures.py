"""Figures of the task-suite benchmark (matplotlib, no display needed)."""

import io

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from l2o_scale.benchmark import config  # pylint: disable=wrong-import-position
from l2o_scale.benchmark import scoring  # pylint: disable=wrong-import-position
from l2o_scale.runs import atomic_file  # pylint: disable=wrong-import-position

# Each line its own color, dash pattern and marker, so that lines lying on
# one another (tuned Adam and AdamW often do) stay told apart: the thin
# dashed AdamW line is drawn over the thick solid Adam line, which shows
# on both sides of it and through its gaps, and AdamW's small markers sit
# inside Adam's large ones (or at other steps, where there are more
# measurements than markers).
STYLES = {
    "optimizer": dict(color="black", ls="-", marker="D", lw=2.2, ms=5),
    "adam": dict(color="tab:blue", ls="-", marker="o", lw=3.2, ms=8),
    "adamw": dict(color="tab:green", ls=(0, (4, 3)), marker="s", lw=1.4,
                  ms=4),
    "sgd": dict(color="tab:orange", ls=(0, (1, 1.5)), marker="^", lw=1.8,
                ms=6),
}
OTHER = dict(color="tab:purple", ls=(0, (6, 2, 1, 2)), marker="v", lw=1.6,
             ms=5)
MARKERS = 6  # markers per line


def _band(ax, records, label, style, order):
  steps, mean, low, high = scoring.mean_curve(records)
  every = max(1, len(steps) // MARKERS)
  ax.plot(steps, mean, label=label, zorder=3 + order,
          markevery=(order * every // 4 % every, every),
          markerfacecolor="none", **style)
  if len(records) > 1:
    ax.fill_between(steps, low, high, color=style["color"], alpha=0.15,
                    lw=0, zorder=1)


def title(entry, seeds):
  """``task: family, N steps, K seeds``: each said once."""
  return "{}: {}, {:,} steps, {} seed{}".format(
      entry["task"], entry["family"], entry["budget"], seeds,
      "" if seeds == 1 else "s")


def save(fig, path):
  """Writes the figure whole or not at all (atomic_file); closes it."""
  buffer = io.BytesIO()
  fig.savefig(buffer, dpi=110, format="png")
  plt.close(fig)
  try:
    with atomic_file.replace(path, "wb") as f:
      f.write(buffer.getvalue())
  except OSError as e:
    raise config.write_failed(path, e) from None
  return path


def curves(entry, path, label="optimizer under test"):
  """Training loss against steps: the optimizer and each tuned baseline,
  the geometric mean over seeds with the min-max band. The solid lines
  (the optimizer, Adam) are drawn first, the dashed ones over them."""
  fig, ax = plt.subplots(figsize=(6, 4))
  _band(ax, entry["optimizer"]["runs"], label, STYLES["optimizer"], 0)
  for order, (name, result) in enumerate(entry["baselines"].items(), 1):
    if result["runs"]:
      _band(ax, result["runs"], "tuned {} (lr {:g})".format(
          name, result["chosen_lr"]), STYLES.get(name, OTHER), order)
  ax.set_yscale("log")
  ax.set_xlabel("step")
  ax.set_ylabel("training loss (whole training split)")
  ax.set_title(title(entry, len(entry["optimizer"]["runs"])), fontsize=9)
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return save(fig, path)


def speedups(results, path):
  """Speedup over tuned Adam per task and budget (log scale); bars that
  tuned Adam never reached within the budget are hatched and marked '>'."""
  entries = [e for e in results["entries"] if e["speedup"]]
  budgets = list(results["config"]["budgets"])
  tasks = list(dict.fromkeys(e["task"] for e in entries))
  fig, ax = plt.subplots(figsize=(7, 0.45 * len(tasks) * len(budgets) + 1.2))
  height = 0.8 / len(budgets)
  for e in entries:
    s = e["speedup"]
    if s["value"] is None:
      continue
    k = budgets.index(e["budget"])
    y = tasks.index(e["task"]) + (k - (len(budgets) - 1) / 2) * height
    value = max(s["value"], 1e-3)
    ax.barh(y, value, height=height * 0.9, left=0,
            color="tab:blue" if k == 0 else "tab:purple",
            hatch="//" if s["lower_bound"] else None,
            label="{:,} steps".format(e["budget"]))
    ax.text(value, y, " >1" if s["lower_bound"] else " {:.2f}".format(
        s["value"]), va="center", fontsize=7)
  ax.axvline(1., color="black", lw=1)
  ax.set_xscale("log")
  ax.set_xlim(min([1e-2] + [max(e["speedup"]["value"] or 1, 1e-3) / 2
                            for e in entries]), 4)
  ax.set_yticks(range(len(tasks)))
  ax.set_yticklabels(tasks, fontsize=8)
  ax.invert_yaxis()
  ax.set_xlabel("steps tuned Adam needs to reach the optimizer's final "
                "training loss / budget")
  handles, labels = ax.get_legend_handles_labels()
  unique = dict(zip(labels, handles))
  ax.legend(unique.values(), unique.keys(), fontsize=8)
  ax.set_title("Speedup over tuned Adam (hatched: Adam never got there)",
               fontsize=9)
  fig.tight_layout()
  return save(fig, path)
