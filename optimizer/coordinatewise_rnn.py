"""The coordinatewise RNN learned optimizer (the L2O-Scale baseline).

Port of ``optimizer/coordinatewise_rnn.py``; line numbers refer to the
L2O-Scale-Evaluation copy of Open-L2O, identical (apart from whitespace) to
the Google original ``research/learned_optimizer/optimizer/coordinatewise_rnn.py``.

Every coordinate of every tensor is fed, independently, to the same stacked
RNN (l.42-102 build it; l.174-250 run it). Per coordinate::

    ms      = (1 - decay_state) * (g^2 + 1e-12) + decay_state * rms_state
    x       = asinh(g / sqrt(ms + 1e-16))              # utils.rms_scaling
    out, s' = MultiRNNCell(x, s)                        # last cell's h
    delta   = out @ update_weights
    decay'  = sigmoid(out @ decay_weights + decay_bias)
    lr'     = 2 sigmoid(out @ learning_rate_weights + learning_rate_bias) * lr
    param'  = param - lr' * delta

The original builds its cells from a ``tf.contrib.rnn`` class and a
``MultiRNNCell``; TF2 has neither, so the LSTM math and the TF1 variable names
are reproduced by :class:`BasicLSTMCell`, :class:`LSTMCell` and
:class:`MultiRNNCell` below. Variable names (TF >= 1.3, ``kernel``/``bias``)::

    LOL/update_weights                 [cell_sizes[-1], 1]
    LOL/decay_weights, LOL/decay_bias  [cell_sizes[-1], 1], [1]   (learnable_decay)
    LOL/learning_rate_weights          [cell_sizes[-1], 1]        (dynamic_output_scale)
    LOL/learning_rate_bias             [1]                        (dynamic_output_scale)
    LOL/init_vector                    [1, sum(2 * cell_sizes)]
    LOL/multi_rnn_cell/cell_<i>/basic_lstm_cell/{kernel,bias}   (or .../lstm_cell/...)

Quirks of the original, reproduced:

* only cells with an LSTM ``(c, h)`` state tuple work: the original sums
  ``cell.state_size`` (l.96, l.295), which raises for ``GRUCell`` -- the
  default of ``metarun.py``'s ``--cell_cls`` flag. Here a GRU cell raises a
  ``TypeError`` up front with that explanation;
* the ``rms`` and ``decay`` states start at *ones* (l.166-171), so on the first
  step the new mean square is exactly 1 (the "first step" rule of
  ``new_mean_squared`` never fires) and the first RNN input is
  ``asinh(g / sqrt(1 + 1e-16))``;
* the learning-rate change is ``2 sigmoid(.)`` and compounds multiplicatively
  step after step, with no clipping;
* without ``learnable_decay`` the decay is the constant
  ``sigmoid(crnn_default_decay_var_init)``; without ``dynamic_output_scale``
  the learning-rate change is the constant ``2 sigmoid(0) = 1``;
* sparse (``tf.IndexedSlices``) gradients only touch the rows they index,
  state included (l.230-242), with the helpers of the original ``utils.py``
  (``accumulate_sparse_gradients``, ``slice_tensor``, ``stack_tensor``,
  ``update_slices``) ported below. ``apply_gradients`` of the base class
  densifies gradients, so this path is only reached through
  ``compute_updates``/``_compute_update`` with ``IndexedSlices``.
"""

import math

import numpy as np
import tensorflow as tf

from optimizer import trainable_optimizer as opt
from optimizer import utils

# Defaults of the original's module-level flags (l.31-37); they only set
# initial values and can be overridden as keyword arguments.
INIT_DEFAULTS = dict(
    crnn_rnn_readout_scale=0.5,
    crnn_default_decay_var_init=2.2,
)

_LOL = opt.OPTIMIZER_SCOPE


