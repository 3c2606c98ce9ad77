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

import json
import os
import sys

from l2o_scale.benchmark import config
from l2o_scale.benchmark import readme_claims
from l2o_scale.benchmark import reuse
from l2o_scale.benchmark import verdicts
from l2o_scale.runs import atomic_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "reproduce", "results")
PROG = "python -m l2o_scale.benchmark.report"


def figure_prefix(out):
  rel = os.path.relpath(os.path.abspath(out), RESULTS)
  if rel.startswith(".."):
    return ""
  return "results/" + ("" if rel == "." else rel.replace(os.sep, "/") + "/")


def _plural(n, word, plural=None):
  return "{:,} {}".format(n, word if n == 1 else plural or word + "s")


def _tuning(c):
  """How the baselines' learning rates were chosen, in words."""
  text = "baselines tuned over their {} learning-rate grids".format(c["grid"])
  grown = c.get("grid_extension", 0)
  if grown:
    text += " (grown up to {} past an end where the best lies)".format(
        _plural(grown, "half-decade"))
  return text + " on the validation {}".format(c["select_on"])


def _train_eval_size(results):
  return next(e["sizes"]["train_loss_measured_on"] for e in results[
      "entries"] if verdicts.regime(e) == "data-rich")


def _header(results):
  m, c = results["machine"], results["config"]
  rerun = results.get("runs_rerun") or []
  return [
      "Optimizer under test: `{}`. Measured {} on {} ({} CPU cores{}), "
      "TensorFlow {}, Keras {}, Python {}.".format(
          c["optimizer"], results["date"][:10], m["cpu"], m["cpu_count"],
          "" if results.get("runs_reused") else
          ", load average {:.1f} at the start".format(
              m["load_average_1min_at_start"] or 0.),
          m["tensorflow"], m["keras"], m["python"]),
      "",
      "Size `{}`: {}, {} of {}, {} per run, batch size {}, training loss "
      "measured on the whole training split{} every budget/{} steps; {}. "
      "Wall time {:.0f} s ({} reused{}; the runs took {:.0f} s in all), "
      "peak memory {:.0f} MiB.".format(
          c["size"], _plural(len(c["tasks"]), "task"),
          "budget" if len(c["budgets"]) == 1 else "budgets",
          " and ".join("{:,}".format(b) for b in c["budgets"]) + " steps",
          _plural(c["seeds"], "seed"), c["batch_size"],
          " (a data-rich task's: its first {:,} examples)".format(
              _train_eval_size(results)) if "data-rich" in verdicts.regimes(results)
          else "", c["eval_points"], _tuning(c), results["wall_time_s"],
          _plural(results.get("runs_reused", 0), "stored run"),
          ", {} damaged and run again".format(len(rerun)) if rerun else "",
          results.get("runs_wall_s_sum", 0.), results["peak_memory_mib"]),
      ""] + _baselines_from(results)


# How the page names the blocks of each kind of :data:`reuse.KINDS`
# (one, several).
_GIVEN = dict(tuned=("tuned baseline block", None),
              untuned=("baseline without tuning", "baselines without tuning"),
              optimizer=("block of the optimizers under test",
                         "blocks of the optimizers under test"))


def _baselines_from(results):
  """What an earlier run's results.json gave this page, and when and where
  the runs behind it were measured."""
  source = results.get("baselines_from")
  if not source:
    return []
  given = []
  for kind, count, date in reuse.KINDS:
    if source.get(count):
      given.append("{} (runs measured {})".format(
          _plural(source[count], *_GIVEN[kind]), _dates(source.get(date))))
  if not given:
    return []
  files = list(dict.fromkeys(
      u["path"] for u in source.get("sources") or [source]))
  return ["{}, one per task, budget and optimizer, are taken from {} ({}) "
          "and not run again; their runs ran on {} ({} CPU cores); what {} "
          "ran here.".format(
              _sentence(given),
              "earlier results.json files" if len(files) > 1 else
              "an earlier results.json", ", ".join(
                  "`{}`".format(path) for path in files),
              source.get("cpu"), source.get("cpu_count"),
              "they lack" if len(files) > 1 else "it lacks"), ""]


def _sentence(parts):
  return parts[0] if len(parts) == 1 else "{} and {}".format(
      ", ".join(parts[:-1]), parts[-1])


def _dates(joined):
  """"on D" for one date, "between D1 and D2" for several."""
  dates = reuse.days(joined) or ["?"]
  return "on {}".format(dates[0]) if len(dates) == 1 else (
      "between {} and {}".format(dates[0], dates[-1]))


