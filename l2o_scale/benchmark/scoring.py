"""The benchmark's arithmetic: learning-rate selection, the speedup over
tuned Adam, and summaries over seeds. Pure functions of run records.

A run record (:meth:`l2o_scale.benchmark.training.Trainer.run`) holds
``steps``, ``train_loss`` (whole training split at those steps),
``final_train_loss``, ``validation_loss``, ``validation_metric``,
``test_loss``, ``test_metric`` and ``diverged``.
"""

import math

import numpy as np

SELECT_ON = ("metric", "loss")


def _finite(value):
  return value is not None and math.isfinite(value)


def select_lr(grid, higher_is_better, select_on="metric"):
  """The learning rate of the best grid run, judged on the validation split
  only (never on the test split).

  ``grid``: ``{lr: record}``. ``select_on="metric"``: the best final
  validation metric, ties broken by the lower validation loss;
  ``"loss"``: the lowest final validation loss. Diverged runs rank last.
  Returns None when every run diverged.
  """
  if select_on not in SELECT_ON:
    raise ValueError("select_on must be one of {}, not {!r}".format(
        SELECT_ON, select_on))
  sign = -1. if higher_is_better else 1.

  def key(lr):
    r = grid[lr]
    if r["diverged"] or not _finite(r["validation_loss"]):
      return (1, 0., 0.)
    if select_on == "loss":
      return (0, r["validation_loss"], 0.)
    return (0, sign * r["validation_metric"], r["validation_loss"])
  best = min(sorted(grid), key=key)
  return None if key(best)[0] else best


def steps_to_reach(steps, losses, target):
  """The first step at which a loss curve reaches ``target`` (<=),
  interpolated linearly in log(loss) between the recorded steps (exact for
  a curve that decays exponentially between them); None if never."""
  for i, (step, loss) in enumerate(zip(steps, losses)):
    if not _finite(loss):
      return None
    if loss <= target:
      if i == 0:
        return float(step)
      before, prev = steps[i - 1], losses[i - 1]
      if loss > 0 and target > 0:
        frac = (math.log(prev) - math.log(target)) / (
            math.log(prev) - math.log(loss))
      else:
        frac = (prev - target) / (prev - loss)
      return before + frac * (step - before)
  return None


def speedup(steps, adam_losses, target, budget):
  """Steps tuned Adam needs to reach ``target`` (the optimizer's final
  training loss) divided by the budget: below 1 where Adam gets there
  sooner. Where Adam never gets there within the budget the speedup is
  only known to exceed 1: ``{"value": 1.0, "lower_bound": True}``."""
  if not _finite(target):
    return {"value": None, "lower_bound": False, "adam_steps": None}
  needed = steps_to_reach(steps, adam_losses, target)
  if needed is None:
    return {"value": 1.0, "lower_bound": True, "adam_steps": None}
  return {"value": needed / budget, "lower_bound": False,
          "adam_steps": needed}


def mean_curve(records):
  """Geometric mean over seeds of the training-loss curves (the mean of
  log losses, as the curves are read on a log scale), with min and max.
  Curves of diverged runs are cut short: the steps all runs share."""
  length = min(len(r["train_loss"]) for r in records)
  values = np.array([r["train_loss"][:length] for r in records], float)
  with np.errstate(divide="ignore", invalid="ignore"):
    mean = np.exp(np.mean(np.log(values), axis=0))
  return (list(records[0]["steps"][:length]), mean.tolist(),
          values.min(axis=0).tolist(), values.max(axis=0).tolist())


def spread(values):
  """mean, min and max of the finite values; None where none are."""
  values = [v for v in values if _finite(v)]
  if not values:
    return {"mean": None, "min": None, "max": None, "n": 0}
  return {"mean": float(np.mean(values)), "min": float(min(values)),
          "max": float(max(values)), "n": len(values)}


# A finished run that gives back more than this share of the reduction of
# its training loss, from its first value to its lowest, by its last step
# has collapsed: it trained, then fell back (e.g. to the loss of a constant
# prediction) with a loss that stays finite, which the diverged flag misses.
COLLAPSE_SHARE = 0.5


def collapsed(record):
  """Whether a run that did not diverge collapsed (:data:`COLLAPSE_SHARE`
  of its gain given back by its end). False for a diverged run and for one
  whose loss never went below its first value."""
  losses = record["train_loss"]
  if record["diverged"] or not all(_finite(l) for l in losses):
    return False
  first, lowest, final = losses[0], min(losses), losses[-1]
  return lowest < first and final - lowest > COLLAPSE_SHARE * (first -
                                                               lowest)


def summarize(records):
  """Spread over seeds of a run's final numbers."""
  return {key: spread([r[key] for r in records])
          for key in ("final_train_loss", "validation_metric", "test_metric",
                      "test_loss")} | {
                          "diverged": sum(r["diverged"] for r in records)}


def task_speedup(learned, adam, budget):
  """The speedup of the mean curves, and per seed (seed i of the optimizer
  against seed i of tuned Adam)."""
  steps, adam_mean, _, _ = mean_curve(adam)
  finals = [r["final_train_loss"] for r in learned]
  if not all(_finite(f) for f in finals):
    target = None
  else:
    target = float(np.exp(np.mean(np.log(finals))))
  result = speedup(steps, adam_mean, target, budget)
  result["per_seed"] = [
      speedup(a["steps"], a["train_loss"], l["final_train_loss"], budget)
      for l, a in zip(learned, adam)]
  return result
