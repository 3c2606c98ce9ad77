"""The meta-learner: what happens to a meta-gradient before it moves anything.

Port of the meta-update of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.215-240): non-finite entries of the
meta-gradients are replaced by zeros (``utils.make_finite``), each entry is
clipped to ``[-gradient_clip, gradient_clip]`` (``tf.clip_by_value``), and
the TF1 RMSProp meta-optimizer applies the result (or the meta-optimizer
``--meta_optimizer`` picks, :func:`build_meta_optimizer`). One owner for the three,
as the outer trainers of google/learned_optimization split a gradient
*estimator* (here :mod:`l2o_scale.meta_training.meta_step`: one unroll in, meta-gradients
out) from the *learner* that applies them; the training loops (single
process, :mod:`l2o_scale.meta_training.training`; parameter servers,
:mod:`l2o_scale.meta_training.distributed`) only decide when.
"""

import collections

import tensorflow as tf

from l2o_scale.steps import tf1_optimizers
from optimizer import utils

# --meta_optimizer: 'rmsprop' is the original's (TF1 RMSProp, mean square
# starting at 1); the others are options.
META_OPTIMIZERS = ("rmsprop", "rmsprop_ms0", "adam")

MetaUpdate = collections.namedtuple("MetaUpdate",
                                    ["clipped", "nonfinite", "entries"])


def prepare(grads, gradient_clip):
  """Made finite and clipped meta-gradients, and how many entries were not
  finite (a tensor). Graph-safe: the distributed worker calls it inside its
  compiled step."""
  nonfinite = tf.add_n([tf.reduce_sum(tf.cast(~tf.math.is_finite(g),
                                              tf.int64)) for g in grads])
  clipped = [tf.clip_by_value(utils.make_finite(g, tf.zeros_like(g)),
                              -gradient_clip, gradient_clip) for g in grads]
  return clipped, nonfinite


def build_meta_optimizer(variables, learning_rate, config):
  """The meta-optimizer ``config`` (a TrainingConfig) names, on ``variables``.

  ``rmsprop``: the original's ``tf.train.RMSPropOptimizer(learning_rate,
  decay=rms_decay, epsilon=rms_epsilon)`` (metaopt.py l.215-225), whose mean
  square starts at 1. ``rmsprop_ms0``: the same rule with the mean square
  starting at 0 (no implicit warm-up). ``adam``: TF1 Adam with bias
  correction (beta1 0.9, beta2 0.999, epsilon 1e-8). ``meta_lr_warmup`` > 0
  ramps the learning rate linearly over that many meta-updates, any rule.
  """
  name = config.meta_optimizer
  if name not in META_OPTIMIZERS:
    raise ValueError("meta_optimizer={!r} is not one of {}".format(
        name, ", ".join(META_OPTIMIZERS)))
  if config.meta_lr_warmup < 0:
    raise ValueError("meta_lr_warmup must be >= 0, got {}".format(
        config.meta_lr_warmup))
  if name == "adam":
    return tf1_optimizers.Adam(variables, learning_rate,
                               warmup_steps=config.meta_lr_warmup)
  return tf1_optimizers.RMSProp(
      variables, learning_rate, decay=config.rms_decay,
      epsilon=config.rms_epsilon,
      initial_mean_square=0. if name == "rmsprop_ms0" else 1.,
      warmup_steps=config.meta_lr_warmup)


class MetaLearner(object):
  """Applies meta-gradients with the original's rule.

  ``meta_optimizer`` is a :mod:`l2o_scale.steps.tf1_optimizers`
  meta-optimizer (:func:`build_meta_optimizer`) whose slots and counter go
  into checkpoints; this class adds the clipping level
  and the bookkeeping the training loop reports (the last raw and clipped
  gradients for the histogram summaries).
  """

  def __init__(self, meta_optimizer, gradient_clip):
    self.meta_optimizer = meta_optimizer
    self.gradient_clip = float(gradient_clip)
    self.last_grads = ([], [])
    # One compiled call: op by op, the ~6 ops per meta-variable cost as
    # much as a tenth of a 20-step unroll.
    self._apply = tf.function(self._apply_impl)

  def _apply_impl(self, grads):
    clipped, nonfinite = prepare(grads, self.gradient_clip)
    self.meta_optimizer.apply_gradients(clipped)
    return clipped, nonfinite

  def apply(self, grads):
    """make_finite, clip, meta-optimizer. Returns a :class:`MetaUpdate`."""
    grads = list(grads)
    clipped, nonfinite = self._apply(grads)
    self.last_grads = (grads, clipped)
    return MetaUpdate(clipped, int(nonfinite),
                      sum(g.shape.num_elements() for g in grads))
