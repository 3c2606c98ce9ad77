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

import glob
import json
import math
import os

import numpy as np

# seed_stats imports TensorFlow: its start-up lines filtered as every
# command's are.
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top,wrong-import-position
quiet_cuda.install()
from reproduce import figures  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import medium  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import plot  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import run_log  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import seed_stats  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import styles  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce.pipeline import names  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce.pipeline import sizes  # pylint: disable=g-import-not-at-top,wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The name its refusals start with (the pipeline's last stage of the study
# size runs it as python -m reproduce.study_report).
PROG = "study_report.py"
# The study as the pipeline runs it (reproduce/pipeline/sizes.py): its arms
# (the control first), training seeds, test seeds and problems.
STUDY = sizes.SIZES["study"]
ARMS = sizes.STUDY_ARMS
CONTROL = ARMS[0]
SEEDS_PER_ARM = len(sizes.STUDY_SEEDS)
TEST_SEEDS = tuple(int(s) for s in STUDY.seeds.split(","))
PROBLEMS = STUDY.problems
# The protocol's analysis (docs/flatness-study.md).
ALPHA = 0.05  # family-wise error, Holm
LEVEL = 0.95  # intervals
POWER = 0.8
ACCURACY_MARGIN = 0.5  # points of held-out accuracy
LOSS_MARGIN = 1.25  # factor in training loss
LOG_LOSS_MARGIN = math.log10(LOSS_MARGIN)


class Endpoint(object):
  """One endpoint: ``name``, its ``problem``, ``kind`` ('accuracy' or
  'loss') and whether it is ``primary``."""

  def __init__(self, name, problem, kind, primary):
    self.name, self.problem, self.kind, self.primary = (name, problem, kind,
                                                        primary)

  @property
  def what(self):
    return ("held-out accuracy" if self.kind == "accuracy" else
            "training loss")


ENDPOINTS = (Endpoint("A-sigmoid", PROBLEMS[0], "accuracy", True),
             Endpoint("A-deeper", PROBLEMS[1], "accuracy", True),
             Endpoint("L-sigmoid", PROBLEMS[0], "loss", False),
             Endpoint("L-deeper", PROBLEMS[1], "loss", False))
# The mechanism: (key in metatest's held-out JSON, name).
FLATNESS = (("hessian_trace", "Hessian trace"),
            ("hessian_top_eigenvalue", "top Hessian eigenvalue"))


# ------------------------------------------------------------------ data
def _run_value(kind, curve, record):
  """One run's value: accuracy in points at the last evaluation, the mean
  of the last plot.FINAL_WINDOW minibatch losses, or a flatness key."""
  if kind == "loss":
    return (float(plot.final_losses({0: curve})[0]) if curve is not None
            else math.nan)
  if record is None:
    return math.nan
  if kind == "accuracy":
    return 100. * medium.heldout_value(record, "heldout_accuracy")
  return medium.heldout_value(record, kind)


def collect(results_dir):
  """Reads the runs: returns ``(values, runs)``. ``values[problem][kind]
  [arm][training seed]`` is the mean over test seeds (kinds: 'accuracy',
  'loss', and the FLATNESS keys), for training seeds with every one of the
  study's TEST_SEEDS; ``runs[problem][arm][training seed]``: the lengths
  of its loss curves (the steps run)."""
  losses, heldout = plot.load_results(results_dir)
  learned = {p: {n: c for n, c in losses.get(p, {}).items()
                 if styles.split_name(n)[1] is not None and
                 not styles.is_baseline(n)} for p in PROBLEMS}
  expected = list(TEST_SEEDS)
  values, runs = {}, {}
  for problem in PROBLEMS:
    by_name = learned[problem]
    kinds = ["accuracy", "loss"] + [k for k, _ in FLATNESS]
    out = values.setdefault(problem, {k: {} for k in kinds})
    for name, curves in by_name.items():
      arm, tseed = styles.split_name(name)
      records = heldout.get(problem, {}).get(name, {})
      runs.setdefault(problem, {}).setdefault(arm, {})[tseed] = sorted(
          {len(c) for c in curves.values()})
      if not set(expected) <= set(curves):
        continue
      for kind in kinds:
        v = [_run_value(kind, curves[s], records.get(s)) for s in expected]
        if all(math.isfinite(x) for x in v):
          out[kind].setdefault(arm, {})[tseed] = float(np.mean(v))
  return values, runs


