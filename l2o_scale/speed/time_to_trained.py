"""Time to a trained optimizer: wall time of meta-training from a cold start
until the optimizer is good, for several recipes in the same run.

Why: what a user of meta-training pays is the time until the optimizer is
trained, not the time of one unroll. This tool measures it the same way for
every recipe (a recipe: a set of ``metarun.py`` flags, e.g. an absl
flagfile):

* each training is its own ``metarun.py`` process, started cold (Python and
  TensorFlow start-up and tracing count), at ``nice`` 5, one at a time; for
  each training seed the recipes take turns (their order alternates from seed
  to seed) so that a change of machine speed hits all of them;
* after each meta-iteration the training writes ``model.ckpt-K``; the tool
  then pauses the process (SIGSTOP), scores the snapshot with one yardstick
  for every recipe -- the robust score of ``--selection=robust``
  (:mod:`l2o_scale.meta_training.selection`: 1,000 meta-test steps on seeds
  1001, 1002, 1003 of the training problem, default MNIST MLP 784-20-10
  sigmoid, batch 128) -- and resumes it (SIGCONT). The pauses are left out of
  the elapsed time;
* the elapsed time of snapshot K is the modification time of
  ``model.ckpt-K.index`` minus the process start, minus the pauses before;
  the **time to trained** is the elapsed time of the first snapshot whose
  yardstick score is <= ``--threshold`` (0.05), and the training stops there
  (``--run_to_end`` lets it finish its meta-iterations);
* reported per recipe and seed: time to trained, meta-iterations to it,
  seconds per meta-iteration (between the first and the last snapshot; the
  first snapshot's elapsed time includes start-up and tracing), the
  yardstick trajectory, the recipe's own selection scores and the machine
  load; per recipe the median over seeds, and the ratio of the first
  recipe's median to each other's.

Usage::

  python -m l2o_scale.speed --time_to_trained --data_dir=DIR \\
      --recipe stable --recipe fast=path/to/fast.flags [--seeds 1,2,3] \\
      [--json OUT.json] [--work_dir DIR]

``--recipe NAME`` takes a shipped recipe (:mod:`l2o_scale.config.recipes`),
``NAME=FILE``
an absl flagfile (one ``--flag=value`` per line).

This module holds the schedule, the summary and the command;
:mod:`l2o_scale.speed.training_snapshots` runs one training and scores its
snapshots (the yardstick).
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from l2o_scale.config import recipes
from l2o_scale.runs import atomic_file
from l2o_scale.runs import entry_point
# The snapshot runner and the yardstick; their names stay reachable here.
from l2o_scale.speed.training_snapshots import (  # pylint: disable=unused-import
    FIRST_UNROLL_LINE, THRESHOLD, YARDSTICK_PROBLEMS, YARDSTICK_SEEDS,
    YARDSTICK_STEPS, Yardstick, active_elapsed, run_job,
    seconds_per_meta_iteration, time_to_threshold)
from problems import datasets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
METARUN = os.path.join(ROOT, "metarun.py")


# --------------------------------------------------------------- summary
def _median(values):
  """Median with None (never reached) counted as +inf; None if the median
  itself is not reached."""
  if not values:
    return None
  value = statistics.median([float("inf") if v is None else v
                             for v in values])
  return None if value == float("inf") else value


def summarize(jobs, recipe_names):
  """Per recipe: medians over its seeds; ratios of the first recipe's median
  time to trained to each recipe's."""
  per_recipe = {}
  for name in recipe_names:
    mine = [j for j in jobs if j["recipe"] == name]
    per_recipe[name] = dict(
        seeds=[j["seed"] for j in mine],
        seconds_to_trained=[j["seconds_to_trained"] for j in mine],
        meta_iterations_to_trained=[j["meta_iterations_to_trained"]
                                    for j in mine],
        median_seconds_to_trained=_median(
            [j["seconds_to_trained"] for j in mine]),
        median_meta_iterations_to_trained=_median(
            [j["meta_iterations_to_trained"] for j in mine]),
        median_seconds_per_meta_iteration=_median(
            [j["seconds_per_meta_iteration"] for j in mine
             if j["seconds_per_meta_iteration"] is not None] or [None]),
        median_seconds_to_first_snapshot=_median(
            [j["snapshots"][0]["elapsed"] if j["snapshots"] else None
             for j in mine]))
  base = per_recipe[recipe_names[0]]["median_seconds_to_trained"]
  for name in recipe_names:
    other = per_recipe[name]["median_seconds_to_trained"]
    per_recipe[name]["speedup_vs_{}".format(recipe_names[0])] = (
        base / other if base is not None and other else None)
  return per_recipe