def page(results, prefix, against=None):
  lines = ["# Task-suite benchmark: {}".format(
      results["config"]["optimizer"]), ""] + _header(results)
  for budget in results["config"]["budgets"]:
    lines += verdicts.summary_lines(results, budget) + [""]
  if against is not None:
    lines += ["## Against {}".format(against["config"]["optimizer"]), ""] + (
        verdicts.comparison_lines(results, against)) + [""]
  lines += ["## Tables", "", verdicts.tables(results), "## Figures", "",
            "![Speedup over tuned Adam]({}speedups.png)".format(prefix), ""]
  for e in results["entries"]:
    lines += ["![{0} at {1} steps]({2}{3})".format(
        e["task"], e["budget"], prefix, curve_name(e)), ""]
  return "\n".join(lines)


def curve_name(entry):
  return "curves_{}_{}.png".format(entry["task"], entry["budget"])


def write(results, out, against=None):
  """Writes table.md, the figures and results.md into ``out`` (with
  ``against``, another optimizer's results: a comparison with it). Each file
  is written whole or not at all (a full disk: OSError naming it)."""
  from l2o_scale.benchmark import figures  # pylint: disable=g-import-not-at-top
  config.check_out(out)
  written = []
  for name, text in (("table.md", verdicts.tables(results)),
                     ("results.md", page(results, figure_prefix(out),
                                         against))):
    path = os.path.join(out, name)
    try:
      with atomic_file.replace(path) as f:
        f.write(text)
    except OSError as e:
      raise config.write_failed(path, e) from None
    written.append(path)
  for entry in results["entries"]:
    written.append(figures.curves(
        entry, os.path.join(out, curve_name(entry)),
        label=results["config"]["optimizer"]))
  written.append(figures.speedups(results, os.path.join(out, "speedups.png")))
  return written


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _refuse(message):
  """Status 2 after one line ``PROG: error: message``."""
  print("{}: error: {}".format(PROG, message), file=sys.stderr)
  return 2


def _print_lines(args):
  """The modes that print lines and exit (``--readme_table``,
  ``--regime_claims``, ``--claims``): their status, None for none asked."""
  if args.readme_table:
    try:
      print("\n".join(readme_claims.shipped_readme_table()))
    except (OSError, ValueError, KeyError) as e:
      return _refuse("cannot read the committed results: {}".format(e))
    return 0
  if args.regime_claims:
    try:
      print("\n".join(readme_claims.regime_claims(
          [_read(path) for path in args.regime_claims])))
    except (OSError, ValueError, KeyError) as e:
      return _refuse("cannot read the results: {}".format(e))
    return 0
  if args.claims:
    try:
      print("\n".join(readme_claims.shipped_claims()))
    except OSError as e:  # a damaged shipped card
      return _refuse(e)
    return 0
  return None


def main(argv=None):
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  p = entry_point.ArgumentParser(
      prog=PROG,
      description="Tables, figures and results page of the task-suite "
      "benchmark (python -m l2o_scale.benchmark), from its results.json.")
  p.add_argument("results", nargs="?", help="results.json of a benchmark "
                 "run")
  p.add_argument("--out", help="folder to write into")
  p.add_argument("--claims", action="store_true", help="print one line "
                 "per shipped optimizer and budget, from the benchmark "
                 "sections of their cards, and exit")
  p.add_argument("--against", help="results.json of another optimizer on "
                 "the same tasks: the page compares the two task by task")
  p.add_argument("--regime_claims", nargs="+", metavar="RESULTS_JSON",
                 help="print one line per data regime on these results, "
                 "with each bare variant, and exit")
  p.add_argument("--readme_table", action="store_true", help="print the "
                 "README's results table, one row per shipped optimizer, "
                 "from the committed results.json files, and exit")
  args = p.parse_args(argv)
  printed = _print_lines(args)
  if printed is not None:
    return printed
  if not (args.results and args.out):
    p.error("give results.json and --out (or --claims)")
  paths = [args.results] + ([args.against] if args.against else [])
  read = []
  for path in paths:
    try:
      read.append(_read(path))
    except (OSError, ValueError) as e:
      return _refuse("cannot read {}: {}".format(path, e.strerror if isinstance(
          e, OSError) and e.strerror else e))
  for path, results in zip(paths, read):
    if not (isinstance(results, dict) and
            {"config", "entries"} <= set(results)):
      return _refuse("{} is not the results.json of python -m "
                     "l2o_scale.benchmark".format(path))
  try:
    written = write(read[0], args.out, read[1] if args.against else None)
  except OSError as e:
    return _refuse(e)
  except (KeyError, TypeError, IndexError) as e:
    return _refuse("{} is incomplete or damaged ({}: {}); run the benchmark "
                   "again to rewrite it".format(args.results,
                                                type(e).__name__, e))
  for path in written:
    print("wrote", path)
  return 0


if __name__ == "__main__":
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  entry_point.run_main(PROG, main)