def arms_of(runs):
  """The study's arms (the control first), then any other arm found."""
  found = {a for by_arm in runs.values() for a in by_arm}
  return list(ARMS) + styles.ordered(found - set(ARMS))


def endpoint_values(values, endpoint, arm):
  """``{training seed: value}`` on ``endpoint`` (losses as log10)."""
  by_seed = values.get(endpoint.problem, {}).get(endpoint.kind, {}).get(
      arm, {})
  if endpoint.kind == "loss":
    return {t: math.log10(v) if v > 0 else math.nan
            for t, v in by_seed.items()}
  return dict(by_seed)


# ------------------------------------------------------------- analysis
def compare_all(values, arms):
  """Each regularized arm against the control on each endpoint: a list of
  dicts (seed_stats.welch's, plus ``arm``, ``endpoint``, ``holm`` and
  ``words``), Holm's correction over every test that could run."""
  rows = []
  for arm in arms:
    if arm == CONTROL:
      continue
    for e in ENDPOINTS:
      a = list(endpoint_values(values, e, arm).values())
      b = list(endpoint_values(values, e, CONTROL).values())
      row = seed_stats.welch(a, b, LEVEL)
      row.update(arm=arm, endpoint=e)
      rows.append(row)
  adjusted = seed_stats.holm([r["p"] for r in rows])
  for r, p in zip(rows, adjusted):
    r["holm"] = p
    r["words"] = words(r)
  return rows


def _margin(endpoint):
  return (ACCURACY_MARGIN if endpoint.kind == "accuracy" else
          LOG_LOSS_MARGIN)


def inside_margin(row):
  """Whether the comparison's interval lies inside the equivalence margin."""
  margin = _margin(row["endpoint"])
  return -margin < row["lo"] and row["hi"] < margin


def format_effect(endpoint, delta, lo=math.nan, hi=math.nan):
  """``+0.42 points [-0.10, +0.94]`` or, for a loss (log10 differences),
  ``×1.08 [0.91, 1.28]``."""
  if endpoint.kind == "accuracy":
    text = "{:+.2f} points".format(delta)
    if math.isfinite(lo):
      text += " [{:+.2f}, {:+.2f}]".format(lo, hi)
    return text
  text = "×{:.3g}".format(10 ** delta)
  if math.isfinite(lo):
    text += " [{:.3g}, {:.3g}]".format(10 ** lo, 10 ** hi)
  return text


def words(row):
  """The protocol's words for one comparison: an effect where the
  Holm-adjusted test rejects, "no effect of <margin> or more" where the
  interval lies inside the margin, otherwise "cannot tell"; always with the
  estimate and its interval."""
  e = row["endpoint"]
  if row["n_a"] == 0 or row["n_b"] == 0:
    return "no data yet"
  effect = format_effect(e, row["delta"], row["lo"], row["hi"])
  if not math.isfinite(row["p"]):
    return "too few training seeds ({} against {}): {}".format(
        row["n_a"], row["n_b"], effect)
  inside = inside_margin(row)
  margin_text = ("{:g} points".format(ACCURACY_MARGIN) if e.kind ==
                 "accuracy" else "a factor {:g}".format(LOSS_MARGIN))
  if row["holm"] < ALPHA:
    if e.kind == "accuracy":
      way = "higher" if row["delta"] > 0 else "lower"
    else:
      way = "lower" if row["delta"] < 0 else "higher"
    text = "{} {}: {}".format(way, e.what, effect)
    if inside:
      text += ", less than {}".format(margin_text)
    return text
  if inside:
    return "no effect of {} or more: {}".format(margin_text, effect)
  return "cannot tell: {}".format(effect)


