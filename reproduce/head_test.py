"""``python -m reproduce.head_test``: the single look at the test tasks of
the schedule head (docs/schedule-head.md, "Choosing a head").

For each meta-training run of a selection (``python -m
l2o_scale.head_training.selection``, its ``chosen_by_run``) the chosen head
runs on the test tasks (``--tasks``; by default the four registered ones,
``l2o_scale.head_training.selection.TEST_TASKS``) with the task-suite benchmark (2,000 steps, 3
seeds), as ``l2o-scale+head=PATH`` (``l2o-scale+bare`` where the zero head
is chosen, ``l2o-scale`` where the card is): the small-data tasks with the
settings of the stored ``l2o-scale`` benchmark and its tuned baselines, the
data-rich tasks with those of the stored data-rich one, each held-out set
with those of its own stored run. The stored runs of ``l2o-scale`` with its
card, from the same initial weights and minibatches, are the other side of
the comparison. The page (``results.md``, ``results.json``) says per
meta-training seed and task:

* whether the headed optimizer matches or beats ``l2o-scale`` with its card
  on the test metric (mean over the 3 seeds; "matches": within the
  benchmark's tolerance, 0.005 accuracy or 0.5% of a squared error), and
  whether that holds on at least ``--needed`` of the tasks (3 of the
  registered 4);
* against tuned Adam, the benchmark's verdict: final training loss at or
  below it, test metric within tolerance, speedup; the median speedup over
  the data-rich tasks.

Each benchmark run resumes from its stored runs, so an interrupted look
goes on where it stopped; a seed whose runs are all stored is not run again.
"""

import json
import os
import statistics
import subprocess
import sys

from l2o_scale.benchmark import verdicts as verdict_lib
from l2o_scale.benchmark import tasks as task_registry
from l2o_scale.head_training import selection as head_selection
from l2o_scale.runs import entry_point
from problems import datasets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "python -m reproduce.head_test"


def reference(group):
  """The stored ``l2o-scale`` benchmark run (its card, bare, tuned
  baselines) of a group of test tasks: ``small-data`` (the suite's stored
  run), ``data-rich`` or a held-out set (:data:`tasks.HELD_OUT_SETS`)."""
  folder = "" if group == "small-data" else group + "/"
  return "reproduce/results/benchmark/{}l2o-scale/results.json".format(folder)


SMALL_REFERENCE = reference("small-data")
RICH_REFERENCE = reference("data-rich")
SMALL_FLAGS = ("--size=full", "--budgets=2000", "--seeds=3",
               "--eval_points=25", "--grid_extension=2")
# Per group of test tasks (the data regime; each held-out set apart, at the
# small-data settings): the stored l2o-scale run whose settings and tuned
# baselines its test tasks take, and the benchmark flags of those settings.
# A new held-out set in the task registry is a new group here.
GROUPS = {
    "small-data": (SMALL_REFERENCE, SMALL_FLAGS),
    **{held_out: (reference(held_out), SMALL_FLAGS)
       for held_out in task_registry.HELD_OUT_SETS},
    "data-rich": (RICH_REFERENCE, (
        "--size=medium", "--budgets=2000", "--seeds=3", "--baselines=adam")),
}
BUDGET = 2000
NEEDED = 3  # of the 4 test tasks, for every meta-training seed


def parts(tasks):
  """((group, its tasks, reference, flags), ...) of test tasks, in the
  order of :data:`GROUPS` (a held-out task's group is its held-out set,
  the others' their data regime); ValueError for a task the registry lacks or a
  validation task."""
  chosen_on = sorted(set(tasks) & set(head_selection.VALIDATION_TASKS))
  if chosen_on:
    raise ValueError("--tasks: {} are validation tasks, which chose the "
                     "heads; test on others".format(", ".join(chosen_on)))
  by_group = {}
  for name in tasks:
    task = task_registry.get(name)
    by_group.setdefault(task.held_out or task.regime, []).append(name)
  return tuple((group, tuple(by_group[group]), reference, flags)
               for group, (reference, flags) in GROUPS.items()
               if group in by_group)


