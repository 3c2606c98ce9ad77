"""Figures of the task-suite benchmark (matplotlib, no display needed)."""

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from l2o_scale.benchmark import scoring  # pylint: disable=wrong-import-position

COLORS = {"adam": "tab:blue", "adamw": "tab:green", "sgd": "tab:orange"}


def _band(ax, records, label, color):
  steps, mean, low, high = scoring.mean_curve(records)
  ax.plot(steps, mean, color=color, label=label, lw=1.6)
  if len(records) > 1:
    ax.fill_between(steps, low, high, color=color, alpha=0.2, lw=0)


def curves(entry, path, label="optimizer under test"):
  """Training loss against steps: the optimizer and each tuned baseline,
  the geometric mean over seeds with the min-max band."""
  fig, ax = plt.subplots(figsize=(6, 4))
  _band(ax, entry["optimizer"]["runs"], label, "black")
  for name, result in entry["baselines"].items():
    if result["runs"]:
      _band(ax, result["runs"], "tuned {} (lr {:g})".format(
          name, result["chosen_lr"]), COLORS.get(name))
  ax.set_yscale("log")
  ax.set_xlabel("step")
  ax.set_ylabel("training loss (whole training split)")
  seeds = len(entry["optimizer"]["runs"])
  ax.set_title("{} ({}), {:,} steps, {} seed{}".format(
      entry["task"], entry["family"], entry["budget"], seeds,
      "s" if seeds > 1 else ""), fontsize=9)
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


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
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
