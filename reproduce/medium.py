"""Medium-size reproduction: per-variant pooling over training seeds, tuned
learning-rate baselines, flatness and regularizer verdicts, as Markdown
tables (the meta-training logs and the facts of the run: reproduce/run_log.py).

Conventions (reproduce/all.sh, medium size; names and looks in styles.py):

* ``<variant>.t<k>``: learned optimizer ``variant`` meta-trained with training
  seed ``k``; a name without ``.t<k>`` is a variant with one run.
* ``<Opt>-lr<value>``: baseline ``Opt`` (SGD, Adam) at a tuned learning rate;
  only the best (lowest mean final train loss) is drawn per problem.
* held-out JSONs may carry ``hessian_trace`` and ``hessian_top_eigenvalue``.

Plain numpy and seed_stats.py (intervals) so it is unit-tested in
tests/test_reproduce_plot.py.
"""

import math

import numpy as np

from reproduce import seed_stats
from reproduce.styles import is_baseline  # pylint: disable=unused-import
from reproduce.styles import label as variant_label
from reproduce.styles import ordered as ordered_variants
from reproduce.styles import split_name
from reproduce.styles import tuned_lr

# The verdict rule, quoted in results.md.
VERDICT_RULE = ("a difference counts as real when |Δ| > 2 × pooled std "
                "(sqrt of the mean of the two sample variances, ddof=1) and "
                "both sides have n ≥ 2 training seeds")
# What the intervals of the verdict tables are, quoted in results.md.
INTERVAL_RULE = ("[lo, hi]: 95% t-interval over training seeds of the "
                 "per-training-seed means (none with one training seed); "
                 "for Δ, Welch's 95% interval (Welch–Satterthwaite degrees "
                 "of freedom)")


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


# ------------------------------------------------------------ aggregation
def pool_losses(losses, keep_all_tuned=False, finals=None):
  """``losses[problem][name][test_seed]`` -> ``[problem][variant][(train,
  test)]`` (all runs of a variant pooled); tuned-LR baselines other than the
  best per optimizer and problem dropped unless ``keep_all_tuned``."""
  out = {}
  for problem, by_name in losses.items():
    grouped = group_runs(by_name)
    keep = set(grouped)
    if not keep_all_tuned:
      best = set(best_tuned({v: finals(problem, v) for v in grouped}).values())
      keep = {v for v in grouped if not tuned_lr(v) or v in best}
    out[problem] = {
        v: {(t or 0, s): c for t, runs in grouped[v].items()
            for s, c in runs.items()} for v in keep}
  return out


def heldout_value(record, key):
  """``record[key]`` as a float (its last entry for a list), NaN if absent."""
  v = record.get(key)
  if isinstance(v, list):
    v = v[-1] if v else None
  try:
    return float(v) if v is not None else float("nan")
  except (TypeError, ValueError):
    return float("nan")


def variant_stats(losses, heldout, final_losses_fn):
  """``stats[problem][variant][metric]`` = pooled_stats dict for metrics
  ``loss``, ``accuracy``, ``trace``, ``top_eig``."""
  keys = {"accuracy": "heldout_accuracy", "trace": "hessian_trace",
          "top_eig": "hessian_top_eigenvalue"}
  stats = {}
  for problem, by_name in losses.items():
    g_loss = group_runs(by_name)
    g_held = group_runs(heldout.get(problem, {}))
    for v, runs in g_loss.items():
      per = {"loss": {t: final_losses_fn(c) for t, c in runs.items()}}
      for metric, key in keys.items():
        per[metric] = {t: np.asarray([heldout_value(r, key) for _, r in
                                      sorted(recs.items())])
                       for t, recs in g_held.get(v, {}).items()}
      stats.setdefault(problem, {})[v] = {m: pooled_stats(p)
                                          for m, p in per.items()}
  return stats


def _ms(s, fmt="{:.4g}"):
  if s["n_train"] == 0 or not math.isfinite(s["mean"]):
    return "—"
  return (fmt + " ± {:.2g}").format(s["mean"], s["std"])


def _n(s):
  return "{} × {}".format(s["n_train"], s["n_test"]) if s["n_train"] else "—"