def ship_verdict(rows, arms):
  """``(qualifying arms, {arm: reason it does not qualify})`` under the
  protocol's rule: higher accuracy on a primary endpoint with Holm-adjusted
  p < ALPHA, and no endpoint's estimate worse than the control's by more
  than the margin (every endpoint measured)."""
  qualify, why_not = [], {}
  for arm in arms:
    if arm == CONTROL:
      continue
    mine = [r for r in rows if r["arm"] == arm]
    if any(not math.isfinite(r["p"]) for r in mine):
      why_not[arm] = "not every endpoint has two training seeds on both sides"
      continue
    wins = [r["endpoint"].name for r in mine if r["endpoint"].primary and
            r["delta"] > 0 and r["holm"] < ALPHA]
    worse = [r["endpoint"].name for r in mine if
             (r["delta"] < -ACCURACY_MARGIN if r["endpoint"].kind ==
              "accuracy" else r["delta"] > LOG_LOSS_MARGIN)]
    if wins and not worse:
      qualify.append(arm)
    elif worse:
      why_not[arm] = "worse than the margin on " + ", ".join(worse)
    else:
      why_not[arm] = ("no primary endpoint with higher accuracy after "
                      "Holm's correction")
  return qualify, why_not


# ------------------------------------------------------------ the page
def _seeds_text(seeds):
  return ", ".join(str(s) for s in sorted(seeds)) if seeds else "none"


def complete_seeds(values, arm):
  """The training seeds with every endpoint measured."""
  sets = [set(endpoint_values(values, e, arm)) for e in ENDPOINTS]
  return set.intersection(*sets) if sets else set()


def unfinished_arms(values, arms):
  """The arms with fewer than the protocol's training seeds with every
  endpoint measured."""
  return [a for a in arms if len(complete_seeds(values, a)) < SEEDS_PER_ARM]


def primary_mean(values, arm):
  """The arm's mean over the primary endpoints (each the mean over its
  training seeds): the protocol's ranking of arms."""
  return float(np.mean([np.mean(list(endpoint_values(values, e, arm).values()))
                        for e in ENDPOINTS if e.primary]))


def best_validation(train_records, arm):
  """``(score, training seed)``: the lowest selection score (the
  validation loss under --selection_objective=validation) over the arm's
  meta-training runs; None without records."""
  best = None
  for seed, log in train_records.get(arm, {}).items():
    scores = [s for _, s in log["selections"] if math.isfinite(s)]
    if scores and (best is None or min(scores) < best[0]):
      best = (min(scores), seed)
  return best


def status_section(values, runs, arms):
  """Whether the study is finished, and each arm's training seeds."""
  counts = {a: len(complete_seeds(values, a)) for a in arms}
  short = [a for a in arms if counts[a] < SEEDS_PER_ARM]
  if short:
    lines = ["**The study is unfinished**: {} of {} arms have fewer than {} "
             "training seeds with every endpoint ({}). Every number below "
             "is provisional, and nothing ships before every arm has {}."
             .format(len(short), len(arms), SEEDS_PER_ARM, "; ".join(
                 "{}: {}".format(a, counts[a]) for a in short),
                     SEEDS_PER_ARM)]
  else:
    lines = ["**The study is finished**: every arm has {} training seeds "
             "with every endpoint.".format(SEEDS_PER_ARM)]
  lines += ["", "The protocol: training seeds {} per arm, each meta-tested "
            "on test seeds {}. Unfinished: training seeds with some of "
            "their meta-tests, not all.".format(
                _seeds_text(sizes.STUDY_SEEDS), _seeds_text(TEST_SEEDS)),
            "", "| arm | training seeds with every endpoint | unfinished "
            "training seeds | steps |", "|---|---|---|---|"]
  for a in arms:
    done = complete_seeds(values, a)
    started = {t for p in PROBLEMS for t in runs.get(p, {}).get(a, {})}
    steps = sorted({n for p in PROBLEMS for r in runs.get(p, {}).get(
        a, {}).values() for n in r})
    lines.append("| {} | {} ({}) | {} | {} |".format(
        a, len(done), _seeds_text(done), _seeds_text(started - done),
        ", ".join("{:,}".format(n) for n in steps) or "—"))
  return "\n".join(lines) + "\n"


