"""Tests of the statistics over meta-training seeds (reproduce/seed_stats.py)
and of the flatness study's results page (reproduce/study_report.py).

Why: the study's verdict is words that must follow its intervals exactly
(docs/flatness-study.md, Analysis). The t distribution, Welch's test and
Holm's correction are checked against published values and hand-computed
examples; the page is built from a synthetic study folder in the real
file format, finished and unfinished.
"""

import json
import math
import os
import pickle

import numpy as np
import pytest

from reproduce import medium
from reproduce import run_log
from reproduce import seed_stats
from reproduce import study_analysis
from reproduce import study_benchmark
from reproduce import study_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------ seed_stats
@pytest.mark.parametrize("p, df, expected", [
    (0.975, 7, 2.3646), (0.975, 14, 2.1448), (0.975, 1, 12.7062),
    (0.95, 30, 1.6973), (0.8, 14, 0.8681), (0.025, 7, -2.3646)])
def test_t_quantile_matches_the_tables(p, df, expected):
  assert seed_stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_and_two_sided_p():
  assert seed_stats.t_two_sided_p(2.0, 10) == pytest.approx(0.07339, abs=1e-5)
  assert seed_stats.t_two_sided_p(-2.0, 10) == pytest.approx(0.07339,
                                                             abs=1e-5)
  assert seed_stats.t_cdf(0., 3.5) == pytest.approx(0.5)
  # Cauchy (df 1): CDF 1/2 + atan(t)/pi.
  assert seed_stats.t_cdf(1.7, 1) == pytest.approx(
      0.5 + math.atan(1.7) / math.pi, abs=1e-12)
  q = seed_stats.t_quantile(0.9, 2.941)  # fractional df, as Welch's
  assert seed_stats.t_cdf(q, 2.941) == pytest.approx(0.9, abs=1e-10)
  with pytest.raises(ValueError, match="degrees of freedom"):
    seed_stats.t_quantile(0.9, 0)


def test_welch_on_a_hand_computed_example():
  """a = 1, 2, 3 (mean 2, var 1), b = 4, 6, 8 (mean 6, var 4): se =
  √(1/3 + 4/3), t = −4/se, df = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 50/17."""
  w = seed_stats.welch([1, 2, 3], [4, 6, 8])
  se = math.sqrt(5. / 3.)
  assert w["delta"] == -4.
  assert w["se"] == pytest.approx(se)
  assert w["t"] == pytest.approx(-4. / se)
  assert w["df"] == pytest.approx(50. / 17.)
  half = seed_stats.t_quantile(0.975, 50. / 17.) * se
  assert half == pytest.approx(3.2187586 * se, rel=1e-7)
  assert (w["lo"], w["hi"]) == pytest.approx((-4. - half, -4. + half))
  assert w["p"] == pytest.approx(0.0547868, abs=1e-6)
  # Fewer than two values on a side: a difference, no test.
  one = seed_stats.welch([1.], [4, 6, 8])
  assert one["delta"] == -5. and math.isnan(one["p"]) and math.isnan(
      one["lo"])
  # No spread at all: the interval is the point.
  flat = seed_stats.welch([2, 2], [1, 1])
  assert (flat["lo"], flat["hi"], flat["p"]) == (1., 1., 0.)


def test_mean_interval():
  mean, lo, hi = seed_stats.mean_interval([1., 2., 3.])
  half = 4.302653 / math.sqrt(3)  # t(0.975, 2) × sd 1 / √3
  assert (mean, lo, hi) == pytest.approx((2., 2. - half, 2. + half),
                                         rel=1e-6)
  mean, lo, hi = seed_stats.mean_interval([5.])
  assert mean == 5. and math.isnan(lo) and math.isnan(hi)


