"""The benchmark's verdicts, from its results alone: per task whether the
optimizer under test reaches tuned Adam's final training loss and test
metric (within tolerance), the counts over tasks and data regimes, the
baselines without tuning it beats, and the tables and summary lines of the
results page (:mod:`l2o_scale.benchmark.report` writes the page).
"""

import statistics

from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import untuned

ACCURACY_TOLERANCE = 0.005  # absolute, for accuracy
MSE_TOLERANCE = 0.005  # relative, for a squared error


def num(value, digits=4):
  return "—" if value is None else "{:.{}g}".format(value, digits)


def cell(summary, key, digits=4):
  """``mean`` or ``mean [min–max]`` of a summary's entry; '—' if none."""
  if summary is None or summary[key]["mean"] is None:
    return "—"
  s = summary[key]
  text = num(s["mean"], digits)
  if s["n"] > 1:
    text += " [{}–{}]".format(num(s["min"], 3), num(s["max"], 3))
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


def against_untuned(entry, which="optimizer"):
  """{baseline without tuning: whether ``which`` meets both criteria
  against it} on one entry, in the page's order ({} where none ran)."""
  return {name: bool(v and v["loss_ok"] and v["metric_ok"])
          for name, v in ((name, verdict(entry, which, against=name))
                          for name, _ in untuned.blocks_in_order(entry))}


def beats_every_untuned(entry, which="optimizer"):
  """Whether ``which`` meets both criteria against every baseline without
  tuning of the entry (False where none ran)."""
  against = against_untuned(entry, which)
  return bool(against) and all(against.values())


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
                     label[name], regime_counts_text(
                         counts(results, budget, which=name)),
                     results["config"]["optimizer"], mine, of))
  entries = [e for e in results["entries"] if e["budget"] == budget and
             e.get("untuned")]
  lines.append("- Against every one of them: `{}` meets both criteria on "
               "{} of {}.".format(results["config"]["optimizer"], sum(
                   beats_every_untuned(e) for e in entries), len(entries)))
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
              c["both"], c["tasks"], num(c["median_speedup"], 2)))


def regime_counts_text(c):
  return ("loss at or below tuned Adam's on {} of {}, test metric within "
          "tolerance on {}, both on {}; median speedup {}{}".format(
              c["loss_ok"], c["tasks"], c["metric_ok"], c["both"],
              num(c["median_speedup"], 2),
              "; diverged on " + ", ".join(c["diverged"])
              if c["diverged"] else "") + collapsed_text(c))


def collapsed_text(c):
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
  return ["- {}, {} tasks: {}.".format(name, r, regime_counts_text(
      counts(results, budget, which=which, in_regime=r)))
          for which, name in names for r in regimes(results)]


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
