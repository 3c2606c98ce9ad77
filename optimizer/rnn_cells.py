"""GRU cell with an injected bias, port of ``optimizer/rnn_cells.py`` (l.26-68).

The hierarchical RNN feeds the state of the level above into the gates of
the level below as an extra bias; a Keras GRUCell has no such input, so the
cell is kept as the original defines it.
"""

import tensorflow as tf

from optimizer import utils


class BiasGRUCell(tf.Module):
  """GRU cell (arXiv:1406.1078) with an additional bias on r, u and c.

  Args:
    num_units: state size.
    input_size: size of the inputs (needed up front: TF2 creates variables
      eagerly, where TF1 inferred it at the first call).
    tf1_scope: TF1 scope of the cell's parent, e.g. ``LOL/PerTensor/Layer0_RNN``;
      variables are ``<tf1_scope>/BiasGRUCell/{gates,candidate}/Affine/{Matrix,Bias}``.
    activation, scale, gate_bias_init, random_seed: as in the original.
  """

  def __init__(self, num_units, input_size, tf1_scope, activation=tf.tanh,
               scale=0.1, gate_bias_init=0., random_seed=None):
    super().__init__(name="BiasGRUCell")
    self._num_units = num_units
    self._activation = activation
    prefix = tf1_scope + "/BiasGRUCell"
    self.gates = utils.Affine(prefix + "/gates/Affine", input_size + num_units,
                              2 * num_units, scale=scale,
                              bias_init=gate_bias_init, random_seed=random_seed)
    self.candidate = utils.Affine(prefix + "/candidate/Affine",
                                  input_size + num_units, num_units,
                                  scale=scale, random_seed=random_seed)

  @property
  def state_size(self):
    return self._num_units

  @property
  def output_size(self):
    return self._num_units

  def tf1_variables(self):
    named = dict(self.gates.tf1_variables())
    named.update(self.candidate.tf1_variables())
    return named

  def __call__(self, inputs, state, bias=None):
    if bias is None:
      bias = tf.zeros((1, 3 * self._num_units))
    r_bias, u_bias, c_bias = tf.split(bias, 3, 1)
    r_lin, u_lin = tf.split(self.gates([inputs, state]), 2, 1)
    r = tf.nn.sigmoid(r_lin + r_bias)
    u = tf.nn.sigmoid(u_lin + u_bias)
    c = self._activation(self.candidate([inputs, r * state]) + c_bias)
    new_h = u * state + (1 - u) * c
    return new_h, new_h

  def call_feature_major(self, rows, bias=None, spread=None):
    """The same step on transposed operands: one column per coordinate.

    ``rows`` is [input_size + num_units, N]: the inputs, then the state, one
    column per coordinate (the caller builds it with the same concat that
    assembles the inputs). ``bias`` is None, [1, 3 num_units] (one injected
    bias for every column) or [T, 3 num_units] with ``spread``, a function
    that maps per-tensor columns [k, T] to per-coordinate columns [k, N]
    (:meth:`optimizer.hrnn_segments.Segments.spread`): coordinates of T
    tensors with different injected biases go through one matmul. Returns
    the new state as [num_units, N].

    Why this form: the per-parameter RNN of the hierarchical optimizer runs
    on up to millions of coordinates with ~20 features each, so its cost is
    the number of passes over [k, N] tensors and the matmul's width. With
    features as rows, slicing and concatenating are contiguous; the
    candidate's input part is computed by the same matmul as the gates (its
    state part needs the reset gate, so it stays a second, small matmul);
    the biases (cell bias plus the injected bias) are added to the matmul's
    output in the elementwise pass that follows it, so neither the matmul's
    width nor the graph grows with the number of tensors. The results equal
    :meth:`__call__` up to float summation order.

    Why long: one GRU step in the feature-major layout, its gates, candidate and
    injected biases written out together (apart, each part would slice the same
    transposed operands again).
    """
    units = self._num_units
    n_in = int(rows.shape[0]) - units
    bias_cols = tf.concat([self.gates.bias, self.candidate.bias], 0)[
        tf.newaxis]
    if bias is not None:
      bias_cols = bias_cols + tf.reshape(bias, [-1, 3 * units])
    bias_cols = tf.transpose(bias_cols)  # [3 units, 1 or T]
    # The gates' and the candidate's biases spread separately: each spread
    # then has one reader, into whose elementwise pass XLA fuses it (spread
    # together, the [3 units, N] result is written out and read back).
    r_bias, u_bias, cand_bias = tf.split(bias_cols, 3, 0)
    if spread is not None:
      r_bias, u_bias, cand_bias = [spread(b) for b in (r_bias, u_bias,
                                                       cand_bias)]
    gates_w = self.gates.matrix
    cand_w = self.candidate.matrix
    weights = tf.concat([
        tf.concat([gates_w[:n_in], cand_w[:n_in]], 1),
        tf.concat([gates_w[n_in:], tf.zeros([units, units])], 1)], 0)
    projected = tf.matmul(weights, rows, transpose_a=True)
    # tf.split rather than slicing: along axis 0 the pieces share the
    # buffer, and in backprop its gradient is one concat where each slice's
    # gradient would be a zero-padded full-size tensor.
    r_lin, u_lin, cand_lin = tf.split(projected, 3, 0)
    # r and u each in the pass that reads it (r * state, then the new
    # state), so neither is written out as a [units, N] array.
    r, u = [0.5 * tf.tanh(0.5 * (lin + b)) + 0.5
            for lin, b in ((r_lin, r_bias), (u_lin, u_bias))]
    state = tf.split(rows, [n_in, units], 0)[1]
    c = self._activation((cand_lin + cand_bias) + tf.matmul(
        cand_w[n_in:], r * state, transpose_a=True))
    # u * state + (1 - u) * c in three passes instead of four.
    return c + u * (state - c)
