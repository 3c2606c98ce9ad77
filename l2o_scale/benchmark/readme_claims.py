"""What the README and the shipped optimizers' cards say about the
benchmark, generated from its committed results: a card's benchmark
section, the README's claim lines and its results table
(``python -m l2o_scale.benchmark.report --readme_table``).
"""

import json
import os

from l2o_scale.benchmark import reuse
from l2o_scale.benchmark import verdicts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)



def regime_claims(results_list):
  """The README's lines on a regime's results: per results, budget and
  data regime one line with the budget, seeds and date, the optimizer as
  configured and, where it ran, its bare variant (:func:`counts`)."""
  lines = []
  for results in results_list:
    for budget in results["config"]["budgets"]:
      for r in verdicts.regimes(results):
        text = ("- `{}`, {} tasks ({:,} steps, {} seeds, measured {}): "
                "{}").format(
            results["config"]["optimizer"], r, budget,
            results["config"]["seeds"], results["date"][:10],
            verdicts.regime_counts_text(verdicts.counts(results, budget, in_regime=r)))
        if verdicts.has_bare(results):
          text += "; bare (without its card's settings): " + (
              verdicts.regime_counts_text(verdicts.counts(results, budget, which="bare",
                                         in_regime=r)))
        lines.append(text + ".")
  return lines


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
          speedup=verdicts.speedup_text(e["speedup"]))
    entry = dict(counts=verdicts.counts(results, budget), tasks=per_task,
                 date=section["date"], seeds=c["seeds"],
                 baselines=list(c["baselines"]))
    if verdicts.untuned_names(results):
      entry["against_untuned"] = {
          name: dict(zip(("both", "tasks"), verdicts.beats(results, budget, name)))
          for name in verdicts.untuned_names(results)}
    present = verdicts.regimes(results)
    if len(present) > 1:
      entry["counts_by_regime"] = {r: verdicts.counts(results, budget, in_regime=r)
                                   for r in present}
    if verdicts.has_bare(results):
      entry["bare"] = dict(spec=verdicts.bare_spec(results), counts=verdicts.counts(
          results, budget, which="bare"), counts_by_regime={
              r: verdicts.counts(results, budget, which="bare", in_regime=r)
              for r in present})
    if outside_training:
      entry["counts_outside_training"] = verdicts.counts(results, budget,
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
                  verdicts.num(c["median_speedup"], 2)))
      outside = entry.get("counts_outside_training")
      if outside:
        text += ("; on the {} tasks whose models it never trained on: "
                 "both on {}, median speedup {}".format(
                     outside["tasks"], outside["both"],
                     verdicts.num(outside["median_speedup"], 2)))
      if c["diverged"]:
        text += "; diverged on {}".format(", ".join(c["diverged"]))
      text += verdicts.collapsed_text(c)
      for r, rc in entry.get("counts_by_regime", {}).items():
        text += "; {} tasks: both on {} of {}, median speedup {}".format(
            r, rc["both"], rc["tasks"], verdicts.num(rc["median_speedup"], 2))
      bare = entry.get("bare")
      if bare:
        text += ("; bare (without the card's settings): both on {} of {}, "
                 "median speedup {}".format(
                     bare["counts"]["both"], bare["counts"]["tasks"],
                     verdicts.num(bare["counts"]["median_speedup"], 2)))
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
  c = verdicts.counts(results, budget, which=which)
  if not c["tasks"]:
    return "—"
  return "{} of {} ({})".format(c["both"], c["tasks"],
                                verdicts.num(c["median_speedup"], 2))


def measured_on(results, kind="optimizer"):
  """The date of a page's runs of ``kind`` (a kind of
  :data:`reuse.KINDS`: ``"optimizer"``, the optimizer under test's;
  ``"untuned"``, the baselines without tuning's): its own, or the earliest
  of the earlier results they were taken from (``--reuse_optimizer``,
  ``--reuse_baselines``)."""
  _, taken_key, date_key = next(k for k in reuse.KINDS if k[0] == kind)
  source = results.get("baselines_from") or {}
  if source.get(taken_key) and source.get(date_key):
    return reuse.days(source[date_key])[0]
  return results["date"][:10]


# The baselines without tuning with a row of the README's table, by name
# (:mod:`untuned`): those a Keras user picks without tuning, as Keras makes
# them; each page holds all of them.
README_UNTUNED = (("schedule_free_adamw", "ScheduleFreeAdamW()"),
                  ("adam_default", "Adam()"), ("adamw_default", "AdamW()"))


def _column_pages(names, root):
  """Per column of :data:`README_COLUMNS`, the results of each of
  ``names`` (None where it has none at that budget)."""
  columns = []
  for heading, template, budget, _ in README_COLUMNS:
    pages = []
    for name in names:
      path = os.path.join(root, README_RUNS.get((heading, name),
                                                template.format(name=name)))
      results = _read(path) if os.path.isfile(path) else None
      ok = results is not None and budget in results["config"]["budgets"]
      pages.append(results if ok else None)
    columns.append(pages)
  return columns


def readme_table(names, root=ROOT):
  """The README's results table of the shipped optimizers ``names``
  (:data:`README_COLUMNS`, :data:`README_RUNS`) and of the baselines
  without tuning (:data:`README_UNTUNED`, from the first page of the
  column that ran them; '—' in the column without hand-set settings): a
  caption line with the runs' seeds, batch sizes and dates, then the
  Markdown table."""
  columns = _column_pages(names, root)
  rows, dates, used = [], [], []
  for i, name in enumerate(names):
    cells = []
    for (_, _, budget, which), pages in zip(README_COLUMNS, columns):
      if pages[i] is not None:
        used.append(pages[i])
        dates.append(measured_on(pages[i]))
      cells.append(readme_cell(pages[i], budget, which))
    rows.append("| `{}` | {} |".format(name, " | ".join(cells)))
  for name, shown in README_UNTUNED:
    cells = []
    for (_, _, budget, which), pages in zip(README_COLUMNS, columns):
      page = next((p for p in pages if p is not None and
                   name in verdicts.untuned_names(p)), None)
      if page is None or which == "bare":
        cells.append("—")
        continue
      dates.append(measured_on(page, "untuned"))
      cells.append(readme_cell(page, budget, name))
    rows.append("| `{}`, no tuning | {} |".format(shown, " | ".join(cells)))
  dates.sort()
  seeds = sorted({r["config"]["seeds"] for r in used})
  batches = sorted({r["config"]["batch_size"] for r in used})
  caption = ("Tasks where the optimizer matches tuned Adam on both counts, "
             "of the tasks run (median speedup over tuned Adam, capped at 1); "
             "2,000 steps unless marked; {} seeds per task, batch size {}; "
             "measured {} to {}; — where not run (an optimizer without "
             "hand-set settings has no run without them). The last rows are "
             "Keras's optimizers at their defaults on the same tasks "
             "(schedule-free scored at its averaged point).".format(
                 " or ".join(str(s) for s in seeds),
                 " or ".join(str(b) for b in batches),
                 dates[0] if dates else "—", dates[-1] if dates else "—"))
  header = "| optimizer | " + " | ".join(c[0] for c in README_COLUMNS) + " |"
  return [caption, "", header, "|---|" + "---|" * len(README_COLUMNS)] + rows


def shipped_readme_table():
  """:func:`readme_table` of the shipped optimizers."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  return readme_table(pretrained.names())