def test_holm_against_the_textbook_example():
  """Holm (1979) as in the textbook example: p = 0.01, 0.04, 0.03, 0.005 at
  family-wise 0.05; sorted 0.005 × 4, 0.01 × 3, 0.03 × 2, 0.04 × 1 with
  the running maximum: H1 and H4 rejected, H2 and H3 not."""
  adjusted = seed_stats.holm([0.01, 0.04, 0.03, 0.005])
  assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
  assert [a < 0.05 for a in adjusted] == [True, False, False, True]
  # Tests that could not run do not count towards m.
  assert seed_stats.holm([0.02, float("nan"), 0.5]) == pytest.approx(
      [0.04, float("nan"), 0.5], nan_ok=True)
  # Monotone: a larger p never gets a smaller adjusted p; capped at 1.
  assert seed_stats.holm([0.3, 0.2]) == pytest.approx([0.4, 0.4])
  assert seed_stats.holm([0.9, 0.8]) == [1., 1.]


def test_min_detectable_effect_at_8_seeds_is_about_one_and_a_half_sd():
  """The protocol's figure: 8 seeds per arm, equal spreads, 80% power at
  0.05: (t(0.975, 14) + t(0.8, 14)) × √(2/8) = 1.506 SD."""
  assert seed_stats.min_detectable(1., 8, 1., 8) == pytest.approx(
      (2.144787 + 0.868055) * 0.5, abs=1e-5)
  assert seed_stats.min_detectable(2., 8, 2., 8) == pytest.approx(
      2 * seed_stats.min_detectable(1., 8, 1., 8))
  assert seed_stats.min_detectable(1., 8, 1., 8, alpha=0.05 / 20) > 2.2
  assert math.isnan(seed_stats.min_detectable(1., 1, 1., 8))


# ------------------------------------------- medium.py's verdict tables
def test_verdict_table_gives_every_arm_its_flatness_with_intervals():
  """Every learned optimizer gets accuracy, loss, trace and top eigenvalue
  with a t-interval over training seeds; one training seed has no
  interval; a problem without flatness (the conv net) shows '—'."""
  def arm(acc, trace=None):  # {training seed: values over test seeds}
    per = {"loss": {t: [0.1] for t in acc},
           "accuracy": {t: [a] for t, a in acc.items()},
           "trace": {t: [trace[t]] for t in trace or {}},
           "top_eig": {t: [trace[t] / 10.] for t in trace or {}}}
    return {m: medium.pooled_stats(v) for m, v in per.items()}
  stats = {
      "mlp": {"l2o-scale": arm({1: .80, 2: .81, 3: .82},
                               {1: 10., 2: 20., 3: 30.}),
              "hess-1e-3": arm({1: .90}, {1: 5.}),
              "SGD": arm({None: .5})},
      "conv": {"l2o-scale": arm({1: .95, 2: .96}),
               "hess-1e-3": arm({1: .97, 2: .98})}}
  text = medium.arm_verdicts(stats, lambda p: p)
  half = 4.302653 * 10. / math.sqrt(3)  # t(0.975, 2) × sd 10 / √3
  assert ("| L2O-Scale (no reg.) | 3 | 0.8100 [0.7852, 0.8348] | 0.1 "
          "[0.1, 0.1] | 20 [{:.4g}, {:.4g}] | 2 [{:.4g}, {:.4g}] | (the "
          "control) |".format(20 - half, 20 + half, 2 - half / 10,
                              2 + half / 10)) in text
  assert ("| Hessian-ESD reg. α=1e-3 | 1 | 0.9000 (1 training seed) | 0.1 "
          "(1 training seed) | 5 (1 training seed) | 0.5 (1 training seed) "
          "| +0.0900 (too few seeds) |") in text
  assert "SGD" not in text  # baselines are not arms
  conv = text[text.index("Verdicts, conv"):]
  # Welch, sd 0.00707 on both sides, n 2: se 0.00707, df 2, ± 4.303 × se;
  # the medium rule (|Δ| > 2 × pooled sd) calls it beyond the spread while
  # the interval holds zero: the interval says what the rule does not.
  assert ("| Hessian-ESD reg. α=1e-3 | 2 | 0.9750 [0.9115, 1.0385] | 0.1 "
          "[0.1, 0.1] | — | — | +0.0200 [-0.0104, +0.0504] (beyond the "
          "spread) |") in conv


