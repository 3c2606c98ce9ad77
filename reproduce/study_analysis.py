"""The flatness study's data and analysis (docs/flatness-study.md): its
arms, seeds, problems and endpoints, the runs collected from the study's
output folder, the comparisons of each arm with the control (Welch
intervals, Holm's correction, the equivalence margins) and the words they
allow; :mod:`reproduce.study_report` writes the page from them.
"""

import glob
import json
import math
import os

import numpy as np

from reproduce import medium
from reproduce import plot
from reproduce import run_log
from reproduce import seed_stats
from reproduce import styles
from reproduce.pipeline import names
from reproduce.pipeline import sizes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def margin_of(endpoint):
  """The equivalence margin of ``endpoint``, in its unit."""
  return (ACCURACY_MARGIN if endpoint.kind == "accuracy" else
          LOG_LOSS_MARGIN)


def inside_margin(row):
  """Whether the comparison's interval lies inside the equivalence margin."""
  margin = margin_of(row["endpoint"])
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
def seeds_text(seeds):
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


def joint_interval(row, tests):
  """``(lo, hi)``: the row's Welch interval at Bonferroni's level
  1 - ALPHA / tests, which holds for all ``tests`` comparisons at once with
  probability 1 - ALPHA (Holm's correction has no intervals of its own)."""
  half = seed_stats.t_quantile(1. - ALPHA / (2. * tests), row["df"]) * (
      row["se"])
  return row["delta"] - half, row["delta"] + half


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