# ------------------------------------------------------------------ cells
class _TupleLSTMCell(tf.Module):
  """LSTM cell with an ``(c, h)`` state tuple and TF1 variable names.

  The math of ``tf.contrib.rnn.BasicLSTMCell`` / ``LSTMCell`` (TF 1.x
  ``rnn_cell_impl``) with their default arguments (``forget_bias=1.0``,
  tanh, no peepholes, clipping or projection, ``state_is_tuple=True``)::

      i, j, f, o = split(concat([x, h]) @ kernel + bias, 4)
      c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)
      h' = tanh(c') * sigmoid(o)

  ``kernel`` [input_size + num_units, 4 num_units] starts Glorot-uniform
  (the TF1 ``get_variable`` default), ``bias`` [4 num_units] at zero.

  Args:
    num_units: state size.
    input_size: size of the input (TF1 inferred it at the first call).
    tf1_scope: scope holding the cell's own scope, e.g.
      ``LOL/multi_rnn_cell/cell_0``; the variables are
      ``<tf1_scope>/<TF1_NAME>/{kernel,bias}``.
    forget_bias: added to the forget gate pre-activation.
    random_seed: op seed of the kernel initializer.
  """

  TF1_NAME = None

  def __init__(self, num_units, input_size, tf1_scope, forget_bias=1.0,
               random_seed=None):
    super().__init__(name=self.TF1_NAME)
    self._num_units = int(num_units)
    self._forget_bias = float(forget_bias)
    self.tf1_scope = "{}/{}".format(tf1_scope, self.TF1_NAME)
    fan_in = int(input_size) + self._num_units
    fan_out = 4 * self._num_units
    limit = math.sqrt(6. / (fan_in + fan_out))
    self.kernel = tf.Variable(
        tf.random.uniform([fan_in, fan_out], -limit, limit, seed=random_seed),
        name="kernel")
    self.bias = tf.Variable(tf.zeros([fan_out]), name="bias")

  @property
  def state_size(self):
    """``(c, h)`` sizes, as TF1's ``LSTMStateTuple(num_units, num_units)``."""
    return (self._num_units, self._num_units)

  @property
  def output_size(self):
    return self._num_units

  def tf1_variables(self):
    return {self.tf1_scope + "/kernel": self.kernel,
            self.tf1_scope + "/bias": self.bias}

  def __call__(self, inputs, state):
    c, h = state
    gates = tf.matmul(tf.concat([inputs, h], 1), self.kernel) + self.bias
    i, j, f, o = tf.split(gates, 4, axis=1)
    new_c = (c * tf.sigmoid(f + self._forget_bias) +
             tf.sigmoid(i) * tf.tanh(j))
    new_h = tf.tanh(new_c) * tf.sigmoid(o)
    return new_h, (new_c, new_h)


class BasicLSTMCell(_TupleLSTMCell):
  """``tf.contrib.rnn.BasicLSTMCell``: variables ``.../basic_lstm_cell/...``."""
  TF1_NAME = "basic_lstm_cell"


class LSTMCell(_TupleLSTMCell):
  """``tf.contrib.rnn.LSTMCell`` (default arguments): ``.../lstm_cell/...``."""
  TF1_NAME = "lstm_cell"


CELL_CLASSES = {"BasicLSTMCell": BasicLSTMCell, "LSTMCell": LSTMCell}


def resolve_cell_cls(cell_cls):
  """Maps ``cell_cls`` (a class here, a TF1/Keras class or a name) to a cell.

  The original received ``getattr(tf.contrib.rnn, FLAGS.cell_cls)``; its
  class name selects the port's cell. Cells without an LSTM state tuple
  (``GRUCell``, ``BasicRNNCell``, ...) made the original fail in
  ``sum(state_size)``; they raise a ``TypeError`` here.
  """
  if isinstance(cell_cls, type) and issubclass(cell_cls, _TupleLSTMCell):
    return cell_cls
  name = cell_cls if isinstance(cell_cls, str) else getattr(
      cell_cls, "__name__", repr(cell_cls))
  if name in CELL_CLASSES:
    return CELL_CLASSES[name]
  raise TypeError(
      "CoordinatewiseRNN needs an LSTM cell with a (c, h) state tuple ({}); "
      "got {!r}. The original sums each cell's state_size, which fails for "
      "cells with a single state such as GRUCell.".format(
          ", ".join(sorted(CELL_CLASSES)), name))