# ------------------------------------------------------- study_report.py
A_SIGMOID, A_DEEPER, L_SIGMOID, L_DEEPER = study_analysis.ENDPOINTS


def _row(endpoint, delta, lo, hi, p, holm, n=8):
  return dict(endpoint=endpoint, n_a=n, n_b=n, delta=delta, lo=lo, hi=hi,
              p=p, holm=holm)


def test_words_follow_the_intervals():
  words = lambda *a, **k: study_analysis.words(_row(*a, **k))
  # Inside the margin, not rejected: the equivalence statement.
  assert words(A_SIGMOID, 0.1, -0.2, 0.4, 0.5, 1.) == (
      "no effect of 0.5 points or more: +0.10 points [-0.20, +0.40]")
  # Crossing zero and the margin: the study cannot tell.
  assert words(A_SIGMOID, 0.1, -0.6, 0.8, 0.7, 1.) == (
      "cannot tell: +0.10 points [-0.60, +0.80]")
  # Above zero before the correction, not after it: still cannot tell.
  assert words(A_DEEPER, 0.9, 0.1, 1.7, 0.01, 0.2) == (
      "cannot tell: +0.90 points [+0.10, +1.70]")
  # Rejected after Holm: the effect named, with its interval.
  assert words(A_DEEPER, 0.9, 0.5, 1.3, 0.001, 0.02) == (
      "higher held-out accuracy: +0.90 points [+0.50, +1.30]")
  assert words(A_DEEPER, -0.2, -0.3, -0.1, 0.001, 0.02) == (
      "lower held-out accuracy: -0.20 points [-0.30, -0.10], less than "
      "0.5 points")
  # The interval touching the margin is not inside it.
  assert words(A_SIGMOID, 0., -0.5, 0.3, 0.9, 1.).startswith("cannot tell")
  # Losses: log10 differences, reported as ratios, margin a factor 1.25.
  lg = math.log10
  assert words(L_SIGMOID, lg(1.05), lg(0.9), lg(1.2), 0.4, 1.) == (
      "no effect of a factor 1.25 or more: ×1.05 [0.9, 1.2]")
  assert words(L_DEEPER, lg(0.5), lg(0.4), lg(0.6), 1e-5, 1e-4) == (
      "lower training loss: ×0.5 [0.4, 0.6]")
  assert words(L_DEEPER, lg(1.3), lg(0.8), lg(2.), 0.3, 1.) == (
      "cannot tell: ×1.3 [0.8, 2]")
  one = dict(_row(A_SIGMOID, 0.3, math.nan, math.nan, math.nan, math.nan),
             n_a=1)
  assert study_analysis.words(one) == (
      "too few training seeds (1 against 8): +0.30 points")


def _write_run(root, arm, tseed, problem, test_seed, accuracy, loss,
               trace=50., eig=5.):
  """metatest's two files of one run, as metatest.py writes them."""
  folder = os.path.join(root, "test", problem)
  os.makedirs(folder, exist_ok=True)
  name = "{}.t{}".format(arm, tseed)
  with open(os.path.join(folder, "seed{}_eval_loss_record.pickle-{}".format(
      test_seed, name)), "wb") as f:
    pickle.dump([np.float32(3.)] * 5 + [np.float32(loss)] * 10, f)
  with open(os.path.join(folder, "seed{}_heldout_record-{}.json".format(
      test_seed, name)), "w") as f:
    json.dump({"heldout_iter": [0, 15], "heldout_accuracy": [0.1, accuracy],
               "heldout_loss": [2., 0.3], "train_loss": [2., loss],
               "train_accuracy": [0.1, 0.9], "hessian_trace": trace,
               "hessian_top_eigenvalue": eig}, f)


def _offset(k):  # -1, 0, +1 in turn
  return k % 3 - 1


