"""The benchmark's tables, figures and results page, from its JSON alone.

``python -m l2o_scale.benchmark.report results.json --out DIR`` writes:

* ``table.md``: per budget, final training loss and held-out test metric of
  the optimizer under test and each tuned baseline (mean over seeds, with
  the min-max range when there are several), the speedup over tuned Adam
  and the chosen learning rates;
* ``curves_<task>_<budget>.png``: training loss on the whole training split
  against steps, the optimizer and each tuned baseline, the mean over seeds
  with a min-max band;
* ``speedups.png``: the speedup over tuned Adam of every task and budget;
* ``results.md``: the page: date, machine, sizes, seeds, wall time, peak
  memory, where the optimizer wins and loses against tuned Adam, the tables
  and the figures.

Figures are linked as ``results/<path below reproduce/results>/NAME`` when
DIR lies under ``reproduce/results/`` (where the docs publish them, see
``docs/_hooks.py``), otherwise by their bare names.
"""

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "reproduce", "results")
ACCURACY_TOLERANCE = 0.005  # absolute, for accuracy
MSE_TOLERANCE = 0.005  # relative, for a squared error


def _num(value, digits=4):
  return "—" if value is None else "{:.{}g}".format(value, digits)


def cell(summary, key, digits=4):
  """``mean`` or ``mean [min–max]`` of a summary's entry; '—' if none."""
  if summary is None or summary[key]["mean"] is None:
    return "—"
  s = summary[key]
  text = _num(s["mean"], digits)
  if s["n"] > 1:
    text += " [{}–{}]".format(_num(s["min"], 3), _num(s["max"], 3))
  return text


def speedup_text(speedup):
  """'0.42', '>1' (tuned Adam never reached the loss) or 'diverged'."""
  if speedup is None:
    return "—"
  if speedup["value"] is None:
    return "diverged"
  if speedup["lower_bound"]:
    return ">1"
  return "{:.2f}".format(speedup["value"])


def verdict(entry):
  """How the optimizer compares with tuned Adam on one entry: whether its
  final training loss is at or below Adam's, whether its test metric is
  within tolerance of Adam's (or better), and the differences."""
  mine = entry["optimizer"]["summary"]
  adam = entry["baselines"].get("adam", {}).get("summary")
  if adam is None or mine["final_train_loss"]["mean"] is None:
    return None
  loss, adam_loss = (mine["final_train_loss"]["mean"],
                     adam["final_train_loss"]["mean"])
  metric, adam_metric = mine["test_metric"]["mean"], adam["test_metric"]["mean"]
  if entry["higher_is_better"]:
    metric_ok = metric >= adam_metric - ACCURACY_TOLERANCE
  else:
    metric_ok = metric <= adam_metric * (1 + MSE_TOLERANCE)
  return dict(loss_ok=loss <= adam_loss, metric_ok=metric_ok,
              loss_ratio=loss / adam_loss if adam_loss else None,
              metric_diff=metric - adam_metric)


def _baseline_names(results):
  return list(results["config"]["baselines"])