# --------------------------------------------------------------------- CLI
def recipe_flags(spec):
  """``(name, flags)`` of ``--recipe NAME`` (built-in) or ``NAME=FILE``."""
  if "=" in spec:
    name, path = spec.split("=", 1)
    if not os.path.isfile(path):
      raise ValueError("--recipe {}: no file {}".format(spec, path))
    return name, ["--flagfile={}".format(os.path.abspath(path))]
  if spec not in recipes.names():
    raise ValueError("--recipe {}: not a shipped recipe ({}); give "
                     "NAME=FLAGFILE".format(spec, ", ".join(recipes.names())))
  return spec, ["--recipe={}".format(spec)]


def schedule(recipe_names, seeds):
  """(seed, recipe) jobs: seed by seed, the recipes taking turns, in an
  order that alternates from one seed to the next."""
  jobs = []
  for i, seed in enumerate(seeds):
    names = recipe_names if i % 2 == 0 else recipe_names[::-1]
    jobs.extend((seed, name) for name in names)
  return jobs


def load_average():
  try:
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
  except OSError:
    return None


PROG = "python -m l2o_scale.speed --time_to_trained"


def build_parser():
  parser = entry_point.ArgumentParser(
      prog=PROG,
      description="Wall time of meta-training from a cold start until the "
      "robust score first reaches --threshold, per recipe and training seed, "
      "recipes taking turns in one run.")
  parser.add_argument("--recipe", action="append", default=None,
                      help="NAME (built-in: {}) or NAME=FLAGFILE; repeat; "
                      "the first is the baseline of the ratios (default: "
                      "stable)".format(", ".join(recipes.names())))
  parser.add_argument("--seeds", default="1,2,3",
                      help="training seeds (metarun --seed)")
  parser.add_argument("--threshold", type=float, default=THRESHOLD)
  datasets.add_data_dir_argument(parser)
  parser.add_argument("--work_dir", default=None,
                      help="where the train dirs and logs go (default: a new "
                      "temporary folder); each job's train dir is replaced")
  parser.add_argument("--json", metavar="PATH", help="also write JSON here")
  parser.add_argument("--run_to_end", action="store_true",
                      help="let each training run all its meta-iterations")
  parser.add_argument("--max_meta_iterations", type=int, default=None,
                      help="cap: overrides the recipes' --num_meta_iterations")
  parser.add_argument("--nice", type=int, default=5,
                      help="niceness of the training processes")
  parser.add_argument("--extra", action="append", default=[],
                      help="a metarun flag added to every recipe")
  return parser


def format_table(report):
  rows = ["{:<16} {:>5} {:>12} {:>9} {:>11} {:>10}  {}".format(
      "recipe", "seed", "s to trained", "meta-its", "s/meta-it",
      "1st snap s", "yardstick by meta-iteration")]
  for job in report["jobs"]:
    fmt = lambda v, f: "-" if v is None else f.format(v)  # pylint: disable=cell-var-from-loop
    rows.append("{:<16} {:>5} {:>12} {:>9} {:>11} {:>10}  {}".format(
        job["recipe"], job["seed"], fmt(job["seconds_to_trained"], "{:.1f}"),
        fmt(job["meta_iterations_to_trained"], "{}"),
        fmt(job["seconds_per_meta_iteration"], "{:.2f}"),
        fmt(job["snapshots"][0]["elapsed"] if job["snapshots"] else None,
            "{:.1f}"),
        " ".join("{}:{:.3g}".format(s["meta_iteration"], s["score"])
                 for s in job["snapshots"])))
  for name, s in report["summary"].items():
    rows.append("{}: median {} s to trained ({} meta-iterations, {} s per "
                "meta-iteration); speed-up vs {}: {}".format(
                    name, s["median_seconds_to_trained"],
                    s["median_meta_iterations_to_trained"],
                    s["median_seconds_per_meta_iteration"],
                    report["baseline"],
                    s["speedup_vs_{}".format(report["baseline"])]))
  return "\n".join(rows)


