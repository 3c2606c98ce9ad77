"""The hierarchical RNN learned optimizer of L2O-Scale (Wichrowska et al. 2017).

Port of ``optimizer/hierarchical_rnn.py``. Line ranges below refer to the
L2O-Scale-Evaluation copy; the L2O-Scale-Training copy is the same apart from
the imitation ("MODIFY", ``mode_mt``) branch of ``_compute_updates``, which is
``TrainableOptimizer._follow_teacher`` here.

Three levels (l.62-140): a per-parameter GRU (level 0), a per-tensor GRU
(level 1) and a global GRU (level 2); each level's state biases the gates of
the level below. The per-parameter RNN reads the gradient accumulated and
RMS-normalised at ``num_gradient_scales`` timescales plus optional features,
and its state is projected to the update direction, the learning-rate change
and the two decay rates.
"""

import math

import numpy as np
import tensorflow as tf

from optimizer import native_step
from optimizer import rnn_cells
from optimizer import trainable_optimizer as opt
from optimizer import utils

# Defaults of the original's module-level flags (hierarchical_rnn.py l.31-55).
# They only set initial values; metarun.py exposes them as flags.
INIT_DEFAULTS = dict(
    biasgrucell_scale=0.5,
    biasgrucell_gate_bias_init=2.2,
    hrnn_rnn_readout_scale=0.5,
    hrnn_default_decay_var_init=2.2,
    scale_decay_bias_init=3.2,
    learning_rate_momentum_logit_init=3.2,
    hrnn_affine_scale=0.5,
)

_LOL = opt.OPTIMIZER_SCOPE
_PER_TENSOR = _LOL + "/PerTensor"


# Most tensors for which _Segments.spread selects per coordinate (about two
# vector operations per tensor and element) rather than writing the spread
# values out (a write and a read of [k, N]).
SELECT_MAX_TENSORS = 16