def _table(results, budget):
  names = _baseline_names(results)
  entries = [e for e in results["entries"] if e["budget"] == budget]
  labels = ["tuned " + n for n in names]
  lines = ["### {:,} steps".format(budget), "",
           "Final training loss (whole training split):", "",
           "| task | family | optimizer | " + " | ".join(labels) +
           " | speedup over tuned Adam |",
           "|---|---|---|" + "---|" * len(names) + "---|"]
  for e in entries:
    lines.append("| {} | {} | {} | {} | {} |".format(
        e["task"], e["family"], cell(e["optimizer"]["summary"],
                                     "final_train_loss"),
        " | ".join(cell(e["baselines"][n]["summary"], "final_train_loss")
                   for n in names), speedup_text(e["speedup"])))
  lines += ["", "Held-out metric (test split):", "",
            "| task | metric | optimizer | " + " | ".join(labels) + " |",
            "|---|---|---|" + "---|" * len(names)]
  for e in entries:
    lines.append("| {} | {} ({}) | {} | {} |".format(
        e["task"], e["metric"], "higher is better" if e["higher_is_better"]
        else "lower is better", cell(e["optimizer"]["summary"], "test_metric"),
        " | ".join(cell(e["baselines"][n]["summary"], "test_metric")
                   for n in names)))
  lines += ["", "Learning rates chosen on the validation split (* at the "
            "edge of the grid):", "",
            "| task | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names)]
  for e in entries:
    lines.append("| {} | {} |".format(e["task"], " | ".join(
        "—" if e["baselines"][n]["chosen_lr"] is None else "{:g}{}".format(
            e["baselines"][n]["chosen_lr"],
            "*" if e["baselines"][n]["at_grid_edge"] else "")
        for n in names)))
  return "\n".join(lines) + "\n"


def tables(results):
  return "\n".join(_table(results, b) for b in results["config"]["budgets"])


def summary_lines(results, budget):
  """Where the optimizer wins and where it loses against tuned Adam."""
  entries = [e for e in results["entries"] if e["budget"] == budget]
  verdicts = [(e, verdict(e)) for e in entries]
  scored = [(e, v) for e, v in verdicts if v is not None]
  speedups = [e["speedup"]["value"] for e in entries
              if e["speedup"] and e["speedup"]["value"] is not None]
  diverged = [e["task"] for e in entries
              if e["optimizer"]["summary"]["diverged"]]
  lines = ["At {:,} steps, against tuned Adam: final training loss at or "
           "below it on {} of {} tasks; test metric within tolerance of it "
           "(or better) on {} of {}; both on {} of {}; median speedup {} "
           "(a '>1' counts as 1).".format(
               budget, sum(v["loss_ok"] for _, v in scored), len(entries),
               sum(v["metric_ok"] for _, v in scored), len(entries),
               sum(v["loss_ok"] and v["metric_ok"] for _, v in scored),
               len(entries), "{:.2f}".format(statistics.median(speedups))
               if speedups else "—")]
  if diverged:
    lines.append("Diverged: {}.".format(", ".join(diverged)))
  lines.append("")
  for e, v in scored:
    lines.append("- {}: training loss {:.3g}x tuned Adam's ({}), test {} "
                 "{:+.4f} ({}).".format(
                     e["task"], v["loss_ratio"] or float("nan"),
                     "wins" if v["loss_ok"] else "loses", e["metric"],
                     v["metric_diff"],
                     "within tolerance" if v["metric_ok"] else "short"))
  return lines


def figure_prefix(out):
  rel = os.path.relpath(os.path.abspath(out), RESULTS)
  if rel.startswith(".."):
    return ""
  return "results/" + ("" if rel == "." else rel.replace(os.sep, "/") + "/")


def _header(results):
  m, c = results["machine"], results["config"]
  return [
      "Optimizer under test: `{}`. Measured {} on {} ({} CPU cores{}), "
      "TensorFlow {}, Keras {}, Python {}.".format(
          c["optimizer"], results["date"][:10], m["cpu"], m["cpu_count"],
          "" if results.get("runs_reused") else
          ", load average {:.1f} at the start".format(
              m["load_average_1min_at_start"] or 0.),
          m["tensorflow"], m["keras"], m["python"]),
      "",
      "Size `{}`: {} tasks, budgets {} steps, {} seed(s) per run, batch "
      "size {}, training loss measured on the whole training split every "
      "budget/{} steps; baselines tuned over their learning-rate grids "
      "({} grid, grown up to {} half-decades past an end where the best "
      "lies) on the validation {}. Wall time {:.0f} s ({} stored runs "
      "reused; the runs took {:.0f} s in all), peak memory {:.0f} MiB."
      .format(
          c["size"], len(c["tasks"]), ", ".join(
              "{:,}".format(b) for b in c["budgets"]), c["seeds"],
          c["batch_size"], c["eval_points"], c["grid"],
          c.get("grid_extension", 0), c["select_on"],
          results["wall_time_s"], results.get("runs_reused", 0),
          results.get("runs_wall_s_sum", 0.), results["peak_memory_mib"]),
      ""]


def page(results, prefix):
  lines = ["# Task-suite benchmark results", ""] + _header(results)
  for budget in results["config"]["budgets"]:
    lines += summary_lines(results, budget) + [""]
  lines += ["## Tables", "", tables(results), "## Figures", "",
            "![Speedup over tuned Adam]({}speedups.png)".format(prefix), ""]
  for e in results["entries"]:
    lines += ["![{0} at {1} steps]({2}{3})".format(
        e["task"], e["budget"], prefix, curve_name(e)), ""]
  return "\n".join(lines)


def curve_name(entry):
  return "curves_{}_{}.png".format(entry["task"], entry["budget"])


def write(results, out):
  """Writes table.md, the figures and results.md into ``out``."""
  from l2o_scale.benchmark import figures  # pylint: disable=g-import-not-at-top
  os.makedirs(out, exist_ok=True)
  written = []
  for name, text in (("table.md", tables(results)),
                     ("results.md", page(results, figure_prefix(out)))):
    path = os.path.join(out, name)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    written.append(path)
  for entry in results["entries"]:
    written.append(figures.curves(
        entry, os.path.join(out, curve_name(entry)),
        label=results["config"]["optimizer"]))
  written.append(figures.speedups(results, os.path.join(out, "speedups.png")))
  return written


def main(argv=None):
  p = argparse.ArgumentParser(
      prog="python -m l2o_scale.benchmark.report",
      description="Tables, figures and results page of the task-suite "
      "benchmark (python -m l2o_scale.benchmark), from its results.json.")
  p.add_argument("results", help="results.json of a benchmark run")
  p.add_argument("--out", required=True, help="folder to write into")
  args = p.parse_args(argv)
  try:
    with open(args.results, encoding="utf-8") as f:
      results = json.load(f)
  except (OSError, ValueError) as e:
    print("error: cannot read {}: {}".format(args.results, e),
          file=sys.stderr)
    return 2
  for path in write(results, args.out):
    print("wrote", path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