# The arms of the synthetic study (the protocol's), per training seed t:
# (accuracy in points, loss, Hessian trace).
ARMS = {
    "l2o-scale": lambda t: (89. + 0.1 * _offset(t), 0.01 * 1.1 ** _offset(t),
                            100. + _offset(t)),
    # One point better, the same loss, flatter: qualifies to ship.
    "hess-5pct-always": lambda t: (90. + 0.1 * _offset(t),
                                   0.01 * 1.1 ** _offset(t), 80. + _offset(t)),
    # The same accuracy (the pattern shifted: Δ = -0.0125 points, sd 0.09).
    "hess-5pct-posterior": lambda t: (89. + 0.1 * _offset(t + 1),
                                      0.01 * 1.1 ** _offset(t + 1),
                                      100. + _offset(t + 1)),
    "hess-25pct-always": lambda t: (89. + 0.1 * _offset(t + 2),
                                    0.01 * 1.1 ** _offset(t + 2),
                                    100. + _offset(t + 2)),
    "hess-25pct-posterior": lambda t: (89. + 0.1 * _offset(t + 1),
                                       0.01 * 1.1 ** _offset(t),
                                       100. + _offset(t)),
    # One point better, but twice the loss: beyond the loss margin.
    "reg-cl-mt": lambda t: (90. + 0.1 * _offset(t), 0.02 * 1.1 ** _offset(t),
                            90. + _offset(t)),
}


def test_the_synthetic_study_has_the_protocols_arms_and_seeds():
  assert tuple(ARMS) == study_analysis.ARMS
  assert study_analysis.CONTROL == "l2o-scale"
  assert study_analysis.SEEDS_PER_ARM == 8
  assert study_analysis.TEST_SEEDS == (6, 12, 18)
  assert study_analysis.PROBLEMS == ("mnist-mlp-sigmoid", "mnist-mlp-deeper")


def _study(root, seeds=range(1, 9), skip=()):
  """A synthetic study under ``root``; ``seeds``: the training seeds (or a
  function of the arm giving them); ``skip``: (arm, training seed,
  problem, test seed) runs left out."""
  for arm, value in ARMS.items():
    for t in seeds(arm) if callable(seeds) else seeds:
      acc, loss, trace = value(t)
      for problem in study_analysis.PROBLEMS:
        for s in study_analysis.TEST_SEEDS:
          if (arm, t, problem, s) not in skip:
            _write_run(root, arm, t, problem, s, acc / 100., loss, trace,
                       trace / 10.)
  return root


def _sections(text):
  """{heading: the section's text below it}."""
  parts = [p.split("\n", 1) for p in text.split("\n## ")[1:]]
  return {head: body.lstrip("\n") for head, body in parts}