def default_parts():
  """The parts of the registered test tasks (head_selection.TEST_TASKS)."""
  return parts(head_selection.TEST_TASKS)


def optimizer_spec(chosen):
  """The benchmark spec of a chosen head: the zero head is the frozen
  optimizer exactly, ``l2o-scale+bare``; the card is ``l2o-scale`` with its
  card's settings."""
  if chosen == head_selection.CARD:
    return "l2o-scale"
  return "l2o-scale+bare" if chosen == head_selection.ZERO else (
      "l2o-scale+head=" + chosen)


def _load(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def run_folder(out, run):
  return os.path.join(out, os.path.basename(os.path.normpath(run)))


def run_benchmarks(selection, out, data_dir, test_parts,
                   python=sys.executable):
  """Runs each seed's chosen head on the test tasks of ``test_parts``
  (:func:`parts`; resuming stored runs); the folder of each seed's results
  by run folder."""
  folders = {}
  for run, chosen in selection["chosen_by_run"].items():
    folders[run] = run_folder(out, run)
    for part, tasks, reference, flags in test_parts:
      dest = os.path.join(folders[run], part)
      done = os.path.join(dest, "results.json")
      stored = _load(done)["config"] if os.path.exists(done) else {}
      if (stored.get("optimizer") == optimizer_spec(chosen) and
          stored.get("tasks") == list(tasks)):
        continue
      command = [python, "-m", "l2o_scale.benchmark",
                 "--optimizer=" + optimizer_spec(chosen),
                 "--tasks=" + ",".join(tasks), *flags,
                 "--reuse_baselines=" + reference, "--out=" + dest]
      if data_dir:
        command.append("--data_dir=" + data_dir)
      print(" ".join(command[1:]), flush=True)
      subprocess.run(command, check=True, cwd=ROOT)
  return folders


def _metric_matches(entry, mine, card):
  """Whether test metric ``mine`` matches or beats ``card`` within the
  benchmark's tolerance against Adam."""
  return mine is not None and card is not None and verdict_lib.within_tolerance(
      entry["higher_is_better"], mine, card)


def card_entries(test_parts, root=ROOT):
  """{test task: the stored benchmark entry of l2o-scale with its card}."""
  references = {}
  for _, tasks, reference, _ in test_parts:
    for e in _load(os.path.join(root, reference))["entries"]:
      if e["task"] in tasks and e["budget"] == BUDGET:
        references[e["task"]] = e
  return references


def compare(selection, folders, references, test_parts=None):
  """Per seed and task: the headed optimizer's and the card's test metric
  (``references``: :func:`card_entries`), whether it matches the card, and
  the benchmark's verdict against tuned Adam; per seed the counts and the
  data-rich median speedup. ``test_parts``: :func:`parts` (default: the
  registered test tasks)."""
  test_parts = test_parts or default_parts()
  seeds = []
  for run, chosen in selection["chosen_by_run"].items():
    rows, runs = [], []
    for part, tasks, _, _ in test_parts:
      path = os.path.join(folders[run], part, "results.json")
      if not os.path.exists(path):
        continue
      results = _load(path)
      runs.append(dict(date=results.get("date"), wall_time_s=results.get(
          "wall_time_s"), peak_memory_mib=results.get("peak_memory_mib"),
                       cpu=results.get("machine", {}).get("cpu"),
                       cpu_count=results.get("machine", {}).get(
                           "cpu_count")))
      rows += [_task_row(e, part, references[e["task"]])
               for e in results["entries"]
               if e["task"] in tasks and e["budget"] == BUDGET]
    rich = [r["speedup"] for r in rows if r["regime"] == "data-rich" and
            r["speedup"] is not None]
    seeds.append(dict(
        run=run, chosen=chosen, score=selection["scores"][chosen],
        spec=optimizer_spec(chosen), tasks=rows, benchmark_runs=runs,
        complete=len(rows) == sum(len(p[1]) for p in test_parts),
        matches_card=sum(r["matches_card"] for r in rows),
        adam_both=sum(bool(r["loss_ok"] and r["metric_ok"]) for r in rows),
        rich_median_speedup=statistics.median(rich) if rich else None))
  return seeds


def _task_row(entry, part, reference):
  """One task's row of a seed: the headed optimizer's benchmark ``entry``
  against the card's (``reference``, the stored entry of the same task) and
  the benchmark's verdict against tuned Adam."""
  spread = entry["optimizer"]["summary"]["test_metric"]
  mine = spread["mean"]
  card = reference["optimizer"]["summary"]["test_metric"]["mean"]
  v = verdict_lib.verdict(entry) or {}
  return dict(
      task=entry["task"], regime=part, metric=entry["metric"], headed=mine,
      headed_range=[spread.get("min"), spread.get("max")],
      card=card, matches_card=_metric_matches(entry, mine, card),
      bare=(reference.get("bare") or {}).get("summary", {}).get(
          "test_metric", {}).get("mean"),
      headed_loss=entry["optimizer"]["summary"]["final_train_loss"]["mean"],
      card_loss=reference["optimizer"]["summary"]["final_train_loss"][
          "mean"],
      loss_ok=v.get("loss_ok"), metric_ok=v.get("metric_ok"),
      speedup=entry["speedup"]["value"],
      speedup_text=verdict_lib.speedup_text(entry["speedup"]),
      diverged=entry["optimizer"]["summary"]["diverged"])

def verdicts(seeds, needed=NEEDED):
  """The two criteria over every seed: the card (matches or beats it on at
  least ``needed`` test tasks for every seed) and tuned Adam (both on at
  least ``needed`` and, where there are data-rich test tasks, a data-rich
  median speedup of at least 1, for every seed)."""
  complete = bool(seeds) and all(s["complete"] for s in seeds)
  return dict(
      complete=complete,
      beats_card=complete and all(s["matches_card"] >= needed
                                  for s in seeds),
      beats_adam=complete and all(
          s["adam_both"] >= needed and _rich_speedup_ok(s) for s in seeds))


def _rich_speedup_ok(seed):
  if seed["rich_median_speedup"] is None:
    return not any(r["regime"] == "data-rich" for r in seed["tasks"])
  return seed["rich_median_speedup"] >= 1


def _fmt(x):
  return "—" if x is None else "{:.4g}".format(x)


def _with_range(mean, extremes):
  """``mean [min, max]`` over the seeds where they are known."""
  if not extremes or None in extremes:
    return _fmt(mean)
  return "{} [{}, {}]".format(_fmt(mean), _fmt(extremes[0]),
                              _fmt(extremes[1]))


def _run_facts(runs):
  """When, where and how long the seed's benchmark runs took."""
  if not runs:
    return ""
  wall = sum(r["wall_time_s"] or 0 for r in runs)
  peak = max(r["peak_memory_mib"] or 0 for r in runs)
  dates = sorted({(r["date"] or "?")[:10] for r in runs})
  return (" Measured {} on {} ({} cores), wall time {:.0f} s, peak memory "
          "{:.0f} MiB.".format(", ".join(dates), runs[0]["cpu"],
                               runs[0]["cpu_count"], wall, peak))


def page(selection, seeds, needed=NEEDED, num_tasks=4):
  """The lines of results.md (``num_tasks`` test tasks, ``needed`` of
  them for a seed to count)."""
  v = verdicts(seeds, needed)
  lines = [
      "# Schedule head: the test tasks", "",
      "Generated by `python -m reproduce.head_test`. For each "
      "meta-training seed, the head chosen on the validation tasks "
      "(`{}`) against `l2o-scale` with its card's hand-set settings (the "
      "stored benchmark runs, same initial weights and minibatches) and "
      "against tuned Adam; {:,} steps, batch 128, 3 seeds, test metric "
      "the mean over seeds.".format(", ".join(selection["tasks"]), BUDGET),
      ""]
  lines += ["Meta-training seeds here: {}. The headed column is the mean "
            "test metric over the 3 seeds, [lowest, highest].".format(
                ", ".join(os.path.basename(os.path.normpath(s["run"]))
                          for s in seeds)), ""]
  if not v["complete"]:
    lines += ["**Incomplete**: not every seed has run every test task.", ""]
  lines += [
      "- Matches or beats `l2o-scale` with its card on at least {} of {} "
      "test tasks for every seed: **{}**.".format(
          needed, num_tasks, "yes" if v["beats_card"] else "no"),
      "- Against tuned Adam, training loss at or below it and test metric "
      "within tolerance on at least {} of {}, with a data-rich median "
      "speedup of at least 1 where there are data-rich tasks, for every "
      "seed: **{}**.".format(needed, num_tasks,
                             "yes" if v["beats_adam"] else "no"), ""]
  for s in seeds:
    lines += _seed_lines(s)
  return lines


def _seed_lines(s):
  """The section of one meta-training seed ``s`` (:func:`compare`'s): its
  chosen head, counts and per-task table."""
  lines = [
      "## {}: {} (validation score {:+.3f})".format(
          os.path.basename(os.path.normpath(s["run"])), s["chosen"],
          s["score"]), "",
      "Matches or beats the card on {} of {}; both criteria against "
      "tuned Adam on {} of {}; data-rich median speedup {}.{}".format(
          s["matches_card"], len(s["tasks"]), s["adam_both"],
          len(s["tasks"]), _fmt(s["rich_median_speedup"]),
          _run_facts(s["benchmark_runs"])), "",
      "| task | regime | metric | headed [range] | card | bare (the zero "
      "head) | matches card | "
      "training loss, headed | training loss, card | loss ≤ Adam | "
      "metric ok vs Adam | speedup |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in s["tasks"]:
    lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} "
                 "| {} |".format(
                     r["task"], r["regime"], r["metric"],
                     _with_range(r["headed"], r.get("headed_range")),
                     _fmt(r["card"]), _fmt(r.get("bare")),
                     "yes" if r["matches_card"] else "no",
                     _fmt(r["headed_loss"]), _fmt(r["card_loss"]),
                     "yes" if r["loss_ok"] else "no",
                     "yes" if r["metric_ok"] else "no",
                     r["speedup_text"]))
  lines.append("")
  return lines


