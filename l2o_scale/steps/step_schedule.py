"""A decay of every update over a run of known length (``--step_schedule``).

Not in the original, which runs every optimizer at a constant step. Why it
exists: the hierarchical RNN (``dynamic_output_scale``, the original's
default) gives each tensor's update direction unit RMS and scales it by its
learned learning rate, which the trained optimizers keep at their cap; its
steps never shrink. Near a minimum that makes brief excursions (the loss of
the whole train split rising tenfold for a few dozen steps, then recovering)
that a decaying step removes. The schedule multiplies the update the
optimizer proposes, ``new = old + scale(t) * (proposed - old)``, whatever the
optimizer: a learned one and a baseline get the same decay, so the
comparison stays fair. The closed forms equal Keras' schedules with
``initial_learning_rate=1`` and ``decay_steps=num_steps``
(``CosineDecay``, ``PolynomialDecay(end_learning_rate=0)``), which
``LearnedOptimizer(learning_rate=...)`` takes for the same decay in Keras
(:func:`keras_schedule`).

As a step transform (:mod:`l2o_scale.steps.transform`): :class:`ScaleStep`
scales the step by its :data:`~l2o_scale.steps.transform.SCALE` input (Keras
gives its learning rate), :class:`ScaleBySchedule` also gives that input
from a named schedule (metatest.py).
"""

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.steps import transform

SCHEDULES = ("none", "cosine", "linear")


def step_scales(name, num_steps, decay_start=0.):
  """The scale of each of ``num_steps`` updates (float32 [num_steps]), or
  None for ``none``. Step t (0-based) gets cosine ``(1 + cos(pi t / T)) / 2``
  or linear ``1 - t / T``: 1 at the first step, above 0 at the last. With
  ``decay_start`` = f in [0, 1) the scale holds at 1 for the first f of the
  run and the decay spans the rest (t and T counted from there)."""
  check(name, decay_start)
  if name in (None, "none"):
    return None
  hold = int(round(decay_start * num_steps))
  t = np.maximum(np.arange(num_steps, dtype=np.float64) - hold, 0.) / float(
      num_steps - hold)
  if name == "cosine":
    scales = 0.5 * (1. + np.cos(np.pi * t))
  else:
    scales = 1. - t
  return scales.astype(np.float32)


def check(name, decay_start=0.):
  """ValueError unless ``name`` is one of :data:`SCHEDULES` (or None) and,
  for a decay, ``decay_start`` lies in [0, 1)."""
  if name not in SCHEDULES and name is not None:
    raise ValueError("unknown step schedule {!r}; choose one of {}".format(
        name, ", ".join(SCHEDULES)))
  if name not in (None, "none") and not 0. <= decay_start < 1.:
    raise ValueError("the decay must start within the run: decay_start in "
                     "[0, 1), got {}".format(decay_start))


def scaled_update(variables, proposed, scale):
  """``variables + scale * (proposed - variables)``: the proposed update
  scaled by ``scale`` (a scalar tensor). A scale of exactly 1 returns
  ``proposed`` bit for bit, so an unscaled run keeps its numbers, and takes
  a branch with no per-tensor work."""
  proposed = list(proposed)
  return tf.cond(tf.equal(scale, 1.), lambda: proposed,
                 lambda: [v + scale * (p - v)
                          for v, p in zip(variables, proposed)])


class ScaleStep(transform.StepTransform):
  """Scales the step by this step's ``SCALE`` input (:func:`scaled_update`),
  whoever gives it."""

  def apply(self, old, proposed, inputs):
    return scaled_update(old, proposed, inputs[transform.SCALE])


class ScaleBySchedule(ScaleStep):
  """Scales the step by a named schedule over the run (:func:`step_scales`);
  built by :func:`scale_by_schedule`."""

  def __init__(self, name, decay_start=0.):
    self.name, self.decay_start = name, float(decay_start)

  def step_inputs(self, num_steps):
    return {transform.SCALE: step_scales(self.name, num_steps,
                                         self.decay_start)}

  def keras_kwargs(self, total_steps):
    return {"learning_rate": keras_schedule(self.name, total_steps,
                                            self.decay_start)}


def scale_by_schedule(name="none", decay_start=0.):
  """The step transform of ``--step_schedule=name
  --step_decay_start=decay_start``: the identity for ``none``; checks its
  arguments now (a ValueError names what is wrong)."""
  check(name, decay_start)
  if name in (None, "none"):
    return transform.identity()
  return ScaleBySchedule(name, decay_start)


def keras_schedule(name, total_steps, decay_start=0.):
  """The Keras learning-rate schedule of :func:`step_scales` over
  ``total_steps``: ``CosineDecay`` (holding 1 for the first
  ``decay_start`` of the run as a "warm-up" from 1 to 1) or, for ``linear``
  from the first step, ``PolynomialDecay(end_learning_rate=0)``."""
  total_steps = int(total_steps)
  if total_steps < 1 or not 0. <= decay_start < 1.:
    raise ValueError("a long-run schedule needs total_steps >= 1 and "
                     "decay_start in [0, 1), got {} and {}".format(
                         total_steps, decay_start))
  hold = min(int(round(decay_start * total_steps)), total_steps - 1)
  if name == "cosine":
    return keras.optimizers.schedules.CosineDecay(
        1.0, decay_steps=total_steps - hold, warmup_target=1.0,
        warmup_steps=hold)
  if name == "linear" and not hold:
    return keras.optimizers.schedules.PolynomialDecay(1.0, total_steps, 0.)
  raise ValueError("Keras has no form of the {} step schedule with "
                   "decay_start={}: pass learning_rate yourself".format(
                       name, decay_start))
