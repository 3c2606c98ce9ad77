"""The packed layout's tensors: T tensors laid end to end in [k, N] rows.

Not in the original, which runs its step once per tensor
(``optimizer/hierarchical_rnn.py`` ``_compute_updates``, l.352-423 of the
L2O-Scale-Evaluation copy). The hierarchical RNN's packed step
(:mod:`optimizer.hrnn_step`) lays the coordinates of all tensors end to end;
what it needs to tell the tensors apart (per-tensor sums and means, spreading
per-tensor values back over each tensor's coordinates) lives here.
"""

import numpy as np
import tensorflow as tf


# Most tensors for which Segments.spread selects per coordinate (about two
# vector operations per tensor and element) rather than writing the spread
# values out (a write and a read of [k, N]).
SELECT_MAX_TENSORS = 16


class Segments:
  """T tensors laid end to end along the last axis of [k, N] row matrices.

  What the packed step needs to tell tensors apart: per-tensor means of
  rows, and spreading per-tensor values back over each tensor's
  coordinates. Only the T sizes are kept (built once per set of sizes by
  the optimizer that uses it: ``HierarchicalRNN.segments``): nothing of
  size N is stored, so neither the traced graph nor memory grows with
  T * N (a model of hundreds of tensors and millions of parameters would
  otherwise carry gigabytes of constants in its step).
  """

  def __init__(self, sizes):
    self.sizes = list(sizes)
    self.count = len(self.sizes)
    # numpy, not tf constants: the cache outlives any one graph.
    self._inverse_sizes = np.array(
        [[1. / max(size, 1) for size in self.sizes]], np.float32)

  def concat(self, rows):
    """Lays per-tensor [k, N_t] blocks end to end."""
    return rows[0] if self.count == 1 else tf.concat(rows, 1)

  def split(self, rows):
    """The inverse of :meth:`concat`."""
    return [rows] if self.count == 1 else tf.split(rows, self.sizes, 1)

  def sums(self, rows):
    """[k, N] -> [k, T]: each row summed over each tensor.

    The largest tensor's sum is the row total minus the other tensors'
    sums: a reduction over a whole row fuses with whatever produced it,
    where one over a slice of the large tensor copies the slice first (XLA
    and plain TF alike). The difference carries the total's rounding, an
    absolute error of ~1e-7 of the row's sum.
    """
    if self.count == 1:
      return tf.reduce_sum(rows, 1, keepdims=True)
    largest = int(np.argmax(self.sizes))
    pieces = tf.split(rows, self.sizes, 1)
    sums = [None if t == largest else tf.reduce_sum(pieces[t], 1)
            for t in range(self.count)]
    sums[largest] = tf.reduce_sum(rows, 1) - tf.add_n(
        [x for x in sums if x is not None])
    return tf.stack(sums, 1)

  def means(self, rows):
    """[k, N] -> [k, T]: each row averaged over each tensor (:meth:`sums`)."""
    return self.means_of_sums(self.sums(rows))

  def means_of_sums(self, sums):
    """[k, T] per-tensor sums -> the per-tensor means."""
    return sums * tf.constant(self._inverse_sizes)

  def spread(self, per_tensor):
    """[k, T] -> [k, N]: each tensor's value on each of its coordinates
    ([k, 1] is returned as it is: it broadcasts).

    Up to :data:`SELECT_MAX_TENSORS` tensors, a chain of selects on the
    coordinate's index, which XLA fuses into the elementwise pass that
    reads the result, so the [k, N] result is never written out (T
    broadcasts laid end to end by a concat are: XLA fuses neither the
    broadcasts into the concat nor the concat into its reader; a gather
    by tensor index is fused but costs more per element than writing the
    result out). Beyond, the concat of broadcasts, whose cost does not grow
    with T. Nothing of size N is stored in the graph either way. The
    gradient is :meth:`sums` (autodiff of the selects would make T
    [k, N] masks).
    """
    if self.count == 1 or int(per_tensor.shape[1]) == 1:
      return per_tensor

    @tf.custom_gradient
    def spread_columns(values):
      return self._spread_forward(values), self.sums

    return spread_columns(per_tensor)

  def _spread_forward(self, per_tensor):
    k, total = int(per_tensor.shape[0]), sum(self.sizes)
    columns = tf.split(per_tensor, self.count, 1)
    if self.count > SELECT_MAX_TENSORS:
      return tf.concat([tf.broadcast_to(column, [k, size])
                        for column, size in zip(columns, self.sizes)], 1)
    index = tf.range(total)[tf.newaxis]
    spread = tf.broadcast_to(columns[0], [k, total])
    for column, start in zip(columns[1:], np.cumsum(self.sizes)[:-1]):
      spread = tf.where(index >= int(start), column, spread)
    return spread
