"""The protocol's criteria on the single look at the test tasks
(docs/learned-adamw.md, "Test"), from the benchmark's ``results.json``:
task by task, whether the chosen learned AdamW reaches tuned Adam's final
training loss and its test metric within tolerance, and whether it meets
both criteria against every baseline without tuning; the protocol asks
for both on at least :data:`NEEDED` of the four tasks.

``python -m l2o_scale.controller_training.test_look RESULTS_JSON`` prints
the rows and the two verdicts as Markdown.
"""

import json

from l2o_scale.benchmark import verdicts
from l2o_scale.runs import entry_point

PROG = "python -m l2o_scale.controller_training.test_look"
NEEDED = 3  # of the four test tasks


def rows(results, budget):
  """Per task at ``budget``: the comparison with tuned Adam and with each
  baseline without tuning (its name -> both criteria met)."""
  found = []
  for e in results["entries"]:
    if e["budget"] != budget:
      continue
    adam = verdicts.verdict(e) or {}
    against = verdicts.against_untuned(e)
    found.append(dict(
        task=e["task"], metric=e["metric"],
        test_metric=e["optimizer"]["summary"]["test_metric"]["mean"],
        adam_test_metric=e["baselines"]["adam"]["summary"]["test_metric"][
            "mean"],
        loss_ratio=adam.get("loss_ratio"), loss_ok=bool(adam.get("loss_ok")),
        metric_ok=bool(adam.get("metric_ok")), against_untuned=against,
        beats_every_untuned=verdicts.beats_every_untuned(e)))
  return found


def criteria(found, needed=NEEDED):
  """(tasks with both criteria against tuned Adam, tasks better than every
  baseline without tuning, whether each reaches ``needed``)."""
  adam = sum(r["loss_ok"] and r["metric_ok"] for r in found)
  every = sum(r["beats_every_untuned"] for r in found)
  return dict(adam=adam, untuned=every, tasks=len(found),
              adam_met=adam >= needed, untuned_met=every >= needed)


def markdown(found):
  names = list(found[0]["against_untuned"]) if found else []
  lines = ["| task | test metric (tuned Adam) | training loss / tuned Adam's "
           "| loss at or below | metric within tolerance | " +
           " | ".join("both vs {}".format(n) for n in names) + " |",
           "|---|---|---|---|---|" + "---|" * len(names)]
  for r in found:
    lines.append("| {} | {} {:.4g} ({:.4g}) | {:.3g} | {} | {} | {} |".format(
        r["task"], r["metric"], r["test_metric"], r["adam_test_metric"],
        r["loss_ratio"], "yes" if r["loss_ok"] else "no",
        "yes" if r["metric_ok"] else "no", " | ".join(
            "yes" if r["against_untuned"][n] else "no" for n in names)))
  c = criteria(found)
  lines += ["", "Both criteria against tuned Adam on {adam} of {tasks} "
            "tasks; better than every baseline without tuning on {untuned} "
            "of {tasks}.".format(**c)]
  return lines


def main(argv=None):
  p = entry_point.ArgumentParser(
      prog=PROG, description="The protocol's criteria on the test look, "
      "from the benchmark's results.json.")
  p.add_argument("results", help="results.json of the test look")
  args = p.parse_args(argv)
  try:
    with open(args.results, encoding="utf-8") as f:
      results = json.load(f)
  except (OSError, ValueError) as e:
    p.error("cannot read {}: {}".format(args.results, e))
  for budget in results["config"]["budgets"]:
    print("\n".join(markdown(rows(results, budget))))
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
