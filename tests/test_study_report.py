"""Tests of the statistics over meta-training seeds (reproduce/seed_stats.py)
and of the flatness study's results page (reproduce/study_report.py).

Why: the study's verdict is words that must follow its intervals exactly
(docs/flatness-study.md, Analysis). The t distribution, Welch's test and
Holm's correction are checked against published values and hand-computed
examples; the page is built from a synthetic study folder in the real
file format, finished and unfinished.
"""

import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "reproduce"))

import seed_stats  # pylint: disable=g-import-not-at-top,wrong-import-position


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
  import medium  # pylint: disable=g-import-not-at-top

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