def medium_tables(stats, problem_label):
  """The per-problem tables, regularizer effect and LR sweep (Markdown)."""
  lines = []
  for problem in stats:
    st, label = stats[problem], problem_label(problem)
    finals = {v: st[v]["loss"]["values"] for v in st}
    best = set(best_tuned(finals).values())
    lines += (_problem_table(st, label, best) + _regularizer_table(st, label)
              + _sweep_table(st, label, best))
  return "\n".join(lines) + "\n"


def _problem_table(st, label, best):
  """One problem's table: each optimizer shown (of the tuned baselines the
  ``best`` only)."""
  shown = [v for v in ordered_variants(st) if not tuned_lr(v) or v in best]
  lines = ["", "### {}".format(label), "",
           "Mean ± std: for learned optimizers over training seeds of the "
           "per-training-seed mean over test seeds; for baselines (one "
           "training run) over test seeds. n = training seeds × test "
           "seeds. Final train loss: mean of the last minibatch losses; "
           "Hessian trace (Hutchinson) and top eigenvalue (power "
           "iteration) at the final parameters on the training split.", "",
           "| optimizer | n | final train loss | held-out accuracy | "
           "Hessian trace | top eigenvalue |", "|---|---|---|---|---|---|"]
  for v in shown:
    s = st[v]
    lines.append("| {} | {} | {} | {} | {} | {} |".format(
        variant_label(v), _n(s["loss"]), _ms(s["loss"]),
        _ms(s["accuracy"], "{:.4f}"), _ms(s["trace"]), _ms(s["top_eig"])))
  return lines


def _regularizer_table(st, label):
  """Each regularized variant against L2O-Scale on one problem ([] without
  either)."""
  regs = [v for v in ordered_variants(st)
          if v != "l2o-scale" and not is_baseline(v)]
  if "l2o-scale" not in st or not regs:
    return []
  lines = ["", "#### Regularizer effect ({})".format(label), "",
           "Δ = mean(variant) − mean(L2O-Scale, no reg.) over "
           "per-training-seed means [Welch's 95% interval]; verdict: " +
           VERDICT_RULE + ".", "",
           "| variant | Δ held-out accuracy | Δ final train loss | "
           "Δ Hessian trace | Δ top eigenvalue |",
           "|---|---|---|---|---|"]
  for v in regs:
    cells = [delta_cell(st[v][metric], st["l2o-scale"][metric], fmt)
             for metric, fmt in (("accuracy", "{:+.4f}"),
                                 ("loss", "{:+.4g}"), ("trace", "{:+.4g}"),
                                 ("top_eig", "{:+.4g}"))]
    lines.append("| {} | {} |".format(variant_label(v), " | ".join(cells)))
  return lines


def _sweep_table(st, label, best):
  """Every swept learning rate of the tuned baselines on one problem ([]
  without a sweep)."""
  sweep = [v for v in ordered_variants(st) if tuned_lr(v)]
  if not sweep:
    return []
  lines = ["", "#### Learning-rate sweep ({})".format(label), "",
           "Every swept learning rate; the lowest mean final train loss "
           "per optimizer (marked *) is the one shown above and in the "
           "figures. Mean ± std over test seeds.", "",
           "| optimizer | lr | final train loss | held-out accuracy |",
           "|---|---|---|---|"]
  for v in sweep:
    opt, _ = tuned_lr(v)
    lines.append("| {}{} | {} | {} | {} |".format(
        opt, " *" if v in best else "", v.split("-lr", 1)[1],
        _ms(st[v]["loss"]), _ms(st[v]["accuracy"], "{:.4f}")))
  return lines


def interval_cell(values, fmt="{:.4g}"):
  """``mean [lo, hi]`` (95% t-interval) of per-training-seed ``values``;
  ``mean (1 training seed)`` without a spread; '—' without data."""
  mean, lo, hi = seed_stats.mean_interval(values)
  if not math.isfinite(mean):
    return "—"
  if not math.isfinite(lo):
    return (fmt + " (1 training seed)").format(mean)
  return (fmt + " [" + fmt + ", " + fmt + "]").format(mean, lo, hi)


