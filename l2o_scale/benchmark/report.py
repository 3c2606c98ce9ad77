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
import statistics
import sys

from l2o_scale.benchmark import config
from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import untuned
from l2o_scale.runs import atomic_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "reproduce", "results")
ACCURACY_TOLERANCE = 0.005  # absolute, for accuracy
MSE_TOLERANCE = 0.005  # relative, for a squared error
PROG = "python -m l2o_scale.benchmark.report"


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


def within_tolerance(higher_is_better, metric, reference):
  """Whether a test metric is within the benchmark's tolerance of a
  reference's, or better: :data:`ACCURACY_TOLERANCE` below it (absolute)
  for a metric where higher is better, :data:`MSE_TOLERANCE` above it
  (relative) for a squared error."""
  if higher_is_better:
    return metric >= reference - ACCURACY_TOLERANCE
  return metric <= reference * (1 + MSE_TOLERANCE)


def _block(entry, which):
  """The block ``which`` of an entry: ``"optimizer"``, ``"bare"``, or a
  baseline without tuning by name (:mod:`untuned`); None where absent."""
  if which in ("optimizer", "bare"):
    return entry.get(which)
  return entry.get("untuned", {}).get(which)


def verdict(entry, which="optimizer", against=None):
  """How an optimizer under test (``which``: ``"optimizer"``, ``"bare"``
  for its bare variant, or a baseline without tuning by name) compares with
  tuned Adam (``against``: None) or with a baseline without tuning
  (``against``: its name) on one entry: whether its final training loss is
  at or below the reference's, whether its test metric is within tolerance
  of it (or better), and the differences."""
  block = _block(entry, which)
  if block is None:
    return None
  mine = block["summary"]
  adam = (entry["baselines"].get("adam", {}).get("summary") if against is None
          else (_block(entry, against) or {}).get("summary"))
  if adam is None or mine["final_train_loss"]["mean"] is None:
    return None
  loss, adam_loss = (mine["final_train_loss"]["mean"],
                     adam["final_train_loss"]["mean"])
  metric, adam_metric = mine["test_metric"]["mean"], adam["test_metric"]["mean"]
  metric_ok = within_tolerance(entry["higher_is_better"], metric, adam_metric)
  return dict(loss_ok=loss <= adam_loss, metric_ok=metric_ok,
              loss_ratio=loss / adam_loss if adam_loss else None,
              metric_diff=metric - adam_metric)


def regime(entry):
  """The entry's data regime (results written before regimes existed hold
  small-data tasks only)."""
  return entry.get("regime", "small-data")


def regimes(results):
  """The regimes of the results' tasks, in the order of
  :data:`tasks.REGIMES`."""
  present = {regime(e) for e in results["entries"]}
  return [r for r in ("small-data", "data-rich") if r in present]


def has_bare(results):
  return any("bare" in e for e in results["entries"])


def bare_spec(results):
  return next((e["bare"]["spec"] for e in results["entries"] if "bare" in e),
              None)


def _speedup(entry, which):
  return entry["speedup"] if which == "optimizer" else _block(
      entry, which)["speedup"]


def _baseline_names(results):
  return list(results["config"]["baselines"])


def _under_test_cells(e, key, bare):
  """The optimizer's cell, and its bare variant's where the table has
  that column."""
  cells = [cell(e["optimizer"]["summary"], key)]
  if bare:
    cells.append(cell(e["bare"]["summary"], key) if "bare" in e else "—")
  return " | ".join(cells)


