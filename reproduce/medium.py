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
                   "Adagrad": "tab:brown"}  # as plot.OPTIMIZER_STYLES
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


def _heldout_value(record, key):
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
        per[metric] = {t: np.asarray([_heldout_value(r, key) for _, r in
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
    st = stats[problem]
    finals = {v: st[v]["loss"]["values"] for v in st}
    best = set(best_tuned(finals).values())
    shown = [v for v in ordered_variants(st)
             if not tuned_lr(v) or v in best]
    lines += ["", "### {}".format(problem_label(problem)), "",
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
    regs = [v for v in ordered_variants(st)
            if v != "l2o-scale" and not is_baseline(v)]
    if "l2o-scale" in st and regs:
      lines += ["", "#### Regularizer effect ({})".format(
          problem_label(problem)), "",
                "Δ = mean(variant) − mean(L2O-Scale, no reg.) over "
                "per-training-seed means; verdict: " + VERDICT_RULE + ".", "",
                "| variant | Δ held-out accuracy | Δ Hessian trace | "
                "Δ top eigenvalue |", "|---|---|---|---|"]
      for v in regs:
        cells = []
        for metric in ("accuracy", "trace", "top_eig"):
          # Training seeds are the unit: with one, its test seeds are not
          # independent meta-training runs ("too few seeds").
          c = compare(st[v][metric]["per_seed"],
                      st["l2o-scale"][metric]["per_seed"])
          cells.append("—" if not math.isfinite(c["delta"]) else
                       "{:+.4g} ({})".format(round(c["delta"], 12) + 0.,
                                             c["verdict"]))
        lines.append("| {} | {} |".format(variant_label(v), " | ".join(cells)))
    sweep = [v for v in ordered_variants(st) if tuned_lr(v)]
    if sweep:
      lines += ["", "#### Learning-rate sweep ({})".format(
          problem_label(problem)), "",
                "Every swept learning rate; the lowest mean final train loss "
                "per optimizer (marked *) is the one shown above and in the "
                "figures. Mean ± std over test seeds.", "",
                "| optimizer | lr | final train loss | held-out accuracy |",
                "|---|---|---|---|"]
      for v in sweep:
        opt, lr = tuned_lr(v)
        lines.append("| {}{} | {} | {} | {} |".format(
            opt, " *" if v in best else "", v.split("-lr", 1)[1],
            _ms(st[v]["loss"]), _ms(st[v]["accuracy"], "{:.4f}")))
  return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- figures
def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def save_figure(fig, plt, out_prefix):
  """Writes ``out_prefix``.png and .pdf, closes ``fig``; returns the paths."""
  os.makedirs(os.path.dirname(os.path.abspath(out_prefix)), exist_ok=True)
  paths = []
  for ext in ("png", "pdf"):
    path = "{}.{}".format(out_prefix, ext)
    fig.savefig(path, dpi=110 if ext == "png" else None)
    paths.append(path)
  plt.close(fig)
  return paths


def _grid(plt, n, width=6.0, height=4.0, ncols=2):
  ncols = min(ncols, n)
  nrows = int(math.ceil(n / ncols))
  fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols,
                                                  height * nrows),
                           squeeze=False, layout="constrained")
  for ax in list(axes.flat)[n:]:
    ax.axis("off")
  return fig, axes


def _legend(fig, handles, panels_across):
  fig.legend(list(handles.values()), list(handles), loc="outside lower center",
             ncol=min(2 * panels_across, len(handles)), frameon=False,
             fontsize=9)


def plot_heldout_accuracy(heldout, out_prefix, problem_label, title=None):
  """Held-out accuracy vs step, one panel per problem, mean ± std band over
  all runs of a variant (best tuned LR only). Returns paths or []."""
  problems = [p for p in heldout if heldout[p]]
  if not problems:
    return []
  plt = _pyplot()
  fig, axes = _grid(plt, len(problems))
  handles = {}
  for ax, problem in zip(axes.flat, problems):
    grouped = group_runs(heldout[problem])
    runs = 0
    for i, v in enumerate(ordered_variants(grouped)):
      recs = [r for runs in grouped[v].values() for r in runs.values()
              if r.get("heldout_accuracy")]
      if not recs:
        continue
      n = min(len(r["heldout_accuracy"]) for r in recs)
      acc = np.asarray([r["heldout_accuracy"][:n] for r in recs], np.float64)
      steps = np.asarray(recs[0].get("iteration", list(range(n)))[:n])
      color, ls = variant_style(v, i)
      mean, std = acc.mean(0), acc.std(0)
      (line,) = ax.plot(steps, mean, color=color, linestyle=ls, lw=1.5)
      ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.12,
                      lw=0)
      handles.setdefault(variant_label(v), line)
      runs = max(runs, len(recs))
    ax.set_title("{} (up to {} runs)".format(problem_label(problem), runs),
                 fontsize=11)
    ax.set_xlabel("iteration")
    ax.set_ylabel("held-out test accuracy")
    ax.grid(True, alpha=0.3)
  _legend(fig, handles, axes.shape[1])
  fig.suptitle((title + "\n" if title else "") + "held-out accuracy: mean "
               "over all runs (training × test seeds), band ± 1 std",
               fontsize=10.5)
  return save_figure(fig, plt, out_prefix)


def plot_meta_training(logs, out_prefix, title=None):
  """One panel per variant: robust selection score (or evaluation cost)
  per evaluation, one line per training seed, log y; rollbacks as
  vertical dotted lines; diverged (inf) scores as x at the top edge."""
  variants = [v for v in ordered_variants(logs)
              if any(l["evaluations"] or l["selections"]
                     for l in logs[v].values())]
  if not variants:
    return []
  plt = _pyplot()
  fig, axes = _grid(plt, len(variants), 5.0, 3.4, ncols=3)
  cmap = plt.get_cmap("viridis")
  notes = False
  for ax, v in zip(axes.flat, variants):
    seeds = sorted(logs[v], key=lambda s: -1 if s is None else s)
    finite_max = 0.
    infs = []
    for j, s in enumerate(seeds):
      log = logs[v][s]
      color = cmap(j / max(1, len(seeds) - 1) * 0.85)
      lab = "train seed {}".format(s if s is not None else "—")
      for pts, style, what in ((log["selections"], "-", "selection"),
                               ([(k, c) for k, _, c in log["evaluations"]],
                                ":", "evaluation")):
        if not pts:
          continue
        k = np.asarray([p[0] for p in pts], np.float64)
        y = np.asarray([p[1] for p in pts], np.float64)
        ok = np.isfinite(y) & (y > 0)
        ax.plot(k[ok], y[ok], style, marker=".", color=color, lw=1.2,
                label="{}, {}".format(lab, what))
        if np.any(ok):
          finite_max = max(finite_max, float(np.max(y[ok])))
        infs += [(kk, color) for kk in k[~np.isfinite(y)]]
      for r in log["rollbacks"]:
        ax.axvline(r, color=color, ls=":", lw=0.8, alpha=0.7)
        notes = True
    ax.set_yscale("log")
    if infs and finite_max > 0:
      top = finite_max * 2
      for kk, color in infs:
        ax.plot([kk], [top], "x", color=color, ms=7, clip_on=False)
      ax.set_ylim(top=top * 1.2)
      notes = True
    ax.set_title("{} ({} training seed{})".format(
        variant_label(v), len(seeds), "" if len(seeds) == 1 else "s"),
                 fontsize=10)
    ax.xaxis.set_major_locator(plt.MaxNLocator(6, integer=True))
    ax.set_xlabel("evaluation / meta-iteration")
    ax.set_ylabel("score (lower is better)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=6.5, frameon=False)
  sub = ("solid: robust selection score (mean final objective of meta-test "
         "runs); dotted: evaluation cost")
  if notes:
    sub += "; x at top: diverged (inf); vertical dotted: rolled back"
  fig.suptitle((title + "\n" if title else "") + sub, fontsize=10)
  return save_figure(fig, plt, out_prefix)


def plot_accuracy_flatness(stats, out_prefix, problem_label, title=None):
  """Per problem a row: final held-out accuracy, Hessian trace, top
  eigenvalue per variant (bars, error bars = the pooled std)."""
  problems = [p for p in stats if any(
      stats[p][v]["accuracy"]["n_train"] for v in stats[p])]
  if not problems:
    return []
  plt = _pyplot()
  fig, axes = plt.subplots(len(problems), 3, squeeze=False,
                           figsize=(15, 3.8 * len(problems)),
                           layout="constrained")
  metrics = (("accuracy", "final held-out accuracy", False),
             ("trace", "Hessian trace (Hutchinson)", True),
             ("top_eig", "top Hessian eigenvalue", True))
  for row, problem in zip(axes, problems):
    st = stats[problem]
    best = set(best_tuned({v: st[v]["loss"]["values"] for v in st}).values())
    shown = [v for v in ordered_variants(st) if not tuned_lr(v) or v in best]
    for ax, (metric, name, log) in zip(row, metrics):
      x, labels = 0, []
      for i, v in enumerate(shown):
        s = st[v][metric]
        labels.append(variant_label(v))
        if s["n_train"] and math.isfinite(s["mean"]):
          color, ls = variant_style(v, i)
          # Points, not bars: the axes zoom in on the differences.
          ax.errorbar(x, s["mean"], yerr=s["std"], color=color, capsize=4,
                      marker="o" if ls == "-" else "s", ms=7,
                      mfc=color if ls == "-" else "white", mew=1.5)
        x += 1
      ax.set_xticks(range(len(labels)))
      ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7.5)
      if log and ax.has_data():
        ax.set_yscale("log")
      ax.set_title("{}: {}".format(problem_label(problem), name), fontsize=10)
      ax.grid(True, axis="y", alpha=0.3)
  fig.suptitle((title + "\n" if title else "") + "mean; error bars: std "
               "over training seeds (learned, filled circles) or over test "
               "seeds (baselines, open squares)", fontsize=10)
  return save_figure(fig, plt, out_prefix)
