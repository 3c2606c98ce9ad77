"""The flatness study's results page: its Analysis (docs/flatness-study.md)
applied to the runs that exist, finished or not.

Why: the study's verdict is fixed in advance as words that follow the
intervals (an effect only where Holm's correction rejects, "no effect of
... or more" only where the interval lies inside the margin, otherwise
"cannot tell"); this script is the one place that turns its runs into
those words, so the page cannot say more than the numbers do.

  python -m reproduce.study_report \\
      --study_dir=reproduce/results/study/runs --out_dir=reproduce/results/study

Input: the study's output folder (reproduce/all.sh with REPRO_STUDY=1):
``<study_dir>/test/<problem>/`` holds metatest's
``seed<S>_eval_loss_record.pickle-<arm>.t<k>`` and
``seed<S>_heldout_record-<arm>.t<k>.json`` (held-out accuracy, Hessian
trace and top eigenvalue) of training seed ``k`` on test seed ``S``;
``<study_dir>/train/`` the meta-training runs' events (the validation
scores). Output: ``results.md``, ``endpoints.png`` and ``flatness.png``
in ``--out_dir``.

The unit is the meta-training seed: its value on an endpoint is the mean
over its test seeds; a training seed counts on a problem once every test
seed of the study is there (a partial study reports what has finished,
and says so).
"""

import math
import os

import numpy as np

# seed_stats imports TensorFlow: its start-up lines filtered as every
# command's are.
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top,wrong-import-position
quiet_cuda.install()
from reproduce import medium  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import plot  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import run_log  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import study_analysis as analysis  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import study_figures  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import seed_stats  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce.pipeline import sizes  # pylint: disable=g-import-not-at-top,wrong-import-position
# The name its refusals start with (the pipeline's last stage of the study
# size runs it as python -m reproduce.study_report).
PROG = "study_report.py"


def status_section(values, runs, arms):
  """Whether the study is finished, and each arm's training seeds."""
  counts = {a: len(analysis.complete_seeds(values, a)) for a in arms}
  short = [a for a in arms if counts[a] < analysis.SEEDS_PER_ARM]
  if short:
    lines = ["**The study is unfinished**: {} of {} arms have fewer than {} "
             "training seeds with every endpoint ({}). Every number below "
             "is provisional, and nothing ships before every arm has {}."
             .format(len(short), len(arms), analysis.SEEDS_PER_ARM, "; ".join(
                 "{}: {}".format(a, counts[a]) for a in short),
                     analysis.SEEDS_PER_ARM)]
  else:
    lines = ["**The study is finished**: every arm has {} training seeds "
             "with every endpoint.".format(analysis.SEEDS_PER_ARM)]
  lines += ["", "The protocol: training seeds {} per arm, each meta-tested "
            "on test seeds {}. Unfinished: training seeds with some of "
            "their meta-tests, not all.".format(
                analysis.seeds_text(sizes.STUDY_SEEDS), analysis.seeds_text(analysis.TEST_SEEDS)),
            "", "| arm | training seeds with every endpoint | unfinished "
            "training seeds | steps |", "|---|---|---|---|"]
  for a in arms:
    done = analysis.complete_seeds(values, a)
    started = {t for p in analysis.PROBLEMS for t in runs.get(p, {}).get(a, {})}
    steps = sorted({n for p in analysis.PROBLEMS for r in runs.get(p, {}).get(
        a, {}).values() for n in r})
    lines.append("| {} | {} ({}) | {} | {} |".format(
        a, len(done), analysis.seeds_text(done), analysis.seeds_text(started - done),
        ", ".join("{:,}".format(n) for n in steps) or "—"))
  return "\n".join(lines) + "\n"


def _flatness_delta(values, problem, key, arm):
  a = list(values.get(problem, {}).get(key, {}).get(arm, {}).values())
  b = list(values.get(problem, {}).get(key, {}).get(analysis.CONTROL, {}).values())
  w = seed_stats.welch(a, b, analysis.LEVEL)
  if not math.isfinite(w["delta"]):
    return "—"
  if not math.isfinite(w["lo"]):
    return "{:+.4g}".format(w["delta"])
  return "{:+.4g} [{:+.4g}, {:+.4g}]".format(w["delta"], w["lo"], w["hi"])


