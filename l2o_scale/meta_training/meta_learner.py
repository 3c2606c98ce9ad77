"""The meta-learner: what happens to a meta-gradient before it moves anything.

Port of the meta-update of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.215-240): non-finite entries of the
meta-gradients are replaced by zeros (``utils.make_finite``), each entry is
clipped to ``[-gradient_clip, gradient_clip]`` (``tf.clip_by_value``), and
the TF1 RMSProp meta-optimizer applies the result. One owner for the three,
as the outer trainers of google/learned_optimization split a gradient
*estimator* (here :mod:`l2o_scale.meta_training.meta_step`: one unroll in, meta-gradients
out) from the *learner* that applies them; the training loops (single
process, :mod:`l2o_scale.meta_training.training`; parameter servers,
:mod:`l2o_scale.meta_training.distributed`) only decide when.
"""

import collections

import tensorflow as tf

from optimizer import utils

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


class MetaLearner(object):
  """Applies meta-gradients with the original's rule.

  ``meta_optimizer`` is the :class:`l2o_scale.meta_training.tf1_optimizers.RMSProp` whose
  slots and counter go into checkpoints; this class adds the clipping level
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
    """make_finite, clip, RMSProp. Returns a :class:`MetaUpdate`."""
    grads = list(grads)
    clipped, nonfinite = self._apply(grads)
    self.last_grads = (grads, clipped)
    return MetaUpdate(clipped, int(nonfinite),
                      sum(g.shape.num_elements() for g in grads))