class _Segments:
  """T tensors laid end to end along the last axis of [k, N] row matrices.

  What the packed step needs to tell tensors apart: per-tensor means of
  rows, and spreading per-tensor values back over each tensor's
  coordinates. Only the T sizes are kept (built once per set of sizes by
  the optimizer that uses it: :meth:`HierarchicalRNN.segments`): nothing
  of size N is stored, so neither the traced graph nor memory grows with
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


class HierarchicalRNN(opt.TrainableOptimizer):
  """3-level hierarchical RNN optimizer (same arguments as the original).

  ``level_sizes`` has 1, 2 or 3 ints. All other arguments keep the
  original's meaning and defaults (see l.69-133 of the original). The
  extra keyword arguments of :data:`INIT_DEFAULTS` replace the original's
  init-scale flags; the rest go to :class:`TrainableOptimizer`.
  """

  def __init__(self, level_sizes, init_lr_range=(1e-6, 1e-2),
               learnable_decay=True, dynamic_output_scale=True,
               use_attention=False, use_log_objective=True,
               num_gradient_scales=4, zero_init_lr_weights=True,
               use_log_means_squared=True, use_relative_lr=True,
               use_extreme_indicator=False, max_log_lr=33,
               obj_train_max_multiplier=-1, use_problem_lr_mean=False,
               use_gradient_shortcut=False, use_lr_shortcut=False,
               use_grad_products=False, use_multiple_scale_decays=False,
               learnable_inp_decay=True, learnable_rnn_init=True,
               random_seed=None, **kwargs):
    """The original's constructor (hierarchical_rnn.py ``__init__``): its
    options, their checks, then the meta-parameters. Long on purpose: one
    line per option of the original's signature and one check per rule it
    enforced, kept in its order."""
    level_sizes = list(level_sizes)
    if len(level_sizes) not in [1, 2, 3]:
      raise ValueError("HierarchicalRNN only supports 1, 2, or 3 levels in the "
                       "hierarchy, but {} were requested.".format(
                           len(level_sizes)))
    if any(not isinstance(level, (int, np.integer)) for level in level_sizes):
      raise ValueError("Level sizes must be integer values, were {}".format(
          level_sizes))
    if len(init_lr_range) != 2:
      raise ValueError(
          "Initial LR range must be len 2, was {}".format(len(init_lr_range)))
    if init_lr_range[0] > init_lr_range[1]:
      raise ValueError("Initial LR range min is greater than max.")
    if num_gradient_scales < 1:
      raise ValueError("num_gradient_scales must be at least 1.")
    if (use_relative_lr or use_extreme_indicator) and not dynamic_output_scale:
      raise ValueError("Relative LR and Extreme Indicator features "
                       "require dynamic_output_scale to be set to True.")
    init = dict(INIT_DEFAULTS)
    for key in list(kwargs):
      if key in INIT_DEFAULTS:
        init[key] = kwargs.pop(key)
    self.init_scales = init

    self.level_sizes = [int(s) for s in level_sizes]
    self.learnable_decay = learnable_decay
    self.dynamic_output_scale = dynamic_output_scale
    self.use_attention = use_attention
    self.use_log_objective = use_log_objective
    self.num_gradient_scales = num_gradient_scales
    self.zero_init_lr_weights = zero_init_lr_weights
    self.use_log_means_squared = use_log_means_squared
    self.use_relative_lr = use_relative_lr
    self.use_extreme_indicator = use_extreme_indicator
    self.max_log_lr = max_log_lr
    # Not an option of the original: the step's per-coordinate part as one
    # native kernel where a step is compiled by XLA (forward only; set by
    # LearnedOptimizer(native_step=True) and the compiled meta-test loop;
    # optimizer/native_step.py).
    self.native_step = False
    self.use_problem_lr_mean = use_problem_lr_mean
    self.use_gradient_shortcut = use_gradient_shortcut
    self.use_lr_shortcut = use_lr_shortcut
    self.use_grad_products = use_grad_products
    self.use_multiple_scale_decays = use_multiple_scale_decays
    self.learnable_inp_decay = learnable_inp_decay
    self.learnable_rnn_init = learnable_rnn_init
    self.random_seed = random_seed
    self.num_layers = len(level_sizes)
    self.init_lr_range = tuple(init_lr_range)

    state_keys = ["parameter", "layer", "scl_decay", "inp_decay", "true_param"]
    if self.dynamic_output_scale:
      state_keys.append("log_learning_rate")
    for i in range(self.num_gradient_scales):
      state_keys.append("grad_accum{}".format(i + 1))
      state_keys.append("ms{}".format(i + 1))

    super().__init__("hRNN", state_keys, use_attention=use_attention,
                     use_log_objective=use_log_objective,
                     obj_train_max_multiplier=obj_train_max_multiplier,
                     **kwargs)
    with self.name_scope:
      self._build_variables()
    # Held by a closure, not a dict attribute: tf.Module would track a dict.
    segments_by_sizes = {}
    self._segments_by_sizes = lambda: segments_by_sizes

  def segments(self, sizes):
    """The :class:`_Segments` of tensors with these static sizes, built once
    per set of sizes for this optimizer."""
    if any(size is None for size in sizes):
      raise ValueError("The hierarchical RNN needs static tensor shapes, got "
                       "sizes {}".format(sizes))
    key = tuple(int(size) for size in sizes)
    cache = self._segments_by_sizes()
    if key not in cache:
      cache[key] = _Segments(key)
    return cache[key]

  # ------------------------------------------------------------ variables
  @property
  def num_rnn_inputs(self):
    """Width of the per-parameter RNN input (l.434-487 of the original)."""
    g = self.num_gradient_scales
    n = g
    if g > 1 and self.use_grad_products:
      n += g - 1
    if self.use_log_means_squared:
      n += g
    if self.use_relative_lr:
      n += 1
    if self.use_extreme_indicator:
      n += 1
    if self.use_lr_shortcut:
      n += 1
    return n

  @property
  def _uses_additional_features(self):
    return self.num_rnn_inputs != self.num_gradient_scales

  def _build_variables(self):
    """Creates every meta-parameter with its TF1 name (original l.150-310).

    Long on purpose: it is the table of the original's variables, in the
    original's creation order (which fixes the random initial values for a
    seed) with their TF1 names; split up, that order would be spread over
    several functions.
    """
    init = self.init_scales
    seed = self.random_seed
    sizes = self.level_sizes
    n_in = self.num_rnn_inputs

    # RNN cells and their initial states (_initialize_rnn_cells, l.206-225).
    cell_inputs = [n_in]
    if self.num_layers > 1:
      cell_inputs.append(sizes[0] + (n_in if self._uses_additional_features
                                     else 0))
    if self.num_layers > 2:
      cell_inputs.append(sizes[1])
    cell_scopes = [_PER_TENSOR + "/Layer0_RNN", _PER_TENSOR + "/Layer1_RNN",
                   _LOL + "/Layer2_RNN"]
    self.cells = []
    self.init_vectors = []
    for level in range(self.num_layers):
      cell = rnn_cells.BiasGRUCell(
          sizes[level], cell_inputs[level], cell_scopes[level],
          scale=init["biasgrucell_scale"],
          gate_bias_init=init["biasgrucell_gate_bias_init"], random_seed=seed)
      self.cells.append(cell)
      self._register(cell.tf1_variables())
      init_vec = tf.random.uniform([1, sizes[level]], -1., 1., seed=seed)
      if self.learnable_rnn_init:
        init_vec = self._meta_variable(
            "{}/Level{}_RNN/init_vector".format(_LOL, level), init_vec)
      self.init_vectors.append(init_vec)

    # Per-tensor and global biases of the lower levels (l.520-545).
    affine_scale = init["hrnn_affine_scale"]
    self.param_bias_affine = None
    self.global_bias_affine = None
    self.layer_bias_affine = None
    if self.num_layers > 1:
      self.param_bias_affine = utils.Affine(
          _PER_TENSOR + "/Layer0_RNN/Param/Affine", sizes[1], 3 * sizes[0],
          scale=affine_scale, random_seed=seed)
      self._register(self.param_bias_affine.tf1_variables())
    if self.num_layers == 3:
      self.global_bias_affine = utils.Affine(
          _PER_TENSOR + "/Layer0_RNN/Global/Affine", sizes[2], 3 * sizes[0],
          scale=affine_scale, random_seed=seed)
      self.layer_bias_affine = utils.Affine(
          _PER_TENSOR + "/Layer1_RNN/Affine", sizes[2], 3 * sizes[1],
          scale=affine_scale, random_seed=seed)
      self._register(self.global_bias_affine.tf1_variables())
      self._register(self.layer_bias_affine.tf1_variables())

    # Readouts of the per-parameter state (l.166-190).
    cell_size = sizes[0]
    readout_std = init["hrnn_rnn_readout_scale"] / math.sqrt(cell_size)

    def scaled_init(shape):
      return tf.random.normal(shape, 0., readout_std, seed=seed)

    self.update_weights = self._meta_variable(_LOL + "/update_weights",
                                              scaled_init((cell_size, 1)))
    if self.use_attention:
      self.attention_weights = self._meta_variable(
          _LOL + "/attention_weights", tf.identity(self.update_weights))

    if self.learnable_decay:
      self.scl_decay_weights = self._meta_variable(
          _LOL + "/scl_decay_weights", scaled_init((cell_size, 1)))
      self.scl_decay_bias = self._meta_variable(
          _LOL + "/scl_decay_bias", tf.fill([1], init["scale_decay_bias_init"]))
    else:
      self.scl_decay_weights = tf.zeros((cell_size, 1))
      self.scl_decay_bias = tf.constant(math.log(0.93 / (1. - 0.93)))

    if (self.learnable_decay and self.num_gradient_scales > 1 and
        self.learnable_inp_decay):
      self.inp_decay_weights = self._meta_variable(
          _LOL + "/inp_decay_weights", scaled_init((cell_size, 1)))
      self.inp_decay_bias = self._meta_variable(
          _LOL + "/inp_decay_bias",
          tf.fill([1], init["hrnn_default_decay_var_init"]))
    else:
      self.inp_decay_weights = tf.zeros((cell_size, 1))
      self.inp_decay_bias = tf.constant(math.log(0.89 / (1. - 0.89)))

    if self.dynamic_output_scale:
      wt = (tf.zeros((cell_size, 1)) if self.zero_init_lr_weights
            else scaled_init((cell_size, 1)))
      self.lr_weights = self._meta_variable(_LOL + "/learning_rate_weights", wt)
      self.lr_bias = self._meta_variable(_LOL + "/learning_rate_bias",
                                         tf.zeros([1]))
      self.lr_momentum_logit = self._meta_variable(
          _PER_TENSOR + "/learning_rate_momentum_logit",
          tf.constant(float(init["learning_rate_momentum_logit_init"])))
      self.param_stepsize_offset = self._meta_variable(
          _PER_TENSOR + "/param_stepsize_offset", tf.constant(-1.))
    else:
      self.lr_weights = tf.zeros((cell_size, 1))
      self.lr_bias = tf.zeros([1, 1])

    # Affine shortcut from the scaled gradients to the update (l.573-590).
    self.grads_to_delta = None
    self.grads_to_attn_delta = None
    if self.use_gradient_shortcut:
      g = self.num_gradient_scales
      self.grads_to_delta = utils.Affine(
          _PER_TENSOR + "/GradsToDelta", g, 1, include_bias=False,
          vec_mean=1. / g, random_seed=seed)
      self._register(self.grads_to_delta.tf1_variables())
      if self.use_attention:
        self.grads_to_attn_delta = utils.Affine(
            _PER_TENSOR + "/GradsToAttnDelta", g, 1, include_bias=False,
            vec_mean=1. / g, random_seed=seed)
        self._register(self.grads_to_attn_delta.tf1_variables())

  # ---------------------------------------------------------------- state
  def initialize_state(self, var, seed=None):
    """Initial state of one tensor (``_initialize_state``, l.310-355).

    The initial log learning rates are random unless ``init_lr_range`` is
    one value: from TensorFlow's random stream (the original's
    ``tf.random_uniform``), or, given a ``[2]`` integer ``seed``, drawn
    statelessly from it (same distribution).
    """
    var = tf.convert_to_tensor(var, dtype=tf.float32)
    var_vectorized = tf.reshape(var, [-1, 1])
    ndim = int(var_vectorized.shape[0])
    state = {
        "parameter": tf.ones([ndim, 1]) * self.init_vectors[0],
        "scl_decay": tf.zeros_like(var_vectorized),
        "inp_decay": tf.zeros_like(var_vectorized),
        "true_param": var,
    }
    if self.num_layers > 1:
      state["layer"] = tf.ones([1, 1]) * self.init_vectors[1]
    if self.dynamic_output_scale:
      min_lr, max_lr = self.init_lr_range
      if min_lr == max_lr:
        log_init_lr = tf.math.log(min_lr * tf.ones_like(var_vectorized))
      else:
        # A random offset per tensor makes tensors' mean LRs differ (l.334).
        lo, hi = np.log(min_lr) / 2., np.log(max_lr) / 2.
        if seed is None:
          actual_vals = tf.random.uniform([ndim, 1], lo, hi,
                                          seed=self.random_seed)
          offset = tf.random.uniform((), lo, hi, seed=self.random_seed)
        else:
          vals_seed, offset_seed = tf.unstack(
              tf.random.experimental.stateless_split(seed, 2))
          actual_vals = tf.random.stateless_uniform([ndim, 1], vals_seed, lo,
                                                    hi)
          offset = tf.random.stateless_uniform((), offset_seed, lo, hi)
        log_init_lr = actual_vals + offset
      state["log_learning_rate"] = tf.clip_by_value(log_init_lr, -33.,
                                                    self.max_log_lr)
    for i in range(self.num_gradient_scales):
      state["grad_accum{}".format(i + 1)] = tf.zeros_like(var_vectorized)
      state["ms{}".format(i + 1)] = tf.zeros_like(var_vectorized)
    return state

  def initialize_global_state(self):
    """Global RNN state, only with 3 levels (l.357-361)."""
    if self.num_layers < 3:
      return []
    return [tf.ones([1, 1]) * self.init_vectors[2]]

  # ----------------------------------------------------------------- step
  def compute_updates(self, params, grads, states, global_state,
                      mode_mt=None, update_steps_mt=None):
    """One step on all tensors (``_compute_updates``, l.363-432).

    Computes what the line-by-line port of the original
    (``tests/hrnn_reference.py``) computes, up to float rounding, with
    per-tensor state dicts in the TF1 layout: packs them (:meth:`pack_state`), runs
    :meth:`compute_updates_packed` and unpacks the result. Callers that keep
    the state across steps (the meta-test loop, the benchmark) use the
    packed form directly and skip the packing.
    """
    packed = self.pack_state(states)
    new_params, new_packed, new_global, new_attend, steps = (
        self.compute_updates_packed(params, grads, packed, global_state,
                                    mode_mt, update_steps_mt))
    return (new_params, self.unpack_state(new_packed, new_params),
            new_global, new_attend, steps)

  # ------------------------------------------------------- packed state
  def initialize_packed_state(self, params, seed=None):
    """The initial state of all tensors in the packed layout (``seed``: see
    :meth:`initial_states`)."""
    return self.pack_state(self.initial_states(params, seed))

  def pack_state(self, states):
    """Per-tensor TF1 state dicts -> the packed layout.

    The packed state is a dict of feature-major blocks with the coordinates
    of all tensors end to end along the last axis (N = total size):
    ``parameter`` [level_sizes[0], N], ``decays`` [2, N] (the scale decay,
    then the input decay), ``log_learning_rate`` [1, N] (with
    ``dynamic_output_scale``), ``grad_accum`` and ``ms`` [num_gradient_scales,
    N], ``layer`` [T, level_sizes[1]] (one row per tensor, with 2 or 3
    levels) and, with ``use_attention``, ``true_param``: the list of the
    tensors' true parameters (without attention they are the parameters).
    """
    sizes = [s["true_param"].shape.num_elements() for s in states]
    seg = self.segments(sizes)

    def rows(key):
      return seg.concat([tf.reshape(s[key], [1, -1]) for s in states])

    g = self.num_gradient_scales
    packed = {
        "parameter": seg.concat([tf.transpose(s["parameter"])
                                 for s in states]),
        "decays": tf.concat([rows("scl_decay"), rows("inp_decay")], 0),
        "grad_accum": tf.concat([rows("grad_accum{}".format(i + 1))
                                 for i in range(g)], 0),
        "ms": tf.concat([rows("ms{}".format(i + 1)) for i in range(g)], 0),
    }
    if self.use_attention:
      # Without attention the true parameters are the parameters.
      packed["true_param"] = [s["true_param"] for s in states]
    if self.dynamic_output_scale:
      packed["log_learning_rate"] = rows("log_learning_rate")
    if self.num_layers > 1:
      packed["layer"] = tf.concat([s["layer"] for s in states], 0)
    return packed

  # How the leaves of the packed state (:meth:`pack_state`) hold the
  # tensors: these keys one row per tensor, these a list with one entry per
  # tensor; the others one column per coordinate.
  PACKED_TENSOR_ROWS = ("layer",)
  PACKED_TENSOR_LISTS = ("true_param",)

  def packed_columns(self, packed, first, last, start, end):
    """The packed state of tensors ``first`` to ``last - 1`` alone, whose
    coordinates are ``start`` to ``end - 1``: what :meth:`pack_state` of
    their states gives, taken out of the packed state of all tensors. Their
    step on it (:meth:`compute_updates_packed` with ``problem_lr_mean``,
    see :meth:`problem_mean_log_lr`) is their part of the step of all
    tensors."""
    def columns(key, leaf):
      if key in self.PACKED_TENSOR_LISTS:
        return list(leaf[first:last])
      if key in self.PACKED_TENSOR_ROWS:
        return leaf[first:last]
      return leaf[:, start:end]
    return {key: columns(key, leaf) for key, leaf in packed.items()}

  def join_packed(self, parts):
    """The packed state of all tensors from the packed states of
    consecutive groups of them (the inverse of :meth:`packed_columns`)."""
    def join(key):
      leaves = [part[key] for part in parts]
      if key in self.PACKED_TENSOR_LISTS:
        return [t for leaf in leaves for t in leaf]
      return tf.concat(leaves, 0 if key in self.PACKED_TENSOR_ROWS else 1)
    return {key: join(key) for key in parts[0]}

  def problem_mean_log_lr(self, parts):
    """What a step on part of the tensors (:meth:`packed_columns`) needs of
    the others: the mean log learning rate of the whole problem
    (``use_problem_lr_mean``, the original's _compute_mean_log_lr), from the
    packed states (or their variables) of consecutive groups of all its
    tensors (``parts``); None
    where the step does not read it. Every other quantity is per tensor, and
    the global RNN reads the last tensor's layer state only (the original's
    l.429), so the part that holds the last tensor gives the new global
    state."""
    if not (self.use_relative_lr and self.use_problem_lr_mean):
      return None
    return tf.reduce_mean(tf.concat(
        [part["log_learning_rate"] for part in parts], 1))

  def unpack_state(self, packed, params):
    """The packed layout -> per-tensor TF1 state dicts (:meth:`pack_state`)."""
    seg = self.segments([p.shape.num_elements() for p in params])

    def columns(block):
      # One list of [N_t, 1] columns per row of the block.
      per_tensor = seg.split(block)
      n = int(block.shape[0])
      return [[tf.reshape(r, [-1, 1]) for r in
               (tf.split(piece, n, 0) if n > 1 else [piece])]
              for piece in per_tensor]

    named = [("scl_decay", "inp_decay", packed["decays"])]
    if self.dynamic_output_scale:
      named.append(("log_learning_rate", packed["log_learning_rate"]))
    g = self.num_gradient_scales
    named.append(tuple("grad_accum{}".format(i + 1) for i in range(g)) +
                 (packed["grad_accum"],))
    named.append(tuple("ms{}".format(i + 1) for i in range(g)) +
                 (packed["ms"],))
    split_blocks = [(keys[:-1], columns(keys[-1])) for keys in named]
    param_states = seg.split(packed["parameter"])
    layers = (tf.split(packed["layer"], seg.count, 0)
              if self.num_layers > 1 else None)
    states = []
    for t in range(seg.count):
      state = {"parameter": tf.transpose(param_states[t]),
               "true_param": (packed["true_param"][t] if self.use_attention
                              else params[t])}
      for keys, per_tensor in split_blocks:
        state.update(zip(keys, per_tensor[t]))
      if layers is not None:
        state["layer"] = layers[t]
      states.append(state)
    return states

  def compute_updates_packed(self, params, grads, packed, global_state,
                             mode_mt=None, update_steps_mt=None,
                             problem_lr_mean=None):
    """:meth:`compute_updates` on the packed state (:meth:`pack_state`).

    Why this form: the per-parameter RNN does ~20 features of work per
    coordinate, so the step's cost is the number of ops and of passes over
    memory, not arithmetic. The original runs its whole graph once per
    tensor; here the coordinates of all T tensors are laid end to end and
    every per-coordinate quantity (the k gradient scales, the RNN input
    features, the RNN state, the readouts) is a row of one [k, N] matrix,
    which is also how the state is kept, so nothing is transposed or
    re-assembled between steps. What differs between tensors is per-tensor:
    the bias each tensor's layer RNN injects into the per-parameter GRU is
    spread over the tensor's coordinates in the elementwise pass after the
    GRU's matmul, per-tensor means (the layer RNN's input, the RMS
    normalisation of the update) are sums over slices (:class:`_Segments`),
    nothing in the graph has T * N entries,
    and the layer RNNs of all tensors run as one batch of T.

    ``problem_lr_mean``: for a step on part of the problem's tensors, the
    mean log learning rate of all of them (:meth:`problem_mean_log_lr`);
    None: the mean over ``packed``.

    Returns (new params, new packed state, new global state, attention
    params, update steps), as :meth:`compute_updates`.
    """
    (new_packed, update_steps, lr_attends,
     attention_deltas) = self._packed_core(grads, packed, global_state,
                                           problem_lr_mean)
    new_params, new_attend = [], []
    for idx, param in enumerate(params):
      base = packed["true_param"][idx] if self.use_attention else param
      updated_param, attended = self._stepped(
          base, update_steps[idx], mode_mt, update_steps_mt, idx,
          lr_attends[idx] if self.use_attention else None,
          attention_deltas[idx] if self.use_attention else None)
      new_params.append(updated_param)
      new_attend.append(attended)
    if self.use_attention:
      new_packed["true_param"] = list(new_params)
    new_global = []
    if self.num_layers == 3:
      # Quirk kept from the original (l.429): the global RNN reads the state
      # of the *last* tensor's layer RNN only, not a mean over all tensors.
      new_global = self._compute_updated_global_state(
          [new_packed["layer"][-1:]], global_state)
    return new_params, new_packed, new_global, new_attend, update_steps

  def _stepped(self, base, update_step, mode_mt, update_steps_mt, idx,
               lr_attend, attention_delta):
    """One tensor's new parameter and attended location (l.395-425).

    ``base`` is the true parameter with attention, else the parameter. In
    imitation mode (``mode_mt`` true) the teacher's step ``update_steps_mt
    [idx]`` replaces the optimizer's own (the training code's "MODIFY").
    """
    updated_param = base - update_step
    if mode_mt is not None and update_steps_mt is not None:
      updated_param = tf.where(mode_mt, base - update_steps_mt[idx],
                               updated_param)
    if not self.use_attention:
      return updated_param, updated_param
    attention_step = tf.reshape(lr_attend * attention_delta, tf.shape(base))
    return updated_param, base - attention_step

  def _stacked_readout(self):
    """All linear readouts of the per-parameter state as one matrix.

    Returns (weights [level_sizes[0], k], bias [k, 1], names, sizes): the
    update direction, the attention direction, the two decay logits and the
    learning-rate logit/change in one matmul, instead of one [N, 1] matmul
    each; ``tf.split(result, sizes)`` gives the pieces named ``names``. The
    update and attention readouts have no bias (a 0 is added).
    """
    cols, biases = [self.update_weights], [tf.zeros([1])]
    names, sizes = ["update"], [1]
    if self.use_attention:
      cols.append(self.attention_weights)
      biases.append(tf.zeros([1]))
      names.append("attention")
      sizes.append(1)
    cols += [self.scl_decay_weights, self.inp_decay_weights, self.lr_weights]
    biases += [tf.reshape(self.scl_decay_bias, [1]),
               tf.reshape(self.inp_decay_bias, [1]),
               tf.reshape(self.lr_bias, [1])]
    names += ["decays", "lr"]
    sizes += [2, 1]
    weights = tf.concat([tf.convert_to_tensor(c) for c in cols], 1)
    bias = tf.reshape(tf.concat(biases, 0), [-1, 1])
    return weights, bias, names, sizes

  def _packed_core(self, grads, packed, global_state, problem_lr_mean=None):
    """Every tensor's step in one pass (see :meth:`compute_updates_packed`).

    Mirrors _compute_mean_log_lr, _compute_scaled_and_ms_grads,
    _extend_rnn_input, _update_rnn_cells, _compute_rnn_state_projections
    and _compute_new_learning_rate. Returns (new packed state without
    ``true_param``, per-tensor update steps shaped like the grads, per-tensor
    lr_attend rows and attention_delta rows).

    Long on purpose: one straight pass over the [k, N] rows of all tensors,
    in the order of the six original functions it mirrors; cut into pieces,
    each piece would take and return a dozen of those rows.
    """
    g = self.num_gradient_scales
    seg = self.segments([grad.shape.num_elements() for grad in grads])
    if self.native_step and native_step.applies(self):
      return self._packed_core_native(grads, packed, global_state,
                                      problem_lr_mean, seg)

    def sqrt_chain(decay):
      # Each accumulator on twice the timescale of the one before.
      decays = [decay]
      for _ in range(g - 1):
        decays.append(tf.sqrt(decays[-1]))
      return decays

    # Gradient accumulators and mean squares, one row per timescale.
    grad_row = seg.concat([tf.reshape(grad, [1, -1]) for grad in grads])
    scale_decay, inp_decay = tf.split(packed["decays"], 2, 0)
    if g == 1:
      grads_accum = grad_row
    else:
      # Row by row into the concat that writes the new accumulators: XLA
      # fuses each row's update into it (the decays as one [g, N] array
      # would be written out first).
      grads_accum = tf.concat(
          [grad_row * (1. - decay) + accum * decay for decay, accum in
           zip(sqrt_chain(inp_decay), tf.split(packed["grad_accum"], g, 0))],
          0)
    if self.use_multiple_scale_decays and g > 1:
      scale_decay = tf.concat(sqrt_chain(scale_decay), 0)
    old_ms = packed["ms"]
    # The original's first-step rule (utils.new_mean_squared: the decay is
    # ignored while a tensor's mean square is all zero), tested per
    # coordinate. That is the same test on every state a run can reach: the
    # mean squares start all zero and after a step every entry is at least
    # (1 - decay) * 1e-12 > 0 (or keeps its old positive value).
    scale_decay = tf.where(tf.equal(old_ms, 0.), 0., scale_decay)
    grads_scaled, mean_squared = utils.rms_scaling_rows(
        grads_accum, scale_decay, old_ms)

    # RNN input features.
    features = [grads_scaled]
    if g > 1 and self.use_grad_products:
      scales = tf.split(grads_scaled, g, 0)
      features.append(tf.concat([a * b for a, b in zip(scales[:-1],
                                                        scales[1:])], 0))
    if self.use_log_means_squared:
      log_ms = tf.math.log(mean_squared + 1e-16)
      features.append(log_ms - tf.reduce_mean(log_ms, 0, keepdims=True))
    if self.dynamic_output_scale or self.use_lr_shortcut:
      log_lr = packed["log_learning_rate"]
    if self.use_relative_lr:
      if self.use_problem_lr_mean:
        # _compute_mean_log_lr: the mean over all of the problem's entries.
        features.append(log_lr - (tf.reduce_mean(log_lr)
                                  if problem_lr_mean is None
                                  else problem_lr_mean))
      else:
        features.append(log_lr - seg.spread(seg.means(log_lr)))
    if self.use_extreme_indicator:
      features.append(tf.nn.relu(log_lr - math.log(1.)) -
                      tf.nn.relu(math.log(1e-6) - log_lr))
    if self.use_lr_shortcut:
      features.append(log_lr - math.log(1e-3))
    # The cell's operand: inputs, then the state.
    inputs = tf.concat(features, 0)
    cell_rows = tf.concat([inputs, packed["parameter"]], 0)

    # Per-parameter and per-tensor RNNs (the latter as one batch of T).
    param_state = self.cells[0].call_feature_major(
        cell_rows, bias=self._injected_bias(packed, global_state),
        spread=seg.spread)
    new_packed = {"parameter": param_state}
    if self.num_layers > 1:
      layer_input = seg.means(param_state)
      if self._uses_additional_features:
        # Means of the cell's operand, not of ``inputs``: XLA then reads
        # the matmul's operand again where it would write the features out
        # a second time for the reduction.
        input_means = seg.means(cell_rows)[:int(inputs.shape[0])]
        layer_input = tf.concat([layer_input, input_means], 0)
      new_packed["layer"] = self._layer_step(layer_input, packed,
                                             global_state)

    # Readouts: update direction, decays, learning rate.
    weights, bias, names, sizes = self._stacked_readout()
    projected = tf.matmul(weights, param_state, transpose_a=True) + bias
    # tf.split, not slicing: see BiasGRUCell.call_feature_major.
    pieces = dict(zip(names, tf.split(projected, sizes, 0)))

    def per_tensor(delta):
      # Split per tensor; with a dynamic output scale each piece gets unit
      # RMS. Normalising the pieces (not the packed row) needs no per-tensor
      # RMS spread back over the coordinates.
      pieces = seg.split(delta)
      if not self.dynamic_output_scale:
        return pieces
      return self._unit_rms(pieces, seg.means(tf.square(delta)))

    update_delta = pieces["update"]
    if self.use_gradient_shortcut:
      update_delta += tf.matmul(self.grads_to_delta.matrix, grads_scaled,
                                transpose_a=True)
    update_deltas = per_tensor(update_delta)
    attention_deltas = None
    if self.use_attention:
      attention_delta = pieces["attention"]
      if self.use_gradient_shortcut:
        attention_delta += tf.matmul(self.grads_to_attn_delta.matrix,
                                     grads_scaled, transpose_a=True)
      attention_deltas = per_tensor(attention_delta)
    new_packed["decays"] = tf.nn.sigmoid(pieces["decays"])
    lr_logit = pieces["lr"]
    if self.dynamic_output_scale:
      step_log_lr = log_lr + lr_logit
      # Clip the value but let the gradient of the unclipped value through.
      step_log_lr += tf.stop_gradient(
          tf.clip_by_value(step_log_lr, -33., self.max_log_lr) - step_log_lr)
      lrm = tf.nn.sigmoid(self.lr_momentum_logit)
      new_packed["log_learning_rate"] = lrm * log_lr + (1. - lrm) * step_log_lr
      lr_param = tf.exp(step_log_lr + self.param_stepsize_offset)
      lr_attend = tf.exp(step_log_lr) if self.use_attention else lr_param
    else:
      lr_param = lr_attend = 2. * tf.nn.sigmoid(lr_logit)
    new_packed["grad_accum"] = grads_accum
    new_packed["ms"] = mean_squared
    update_steps = self._update_steps(lr_param, update_deltas, grads, seg)
    if self.use_attention:
      return (new_packed, update_steps, seg.split(lr_attend),
              attention_deltas)
    return new_packed, update_steps, None, None

  def _injected_bias(self, packed, global_state):
    """[T, 3 units]: the bias each tensor's layer RNN (and the global RNN)
    injects into the per-parameter cell; None with one level."""
    if self.num_layers == 1:
      return None
    total_bias = self.param_bias_affine(packed["layer"])
    if self.num_layers == 3:
      total_bias += self.global_bias_affine(list(global_state))
    return total_bias

  def _layer_step(self, layer_input, packed, global_state):
    """The layer RNNs' new state from their inputs [k, T] (one batch of
    T)."""
    layer_input = tf.transpose(layer_input)
    if self.num_layers == 3:
      layer_bias = self.layer_bias_affine(list(global_state))
      return self.cells[1](layer_input, packed["layer"], bias=layer_bias)[0]
    return self.cells[1](layer_input, packed["layer"])[0]

  @staticmethod
  def _unit_rms(pieces, mean_squares):
    """Each tensor's piece over its RMS (``mean_squares`` [1, T])."""
    rms = tf.sqrt(mean_squares + 1e-16)
    return [piece / rms[:, t] for t, piece in enumerate(pieces)]

  @staticmethod
  def _update_steps(lr_param, update_deltas, grads, seg):
    """Each tensor's step: learning rate times update direction."""
    return [tf.reshape(lr * delta, tf.shape(grad)) for lr, delta, grad
            in zip(seg.split(lr_param), update_deltas, grads)]

  def _packed_core_native(self, grads, packed, global_state, problem_lr_mean,
                          seg):
    """:meth:`_packed_core` with its per-coordinate part as one native
    kernel (:mod:`optimizer.native_step`); the same results up to float
    rounding."""
    lr_mean = (tf.reduce_mean(packed["log_learning_rate"])
               if problem_lr_mean is None else problem_lr_mean)
    out = native_step.per_coordinate_step(
        self, grads, packed, self._injected_bias(packed, global_state),
        lr_mean)
    new_packed = {key: out[key] for key in ("parameter", "decays",
                                            "log_learning_rate",
                                            "grad_accum", "ms")}
    state_means, input_means, delta_ms = tf.split(
        seg.means_of_sums(out["sums"]),
        [native_step.UNITS, native_step.INPUTS, 1], 0)
    if self.num_layers > 1:
      new_packed["layer"] = self._layer_step(
          tf.concat([state_means, input_means], 0), packed, global_state)
    update_deltas = self._unit_rms(seg.split(out["delta"]), delta_ms)
    return (new_packed, self._update_steps(out["lr"], update_deltas, grads,
                                           seg), None, None)

  def _compute_updated_global_state(self, layer_states, global_state):
    """Advances the global RNN (l.707-727)."""
    if self.num_layers < 3:
      return []
    global_input = tf.reduce_mean(tf.concat(layer_states, 0), 0, keepdims=True)
    new_global, _ = self.cells[2](global_input, global_state[0])
    return [new_global]