def verdict_section(values, rows, arms):
  """Per problem: each regularized arm's analysis.words on its accuracy and loss
  endpoints, and the change in flatness beside them."""
  lines = []
  for problem in analysis.PROBLEMS:
    acc, loss = [e for e in analysis.ENDPOINTS if e.problem == problem]
    lines += ["### {} ({}, {})".format(plot.problem_label(problem), acc.name,
                                       loss.name), "",
              "| arm | training seeds | held-out accuracy ({}) | training "
              "loss ({}) | Δ Hessian trace | Δ top eigenvalue |".format(
                  acc.name, loss.name), "|---|---|---|---|---|---|"]
    for arm in arms:
      if arm == analysis.CONTROL:
        continue
      cells = [next(r["words"] for r in rows if r["arm"] == arm and
                    r["endpoint"] is e) for e in (acc, loss)]
      lines.append("| {} | {} | {} | {} | {} |".format(
          arm, len(analysis.endpoint_values(values, acc, arm)), " | ".join(cells),
          _flatness_delta(values, problem, analysis.FLATNESS[0][0], arm),
          _flatness_delta(values, problem, analysis.FLATNESS[1][0], arm)))
    lines.append("")
  return "\n".join(lines)


def details_section(rows):
  """Every test: the numbers behind the analysis.words."""
  lines = ["Accuracies in points; losses: the mean over training seeds of "
           "log10 loss, shown as 10 to that power, and their ratio.", "",
           "| arm | endpoint | seeds (arm, control) | arm | control | "
           "difference [95% interval] | df | t | p | Holm-adjusted p |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    e = r["endpoint"]
    level = (lambda m: "{:.2f}".format(m)) if e.kind == "accuracy" else (
        lambda m: "{:.4g}".format(10 ** m))
    num = lambda x, f="{:.3g}": f.format(x) if math.isfinite(x) else "—"
    lines.append("| {} | {} | {}, {} | {} | {} | {} | {} | {} | {} | {} |"
                 .format(r["arm"], e.name, r["n_a"], r["n_b"],
                         level(r["mean_a"]) if r["n_a"] else "—",
                         level(r["mean_b"]) if r["n_b"] else "—",
                         analysis.format_effect(e, r["delta"], r["lo"], r["hi"])
                         if math.isfinite(r["delta"]) else "—",
                         num(r["df"], "{:.1f}"), num(r["t"], "{:+.2f}"),
                         num(r["p"], "{:.3g}"), num(r["holm"], "{:.3g}")))
  return "\n".join(lines) + "\n"


def ship_section(rows, arms, values, train_records, finished):
  """The ship rule's verdict."""
  qualify, why_not = analysis.ship_verdict(rows, arms)
  lines = []
  if qualify:
    # The protocol's tie-break among arms: the highest mean over the two
    # primary endpoints (its "Across model families").
    best = max(qualify, key=lambda a: analysis.primary_mean(values, a))
    seed = analysis.best_validation(train_records, best)
    lines.append("{}: {} qualif{} under the rule. {} would ship as "
                 "`l2o-entropy`{}.".format(
                     "Provisional" if not finished else "Verdict",
                     ", ".join(qualify), "ies" if len(qualify) == 1 else "y",
                     best, "" if seed is None else
                     " (training seed {}, validation score {:.4g})".format(
                         seed[1], seed[0])))
  else:
    lines.append("{}: no arm qualifies; nothing ships.".format(
        "Provisional" if not finished else "Verdict"))
  if not finished:
    lines.append("The study is unfinished: this verdict may change, and "
                 "nothing ships before every arm has {} training seeds."
                 .format(analysis.SEEDS_PER_ARM))
  if why_not:
    lines += ["", "| arm | why it does not qualify |", "|---|---|"]
    lines += ["| {} | {} |".format(a, why_not[a]) for a in arms
              if a in why_not]
  return "\n".join(lines) + "\n"


def rules_out_section(rows, arms):
  """What the data exclude: per regularized arm and endpoint the effects
  outside its 95% interval (per comparison, before Holm's correction,
  which only widens them), and the largest gain in held-out accuracy that
  any arm's interval still allows."""
  measured = [r for r in rows if math.isfinite(r["lo"])]
  if not measured:
    return "No comparison has two training seeds on both sides yet.\n"
  lines = ["Each comparison's {:.0%} interval (per comparison; Holm's "
           "correction only widens it) leaves out every effect beyond its "
           "ends: held-out accuracy in points, training loss as the ratio "
           "to `{}`'s.".format(analysis.LEVEL, analysis.CONTROL), ""]
  lines.append("| arm | " + " | ".join(
      "{} ({}) excluded".format(e.name, e.what) for e in analysis.ENDPOINTS) + " |")
  lines.append("|---|" + "---|" * len(analysis.ENDPOINTS))
  for arm in arms:
    cells = []
    for e in analysis.ENDPOINTS:
      r = next((r for r in measured if r["arm"] == arm and
                r["endpoint"] == e), None)
      if r is None:
        cells.append("-")
      elif e.kind == "accuracy":
        cells.append("below {:+.2f}, above {:+.2f} points".format(
            r["lo"], r["hi"]))
      else:
        cells.append("below ×{:.3g}, above ×{:.3g}".format(
            10 ** r["lo"], 10 ** r["hi"]))
    if any(c != "-" for c in cells):
      lines.append("| {} | {} |".format(arm, " | ".join(cells)))
  primary = [r for r in measured if r["endpoint"].primary]
  if primary:
    top = max(primary, key=lambda r: r["hi"])
    low = min(primary, key=lambda r: r["hi"])
    lines += ["", "Every interval on a primary endpoint excludes a gain in "
              "held-out accuracy above {:+.2f} points (the highest upper "
              "end: {} on {}; the lowest: {:+.2f} points, {} on {}).".format(
                  top["hi"], top["arm"], top["endpoint"].name, low["hi"],
                  low["arm"], low["endpoint"].name), ""]
    inside = ["{} on {}".format(r["arm"], r["endpoint"].name)
              for r in measured if analysis.inside_margin(r)]
    lines.append("Intervals inside the equivalence margin: {}.".format(
        ", ".join(inside) if inside else "none"))
    lines += [""] + joint_lines(measured)
  return "\n".join(lines) + "\n"


def joint_lines(measured):
  """What the primary endpoints' intervals exclude read together: each 95%
  interval holds for its own comparison; the statement "every arm excludes
  a gain above X" needs the intervals of all comparisons at once."""
  tests = len(measured)
  primary = [r for r in measured if r["endpoint"].primary]
  if not primary:
    return []
  level = 1. - analysis.ALPHA / tests
  joint = [(r, analysis.joint_interval(r, tests)) for r in primary]
  top = max(joint, key=lambda j: j[1][1])
  low = min(joint, key=lambda j: j[1][1])
  lines = ["Each 95% interval above holds for its own comparison. Read "
           "together, over the {} comparisons at once (Bonferroni's "
           "{:.4g}% intervals, family-wise 95%), the held-out accuracy "
           "intervals are wider: their upper ends lie between {:+.2f} "
           "points ({} on {}) and {:+.2f} points ({} on {}).".format(
               tests, 100. * level, low[1][1], low[0]["arm"],
               low[0]["endpoint"].name, top[1][1], top[0]["arm"],
               top[0]["endpoint"].name), "",
           "| arm | " + " | ".join("{} read together".format(e.name)
                                  for e in analysis.ENDPOINTS if e.primary) + " |",
           "|---|" + "---|" * sum(1 for e in analysis.ENDPOINTS if e.primary)]
  for arm in dict.fromkeys(r["arm"] for r in primary):
    cells = []
    for e in analysis.ENDPOINTS:
      if not e.primary:
        continue
      j = next((j for r, j in joint if r["arm"] == arm and
                r["endpoint"] == e), None)
      cells.append("-" if j is None else "[{:+.2f}, {:+.2f}] points".format(
          *j))
    lines.append("| {} | {} |".format(arm, " | ".join(cells)))
  return lines


def flatness_section(values, arms):
  """Each arm's Hessian trace and top eigenvalue at the end of
  meta-testing, on both problems, with their intervals."""
  cols = [(p, k, n) for k, n in analysis.FLATNESS for p in analysis.PROBLEMS]
  lines = ["| arm | " + " | ".join("{}, {}".format(
      n, plot.problem_label(p)) for p, _, n in cols) + " |",
           "|---" * (len(cols) + 1) + "|"]
  for arm in arms:
    cells = [medium.interval_cell(list(values.get(p, {}).get(k, {}).get(
        arm, {}).values())) for p, k, _ in cols]
    lines.append("| {} | {} |".format(arm, " | ".join(cells)))
  return "\n".join(lines) + "\n"


def _spread_text(endpoint, sd):
  if not math.isfinite(sd):
    return "—"
  return ("{:.2f} points".format(sd) if endpoint.kind == "accuracy" else
          "×{:.3g}".format(10 ** sd))


def power_section(values, rows, arms):
  """The observed standard deviations and the smallest differences the
  study could detect with analysis.POWER at a per-test analysis.ALPHA and at Holm's
  strictest level (analysis.ALPHA over the number of tests)."""
  m = sum(math.isfinite(r["p"]) for r in rows)
  lines = ["Standard deviation over training seeds of the per-training-seed "
           "values (losses: the factor one standard deviation of log10 loss "
           "spans):", "",
           "| arm | " + " | ".join(e.name for e in analysis.ENDPOINTS) + " |",
           "|---" * (len(analysis.ENDPOINTS) + 1) + "|"]
  for arm in arms:
    sds = []
    for e in analysis.ENDPOINTS:
      v = list(analysis.endpoint_values(values, e, arm).values())
      sds.append(_spread_text(e, float(np.std(v, ddof=1)) if len(v) > 1
                              else math.nan))
    lines.append("| {} | {} |".format(arm, " | ".join(sds)))
  lines += ["", "The smallest true difference each comparison detects with "
            "{:.0%} power (Welch, at the observed spreads and seeds): at a "
            "per-test {:g}, and in brackets at Holm's strictest level "
            "{:g}/{} (the first step of the correction; later steps lie "
            "between).".format(analysis.POWER, analysis.ALPHA, analysis.ALPHA, m), "",
            "| arm | " + " | ".join(e.name for e in analysis.ENDPOINTS) + " |",
            "|---" * (len(analysis.ENDPOINTS) + 1) + "|"]
  for arm in arms:
    if arm == analysis.CONTROL:
      continue
    cells = []
    for e in analysis.ENDPOINTS:
      r = next(r for r in rows if r["arm"] == arm and r["endpoint"] is e)
      mde = [seed_stats.min_detectable(r["sd_a"], r["n_a"], r["sd_b"],
                                       r["n_b"], a, analysis.POWER)
             for a in (analysis.ALPHA, analysis.ALPHA / max(m, 1))]
      cells.append("—" if not math.isfinite(mde[0]) else "{} ({})".format(
          *[_spread_text(e, x).replace(" points", "") for x in mde]) +
                   (" points" if e.kind == "accuracy" else ""))
    lines.append("| {} | {} |".format(arm, " | ".join(cells)))
  return "\n".join(lines) + "\n"



# ----------------------------------------------------------------- main
METHOD = (
    "The unit is the meta-training seed: an optimizer's value on an "
    "endpoint is the mean over its test seeds (a training seed counts once "
    "every test seed has finished on the endpoint's problem). A-sigmoid, "
    "A-deeper: held-out test accuracy after the last step, in points; "
    "L-sigmoid, "
    "L-deeper: the mean of the last {w} minibatch losses. Each regularized "
    "arm against `{c}`: the difference of means, Welch's two-sided t-test "
    "and its {lv:.0%} interval with Welch–Satterthwaite degrees of freedom; "
    "losses on log10 of each training seed's value (the difference of the "
    "mean log10 losses, shown as a ratio). Holm's correction over every test that could run, family-wise "
    "error {a:g}. Words: an effect is named only where the Holm-adjusted "
    "test rejects; \"no effect of 0.5 points (a factor {lm:g}) or more\" "
    "only where the {lv:.0%} interval lies inside that margin; otherwise "
    "\"cannot tell\", with the interval. Flatness (Hessian trace by "
    "Hutchinson's estimator, top eigenvalue by power iteration, at the "
    "optimizee's final parameters): no verdict rests on it. Protocol: "
    "[docs/flatness-study.md](../../../docs/flatness-study.md).")


def share_section(shares, arms):
  """The calibration's target beside the share each arm's runs had."""
  lines = ["The regularizer's share of the meta-gradient, "
           "‖alpha·∇reg‖ / ‖∇rest‖, as each run recorded it (median over "
           "the unrolls where the term acted); the alphas were set for the "
           "target share on the first meta-iterations without the "
           "validation hold-back (`calibration.json`).\n",
           "| arm | target | median over training seeds | per training "
           "seed |", "|---|---|---|---|"]
  for arm in arms:
    if arm not in analysis.TARGET_SHARES:
      continue
    mine = shares.get(arm, {})
    per_seed = ", ".join("t{}: {:.1%}".format(k, mine[k])
                         for k in sorted(mine)) or "no run recorded yet"
    median = ("{:.1%}".format(float(np.median(list(mine.values()))))
              if mine else "—")
    lines.append("| {} | {:.0%} | {} | {} |".format(
        arm, analysis.TARGET_SHARES[arm], median, per_seed))
  return "\n".join(lines) + "\n"


def page(values, runs, train_records, shares=None):
  """results.md's text."""
  arms = analysis.arms_of(runs)
  rows = analysis.compare_all(values, arms)
  finished = bool(arms) and not analysis.unfinished_arms(values, arms)
  sections = [
      ("Status", status_section(values, runs, arms)),
      ("Verdicts", "Each regularized arm against `{}`; Holm's correction "
       "over the {} tests that could run (of {} comparisons); the analysis.words "
       "follow the intervals (see \"How the numbers are made\"); Δ "
       "flatness: difference of means with Welch's {:.0%} interval.\n\n"
       .format(analysis.CONTROL, sum(math.isfinite(r["p"]) for r in rows), len(rows),
               analysis.LEVEL) + verdict_section(values, rows, arms)),
      ("What ships", ship_section(rows, arms, values, train_records,
                                  finished)),
      ("What the study rules out", rules_out_section(rows, arms)),
      ("Regularizer share", share_section(shares or {}, arms)),
      ("Flatness", "Each arm's mean over training seeds [{:.0%} "
       "t-interval].\n\n".format(analysis.LEVEL) + flatness_section(values, arms)),
      ("Power", power_section(values, rows, arms)),
      ("Figures", "![endpoints](endpoints.png)\n\n"
       "![flatness](flatness.png)\n"),
      ("Every test", details_section(rows)),
      ("How the numbers are made", METHOD.format(
          w=plot.FINAL_WINDOW, c=analysis.CONTROL, lv=analysis.LEVEL, a=analysis.ALPHA,
          lm=analysis.LOSS_MARGIN) + "\n"),
  ]
  text = "# The flatness study: results\n"
  for heading, body in sections:
    text += "\n## {}\n\n{}".format(heading, body)
  return text


def _parser():
  parser = entry_point.ArgumentParser(
      prog=PROG, description=__doc__.split("\n\n")[0])
  parser.add_argument("--study_dir", default=os.path.join(analysis.ROOT,
                                                         sizes.STUDY_OUT),
                      help="the study's output folder (test/<problem>/ "
                      "with metatest's outputs, train/ with the "
                      "meta-training runs)")
  parser.add_argument("--out_dir", default=os.path.dirname(os.path.join(
      analysis.ROOT, sizes.STUDY_OUT)),
                      help="where results.md, endpoints.png and "
                      "flatness.png go")
  parser.add_argument("--allow_empty", action="store_true",
                      help="with no finished training seed yet, say so and "
                      "exit 0 (the pipeline's last stage after a sitting "
                      "that finished none)")
  return parser


def main(argv=None):
  parser = _parser()
  args = parser.parse_args(argv)
  test_dir = os.path.join(args.study_dir, "test")
  values, runs = analysis.collect(test_dir) if os.path.isdir(test_dir) else ({}, {})
  if not any(runs.values()) and args.allow_empty:
    print("no training seed of the study has every meta-test yet under {}: "
          "no page written".format(test_dir))
    return 0
  if not any(runs.values()):
    parser.error("no meta-test of a training seed (seed<S>_eval_loss_record"
                 ".pickle-<arm>.t<k>) under {}/<{}>/: run the study first "
                 "(REPRO_STUDY=1 bash reproduce/all.sh) or pass "
                 "--study_dir".format(test_dir, "|".join(analysis.PROBLEMS)))
  train_dir = os.path.join(args.study_dir, "train")
  train_records = (run_log.load_train_records(train_dir)
                   if os.path.isdir(train_dir) else {})
  os.makedirs(args.out_dir, exist_ok=True)
  arms = analysis.arms_of(runs)
  paths = study_figures.plot_endpoints(values, arms, os.path.join(args.out_dir,
                                                    "endpoints"))
  paths += study_figures.plot_flatness(values, arms, os.path.join(args.out_dir,
                                                    "flatness"))
  path = os.path.join(args.out_dir, "results.md")
  with open(path, "w") as f:
    f.write(page(values, runs, train_records,
                 analysis.achieved_shares(train_dir) if os.path.isdir(train_dir)
                 else {}))
  for p in paths + [path]:
    print("wrote", p)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