def test_a_finished_study_gives_verdicts_and_what_ships(tmp_path):
  root = _study(str(tmp_path / "runs"))
  train = os.path.join(root, "train", "hess-5pct-always.t5", "sub")
  os.makedirs(train)
  with open(os.path.join(train, "meta_training_events.jsonl"), "w") as f:
    for k, score in ((1, 0.5), (2, 0.2)):
      f.write(json.dumps(dict(event="selection", meta_iteration=k,
                              number=k, score=score)) + "\n")
  out = tmp_path / "page"
  assert study_report.main(["--study_dir", root, "--out_dir", str(out)]) == 0
  for name in ("endpoints.png", "flatness.png"):
    assert (out / name).stat().st_size > 10000
  text = (out / "results.md").read_text()
  sec = _sections(text)
  assert "**The study is finished**" in sec["Status"]
  assert ("| hess-5pct-posterior | 8 (1, 2, 3, 4, 5, 6, 7, 8) | none | 15 |"
          in sec["Status"])
  rows = [l for l in sec["Verdicts"].splitlines()
          if l.startswith("| hess-5pct-always")]
  # Δ = 1 point exactly, equal spreads: ± t(0.975, 14) × sd × √(2/8);
  # flatness: trace 20 lower on both problems.
  sd = float(np.std([0.1 * _offset(t) for t in range(1, 9)], ddof=1))
  half = 2.1447867 * sd * 0.5
  assert len(rows) == 2 and all(
      "| higher held-out accuracy: +1.00 points [{:+.2f}, {:+.2f}] |".format(
          1 - half, 1 + half) in r for r in rows), rows
  assert all("| no effect of a factor 1.25 or more: ×1 [" in r and
             "| -20 [" in r for r in rows), rows
  same = [l for l in sec["Verdicts"].splitlines()
          if l.startswith("| hess-5pct-posterior")]
  assert all("| no effect of 0.5 points or more: -0.01 points [" in r
             for r in same), same
  ships = sec["What ships"]
  assert ships.startswith(
      "Verdict: hess-5pct-always qualifies under the rule. hess-5pct-always "
      "would ship as `l2o-entropy` (training seed 5, validation score 0.2).")
  assert ("| hess-5pct-posterior | no primary endpoint with higher accuracy "
          "after Holm's correction |") in ships
  # reg-cl-mt wins on accuracy but doubles the training loss.
  assert ("| reg-cl-mt | worse than the margin on L-sigmoid, L-deeper |"
          in ships)
  assert "| higher training loss: ×2 [" in sec["Verdicts"]
  # What the data exclude: the ends of each interval; hess-5pct-always's
  # gain of 1 point (the highest upper end, 1 + half); the shifted arms lie
  # inside the margin.
  out_rules = sec["What the study rules out"]
  assert ("| hess-5pct-always | below {:+.2f}, above {:+.2f} points | "
          "below {:+.2f}, above {:+.2f} points | below ×".format(
              1 - half, 1 + half, 1 - half, 1 + half) in out_rules)
  assert ("excludes a gain in held-out accuracy above {:+.2f} points (the "
          "highest upper end: hess-5pct-always on A-sigmoid;".format(1 + half)
          in out_rules)
  # Read together: Bonferroni's 1 - 0.05/20 intervals, t(0.99875, 14) =
  # 3.6745939 (scipy), for every comparison at once.
  joint = 3.6745939 * sd * 0.5
  assert ("over the 20 comparisons at once (Bonferroni's 99.75% intervals"
          in out_rules)
  assert ("| hess-5pct-always | [{:+.2f}, {:+.2f}] points | [{:+.2f}, "
          "{:+.2f}] points |".format(1 - joint, 1 + joint, 1 - joint,
                                     1 + joint) in out_rules)
  assert "and {:+.2f} points (hess-5pct-always on A-sigmoid)".format(
      1 + joint) in out_rules
  inside = out_rules.split("Intervals inside the equivalence margin: ")[
      1].split("\n")[0]
  assert "hess-5pct-posterior on A-sigmoid" in inside
  assert "hess-5pct-always on A-sigmoid" not in inside
  assert "reg-cl-mt on L-sigmoid" not in inside
  # The control's traces 100 + (0, 1, -1, 0, 1, -1, 0, 1): 100.125 ±
  # t(0.975, 7) × sd / √8 on both problems.
  half = 2.3646243 * float(np.std([_offset(t) for t in range(1, 9)],
                                  ddof=1)) / math.sqrt(8)
  assert "| l2o-scale | 100.1 [{:.4g}, {:.4g}] | 100.1 [".format(
      100.125 - half, 100.125 + half) in sec["Flatness"]
  # The protocol's 20 tests in Holm's family; the spreads and the smallest
  # effects.
  assert "Holm's strictest level 0.05/20" in sec["Power"]
  assert "| l2o-scale | {:.2f} points |".format(sd) in sec["Power"]
  mde = study_analysis.seed_stats.min_detectable(sd, 8, sd, 8)
  assert "| hess-5pct-always | {:.2f} (".format(mde) in sec["Power"]
  assert "![endpoints](endpoints.png)" in sec["Figures"]
  assert len([l for l in sec["Every test"].splitlines()
              if l.split(" | ")[1:2] in (["A-sigmoid"], ["A-deeper"],
                                         ["L-sigmoid"], ["L-deeper"])]) == 20