def _flatness_delta(values, problem, key, arm):
  a = list(values.get(problem, {}).get(key, {}).get(arm, {}).values())
  b = list(values.get(problem, {}).get(key, {}).get(CONTROL, {}).values())
  w = seed_stats.welch(a, b, LEVEL)
  if not math.isfinite(w["delta"]):
    return "—"
  if not math.isfinite(w["lo"]):
    return "{:+.4g}".format(w["delta"])
  return "{:+.4g} [{:+.4g}, {:+.4g}]".format(w["delta"], w["lo"], w["hi"])


def verdict_section(values, rows, arms):
  """Per problem: each regularized arm's words on its accuracy and loss
  endpoints, and the change in flatness beside them."""
  lines = []
  for problem in PROBLEMS:
    acc, loss = [e for e in ENDPOINTS if e.problem == problem]
    lines += ["### {} ({}, {})".format(plot.problem_label(problem), acc.name,
                                       loss.name), "",
              "| arm | training seeds | held-out accuracy ({}) | training "
              "loss ({}) | Δ Hessian trace | Δ top eigenvalue |".format(
                  acc.name, loss.name), "|---|---|---|---|---|---|"]
    for arm in arms:
      if arm == CONTROL:
        continue
      cells = [next(r["words"] for r in rows if r["arm"] == arm and
                    r["endpoint"] is e) for e in (acc, loss)]
      lines.append("| {} | {} | {} | {} | {} |".format(
          arm, len(endpoint_values(values, acc, arm)), " | ".join(cells),
          _flatness_delta(values, problem, FLATNESS[0][0], arm),
          _flatness_delta(values, problem, FLATNESS[1][0], arm)))
    lines.append("")
  return "\n".join(lines)


def details_section(rows):
  """Every test: the numbers behind the words."""
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
                         format_effect(e, r["delta"], r["lo"], r["hi"])
                         if math.isfinite(r["delta"]) else "—",
                         num(r["df"], "{:.1f}"), num(r["t"], "{:+.2f}"),
                         num(r["p"], "{:.3g}"), num(r["holm"], "{:.3g}")))
  return "\n".join(lines) + "\n"


def ship_section(rows, arms, values, train_records, finished):
  """The ship rule's verdict."""
  qualify, why_not = ship_verdict(rows, arms)
  lines = []
  if qualify:
    # The protocol's tie-break among arms: the highest mean over the two
    # primary endpoints (its "Across model families").
    best = max(qualify, key=lambda a: primary_mean(values, a))
    seed = best_validation(train_records, best)
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
                 .format(SEEDS_PER_ARM))
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
           "to `{}`'s.".format(LEVEL, CONTROL), ""]
  lines.append("| arm | " + " | ".join(
      "{} ({}) excluded".format(e.name, e.what) for e in ENDPOINTS) + " |")
  lines.append("|---|" + "---|" * len(ENDPOINTS))
  for arm in arms:
    cells = []
    for e in ENDPOINTS:
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
              for r in measured if inside_margin(r)]
    lines.append("Intervals inside the equivalence margin: {}.".format(
        ", ".join(inside) if inside else "none"))
    lines += [""] + joint_lines(measured)
  return "\n".join(lines) + "\n"


def joint_interval(row, tests):
  """``(lo, hi)``: the row's Welch interval at Bonferroni's level
  1 - ALPHA / tests, which holds for all ``tests`` comparisons at once with
  probability 1 - ALPHA (Holm's correction has no intervals of its own)."""
  half = seed_stats.t_quantile(1. - ALPHA / (2. * tests), row["df"]) * (
      row["se"])
  return row["delta"] - half, row["delta"] + half


