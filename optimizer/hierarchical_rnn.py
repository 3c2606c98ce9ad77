"""The hierarchical RNN learned optimizer of L2O-Scale (Wichrowska et al. 2017).

Port of ``optimizer/hierarchical_rnn.py``. Line ranges below refer to the
L2O-Scale-Evaluation copy; the L2O-Scale-Training copy is the same apart from
the imitation ("MODIFY", ``mode_mt``) branch of ``_compute_updates``, which is
``TrainableOptimizer._follow_teacher`` here.

Three levels (l.61-140): a per-parameter GRU (level 0), a per-tensor GRU
(level 1) and a global GRU (level 2); each level's state biases the gates of
the level below. The per-parameter RNN reads the gradient accumulated and
RMS-normalised at ``num_gradient_scales`` timescales plus optional features,
and its state is projected to the update direction, the learning-rate change
and the two decay rates.

The class keeps the original's options, state and interface; its parts live
in modules of their own: the meta-parameters (:mod:`optimizer.hrnn_variables`),
the packed state (:mod:`optimizer.hrnn_packed_state`), the tensors' layout in
it (:mod:`optimizer.hrnn_segments`) and the step (:mod:`optimizer.hrnn_step`).
"""

import numpy as np
import tensorflow as tf

from optimizer import hrnn_packed_state
from optimizer import hrnn_segments
from optimizer import hrnn_step
from optimizer import hrnn_variables
from optimizer import trainable_optimizer as opt

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


def _check_options(level_sizes, init_lr_range, num_gradient_scales,
                   dynamic_output_scale, use_relative_lr,
                   use_extreme_indicator):
  """The original's checks of its options (l.133-144, l.506-508)."""
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


def _pop_init_scales(kwargs):
  """The init-scale arguments of :data:`INIT_DEFAULTS`, taken out of
  ``kwargs`` (the original read them from its flags)."""
  init = dict(INIT_DEFAULTS)
  for key in list(kwargs):
    if key in INIT_DEFAULTS:
      init[key] = kwargs.pop(key)
  return init


def _state_keys(dynamic_output_scale, num_gradient_scales):
  """The TF1 slot names of a tensor's state (l.203-211)."""
  state_keys = ["parameter", "layer", "scl_decay", "inp_decay", "true_param"]
  if dynamic_output_scale:
    state_keys.append("log_learning_rate")
  for i in range(num_gradient_scales):
    state_keys.append("grad_accum{}".format(i + 1))
    state_keys.append("ms{}".format(i + 1))
  return state_keys


def _initial_log_lr(hrnn, var_vectorized, seed):
  """A tensor's initial log learning rates, clipped (l.320-341).

  Random unless ``init_lr_range`` is one value: from TensorFlow's random
  stream (the original's ``tf.random_uniform``), or, given a ``[2]``
  integer ``seed``, drawn statelessly from it (same distribution).
  """
  ndim = int(var_vectorized.shape[0])
  min_lr, max_lr = hrnn.init_lr_range
  if min_lr == max_lr:
    log_init_lr = tf.math.log(min_lr * tf.ones_like(var_vectorized))
  else:
    # A random offset per tensor makes tensors' mean LRs differ (l.326).
    lo, hi = np.log(min_lr) / 2., np.log(max_lr) / 2.
    if seed is None:
      actual_vals = tf.random.uniform([ndim, 1], lo, hi,
                                      seed=hrnn.random_seed)
      offset = tf.random.uniform((), lo, hi, seed=hrnn.random_seed)
    else:
      vals_seed, offset_seed = tf.unstack(
          tf.random.experimental.stateless_split(seed, 2))
      actual_vals = tf.random.stateless_uniform([ndim, 1], vals_seed, lo, hi)
      offset = tf.random.stateless_uniform((), offset_seed, lo, hi)
    log_init_lr = actual_vals + offset
  return tf.clip_by_value(log_init_lr, -33., hrnn.max_log_lr)