def _table(results, budget):
  names = _baseline_names(results)
  entries = [e for e in results["entries"] if e["budget"] == budget]
  labels = ["tuned " + n for n in names]
  bare = has_bare(results)
  mine = "optimizer | bare | " if bare else "optimizer | "
  bars = "---|" * (2 if bare else 1)
  lines = ["### {:,} steps".format(budget), "",
           "Final training loss (whole training split; a data-rich task: "
           "its first training examples, see each task's sizes):", "",
           "| task | regime | family | " + mine + " | ".join(labels) +
           " | speedup over tuned Adam" + (" | speedup, bare" if bare
                                           else "") + " |",
           "|---|---|---|" + bars + "---|" * len(names) + "---|" +
           ("---|" if bare else "")]
  for e in entries:
    lines.append("| {} | {} | {} | {} | {} | {} |".format(
        e["task"], regime(e), e["family"],
        _under_test_cells(e, "final_train_loss", bare),
        " | ".join(cell(e["baselines"][n]["summary"], "final_train_loss")
                   for n in names), speedup_text(e["speedup"]) + (
                       " | " + (speedup_text(e["bare"]["speedup"])
                                if "bare" in e else "—") if bare else "")))
  lines += ["", "Held-out metric (test split):", "",
            "| task | metric | " + mine + " | ".join(labels) + " |",
            "|---|---|" + bars + "---|" * len(names)]
  for e in entries:
    lines.append("| {} | {} ({}) | {} | {} |".format(
        e["task"], e["metric"], "higher is better" if e["higher_is_better"]
        else "lower is better", _under_test_cells(e, "test_metric", bare),
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


def untuned_names(results):
  """The baselines without tuning of the results, in the page's order
  (results written before they existed hold none)."""
  for e in results["entries"]:
    if e.get("untuned"):
      return [name for name, _ in untuned.blocks_in_order(e)]
  return []


def beats(results, budget, against, which="optimizer", in_regime=None):
  """(tasks where ``which`` meets both criteria against the baseline
  without tuning ``against``, tasks scored)."""
  scored = [v for v in (
      verdict(e, which, against) for e in results["entries"]
      if e["budget"] == budget and (in_regime is None or
                                     regime(e) == in_regime))
            if v is not None]
  return sum(v["loss_ok"] and v["metric_ok"] for v in scored), len(scored)


def untuned_lines(results, budget):
  """Per baseline without tuning: how it does against tuned Adam, and
  where the optimizer under test meets both criteria against it."""
  names = untuned_names(results)
  if not names:
    return []
  label = {n: b["label"] for e in results["entries"]
           for n, b in e.get("untuned", {}).items()}
  lines = ["Against the baselines a user picks without tuning (each run "
           "once at its defaults; the same criteria, the optimizer under "
           "test against each):", ""]
  for name in names:
    mine, of = beats(results, budget, name)
    lines.append("- {}: {}; `{}` meets both criteria "
                 "against it on {} of {}.".format(
                     label[name], _regime_counts_text(
                         counts(results, budget, which=name)),
                     results["config"]["optimizer"], mine, of))
  return lines + [""]


def _untuned_table(results, budget):
  names = untuned_names(results)
  if not names:
    return ""
  entries = [e for e in results["entries"] if e["budget"] == budget]
  head = ("| task | optimizer | " + " | ".join(names) + " |\n|---|---|" +
          "---|" * len(names))
  lines = ["Without tuning, final training loss (speedup over tuned Adam):",
           "", head]
  for e in entries:
    lines.append("| {} | {} | {} |".format(
        e["task"], cell(e["optimizer"]["summary"], "final_train_loss"),
        " | ".join("{} ({})".format(
            cell(_block(e, n)["summary"], "final_train_loss"),
            speedup_text(_block(e, n)["speedup"])) if _block(e, n) else "—"
                   for n in names)))
  lines += ["", "Without tuning, held-out metric (test split):", "", head]
  for e in entries:
    lines.append("| {} | {} | {} |".format(
        e["task"], cell(e["optimizer"]["summary"], "test_metric"),
        " | ".join(cell(_block(e, n)["summary"], "test_metric")
                   if _block(e, n) else "—" for n in names)))
  return "\n".join(lines) + "\n"


def tables(results):
  return "\n".join(_table(results, b) + (
      "\n" + _untuned_table(results, b) if untuned_names(results) else "")
                   for b in results["config"]["budgets"])


def counts(results, budget, tasks=None, which="optimizer", in_regime=None):
  """The verdict against tuned Adam at ``budget`` in numbers: tasks, those
  whose final training loss is at or below Adam's (``loss_ok``), whose test
  metric is within tolerance (``metric_ok``), both, the median speedup (a
  '>1' counts as 1), the tasks where a run diverged and those where one
  collapsed (:func:`~l2o_scale.benchmark.scoring.collapsed`). ``tasks``: only
  these; ``in_regime``: only the tasks of that regime; ``which``:
  ``"optimizer"`` or ``"bare"`` (its bare variant, where run)."""
  entries = [e for e in results["entries"] if e["budget"] == budget and
             (tasks is None or e["task"] in tasks) and
             _block(e, which) is not None and
             (in_regime is None or regime(e) == in_regime)]
  scored = [v for v in (verdict(e, which) for e in entries) if v is not None]
  speedups = [_speedup(e, which)["value"] for e in entries
              if _speedup(e, which) and _speedup(e, which)["value"]
              is not None]
  return dict(
      tasks=len(entries), loss_ok=sum(v["loss_ok"] for v in scored),
      metric_ok=sum(v["metric_ok"] for v in scored),
      both=sum(v["loss_ok"] and v["metric_ok"] for v in scored),
      median_speedup=statistics.median(speedups) if speedups else None,
      diverged=[e["task"] for e in entries
                if _block(e, which)["summary"]["diverged"]],
      collapsed=[e["task"] for e in entries
                 if any(scoring.collapsed(r)
                        for r in _block(e, which).get("runs", ()))])


def counts_sentence(c, budget):
  return ("At {:,} steps, against tuned Adam: final training loss at or "
          "below it on {} of {} tasks; test metric within tolerance of it "
          "(or better) on {} of {}; both on {} of {}; median speedup {} "
          "(a '>1' counts as 1).".format(
              budget, c["loss_ok"], c["tasks"], c["metric_ok"], c["tasks"],
              c["both"], c["tasks"], _num(c["median_speedup"], 2)))


def _regime_counts_text(c):
  return ("loss at or below tuned Adam's on {} of {}, test metric within "
          "tolerance on {}, both on {}; median speedup {}{}".format(
              c["loss_ok"], c["tasks"], c["metric_ok"], c["both"],
              _num(c["median_speedup"], 2),
              "; diverged on " + ", ".join(c["diverged"])
              if c["diverged"] else "") + _collapsed_text(c))


def _collapsed_text(c):
  """'; collapsed on TASKS' where a run collapsed (counts stored before
  collapses were counted have none)."""
  return ("; collapsed on " + ", ".join(c["collapsed"])
          if c.get("collapsed") else "")


def regime_lines(results, budget):
  """Per data regime, and for the bare variant beside the optimizer as
  configured, the verdict in numbers (:func:`counts`)."""
  names = [("optimizer", "`{}`".format(results["config"]["optimizer"]))]
  if has_bare(results):
    names.append(("bare", "`{}` (without its card's settings)".format(
        bare_spec(results))))
  return ["- {}, {} tasks: {}.".format(name, r, _regime_counts_text(
      counts(results, budget, which=which, in_regime=r)))
          for which, name in names for r in regimes(results)]


def regime_claims(results_list):
  """The README's lines on a regime's results: per results, budget and
  data regime one line with the budget, seeds and date, the optimizer as
  configured and, where it ran, its bare variant (:func:`counts`)."""
  lines = []
  for results in results_list:
    for budget in results["config"]["budgets"]:
      for r in regimes(results):
        text = ("- `{}`, {} tasks ({:,} steps, {} seeds, measured {}): "
                "{}").format(
            results["config"]["optimizer"], r, budget,
            results["config"]["seeds"], results["date"][:10],
            _regime_counts_text(counts(results, budget, in_regime=r)))
        if has_bare(results):
          text += "; bare (without its card's settings): " + (
              _regime_counts_text(counts(results, budget, which="bare",
                                         in_regime=r)))
        lines.append(text + ".")
  return lines


def summary_lines(results, budget):
  """Where the optimizer wins and where it loses against tuned Adam."""
  entries = [e for e in results["entries"] if e["budget"] == budget]
  scored = [(e, v) for e, v in ((e, verdict(e)) for e in entries)
            if v is not None]
  c = counts(results, budget)
  lines = [counts_sentence(c, budget)]
  if c["diverged"]:
    lines.append("Diverged: {}.".format(", ".join(c["diverged"])))
  if c["collapsed"]:
    lines.append("Collapsed (a run gave back more than half of its "
                 "training-loss reduction by its end): {}.".format(
                     ", ".join(c["collapsed"])))
  if len(regimes(results)) > 1 or has_bare(results):
    lines += ["", "By data regime{}:".format(
        ", as configured and bare" if has_bare(results) else ""), ""]
    lines += regime_lines(results, budget)
  lines.append("")
  lines += untuned_lines(results, budget)
  for e, v in scored:
    lines.append("- {}: training loss {:.3g}x tuned Adam's ({}), test {} "
                 "{:+.4f} ({}).".format(
                     e["task"], v["loss_ratio"] or float("nan"),
                     "wins" if v["loss_ok"] else "loses", e["metric"],
                     v["metric_diff"],
                     "within tolerance" if v["metric_ok"] else "short"))
  return lines


def comparison_lines(results, other):
  """Task by task, the optimizer under test against another optimizer's
  results on the same tasks and budgets (a generalist against the
  specialist it started from): final training loss and test metric, mean
  over seeds, and which is better on each."""
  mine_name = results["config"]["optimizer"]
  other_name = other["config"]["optimizer"]
  theirs = {(e["task"], e["budget"]): e for e in other["entries"]}
  lines = ["| task | steps | {0} training loss | {1} training loss | {0} "
           "test metric | {1} test metric | lower loss |".format(
               mine_name, other_name), "|---|---|---|---|---|---|---|"]
  wins = total = 0
  for e in results["entries"]:
    o = theirs.get((e["task"], e["budget"]))
    if o is None:
      continue
    a = e["optimizer"]["summary"]["final_train_loss"]["mean"]
    b = o["optimizer"]["summary"]["final_train_loss"]["mean"]
    better = None if a is None or b is None else (
        mine_name if a <= b else other_name)
    total += 1
    wins += better == mine_name
    lines.append("| {} | {:,} | {} | {} | {} | {} | {} |".format(
        e["task"], e["budget"], cell(e["optimizer"]["summary"],
                                     "final_train_loss"),
        cell(o["optimizer"]["summary"], "final_train_loss"),
        cell(e["optimizer"]["summary"], "test_metric"),
        cell(o["optimizer"]["summary"], "test_metric"), better or "—"))
  return ["{} reaches a lower final training loss than {} on {} of {} "
          "task budgets.".format(mine_name, other_name, wins, total), ""] + (
              lines)


def card_section(results, outside_training=None):
  """What a shipped optimizer's card holds about its benchmark run: when,
  where, what size, and per budget the verdict in numbers (:func:`counts`,
  also over ``outside_training``, the tasks whose model the optimizer never
  trained on) and per task the means over seeds with their range. Each
  budget's entry also holds its run's date, seeds and baselines, so that
  budgets from several runs can share a card (:func:`merge_card_sections`)."""
  c = results["config"]
  section = dict(
      date=results["date"][:10], machine="{} ({} CPU cores)".format(
          results["machine"]["cpu"], results["machine"]["cpu_count"]),
      size=c["size"], seeds=c["seeds"], budgets=list(c["budgets"]),
      tasks=list(c["tasks"]), baselines=list(c["baselines"]), budget={})
  for budget in c["budgets"]:
    per_task = {}
    for e in results["entries"]:
      if e["budget"] != budget:
        continue
      adam = e["baselines"].get("adam", {}).get("summary")
      per_task[e["task"]] = dict(
          final_train_loss=e["optimizer"]["summary"]["final_train_loss"],
          test_metric=e["optimizer"]["summary"]["test_metric"],
          metric=e["metric"],
          tuned_adam_final_train_loss=adam and adam["final_train_loss"],
          tuned_adam_test_metric=adam and adam["test_metric"],
          speedup=speedup_text(e["speedup"]))
    entry = dict(counts=counts(results, budget), tasks=per_task,
                 date=section["date"], seeds=c["seeds"],
                 baselines=list(c["baselines"]))
    if untuned_names(results):
      entry["against_untuned"] = {
          name: dict(zip(("both", "tasks"), beats(results, budget, name)))
          for name in untuned_names(results)}
    present = regimes(results)
    if len(present) > 1:
      entry["counts_by_regime"] = {r: counts(results, budget, in_regime=r)
                                   for r in present}
    if has_bare(results):
      entry["bare"] = dict(spec=bare_spec(results), counts=counts(
          results, budget, which="bare"), counts_by_regime={
              r: counts(results, budget, which="bare", in_regime=r)
              for r in present})
    if outside_training:
      entry["counts_outside_training"] = counts(results, budget,
                                                outside_training)
      entry["outside_training"] = list(outside_training)
    section["budget"][str(budget)] = entry
  return section


def merge_card_sections(old, new):
  """A card's benchmark section with the budgets of ``old`` and of ``new``
  (``new``'s entry where both have a budget): e.g. the 10,000-step run of
  some tasks beside the 2,000-step run of all. The other fields stay
  ``old``'s (the card's first run); each budget's entry holds its own run's
  date, seeds and baselines (taken from ``old``'s fields where an older
  card lacks them), and its tasks are the keys of its ``tasks``."""
  budgets = {}
  for budget, entry in old["budget"].items():
    budgets[budget] = dict({key: old[key] for key in
                            ("date", "seeds", "baselines")}, **entry)
  budgets.update(new["budget"])
  merged = dict(old, budget=budgets)
  merged["budgets"] = sorted(int(b) for b in budgets)
  return merged


def claim_lines(cards):
  """The README's sentences about the shipped optimizers, generated from
  the ``benchmark`` sections of their cards (``{name: card}``)."""
  lines = []
  for name, card in sorted(cards.items()):
    bench = card.get("benchmark")
    if not bench:
      continue
    for budget, entry in sorted(bench["budget"].items(),
                                key=lambda kv: int(kv[0])):
      c = entry["counts"]
      text = ("- `{}`, {:,} steps, {} seeds, {} tasks (measured {}): "
              "final training loss at or below tuned Adam's on {} of {} "
              "tasks, test metric within tolerance on {}, both on {}; "
              "median speedup over tuned Adam {}".format(
                  name, int(budget), entry.get("seeds", bench["seeds"]),
                  c["tasks"], entry.get("date", bench["date"]),
                  c["loss_ok"], c["tasks"], c["metric_ok"], c["both"],
                  _num(c["median_speedup"], 2)))
      outside = entry.get("counts_outside_training")
      if outside:
        text += ("; on the {} tasks whose models it never trained on: "
                 "both on {}, median speedup {}".format(
                     outside["tasks"], outside["both"],
                     _num(outside["median_speedup"], 2)))
      if c["diverged"]:
        text += "; diverged on {}".format(", ".join(c["diverged"]))
      text += _collapsed_text(c)
      for r, rc in entry.get("counts_by_regime", {}).items():
        text += "; {} tasks: both on {} of {}, median speedup {}".format(
            r, rc["both"], rc["tasks"], _num(rc["median_speedup"], 2))
      bare = entry.get("bare")
      if bare:
        text += ("; bare (without the card's settings): both on {} of {}, "
                 "median speedup {}".format(
                     bare["counts"]["both"], bare["counts"]["tasks"],
                     _num(bare["counts"]["median_speedup"], 2)))
      lines.append(text + ".")
  return lines


def shipped_claims():
  """:func:`claim_lines` of the shipped optimizers' cards."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  return claim_lines({name: pretrained.record(name).get("card", {})
                      for name in pretrained.names()})


# The README's results table (``--readme_table``): one row per shipped
# optimizer, one column per committed benchmark run. A column is its
# heading, the results.json of optimizer ``{name}`` (below the repository
# root), the budget and the block counted (the optimizer as shipped, or
# "bare": without its card's hand-set settings). A shipped optimizer
# without that file, or without that block, has "—" there; a new one gets
# its row from its name alone.
README_COLUMNS = (
    ("task suite (10 tasks)",
     "reproduce/results/benchmark/{name}/results.json", 2000, "optimizer"),
    ("task suite, without hand-set settings",
     "reproduce/results/benchmark/{name}/results.json", 2000, "bare"),
    ("task suite, 10,000 steps",
     "reproduce/results/benchmark/10000-steps/{name}/results.json", 10000,
     "optimizer"),
    ("data-rich (4 tasks)",
     "reproduce/results/benchmark/data-rich/{name}/results.json", 2000,
     "optimizer"),
    ("held-out set 1 (4 tasks)", "reproduce/results/benchmark/held-out/{name}/"
     "results.json", 2000, "optimizer"),
    ("held-out set 2 (4 tasks)", "reproduce/results/benchmark/held-out-2/{name}/"
     "results.json", 2000, "optimizer"),
    ("held-out set 3 (4 tasks)", "reproduce/results/benchmark/held-out-3/{name}/"
     "results.json", 2000, "optimizer"),
)
# Runs of a shipped optimizer stored under another spec, by (column heading,
# name): l2o-scale-head's head was run on the third held-out set once, as
# l2o-scale+head=<its file, the same bytes as the shipped head> before it
# shipped.
README_RUNS = {
    ("held-out set 3 (4 tasks)", "l2o-scale-head"):
        "reproduce/results/head/scaled-decay/test/s1/held-out-3/results.json",
}


def readme_cell(results, budget, which):
  """``'3 of 10 (0.88)'``: the tasks where ``which`` meets both criteria
  against tuned Adam, of the tasks run, and the median speedup (a '>1'
  counts as 1); '—' where the results lack that budget or block."""
  if results is None or budget not in results["config"]["budgets"]:
    return "—"
  c = counts(results, budget, which=which)
  if not c["tasks"]:
    return "—"
  return "{} of {} ({})".format(c["both"], c["tasks"],
                                _num(c["median_speedup"], 2))


def readme_table(names, root=ROOT):
  """The README's results table of the shipped optimizers ``names``
  (:data:`README_COLUMNS`, :data:`README_RUNS`): a caption line with the
  runs' seeds, batch sizes and dates, then the Markdown table."""
  rows, used = [], []
  for name in names:
    cells = []
    for heading, template, budget, which in README_COLUMNS:
      path = os.path.join(root, README_RUNS.get((heading, name),
                                                template.format(name=name)))
      results = _read(path) if os.path.isfile(path) else None
      if results is not None and budget in results["config"]["budgets"]:
        used.append(results)
      cells.append(readme_cell(results, budget, which))
    rows.append("| `{}` | {} |".format(name, " | ".join(cells)))
  dates = sorted(r["date"][:10] for r in used)
  seeds = sorted({r["config"]["seeds"] for r in used})
  batches = sorted({r["config"]["batch_size"] for r in used})
  caption = ("Tasks where the optimizer matches tuned Adam on both counts, "
             "of the tasks run (median speedup over tuned Adam, capped at 1); "
             "2,000 steps unless marked; {} seeds per task, batch size {}; "
             "measured {} to {}; — where not run (an optimizer without "
             "hand-set settings has no run without them).".format(
                 " or ".join(str(s) for s in seeds),
                 " or ".join(str(b) for b in batches),
                 dates[0] if dates else "—", dates[-1] if dates else "—"))
  header = "| optimizer | " + " | ".join(c[0] for c in README_COLUMNS) + " |"
  return [caption, "", header, "|---|" + "---|" * len(README_COLUMNS)] + rows


def shipped_readme_table():
  """:func:`readme_table` of the shipped optimizers."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  return readme_table(pretrained.names())


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
      "entries"] if regime(e) == "data-rich")


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
              _train_eval_size(results)) if "data-rich" in regimes(results)
          else "", c["eval_points"], _tuning(c), results["wall_time_s"],
          _plural(results.get("runs_reused", 0), "stored run"),
          ", {} damaged and run again".format(len(rerun)) if rerun else "",
          results.get("runs_wall_s_sum", 0.), results["peak_memory_mib"]),
      ""] + _baselines_from(results)


def _baselines_from(results):
  """Where tuned baselines taken from an earlier run were measured."""
  source = results.get("baselines_from")
  if not source or not source.get("blocks"):
    return []
  mine = source.get("optimizer_blocks")
  return ["The tuned baselines ({}, one per task, budget and baseline) "
          "are those of an earlier run, measured {} on {} ({} CPU cores), "
          "taken from its results.json and not run again; {}.".format(
              _plural(source["blocks"], "block"),
              (source.get("date") or "?")[:10], source.get("cpu"),
              source.get("cpu_count"),
              "the runs of the optimizers under test ({}) are taken from "
              "that file too (measured {}); what it lacks ran here".format(
                  _plural(mine, "block"),
                  (source.get("optimizer_date") or "?")[:10]) if mine else
              "the optimizers under test ran here"), ""]


def page(results, prefix, against=None):
  lines = ["# Task-suite benchmark: {}".format(
      results["config"]["optimizer"]), ""] + _header(results)
  for budget in results["config"]["budgets"]:
    lines += summary_lines(results, budget) + [""]
  if against is not None:
    lines += ["## Against {}".format(against["config"]["optimizer"]), ""] + (
        comparison_lines(results, against)) + [""]
  lines += ["## Tables", "", tables(results), "## Figures", "",
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
  for name, text in (("table.md", tables(results)),
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
  if args.readme_table:
    try:
      print("\n".join(shipped_readme_table()))
    except (OSError, ValueError, KeyError) as e:
      return _refuse("cannot read the committed results: {}".format(e))
    return 0
  if args.regime_claims:
    try:
      print("\n".join(regime_claims([_read(path)
                                      for path in args.regime_claims])))
    except (OSError, ValueError, KeyError) as e:
      return _refuse("cannot read the results: {}".format(e))
    return 0
  if args.claims:
    try:
      print("\n".join(shipped_claims()))
    except OSError as e:  # a damaged shipped card
      return _refuse(e)
    return 0
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
