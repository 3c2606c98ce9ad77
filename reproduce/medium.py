"""Medium-size reproduction: per-variant pooling over training seeds, tuned
learning-rate baselines, flatness, regularizer verdicts and meta-training logs.

Conventions (reproduce/all.sh, medium size):

* ``<variant>.t<k>``: learned optimizer ``variant`` meta-trained with training
  seed ``k``; a name without ``.t<k>`` is a variant with one run.
* ``<Opt>-lr<value>``: baseline ``Opt`` (SGD, Adam) at a tuned learning rate;
  only the best (lowest mean final train loss) is drawn per problem.
* held-out JSONs may carry ``hessian_trace`` and ``hessian_top_eigenvalue``.
* ``<logs_dir>/train-<name>.log``: ``evaluation K[, num_steps=N], cost=X``,
  ``selection K, robust score=Y``, ``[meta-iteration K/N] ... rolled back``.

Plain numpy (no scipy) so it is unit-tested in tests/test_reproduce.py.
"""

import glob
import math
import os
import re

import numpy as np

TRAIN_SEED_PATTERN = re.compile(r"^(.+)\.t(\d+)$")
TUNED_PATTERN = re.compile(r"^(SGD|Adam|Adagrad)-lr(.+)$")
EVAL_LINE = re.compile(
    r"evaluation (\d+),(?: num_steps=(\d+),)? cost=([-+0-9.eEinfa]+)")
SELECT_LINE = re.compile(r"selection (\d+), robust score=([-+0-9.eEinfa]+)")
ROLLBACK_LINE = re.compile(r"\[meta-iteration (\d+)/(\d+)\].*rolled back")
BEST_LINE = re.compile(r"best model index=(-?\d+)")

VARIANT_LABELS = {
    "l2o-scale": "L2O-Scale (no reg.)",
    "l2o-entropy-reg-cl-mt": "L2O-Entropy (reg.+CL+MT)",
}
VARIANT_COLORS = {
    "l2o-scale": "tab:blue",
    "hess-1e-4": "#fdae6b", "hess-1e-3": "#f16913", "hess-1e-2": "#d94801",
    "jacob-1e-4": "#a1d99b", "jacob-1e-3": "#41ab5d", "jacob-1e-2": "#006d2c",
    "l2o-entropy-reg-cl-mt": "darkred",
}
VARIANT_ORDER = list(VARIANT_COLORS)
BASELINE_COLORS = {"SGD": "tab:gray", "Adam": "tab:purple",
                   "Adagrad": "tab:brown"}
# The verdict rule, quoted in results.md.
VERDICT_RULE = ("a difference counts as real when |Δ| > 2 × pooled std "
                "(sqrt of the mean of the two sample variances, ddof=1) and "
                "both sides have n ≥ 2 training seeds")


def split_name(name):
  """``(variant, train_seed)``; train_seed None without ``.t<k>``."""
  m = TRAIN_SEED_PATTERN.match(name)
  return (m.group(1), int(m.group(2))) if m else (name, None)


def tuned_lr(name):
  """``(optimizer, lr float)`` for ``<Opt>-lr<value>``, else None."""
  m = TUNED_PATTERN.match(name)
  if not m:
    return None
  try:
    return m.group(1), float(m.group(2))
  except ValueError:
    return None


def is_baseline(variant):
  return variant in BASELINE_COLORS or tuned_lr(variant) is not None


def variant_label(variant):
  if variant in VARIANT_LABELS:
    return VARIANT_LABELS[variant]
  m = re.match(r"^(hess|jacob)-(.+)$", variant)
  if m:
    kind = "Hessian-ESD" if m.group(1) == "hess" else "Jacobian"
    return "{} reg. α={}".format(kind, m.group(2))
  t = tuned_lr(variant)
  if t:
    return "{} (tuned, lr {})".format(t[0], variant.split("-lr", 1)[1])
  return {"SGD": "SGD (lr 1e-3)", "Adam": "Adam (lr 1e-4)",
          "Adagrad": "Adagrad (lr 1e-5)"}.get(variant, variant)


def variant_style(variant, index=0):
  """(colour, linestyle): learned solid, baselines dashed."""
  t = tuned_lr(variant)
  if t:
    return {"SGD": "black", "Adam": "tab:pink"}.get(t[0], "tab:olive"), "--"
  if variant in BASELINE_COLORS:
    return BASELINE_COLORS[variant], "--"
  extra = ["tab:cyan", "tab:olive", "tab:brown", "black"]
  return VARIANT_COLORS.get(variant, extra[index % len(extra)]), "-"


def ordered_variants(names):
  learned = [v for v in VARIANT_ORDER if v in names]
  learned += sorted(v for v in names if v not in VARIANT_ORDER
                    and not is_baseline(v))
  base = [b for b in BASELINE_COLORS if b in names]
  base += sorted((v for v in names if tuned_lr(v)), key=tuned_lr)
  return learned + base


