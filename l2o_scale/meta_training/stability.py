"""Divergence detection and recovery during meta-training (new in the port).

The original ``metaopt.py`` (l.215-240) makes non-finite meta-gradients
finite (zeros) and carries on; an optimizee that explodes (losses of 1e8
after a too-large meta-step) goes unnoticed, the meta-parameters keep the
damage, and training never recovers. This module decides when an unroll
*diverged* and keeps what is needed to undo it:

* :func:`divergence_reason` -- a one-line reason when the unroll's
  meta-objective or meta-gradient is not finite, or its optimizee objective
  is not finite or grew more than ``growth_limit`` times over the start of
  the unroll; ``None`` when healthy.
* :class:`MetaSnapshot` -- an in-memory copy of the meta-parameters and
  the meta-optimizer's slots, taken before each meta-iteration, to roll back
  to.

What happens on divergence is ``TrainingConfig.on_divergence``:
``continue`` (the default: the original's behaviour, with a warning),
``rollback`` (undo the meta-iteration: back to the best evaluated model, or
to the snapshot when there is none yet, and multiply the meta learning rate
by ``divergence_lr_decay``) or ``stop`` (end training; ``model.ckpt-0``
stays the best model evaluated before).
"""

import numpy as np

ON_DIVERGENCE = ("continue", "rollback", "stop")


def divergence_reason(problem_objectives, meta_objective, meta_gradients,
                      growth_limit):
  """Why an unroll diverged (a short phrase), or None if it did not.

  Args:
    problem_objectives: the optimizee's objective at each step (numpy).
    meta_objective: the unroll's meta-objective (a scalar).
    meta_gradients: the raw meta-gradients (tensors or arrays).
    growth_limit: > 0: the optimizee diverged when its last objective is
      above ``growth_limit`` times its first (objectives are nonnegative for
      training problems); <= 0 turns that test off.
  """
  objectives = np.asarray(problem_objectives, np.float64)
  if not np.all(np.isfinite(objectives)):
    return "the optimizee objective is not finite"
  if growth_limit > 0 and objectives.size and (
      objectives[-1] > growth_limit * max(abs(objectives[0]), 1e-12)):
    return "the optimizee objective grew from {:.4g} to {:.4g} (> {:g}x)".format(
        objectives[0], objectives[-1], growth_limit)
  if not np.isfinite(float(meta_objective)):
    return "the meta-objective is not finite"
  nonfinite = sum(int(np.sum(~np.isfinite(np.asarray(g))))
                  for g in meta_gradients)
  if nonfinite:
    return "{} meta-gradient entries are not finite".format(nonfinite)
  return None


class MetaSnapshot(object):
  """Values of the meta-parameters and meta-optimizer slots at one moment."""

  def __init__(self, meta_optimizer, meta_variables):
    self._variables = list(meta_variables) + meta_optimizer.slot_variables()
    self._values = None

  def take(self):
    self._values = [v.numpy() for v in self._variables]

  def restore(self):
    for var, value in zip(self._variables, self._values):
      var.assign(value)