def delta_cell(a, b, fmt="{:+.4g}", words=None):
  """``Δ [lo, hi] (verdict)``: pooled_stats ``a`` against ``b`` over their
  training seeds (Welch's interval, the VERDICT_RULE's verdict, renamed by
  ``words``); '—' without data."""
  c = compare(a["per_seed"], b["per_seed"])
  if not math.isfinite(c["delta"]):
    return "—"
  w = seed_stats.welch(a["per_seed"], b["per_seed"])
  text = fmt.format(round(c["delta"], 12) + 0.)
  if math.isfinite(w["lo"]):
    text += " [{}, {}]".format(fmt.format(round(w["lo"], 12) + 0.),
                               fmt.format(round(w["hi"], 12) + 0.))
  return "{} ({})".format(text, (words or {}).get(c["verdict"], c["verdict"]))


# The verdict tables' columns: (metric, heading, format spec of a value).
VERDICT_COLUMNS = (("accuracy", "held-out accuracy", ".4f"),
                   ("loss", "final train loss", ".4g"),
                   ("trace", "Hessian trace", ".4g"),
                   ("top_eig", "top eigenvalue", ".4g"))


def arm_verdicts(stats, problem_label, metric="accuracy"):
  """Per problem with L2O-Scale, every learned optimizer at the end of
  meta-testing: held-out accuracy, final train loss and flatness (Hessian
  trace, top eigenvalue) with their intervals over training seeds, and the
  difference in ``metric`` against L2O-Scale with its interval and verdict;
  '' when no variant can be compared."""
  problems = [p for p in stats if "l2o-scale" in stats[p]]
  if not any(v != "l2o-scale" and not is_baseline(v)
             for p in problems for v in stats[p]):
    return ""
  words = {"differs": "beyond the spread", "within seed spread": "within"}
  heading, spec = {m: (h, f) for m, h, f in VERDICT_COLUMNS}[metric]
  lines = []
  for p in problems:
    st = stats[p]
    learned = [v for v in ordered_variants(st) if not is_baseline(v)]
    lines += ["### Verdicts, {}".format(problem_label(p)), "",
              "| optimizer | training seeds | " + " | ".join(
                  h for _, h, _ in VERDICT_COLUMNS) +
              " | Δ {} vs L2O-Scale |".format(heading),
              "|---" * (len(VERDICT_COLUMNS) + 3) + "|"]
    for v in learned:
      cells = [interval_cell(st[v][m]["per_seed"], "{:" + f + "}")
               for m, _, f in VERDICT_COLUMNS]
      delta = ("(the control)" if v == "l2o-scale" else
               delta_cell(st[v][metric], st["l2o-scale"][metric],
                          "{:+" + spec + "}", words))
      lines.append("| {} | {} | {} | {} |".format(
          variant_label(v), st[v]["loss"]["n_train"] or "—",
          " | ".join(cells), delta))
    lines.append("")
  return "\n".join(lines)


def verdict_table(stats, problem_label, metric="accuracy"):
  """Regularized variants against L2O-Scale on every problem at once: one
  row per variant, one column per problem, cell ``Δ (verdict)``; '' when no
  variant can be compared."""
  problems = [p for p in stats if "l2o-scale" in stats[p]]
  variants = ordered_variants({v for p in problems for v in stats[p]
                               if v != "l2o-scale" and not is_baseline(v)})
  if not variants:
    return ""
  words = {"differs": "beyond the spread", "within seed spread": "within",
           "too few seeds": "too few seeds", "no data": "no data"}
  lines = ["| variant | " + " | ".join(problem_label(p) for p in problems) +
           " |", "|---" * (len(problems) + 1) + "|"]
  for v in variants:
    cells = []
    for p in problems:
      if v not in stats[p]:
        cells.append("not run")
        continue
      c = compare(stats[p][v][metric]["per_seed"],
                  stats[p]["l2o-scale"][metric]["per_seed"])
      cells.append("—" if not math.isfinite(c["delta"]) else
                   "{:+.4f} ({})".format(round(c["delta"], 12) + 0.,
                                         words[c["verdict"]]))
    lines.append("| {} | {} |".format(variant_label(v), " | ".join(cells)))
  return "\n".join(lines) + "\n"
