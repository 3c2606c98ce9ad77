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