def test_a_partial_study_says_how_many_seeds_and_that_it_is_unfinished(
    tmp_path):
  seeds = {"hess-5pct-posterior": range(1, 5), "hess-25pct-always": (),
           "hess-25pct-posterior": (), "reg-cl-mt": (1,)}
  # hess-5pct-always seed 3 misses a test seed on the deeper MLP;
  # hess-5pct-posterior has seeds 1-4, reg-cl-mt one seed, the 25% arms
  # none.
  root = _study(str(tmp_path / "runs"),
                lambda arm: seeds.get(arm, range(1, 9)), skip={
                    ("hess-5pct-always", 3, "mnist-mlp-deeper", 12)})
  out = tmp_path / "page"
  assert study_report.main(["--study_dir", root, "--out_dir", str(out)]) == 0
  sec = _sections((out / "results.md").read_text())
  assert sec["Status"].startswith(
      "**The study is unfinished**: 5 of 6 arms have fewer than 8 training "
      "seeds with every endpoint (hess-5pct-always: 7; hess-5pct-posterior: "
      "4; hess-25pct-always: 0; hess-25pct-posterior: 0; reg-cl-mt: 1).")
  assert ("| hess-5pct-always | 7 (1, 2, 4, 5, 6, 7, 8) | 3 | 15 |"
          in sec["Status"])
  assert "| hess-25pct-always | 0 (none) | none | — |" in sec["Status"]
  assert ("| hess-25pct-always | 0 | no data yet | no data yet | — | — |"
          in sec["Verdicts"])
  # The sigmoid MLP counts seed 3, the deeper one does not.
  verdicts = sec["Verdicts"].split("### ")
  assert "| hess-5pct-always | 8 | higher" in verdicts[1]
  assert "| hess-5pct-always | 7 | higher" in verdicts[2]
  # 90 against the control's 89.0125.
  assert ("| reg-cl-mt | 1 | too few training seeds (1 against 8): +0.99 "
          "points |") in sec["Verdicts"]
  assert sec["What ships"].startswith(
      "Provisional: hess-5pct-always qualifies under the rule.")
  assert "nothing ships before every arm has 8" in sec["What ships"]
  assert ("| reg-cl-mt | not every endpoint has two training seeds on both "
          "sides |") in sec["What ships"]
  # Holm's family: the 8 tests that could run.
  assert "Holm's strictest level 0.05/8" in sec["Power"]
  assert ("Holm's correction over the 8 tests that could run (of 20 "
          "comparisons)") in sec["Verdicts"]


def test_holm_runs_over_every_test_present():
  values = {p: {k: {} for k in ("accuracy", "loss", "hessian_trace",
                                "hessian_top_eigenvalue")}
            for p in study_analysis.PROBLEMS}
  for arm, value in ARMS.items():
    for p in study_analysis.PROBLEMS:
      for k, kind in enumerate(("accuracy", "loss")):
        values[p][kind][arm] = {t: value(t)[k] for t in range(1, 9)}
  rows = study_analysis.compare_all(values, list(ARMS))
  assert len(rows) == 20
  assert [r["holm"] for r in rows] == pytest.approx(
      seed_stats.holm([r["p"] for r in rows]))
  first = min(rows, key=lambda r: r["p"])
  assert first["holm"] == pytest.approx(20 * first["p"])


def test_refuses_a_folder_without_runs(tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    study_report.main(["--study_dir", str(tmp_path), "--out_dir",
                       str(tmp_path / "out")])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].startswith("study_report.py: error: no meta-test of a "
                            "training seed")
  assert not (tmp_path / "out").exists()


