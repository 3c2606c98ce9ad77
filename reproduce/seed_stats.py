"""Statistics over meta-training seeds: the t distribution, the interval of
a mean, Welch's t-test with its interval, Holm's correction and the
smallest difference a comparison could detect.

Why: the reproduction compares learned optimizers by their meta-training
seeds, a handful of values per arm, so every interval needs the t
distribution at few (and, for Welch, fractional) degrees of freedom. Its
CDF is the regularized incomplete beta function, which TensorFlow provides
(``tf.math.betainc``); the quantile inverts it by bisection. That keeps the
reports (medium.py, study_report.py) within the project's dependencies.
"""

import math

import numpy as np
import tensorflow as tf

# Bisection on t: the quantile to this absolute precision.
_QUANTILE_TOL = 1e-10


def _betainc(a, b, x):
  """I_x(a, b), the regularized incomplete beta function, in float64."""
  f64 = lambda v: tf.constant(v, tf.float64)
  return float(tf.math.betainc(f64(a), f64(b), f64(x)))


def _check_df(df):
  if not (df > 0 and math.isfinite(df)):
    raise ValueError("degrees of freedom must be positive and finite, got "
                     "{}".format(df))


def t_two_sided_p(t, df):
  """P(|T| >= |t|) for T ~ Student's t with ``df`` degrees of freedom."""
  _check_df(df)
  if math.isinf(t):
    return 0.
  return _betainc(df / 2., 0.5, df / (df + t * t))


def t_cdf(t, df):
  """P(T <= t) for T ~ Student's t with ``df`` degrees of freedom."""
  tail = 0.5 * t_two_sided_p(t, df)
  return 1. - tail if t > 0 else tail


def t_quantile(p, df):
  """The ``p`` quantile of Student's t with ``df`` degrees of freedom."""
  _check_df(df)
  if not 0. < p < 1.:
    raise ValueError("a quantile needs 0 < p < 1, got {}".format(p))
  if p < 0.5:
    return -t_quantile(1. - p, df)
  lo, hi = 0., 1.
  while t_cdf(hi, df) < p:
    lo, hi = hi, 2. * hi
  while hi - lo > _QUANTILE_TOL * max(1., hi):
    mid = 0.5 * (lo + hi)
    if t_cdf(mid, df) < p:
      lo = mid
    else:
      hi = mid
  return 0.5 * (lo + hi)


def _finite(values):
  values = np.asarray(values, np.float64).reshape(-1)
  return values[np.isfinite(values)]


def mean_interval(values, level=0.95):
  """``(mean, lo, hi)``: the mean of ``values`` (NaNs and infinities left
  out) and its ``level`` t-interval; the bounds are NaN with fewer than two
  values, all NaN with none."""
  v = _finite(values)
  if v.size == 0:
    return math.nan, math.nan, math.nan
  mean = float(np.mean(v))
  if v.size < 2:
    return mean, math.nan, math.nan
  half = (t_quantile(0.5 + level / 2., v.size - 1) *
          float(np.std(v, ddof=1)) / math.sqrt(v.size))
  return mean, mean - half, mean + half


def welch(a, b, level=0.95):
  """Welch's two-sided t-test of mean(a) - mean(b) and its ``level``
  interval with Welch–Satterthwaite degrees of freedom.

  Returns a dict: ``n_a``, ``n_b``, ``mean_a``, ``mean_b``, ``sd_a``,
  ``sd_b`` (ddof=1), ``delta``, ``se``, ``df``, ``t``, ``p``, ``lo``,
  ``hi``. With fewer than two values on a side everything but the counts,
  means and ``delta`` is NaN. Two constant samples: no spread, so the
  interval is the point and p is 0 (or 1 for equal means).
  """
  a, b = _finite(a), _finite(b)
  out = dict(n_a=int(a.size), n_b=int(b.size),
             mean_a=float(np.mean(a)) if a.size else math.nan,
             mean_b=float(np.mean(b)) if b.size else math.nan)
  out["delta"] = out["mean_a"] - out["mean_b"]
  nan = dict(sd_a=math.nan, sd_b=math.nan, se=math.nan, df=math.nan,
             t=math.nan, p=math.nan, lo=math.nan, hi=math.nan)
  if a.size < 2 or b.size < 2:
    out.update(nan)
    return out
  va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
  wa, wb = va / a.size, vb / b.size
  se = math.sqrt(wa + wb)
  out.update(sd_a=math.sqrt(va), sd_b=math.sqrt(vb), se=se)
  delta = out["delta"]
  if se == 0.:
    out.update(df=float(a.size + b.size - 2), lo=delta, hi=delta,
               t=0. if delta == 0 else math.copysign(math.inf, delta),
               p=1. if delta == 0 else 0.)
    return out
  df = (wa + wb) ** 2 / (wa ** 2 / (a.size - 1) + wb ** 2 / (b.size - 1))
  half = t_quantile(0.5 + level / 2., df) * se
  t = delta / se
  out.update(df=df, t=t, p=t_two_sided_p(t, df), lo=delta - half,
             hi=delta + half)
  return out


def holm(pvalues):
  """Holm's step-down adjusted p-values, in the order given (capped at 1;
  NaN entries stay NaN and do not count as tests). A test rejects at
  family-wise error ``alpha`` when its adjusted p is below ``alpha``."""
  p = np.asarray(pvalues, np.float64).reshape(-1)
  out = np.full(p.shape, np.nan)
  idx = [i for i in np.argsort(p, kind="stable") if np.isfinite(p[i])]
  m, running = len(idx), 0.
  for rank, i in enumerate(idx):
    running = max(running, min(1., (m - rank) * p[i]))
    out[i] = running
  return out.tolist()


def min_detectable(sd_a, n_a, sd_b, n_b, alpha=0.05, power=0.8):
  """The smallest true difference of means that Welch's two-sided test at
  level ``alpha`` finds with probability ``power``, given the spreads
  ``sd_a``, ``sd_b`` and counts ``n_a``, ``n_b``: (t_{1-alpha/2} +
  t_{power}) × its standard error, at the Welch–Satterthwaite degrees of
  freedom. NaN without a spread (fewer than two values on a side)."""
  if n_a < 2 or n_b < 2 or not (math.isfinite(sd_a) and math.isfinite(sd_b)):
    return math.nan
  wa, wb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
  if wa + wb == 0.:
    return 0.
  df = (wa + wb) ** 2 / (wa ** 2 / (n_a - 1) + wb ** 2 / (n_b - 1))
  return ((t_quantile(1. - alpha / 2., df) + t_quantile(power, df)) *
          math.sqrt(wa + wb))