def main(argv=None):
  args = build_parser().parse_args(argv)
  try:
    recipes = [recipe_flags(spec) for spec in (args.recipe or ["stable"])]
    seeds = [int(s) for s in args.seeds.split(",")]
  except ValueError as e:
    print("time_to_trained: {}".format(e), file=sys.stderr)
    return 2
  names = [name for name, _ in recipes]
  if len(set(names)) != len(names):
    print("time_to_trained: recipe names repeat: {}".format(names),
          file=sys.stderr)
    return 2
  flags_of = dict(recipes)
  data_dir = datasets.resolve_data_dir(args.data_dir)
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="time_to_trained-")
  yardstick = Yardstick(data_dir)
  # Imported here: it loads TensorFlow, which the flag checks above and
  # the timing rules' tests do without.
  from l2o_scale.speed import speed_report  # pylint: disable=g-import-not-at-top
  report = dict(machine=speed_report.machine_info(), threshold=args.threshold,
                yardstick=dict(steps=YARDSTICK_STEPS,
                               seeds=list(YARDSTICK_SEEDS),
                               problems=YARDSTICK_PROBLEMS),
                baseline=names[0], recipes=flags_of, extra=args.extra,
                seeds=seeds, work_dir=work_dir, jobs=[],
                started=time.strftime("%Y-%m-%d %H:%M:%S"))
  for seed, name in schedule(names, seeds):
    report["jobs"].append(_job(args, name, seed, os.path.join(
        work_dir, name, "seed{}".format(seed)), data_dir, flags_of[name],
                               yardstick))
    if args.json:  # Written after every job: a long run loses nothing.
      report["summary"] = summarize(report["jobs"], names)
      _write_json(args.json, report)
  report["summary"] = summarize(report["jobs"], names)
  report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
  print(format_table(report))
  if args.json:
    _write_json(args.json, report)
    print("wrote", args.json)
  return 0


def _job(args, name, seed, train_dir, data_dir, flags, yardstick):
  """Recipe ``name``'s meta-training (its ``flags``) with ``seed`` from a
  cold start in ``train_dir``, timed until trained: :func:`run_job`'s
  record with the recipe, the seed and the machine's load around it."""
  subprocess.run(["rm", "-rf", train_dir], check=True)
  command = (["nice", "-n", str(args.nice), sys.executable, METARUN,
              "--train_dir={}".format(train_dir), "--seed={}".format(seed)]
             + (["--data_dir={}".format(data_dir)] if data_dir else [])
             + flags + list(args.extra)
             + (["--num_meta_iterations={}".format(args.max_meta_iterations)]
                if args.max_meta_iterations else []))
  print("[{}] {} seed {} ...".format(time.strftime("%H:%M:%S"), name, seed),
        flush=True)
  load = load_average()
  job = run_job(command, train_dir, yardstick, args.threshold,
                stop_at_threshold=not args.run_to_end,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  job.update(recipe=name, seed=seed, load_before=load,
             load_after=load_average())
  print("  {} s to trained ({} meta-iterations); yardstick {}".format(
      job["seconds_to_trained"], job["meta_iterations_to_trained"],
      [round(s["score"], 4) for s in job["snapshots"]]), flush=True)
  if job["returncode"] not in (0, -signal.SIGKILL) or (
      job["returncode"] == -signal.SIGKILL and not job["stopped_at_threshold"]):
    print("  training failed (exit {}): {}".format(
        job["returncode"], " | ".join(job["output_tail"])), flush=True)
  return job


def _write_json(path, report):
  with atomic_file.replace(path) as f:
    json.dump(report, f, indent=1, default=str)
    f.write("\n")


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
