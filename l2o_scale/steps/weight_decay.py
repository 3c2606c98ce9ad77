"""A decoupled weight decay of every step (``--weight_decay``), as a step
transform (:mod:`l2o_scale.steps.transform`).

Not in the original. ``new = proposed - s * weight_decay * old``, ``s`` the
step's :data:`~l2o_scale.steps.transform.SCALE` input where there is one
(the step schedule's, Keras' learning rate), else 1: the AdamW form, and
what Keras' ``weight_decay`` does before an optimizer's update. Why it
exists: the learned optimizers' steps have a fixed RMS per tensor
(``dynamic_output_scale``), so once the data is fit their weights keep
growing along the loss's margin direction and held-out accuracy falls; the
decay bounds that growth (docs/meta-testing.md).
"""

from l2o_scale.steps import transform


def weight_decayed(variables, new_variables, weight_decay, scale=None,
                   mask=None):
  """``new - scale * weight_decay * old`` for every tensor (those whose
  ``mask`` entry is True, if a mask is given). ``weight_decay`` is a
  Python float; 0 returns ``new_variables`` untouched (no op in the
  graph)."""
  new_variables = list(new_variables)
  if not weight_decay:
    return new_variables
  decay = float(weight_decay) if scale is None else scale * weight_decay
  mask = [True] * len(new_variables) if mask is None else list(mask)
  return [new - decay * old if on else new
          for old, new, on in zip(variables, new_variables, mask)]


class DecoupledWeightDecay(transform.StepTransform):
  """:func:`weight_decayed` as a step transform (optax's
  ``add_decayed_weights`` with a ``mask``); built by
  :func:`decoupled_weight_decay`."""

  def __init__(self, rate, mask=None):
    self.rate = float(rate)
    self.mask = None if mask is None else tuple(bool(m) for m in mask)

  def apply(self, old, proposed, inputs):
    return weight_decayed(old, proposed, self.rate,
                          inputs.get(transform.SCALE), self.mask)

  def key(self):
    return ("weight_decay", self.rate, self.mask)

  def keras_kwargs(self, total_steps):
    del total_steps
    return {"weight_decay": self.rate}


def decoupled_weight_decay(rate, mask=None):
  """The step transform of ``--weight_decay=rate``: the identity for 0 (no
  op), a ValueError for a negative or non-finite rate."""
  if not float(rate) >= 0. or float(rate) == float("inf"):
    raise ValueError("weight_decay must be >= 0, got {}".format(rate))
  if not rate:
    return transform.identity()
  return DecoupledWeightDecay(rate, mask)