class HierarchicalRNN(opt.TrainableOptimizer):
  """3-level hierarchical RNN optimizer (same arguments as the original).

  ``level_sizes`` has 1, 2 or 3 ints. All other arguments keep the
  original's meaning and defaults (see l.69-133 of the original). The
  extra keyword arguments of :data:`INIT_DEFAULTS` replace the original's
  init-scale flags; the rest go to :class:`TrainableOptimizer`.
  """

  # How the leaves of the packed state (:meth:`pack_state`) hold the
  # tensors: these keys one row per tensor, these a list with one entry per
  # tensor; the others one column per coordinate.
  PACKED_TENSOR_ROWS = hrnn_packed_state.TENSOR_ROWS
  PACKED_TENSOR_LISTS = hrnn_packed_state.TENSOR_LISTS

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
    """The original's constructor (l.68-218): its options, their checks,
    then the meta-parameters.

    Why long: the original's constructor, its options checked and its cells
    built in the original's order."""
    level_sizes = list(level_sizes)
    _check_options(level_sizes, init_lr_range, num_gradient_scales,
                   dynamic_output_scale, use_relative_lr,
                   use_extreme_indicator)
    self.init_scales = _pop_init_scales(kwargs)
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
    super().__init__("hRNN", _state_keys(dynamic_output_scale,
                                         num_gradient_scales),
                     use_attention=use_attention,
                     use_log_objective=use_log_objective,
                     obj_train_max_multiplier=obj_train_max_multiplier,
                     **kwargs)
    with self.name_scope:
      self._build_variables()
    # Held by a closure, not a dict attribute: tf.Module would track a dict.
    segments_by_sizes = {}
    self._segments_by_sizes = lambda: segments_by_sizes

  def segments(self, sizes):
    """The :class:`optimizer.hrnn_segments.Segments` of tensors with these
    static sizes, built once per set of sizes for this optimizer."""
    if any(size is None for size in sizes):
      raise ValueError("The hierarchical RNN needs static tensor shapes, got "
                       "sizes {}".format(sizes))
    key = tuple(int(size) for size in sizes)
    cache = self._segments_by_sizes()
    if key not in cache:
      cache[key] = hrnn_segments.Segments(key)
    return cache[key]

  # ------------------------------------------------------------ variables
  @property
  def num_rnn_inputs(self):
    """Width of the per-parameter RNN input (l.484-527)."""
    return hrnn_variables.rnn_input_width(self)

  @property
  def _uses_additional_features(self):
    return self.num_rnn_inputs != self.num_gradient_scales

  def _build_variables(self):
    """Creates every meta-parameter with its TF1 name
    (:mod:`optimizer.hrnn_variables`), in the original's creation order,
    which fixes the random initial values for a seed."""
    self.cells, self.init_vectors = (
        hrnn_variables.rnn_cells_and_init_vectors(self))
    (self.param_bias_affine, self.global_bias_affine,
     self.layer_bias_affine) = hrnn_variables.bias_affines(self)
    scaled_init = hrnn_variables.readout_init(self)
    self.update_weights = self._meta_variable(
        hrnn_variables.SCOPE + "/update_weights",
        scaled_init((self.level_sizes[0], 1)))
    if self.use_attention:
      self.attention_weights = self._meta_variable(
          hrnn_variables.SCOPE + "/attention_weights",
          tf.identity(self.update_weights))
    self.scl_decay_weights, self.scl_decay_bias = hrnn_variables.scale_decay(
        self, scaled_init)
    self.inp_decay_weights, self.inp_decay_bias = hrnn_variables.input_decay(
        self, scaled_init)
    self.lr_weights, self.lr_bias = hrnn_variables.learning_rate(
        self, scaled_init)
    if self.dynamic_output_scale:
      self.lr_momentum_logit, self.param_stepsize_offset = (
          hrnn_variables.learning_rate_dynamics(self))
    self.grads_to_delta, self.grads_to_attn_delta = (
        hrnn_variables.gradient_shortcut(self))

  # ---------------------------------------------------------------- state
  def initialize_state(self, var, seed=None):
    """Initial state of one tensor (``_initialize_state``, l.303-344;
    ``seed``: see :func:`_initial_log_lr`)."""
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
      state["log_learning_rate"] = _initial_log_lr(self, var_vectorized, seed)
    for i in range(self.num_gradient_scales):
      state["grad_accum{}".format(i + 1)] = tf.zeros_like(var_vectorized)
      state["ms{}".format(i + 1)] = tf.zeros_like(var_vectorized)
    return state

  def initialize_global_state(self):
    """Global RNN state, only with 3 levels (l.346-350)."""
    if self.num_layers < 3:
      return []
    return [tf.ones([1, 1]) * self.init_vectors[2]]

  # ----------------------------------------------------------------- step
  def compute_updates(self, params, grads, states, global_state,
                      mode_mt=None, update_steps_mt=None):
    """One step on all tensors (``_compute_updates``, l.352-423).

    Computes what the line-by-line port of the original
    (``tests/hrnn_reference.py``) computes, up to float rounding, with
    per-tensor state dicts in the TF1 layout: packs them
    (:meth:`pack_state`), runs :meth:`compute_updates_packed` and unpacks
    the result. Callers that keep the state across steps (the meta-test
    loop, the benchmark) use the packed form directly and skip the packing.
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
    """Per-tensor TF1 state dicts -> the packed layout
    (:mod:`optimizer.hrnn_packed_state`)."""
    return hrnn_packed_state.pack(self, states)

  def unpack_state(self, packed, params):
    """The packed layout -> per-tensor TF1 state dicts (:meth:`pack_state`)."""
    return hrnn_packed_state.unpack(self, packed, params)

  def packed_columns(self, packed, first, last, start, end):
    """The packed state of tensors ``first`` to ``last - 1`` alone, whose
    coordinates are ``start`` to ``end - 1``: what :meth:`pack_state` of
    their states gives, taken out of the packed state of all tensors. Their
    step on it (:meth:`compute_updates_packed` with ``problem_lr_mean``,
    see :meth:`problem_mean_log_lr`) is their part of the step of all
    tensors."""
    return hrnn_packed_state.columns_of(packed, first, last, start, end)

  def join_packed(self, parts):
    """The packed state of all tensors from the packed states of
    consecutive groups of them (the inverse of :meth:`packed_columns`)."""
    return hrnn_packed_state.join(parts)

  def problem_mean_log_lr(self, parts):
    """What a step on part of the tensors (:meth:`packed_columns`) needs of
    the others: the mean log learning rate of the whole problem
    (``use_problem_lr_mean``, the original's _compute_mean_log_lr), from the
    packed states (or their variables) of consecutive groups of all its
    tensors (``parts``); None where the step does not read it. Every other
    quantity is per tensor, and the global RNN reads the last tensor's
    layer state only (the original's l.419), so the part that holds the
    last tensor gives the new global state."""
    if not (self.use_relative_lr and self.use_problem_lr_mean):
      return None
    return tf.reduce_mean(tf.concat(
        [part["log_learning_rate"] for part in parts], 1))

  def compute_updates_packed(self, params, grads, packed, global_state,
                             mode_mt=None, update_steps_mt=None,
                             problem_lr_mean=None):
    """:meth:`compute_updates` on the packed state (:meth:`pack_state`), all
    tensors in one pass (:mod:`optimizer.hrnn_step` says why).

    ``problem_lr_mean``: for a step on part of the problem's tensors, the
    mean log learning rate of all of them (:meth:`problem_mean_log_lr`);
    None: the mean over ``packed``.

    Returns (new params, new packed state, new global state, attention
    params, update steps), as :meth:`compute_updates`.
    """
    (new_packed, update_steps, lr_attends,
     attention_deltas) = hrnn_step.packed_core(self, grads, packed,
                                               global_state, problem_lr_mean)
    new_params, new_attend = [], []
    for idx, param in enumerate(params):
      base = packed["true_param"][idx] if self.use_attention else param
      updated_param, attended = hrnn_step.stepped(
          self, base, update_steps[idx], mode_mt, update_steps_mt, idx,
          lr_attends[idx] if self.use_attention else None,
          attention_deltas[idx] if self.use_attention else None)
      new_params.append(updated_param)
      new_attend.append(attended)
    if self.use_attention:
      new_packed["true_param"] = list(new_params)
    new_global = []
    if self.num_layers == 3:
      # Quirk kept from the original (l.419): the global RNN reads the state
      # of the *last* tensor's layer RNN only, not a mean over all tensors.
      new_global = hrnn_step.updated_global_state(
          self, [new_packed["layer"][-1:]], global_state)
    return new_params, new_packed, new_global, new_attend, update_steps