def group_runs(by_optimizer):
  """``{optimizer: {test_seed: x}}`` -> ``{variant: {train_seed: {test_seed:
  x}}}`` (train_seed None for names without ``.t<k>``)."""
  out = {}
  for name, runs in by_optimizer.items():
    variant, tseed = split_name(name)
    out.setdefault(variant, {})[tseed] = runs
  return out


def pooled_stats(per_train_seed_values):
  """``{train_seed: 1-D values over test seeds}`` -> dict with ``mean`` and
  ``std`` over training seeds of the per-training-seed mean (one training
  seed: mean and std over test seeds), ``per_seed`` means, ``n_train``,
  ``n_test`` (test seeds per training seed, the smallest), ``values`` (the
  per-seed means used for tests)."""
  means, n_test, all_values = [], [], []
  for _, v in sorted(per_train_seed_values.items(),
                     key=lambda kv: -1 if kv[0] is None else kv[0]):
    v = np.asarray(v, np.float64).reshape(-1)
    v = v[np.isfinite(v)] if v.size else v
    if v.size == 0:
      continue
    means.append(float(np.mean(v)))
    n_test.append(v.size)
    all_values.append(v)
  if not means:
    return {"mean": float("nan"), "std": float("nan"), "per_seed": [],
            "n_train": 0, "n_test": 0, "values": np.zeros(0)}
  if len(means) == 1:
    values = all_values[0]
  else:
    values = np.asarray(means)
  return {"mean": float(np.mean(means)), "std": float(np.std(values)),
          "per_seed": means, "n_train": len(means), "n_test": min(n_test),
          "values": values}


def compare(a, b):
  """Regularized ``a`` against baseline ``b`` (per-training-seed means).

  Returns dict ``delta`` (mean a - mean b), ``pooled_std``, ``welch_t``,
  ``significant`` (the VERDICT_RULE) and ``verdict`` text.
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.size == 0 or b.size == 0:
    return {"delta": float("nan"), "pooled_std": float("nan"),
            "welch_t": float("nan"), "significant": False,
            "verdict": "no data"}
  delta = float(np.mean(a) - np.mean(b))
  if a.size < 2 or b.size < 2:
    return {"delta": delta, "pooled_std": float("nan"),
            "welch_t": float("nan"), "significant": False,
            "verdict": "too few seeds"}
  va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
  pooled = math.sqrt((va + vb) / 2.)
  se = math.sqrt(va / a.size + vb / b.size)
  t = delta / se if se > 0 else (math.inf if delta else 0.)
  sig = abs(delta) > 2. * pooled
  return {"delta": delta, "pooled_std": pooled, "welch_t": t,
          "significant": bool(sig),
          "verdict": "differs" if sig else "within seed spread"}


def best_tuned(final_loss_by_variant):
  """``{variant: 1-D final losses}`` -> ``{opt: variant}`` with the lowest
  mean final train loss among ``<opt>-lr*`` variants."""
  best = {}
  for v, losses in final_loss_by_variant.items():
    t = tuned_lr(v)
    losses = np.asarray(losses, np.float64)
    if not t or losses.size == 0:
      continue
    m = float(np.mean(losses))
    if not math.isfinite(m):
      continue
    if t[0] not in best or m < best[t[0]][1]:
      best[t[0]] = (v, m)
  return {k: v for k, (v, _) in best.items()}


def _number(text):
  return float(text)  # float() reads inf / -inf / nan


def parse_train_log(path):
  """Reads a metarun.py log. Returns dict of lists ``evaluations`` [(K,
  num_steps or None, cost)], ``selections`` [(K, score)], ``rollbacks``
  [K], and ``best`` (int or None)."""
  out = {"evaluations": [], "selections": [], "rollbacks": [], "best": None}
  with open(path, errors="replace") as f:
    for line in f:
      m = EVAL_LINE.search(line)
      if m:
        out["evaluations"].append((int(m.group(1)), None if m.group(2) is None
                                   else int(m.group(2)), _number(m.group(3))))
        continue
      m = SELECT_LINE.search(line)
      if m:
        out["selections"].append((int(m.group(1)), _number(m.group(2))))
        continue
      m = ROLLBACK_LINE.search(line)
      if m:
        out["rollbacks"].append(int(m.group(1)))
        continue
      m = BEST_LINE.search(line)
      if m:
        out["best"] = int(m.group(1))
  return out


def load_train_logs(logs_dir):
  """``{variant: {train_seed: parsed log}}`` from ``train-<name>.log``."""
  out = {}
  for path in sorted(glob.glob(os.path.join(logs_dir, "train-*.log"))):
    name = os.path.basename(path)[len("train-"):-len(".log")]
    variant, tseed = split_name(name)
    out.setdefault(variant, {})[tseed] = parse_train_log(path)
  return out
