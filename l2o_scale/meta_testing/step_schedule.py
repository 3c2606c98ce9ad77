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
``LearnedOptimizer(learning_rate=...)`` takes for the same decay in Keras.
"""

import numpy as np

SCHEDULES = ("none", "cosine", "linear")


def step_scales(name, num_steps, decay_start=0.):
  """The scale of each of ``num_steps`` updates (float32 [num_steps]), or
  None for ``none``. Step t (0-based) gets cosine ``(1 + cos(pi t / T)) / 2``
  or linear ``1 - t / T``: 1 at the first step, above 0 at the last. With
  ``decay_start`` = f in [0, 1) the scale holds at 1 for the first f of the
  run and the decay spans the rest (t and T counted from there)."""
  if name in (None, "none"):
    return None
  if not 0. <= decay_start < 1.:
    raise ValueError("the decay must start within the run: decay_start in "
                     "[0, 1), got {}".format(decay_start))
  hold = int(round(decay_start * num_steps))
  t = np.maximum(np.arange(num_steps, dtype=np.float64) - hold, 0.) / float(
      num_steps - hold)
  if name == "cosine":
    scales = 0.5 * (1. + np.cos(np.pi * t))
  elif name == "linear":
    scales = 1. - t
  else:
    raise ValueError("unknown step schedule {!r}; choose one of {}".format(
        name, ", ".join(SCHEDULES)))
  return scales.astype(np.float32)