class MultiRNNCell(tf.Module):
  """``tf.contrib.rnn.MultiRNNCell`` over tuple-state cells.

  Cell ``i`` lives in TF1 scope ``<tf1_scope>/multi_rnn_cell/cell_<i>``;
  the output is the last cell's output, the state a list of per-cell states.
  """

  def __init__(self, cell_cls, cell_sizes, input_size, tf1_scope,
               random_seed=None):
    super().__init__(name="multi_rnn_cell")
    self.cells = []
    in_size = input_size
    for i, size in enumerate(cell_sizes):
      self.cells.append(cell_cls(
          size, in_size, "{}/multi_rnn_cell/cell_{}".format(tf1_scope, i),
          random_seed=random_seed))
      in_size = size

  @property
  def state_size(self):
    return tuple(cell.state_size for cell in self.cells)

  def tf1_variables(self):
    named = {}
    for cell in self.cells:
      named.update(cell.tf1_variables())
    return named

  def __call__(self, inputs, states):
    cur = inputs
    new_states = []
    for cell, state in zip(self.cells, states):
      cur, new_state = cell(cur, state)
      new_states.append(new_state)
    return cur, new_states


# ------------------------------------------- sparse helpers (utils.py)
def accumulate_sparse_gradients(grad):
  """Sums the values of repeated indices of an ``IndexedSlices``.

  Returns (unique indices, summed values); ``accumulate_sparse_gradients``
  of the original ``utils.py``.
  """
  indices, segments = tf.unique(grad.indices)
  values = tf.math.unsorted_segment_sum(grad.values, segments,
                                        tf.shape(indices)[0])
  return indices, values


def slice_tensor(dense_tensor, indices, head_dims):
  """Rows ``indices`` of a tensor whose first axis flattens ``head_dims``.

  ``dense_tensor`` [prod(head_dims), T...] is viewed as [head_dims..., T...],
  gathered on its first axis and flattened back to [-1, T...]
  (``slice_tensor`` of the original ``utils.py``).
  """
  tail_dims = tf.shape(dense_tensor)[1:]
  reshaped = tf.reshape(dense_tensor, tf.concat([head_dims, tail_dims], 0))
  slices = tf.gather(reshaped, indices)
  out = tf.reshape(slices, tf.concat([[-1], tail_dims], 0))
  out.set_shape([None] + dense_tensor.shape.as_list()[1:])
  return out


def stack_tensor(slices, indices, dense_tensor, head_dims):
  """Inverse of :func:`slice_tensor`; rows not in ``indices`` are 0."""
  indices = tf.cast(indices, tf.int32)
  tail_dims = tf.shape(dense_tensor)[1:]
  dense_shape = tf.concat([head_dims, tail_dims], 0)
  slices = tf.reshape(slices, tf.concat([[-1], dense_shape[1:]], 0))
  stacked = tf.scatter_nd(tf.expand_dims(indices, -1), slices, dense_shape)
  return tf.reshape(stacked, tf.shape(dense_tensor))


def update_slices(slices, indices, dense_tensor, head_dims):
  """Like :func:`stack_tensor`, but rows not in ``indices`` keep their value.

  TF1's ``tf.where`` with a vector condition selected whole rows; TF2's
  broadcasts, so the row mask is reshaped to [rows, 1, ..., 1].
  """
  indices = tf.cast(indices, tf.int32)
  tail_dims = tf.shape(dense_tensor)[1:]
  dense_shape = tf.concat([head_dims, tail_dims], 0)
  mask = tf.equal(tf.scatter_nd(tf.expand_dims(indices, -1),
                                tf.ones_like(indices), head_dims[:1]), 1)
  mask = tf.reshape(mask, tf.concat(
      [head_dims[:1], tf.ones([tf.size(dense_shape) - 1], tf.int32)], 0))
  new_rows = tf.reshape(stack_tensor(slices, indices, dense_tensor, head_dims),
                        dense_shape)
  old_rows = tf.reshape(dense_tensor, dense_shape)
  out = tf.reshape(tf.where(mask, new_rows, old_rows), tf.shape(dense_tensor))
  out.set_shape(dense_tensor.shape)
  return out