def main(argv=None):
  p = entry_point.ArgumentParser(prog=PROG,
                                 description=__doc__.split("\n\n")[0])
  p.add_argument("--selection", default="reproduce/results/head/"
                 "selection.json", help="the selection's JSON file")
  p.add_argument("--out", default="reproduce/results/head/test",
                 help="folder of the benchmark runs and the page")
  p.add_argument("--tasks", default=",".join(head_selection.TEST_TASKS),
                 help="the test tasks, comma-separated (default: the "
                 "registered four)")
  p.add_argument("--needed", type=int, default=NEEDED, help="test tasks "
                 "a seed's head must match or beat the card on")
  datasets.add_data_dir_argument(p)
  p.add_argument("--report_only", action="store_true",
                 help="write the page from the runs stored, run nothing")
  args = p.parse_args(argv)
  tasks = [t for t in args.tasks.split(",") if t]
  try:
    test_parts = parts(tasks)
  except (ValueError, KeyError) as e:
    p.error(str(e).strip("'\""))
  if not 1 <= args.needed <= len(tasks):
    p.error("--needed must lie in 1..{} (the test tasks)".format(len(tasks)))
  selection = _load(args.selection)
  if args.report_only:
    folders = {run: run_folder(args.out, run)
               for run in selection["chosen_by_run"]}
  else:
    folders = run_benchmarks(selection, args.out, args.data_dir, test_parts)
  seeds = compare(selection, folders, card_entries(test_parts), test_parts)
  lines = page(selection, seeds, args.needed, len(tasks))
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "results.json"), "w",
            encoding="utf-8") as f:
    json.dump(dict(selection=args.selection, tasks=tasks,
                   needed=args.needed, seeds=seeds,
                   verdicts=verdicts(seeds, args.needed)), f, indent=1)
  with open(os.path.join(args.out, "results.md"), "w",
            encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  print("\n".join(lines))
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