def joint_lines(measured):
  """What the primary endpoints' intervals exclude read together: each 95%
  interval holds for its own comparison; the statement "every arm excludes
  a gain above X" needs the intervals of all comparisons at once."""
  tests = len(measured)
  primary = [r for r in measured if r["endpoint"].primary]
  if not primary:
    return []
  level = 1. - ALPHA / tests
  joint = [(r, joint_interval(r, tests)) for r in primary]
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
                                  for e in ENDPOINTS if e.primary) + " |",
           "|---|" + "---|" * sum(1 for e in ENDPOINTS if e.primary)]
  for arm in dict.fromkeys(r["arm"] for r in primary):
    cells = []
    for e in ENDPOINTS:
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
  cols = [(p, k, n) for k, n in FLATNESS for p in PROBLEMS]
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
  study could detect with POWER at a per-test ALPHA and at Holm's
  strictest level (ALPHA over the number of tests)."""
  m = sum(math.isfinite(r["p"]) for r in rows)
  lines = ["Standard deviation over training seeds of the per-training-seed "
           "values (losses: the factor one standard deviation of log10 loss "
           "spans):", "",
           "| arm | " + " | ".join(e.name for e in ENDPOINTS) + " |",
           "|---" * (len(ENDPOINTS) + 1) + "|"]
  for arm in arms:
    sds = []
    for e in ENDPOINTS:
      v = list(endpoint_values(values, e, arm).values())
      sds.append(_spread_text(e, float(np.std(v, ddof=1)) if len(v) > 1
                              else math.nan))
    lines.append("| {} | {} |".format(arm, " | ".join(sds)))
  lines += ["", "The smallest true difference each comparison detects with "
            "{:.0%} power (Welch, at the observed spreads and seeds): at a "
            "per-test {:g}, and in brackets at Holm's strictest level "
            "{:g}/{} (the first step of the correction; later steps lie "
            "between).".format(POWER, ALPHA, ALPHA, m), "",
            "| arm | " + " | ".join(e.name for e in ENDPOINTS) + " |",
            "|---" * (len(ENDPOINTS) + 1) + "|"]
  for arm in arms:
    if arm == CONTROL:
      continue
    cells = []
    for e in ENDPOINTS:
      r = next(r for r in rows if r["arm"] == arm and r["endpoint"] is e)
      mde = [seed_stats.min_detectable(r["sd_a"], r["n_a"], r["sd_b"],
                                       r["n_b"], a, POWER)
             for a in (ALPHA, ALPHA / max(m, 1))]
      cells.append("—" if not math.isfinite(mde[0]) else "{} ({})".format(
          *[_spread_text(e, x).replace(" points", "") for x in mde]) +
                   (" points" if e.kind == "accuracy" else ""))
    lines.append("| {} | {} |".format(arm, " | ".join(cells)))
  return "\n".join(lines) + "\n"


# -------------------------------------------------------------- figures
def _seed_panel(ax, by_arm, arms, log=False, margin=None):
  """One point per training seed (seeds side by side in increasing order,
  left of each arm's place), the mean and its interval right of them;
  ``log``: values are log10 and drawn on a log axis; ``margin``: the
  equivalence band around the control's mean (in the values' units)."""
  back = (lambda v: 10. ** np.asarray(v)) if log else np.asarray
  for i, arm in enumerate(arms):
    seeds = sorted(by_arm.get(arm, {}))
    if not seeds:
      continue
    kw = styles.line_kwargs(arm)
    v = [by_arm[arm][t] for t in seeds]
    dx = np.linspace(-0.35, -0.05, len(seeds)) if len(seeds) > 1 else [-0.2]
    ax.plot(i + np.asarray(dx), back(v), linestyle="none",
            marker=kw["marker"], ms=4, color=kw["color"], alpha=0.7,
            mfc="white", mec=kw["color"])
    mean, lo, hi = seed_stats.mean_interval(v, LEVEL)
    err = ([[back(mean) - back(lo)], [back(hi) - back(mean)]]
           if math.isfinite(lo) else None)
    ax.errorbar(i + 0.15, back(mean), yerr=err, color=kw["color"],
                marker=kw["marker"], ms=8, capsize=5, linestyle="none",
                mfc=kw["color"], mec=kw["color"])
    if arm == CONTROL:
      ax.axhline(back(mean), color=kw["color"], lw=0.8, ls="--")
      if margin is not None:
        ax.axhspan(back(mean - margin), back(mean + margin),
                   color=kw["color"], alpha=0.08, lw=0)
  ax.set_xticks(range(len(arms)))
  ax.set_xticklabels(["{} ({})".format(a, len(by_arm.get(a, {})))
                      for a in arms], rotation=30, ha="right",
                     rotation_mode="anchor", fontsize=8)
  ax.set_xlim(-0.6, len(arms) - 0.4)
  if log and ax.has_data():
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    if 0 < lo < hi:
      figures.format_log_axis(ax, lo, hi)
  ax.grid(True, axis="y", alpha=0.3)


def plot_endpoints(values, arms, out_prefix):
  """endpoints.png: a panel per endpoint."""
  plt = figures.pyplot()
  fig, axes = figures.grid(plt, len(ENDPOINTS), 6.0, 4.2)
  for ax, e in zip(axes.flat, ENDPOINTS):
    by_arm = {a: endpoint_values(values, e, a) for a in arms}
    _seed_panel(ax, by_arm, arms, log=e.kind == "loss", margin=_margin(e))
    ax.set_title("{} ({}): {}".format(e.name, "primary" if e.primary else
                                      "secondary",
                                      plot.problem_label(e.problem)),
                 fontsize=10)
    ax.set_ylabel("held-out accuracy (%)" if e.kind == "accuracy" else
                  "final training loss (mean of the last {} minibatches)"
                  .format(plot.FINAL_WINDOW), fontsize=8)
  figures.suptitle(fig, "The flatness study: endpoints at the end of "
                   "meta-testing", _FIGURE_NOTE + "; dashed: the control's "
                   "mean, shaded: the equivalence margin around it (±0.5 "
                   "points; a factor 1.25 in loss, means of log10 loss)",
                   axes.shape[1])
  return figures.save_figure(fig, plt, out_prefix, ("png",))


def plot_flatness(values, arms, out_prefix):
  """flatness.png: Hessian trace and top eigenvalue on both problems."""
  plt = figures.pyplot()
  fig, axes = figures.grid(plt, len(FLATNESS) * len(PROBLEMS), 6.0, 4.2)
  panels = [(k, n, p) for k, n in FLATNESS for p in PROBLEMS]
  for ax, (key, name, problem) in zip(axes.flat, panels):
    by_arm = {a: values.get(problem, {}).get(key, {}).get(a, {})
              for a in arms}
    _seed_panel(ax, by_arm, arms)
    ax.set_title("{}: {}".format(name, plot.problem_label(problem)),
                 fontsize=10)
  figures.suptitle(fig, "The flatness study: the optimizee's flatness at "
                   "the end of meta-testing", _FIGURE_NOTE +
                   "; dashed: the control's mean", axes.shape[1])
  return figures.save_figure(fig, plt, out_prefix, ("png",))


_FIGURE_NOTE = ("arm (training seeds); small open markers: one training "
                "seed each (its mean over test seeds), in increasing seed "
                "order from left to right; large marker and bar: the mean "
                "over training seeds and its 95% t-interval")



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


# The share each arm was calibrated for (docs/flatness-study.md, Arms).
TARGET_SHARES = {"hess-5pct-always": 0.05, "hess-5pct-posterior": 0.05,
                 "hess-25pct-always": 0.25, "hess-25pct-posterior": 0.25,
                 "reg-cl-mt": 0.05}


def achieved_shares(train_dir):
  """``{arm: {training seed: median share}}``: the regularizer's share of
  the meta-gradient that each run recorded (``regularizer_share`` events of
  its ``meta_training_events.jsonl``; a meta-iteration repeated by a resume
  counts once, its last record), the median over the unrolls where the
  term acted."""
  out = {}
  pattern = os.path.join(train_dir, "*", "*", run_log.EVENTS)
  for path in sorted(glob.glob(pattern)):
    name = os.path.basename(os.path.dirname(os.path.dirname(path)))
    by_iteration = {}
    with open(path) as f:
      for line in f:
        if line.strip():
          event = json.loads(line)
          if event.get("event") == "regularizer_share":
            by_iteration[event["meta_iteration"]] = event["shares"]
    shares = [v for k in sorted(by_iteration) for v in by_iteration[k]]
    if shares:
      arm, seed = names.split_name(name)
      out.setdefault(arm, {})[seed] = float(np.median(shares))
  return out


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
    if arm not in TARGET_SHARES:
      continue
    mine = shares.get(arm, {})
    per_seed = ", ".join("t{}: {:.1%}".format(k, mine[k])
                         for k in sorted(mine)) or "no run recorded yet"
    median = ("{:.1%}".format(float(np.median(list(mine.values()))))
              if mine else "—")
    lines.append("| {} | {:.0%} | {} | {} |".format(
        arm, TARGET_SHARES[arm], median, per_seed))
  return "\n".join(lines) + "\n"


def page(values, runs, train_records, shares=None):
  """results.md's text."""
  arms = arms_of(runs)
  rows = compare_all(values, arms)
  finished = bool(arms) and not unfinished_arms(values, arms)
  sections = [
      ("Status", status_section(values, runs, arms)),
      ("Verdicts", "Each regularized arm against `{}`; Holm's correction "
       "over the {} tests that could run (of {} comparisons); the words "
       "follow the intervals (see \"How the numbers are made\"); Δ "
       "flatness: difference of means with Welch's {:.0%} interval.\n\n"
       .format(CONTROL, sum(math.isfinite(r["p"]) for r in rows), len(rows),
               LEVEL) + verdict_section(values, rows, arms)),
      ("What ships", ship_section(rows, arms, values, train_records,
                                  finished)),
      ("What the study rules out", rules_out_section(rows, arms)),
      ("Regularizer share", share_section(shares or {}, arms)),
      ("Flatness", "Each arm's mean over training seeds [{:.0%} "
       "t-interval].\n\n".format(LEVEL) + flatness_section(values, arms)),
      ("Power", power_section(values, rows, arms)),
      ("Figures", "![endpoints](endpoints.png)\n\n"
       "![flatness](flatness.png)\n"),
      ("Every test", details_section(rows)),
      ("How the numbers are made", METHOD.format(
          w=plot.FINAL_WINDOW, c=CONTROL, lv=LEVEL, a=ALPHA,
          lm=LOSS_MARGIN) + "\n"),
  ]
  text = "# The flatness study: results\n"
  for heading, body in sections:
    text += "\n## {}\n\n{}".format(heading, body)
  return text