# -------------------------------------------------------------- optimizer
class CoordinatewiseRNN(opt.TrainableOptimizer):
  """RNN applied to each coordinate independently (same arguments as l.45-51).

  Args:
    cell_sizes: hidden sizes of the stacked cells.
    cell_cls: the cell class: :class:`BasicLSTMCell`, :class:`LSTMCell`, a
      class of the same name (e.g. ``tf.compat.v1.nn.rnn_cell.LSTMCell``) or
      the name as a string (``metarun.py``'s ``--cell_cls``).
    init_lr_range: (min, max) of the initial per-coordinate learning rates,
      log-uniform; a constant when min == max. Default (1., 1.).
    dynamic_output_scale: learn ``LOL/learning_rate_{weights,bias}``.
    learnable_decay: learn ``LOL/decay_{weights,bias}``.
    zero_init_lr_weights: start ``LOL/learning_rate_weights`` at zero.
    crnn_rnn_readout_scale, crnn_default_decay_var_init: the original's
      init flags (0.5, 2.2), as keyword arguments.
    random_seed: op seed of the random initializers (not in the original).
    **kwargs: passed to :class:`TrainableOptimizer`.

  State keys (per tensor of N coordinates, all [N, ...]): ``rms`` [N,1],
  ``rnn`` [N, sum(2 cell_sizes)] (per cell ``[c, h]``), ``learning_rate``
  [N,1], ``decay`` [N,1]. The optimizer name is ``"cRNN"``.
  """

  def __init__(self, cell_sizes, cell_cls, init_lr_range=(1., 1.),
               dynamic_output_scale=True, learnable_decay=True,
               zero_init_lr_weights=False, **kwargs):
    if len(init_lr_range) != 2:
      raise ValueError(
          "Initial LR range must be len 2, was {}".format(len(init_lr_range)))
    if init_lr_range[0] > init_lr_range[1]:
      raise ValueError("Initial LR range min is greater than max.")
    init = dict(INIT_DEFAULTS)
    for key in list(kwargs):
      if key in INIT_DEFAULTS:
        init[key] = kwargs.pop(key)
    random_seed = kwargs.pop("random_seed", None)
    self.init_scales = init
    self.init_lr_range = tuple(init_lr_range)
    self.zero_init_lr_weights = zero_init_lr_weights
    self.dynamic_output_scale = dynamic_output_scale
    self.learnable_decay = learnable_decay
    self.cell_sizes = [int(s) for s in cell_sizes]
    self.random_seed = random_seed
    cell_cls = resolve_cell_cls(cell_cls)

    state_keys = ["rms", "rnn", "learning_rate", "decay"]
    super().__init__("cRNN", state_keys, **kwargs)

    with self.name_scope:
      # The RNN reads one scaled gradient per coordinate.
      self.cell = MultiRNNCell(cell_cls, self.cell_sizes, 1, _LOL,
                               random_seed=random_seed)
      self.component_cells = self.cell.cells
      self._register(self.cell.tf1_variables())

      out_size = self.cell_sizes[-1]
      readout_std = init["crnn_rnn_readout_scale"] / math.sqrt(out_size)

      def scaled_init(shape):
        return tf.random.normal(shape, 0., readout_std, seed=random_seed)

      self.update_weights = self._meta_variable(
          _LOL + "/update_weights", scaled_init((out_size, 1)))
      self._initialize_decay(learnable_decay, (out_size, 1), scaled_init)
      self._initialize_lr(dynamic_output_scale, (out_size, 1), scaled_init)
      state_size = sum(sum(s) for s in self.cell.state_size)
      self._init_vector = self._meta_variable(
          _LOL + "/init_vector",
          tf.random.uniform([1, state_size], -1., 1., seed=random_seed))

  def _initialize_decay(self, learnable_decay, shape, scaled_init):
    """Decay readout: variables, or constants (original l.104-125)."""
    decay_init = float(self.init_scales["crnn_default_decay_var_init"])
    if learnable_decay:
      self.decay_weights = self._meta_variable(_LOL + "/decay_weights",
                                               scaled_init(shape))
      self.decay_bias = self._meta_variable(_LOL + "/decay_bias",
                                            tf.fill([1], decay_init))
    else:
      self.decay_weights = tf.zeros(shape)
      self.decay_bias = tf.constant(decay_init)

  def _initialize_lr(self, dynamic_output_scale, shape, scaled_init):
    """Learning-rate readout: variables, or constants (original l.127-149)."""
    if dynamic_output_scale:
      weights = (tf.zeros(shape) if self.zero_init_lr_weights
                 else scaled_init(shape))
      self.lr_weights = self._meta_variable(_LOL + "/learning_rate_weights",
                                            weights)
      self.lr_bias = self._meta_variable(_LOL + "/learning_rate_bias",
                                         tf.zeros([1]))
    else:
      self.lr_weights = tf.zeros(shape)
      self.lr_bias = tf.zeros([1, 1])

  # ---------------------------------------------------------------- state
  def initialize_state(self, var, seed=None):
    """Initial state of one tensor (original l.151-172); the random initial
    learning rates come from ``seed`` (stateless) if one is given."""
    n = tf.TensorShape(var.shape).num_elements()
    shape = [n, 1]
    min_lr, max_lr = self.init_lr_range
    if min_lr == max_lr:
      init_lr = tf.fill(shape, float(min_lr))
    else:
      lo, hi = np.log(min_lr), np.log(max_lr)
      if seed is None:
        log_lr = tf.random.uniform(shape, lo, hi, seed=self.random_seed)
      else:
        log_lr = tf.random.stateless_uniform(shape, seed, lo, hi)
      init_lr = tf.exp(log_lr)
    return {
        "rms": tf.ones(shape),
        "learning_rate": init_lr,
        "rnn": tf.ones(shape) * self._init_vector,
        "decay": tf.ones(shape),
    }

  # ----------------------------------------------------------------- step
  def _compute_update(self, param, grad, state):
    """One step on one tensor (original l.174-250)."""
    param_shape = tf.shape(param)
    (grad_values, decay_state, rms_state, rnn_state, lr_state,
     grad_indices) = self._extract_gradients_and_internal_state(
         grad, state, param_shape)

    grad_scaled, rms = utils.rms_scaling(grad_values, decay_state, rms_state)

    rnn_tuples = self._unpack_rnn_state_into_tuples(rnn_state)
    rnn_output, rnn_tuples = self.cell(grad_scaled, rnn_tuples)
    rnn_state = self._pack_tuples_into_rnn_state(rnn_tuples)

    delta = utils.project(rnn_output, self.update_weights)
    decay = utils.project(rnn_output, self.decay_weights, bias=self.decay_bias,
                          activation=tf.nn.sigmoid)
    lr_change = 2. * utils.project(rnn_output, self.lr_weights,
                                   bias=self.lr_bias, activation=tf.nn.sigmoid)
    new_lr = lr_change * lr_state
    update = tf.reshape(new_lr * delta, tf.shape(grad_values))

    if grad_indices is not None:
      update = stack_tensor(update, grad_indices, param, param_shape[:1])
      rms = update_slices(rms, grad_indices, state["rms"], param_shape)
      new_lr = update_slices(new_lr, grad_indices, state["learning_rate"],
                             param_shape)
      rnn_state = update_slices(rnn_state, grad_indices, state["rnn"],
                                param_shape)
      decay = update_slices(decay, grad_indices, state["decay"], param_shape)

    new_param = param - update
    new_state = {"rms": rms, "learning_rate": new_lr, "rnn": rnn_state,
                 "decay": decay}
    return new_param, new_state

  def _extract_gradients_and_internal_state(self, grad, state, param_shape):
    """Dense gradient and state, or the touched rows of both (l.252-289)."""
    if isinstance(grad, tf.IndexedSlices):
      grad_indices, grad_values = accumulate_sparse_gradients(grad)
      decay_state = slice_tensor(state["decay"], grad_indices, param_shape)
      rms_state = slice_tensor(state["rms"], grad_indices, param_shape)
      rnn_state = slice_tensor(state["rnn"], grad_indices, param_shape)
      lr_state = slice_tensor(state["learning_rate"], grad_indices,
                              param_shape)
    else:
      grad_values = grad
      grad_indices = None
      decay_state = state["decay"]
      rms_state = state["rms"]
      rnn_state = state["rnn"]
      lr_state = state["learning_rate"]
    return (grad_values, decay_state, rms_state, rnn_state, lr_state,
            grad_indices)

  def _unpack_rnn_state_into_tuples(self, rnn_state):
    """Splits the state matrix into per-cell ``(c, h)`` pairs (l.291-303)."""
    tuples = []
    pos = 0
    for cell in self.component_cells:
      size = sum(cell.state_size)
      cur = rnn_state[:, pos:pos + size]
      tuples.append(tuple(tf.split(cur, 2, axis=1)))
      pos += size
    return tuples

  def _pack_tuples_into_rnn_state(self, rnn_tuples):
    """Concatenates per-cell ``[c, h]`` along the columns (l.305-314)."""
    return tf.concat([tf.concat([c, h], 1) for c, h in rnn_tuples], axis=1)