def test_the_page_reports_each_arms_recorded_share(tmp_path):
  """The share a run recorded (regularizer_share events), the median over
  its unrolls, a meta-iteration repeated by a resume counted once; arms
  without a regularizer have no row."""
  def events(name, records):
    folder = tmp_path / name / "HierarchicalRNN_GRUCell_20_2"
    folder.mkdir(parents=True)
    with open(folder / run_log.EVENTS, "w") as f:
      for k, shares in records:
        f.write(json.dumps({"event": "regularizer_share",
                            "meta_iteration": k, "shares": shares}) + "\n")
        f.write(json.dumps({"event": "evaluation", "meta_iteration": k,
                            "cost": 1.0}) + "\n")
  # Meta-iteration 2 repeated after a resume: the second record counts.
  events("hess-5pct-always.t1", [(1, [0.01, 0.03]), (2, [0.9, 0.9]),
                                 (2, [0.05, 0.07])])
  events("hess-5pct-always.t2", [(1, [0.2])])
  events("l2o-scale.t1", [])
  shares = study_analysis.achieved_shares(str(tmp_path))
  assert shares == {"hess-5pct-always": {1: pytest.approx(0.04),
                                         2: pytest.approx(0.2)}}
  text = study_report.share_section(shares, ["l2o-scale",
                                             "hess-5pct-always",
                                             "hess-25pct-always"])
  rows = [l for l in text.splitlines() if l.startswith("| hess")]
  assert rows == ["| hess-5pct-always | 5% | 12.0% | t1: 4.0%, t2: 20.0% |",
                  "| hess-25pct-always | 25% | — | no run recorded yet |"]


def _train_run(root, arm, tseed, scores):
  """A meta-training folder with its selection scores and a best
  checkpoint's index file."""
  sub = os.path.join(root, "train", "{}.t{}".format(arm, tseed), "sub")
  os.makedirs(sub)
  with open(os.path.join(sub, "meta_training_events.jsonl"), "w") as f:
    for k, score in enumerate(scores, 1):
      f.write(json.dumps(dict(event="selection", meta_iteration=k,
                              number=k, score=score)) + "\n")
  open(os.path.join(sub, "model.ckpt-0.index"), "w").close()


def test_the_benchmark_stage_takes_the_best_arm_and_best_validation_seeds(
    tmp_path, capsys):
  """Across model families (the protocol): the regularized arm with the
  highest mean over the primary endpoints and the control, each its
  training seed with the lowest validation score; refused before the
  study is finished, shown with --dry_run."""
  values = {p: {"accuracy": {}, "loss": {}} for p in study_analysis.PROBLEMS}
  for arm, acc in (("l2o-scale", 89.), ("hess-5pct-always", 89.5),
                   ("reg-cl-mt", 89.7)):
    for p in study_analysis.PROBLEMS:
      values[p]["accuracy"][arm] = {t: acc for t in (1, 2)}
      values[p]["loss"][arm] = {t: 0.01 for t in (1, 2)}
  records = {"l2o-scale": {1: {"selections": [(1, 0.4)]},
                           2: {"selections": [(1, 0.5), (2, 0.3)]}},
             "reg-cl-mt": {1: {"selections": [(1, 0.2)]},
                           2: {"selections": [(1, float("nan"))]}}}
  best, seeds = study_benchmark.choose(values, records,
                                       list(study_analysis.ARMS))
  assert best == "reg-cl-mt" and seeds == {"reg-cl-mt": 1, "l2o-scale": 2}
  root = _study(str(tmp_path / "runs"), seeds=range(1, 4))
  for arm in study_analysis.ARMS:
    for t in range(1, 4):
      _train_run(root, arm, t, [0.5 - 0.1 * (t == 2)])
  with pytest.raises(SystemExit) as e:
    study_benchmark.main(["--study_dir", root])
  assert e.value.code == 2 and "the study is unfinished" in (
      capsys.readouterr().err)
  out = str(tmp_path / "bench")
  assert study_benchmark.main(["--study_dir", root, "--out", out,
                               "--dry_run"]) == 0
  printed = capsys.readouterr().out
  assert "(provisional: the study is unfinished)" in printed
  assert "--optimizer=checkpoint:" + os.path.join(
      root, "train", "l2o-scale.t2", "sub", "model.ckpt-0") in printed
  assert "--reuse_baselines=" + study_benchmark.BASELINES in printed
  assert os.path.exists(os.path.join(study_analysis.ROOT,
                                     study_benchmark.BASELINES))
  assert not os.path.exists(out)