def _parser():
  parser = entry_point.ArgumentParser(
      prog=PROG, description=__doc__.split("\n\n")[0])
  parser.add_argument("--study_dir", default=os.path.join(ROOT,
                                                         sizes.STUDY_OUT),
                      help="the study's output folder (test/<problem>/ "
                      "with metatest's outputs, train/ with the "
                      "meta-training runs)")
  parser.add_argument("--out_dir", default=os.path.dirname(os.path.join(
      ROOT, sizes.STUDY_OUT)),
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
  values, runs = collect(test_dir) if os.path.isdir(test_dir) else ({}, {})
  if not any(runs.values()) and args.allow_empty:
    print("no training seed of the study has every meta-test yet under {}: "
          "no page written".format(test_dir))
    return 0
  if not any(runs.values()):
    parser.error("no meta-test of a training seed (seed<S>_eval_loss_record"
                 ".pickle-<arm>.t<k>) under {}/<{}>/: run the study first "
                 "(REPRO_STUDY=1 bash reproduce/all.sh) or pass "
                 "--study_dir".format(test_dir, "|".join(PROBLEMS)))
  train_dir = os.path.join(args.study_dir, "train")
  train_records = (run_log.load_train_records(train_dir)
                   if os.path.isdir(train_dir) else {})
  os.makedirs(args.out_dir, exist_ok=True)
  arms = arms_of(runs)
  paths = plot_endpoints(values, arms, os.path.join(args.out_dir,
                                                    "endpoints"))
  paths += plot_flatness(values, arms, os.path.join(args.out_dir,
                                                    "flatness"))
  path = os.path.join(args.out_dir, "results.md")
  with open(path, "w") as f:
    f.write(page(values, runs, train_records,
                 achieved_shares(train_dir) if os.path.isdir(train_dir)
                 else {}))
  for p in paths + [path]:
    print("wrote", p)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
