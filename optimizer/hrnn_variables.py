"""The hierarchical RNN's meta-parameters, created under their TF1 names.

Port of the variable creation of ``optimizer/hierarchical_rnn.py`` (line
numbers of the L2O-Scale-Evaluation copy): the readouts of ``__init__``
(l.169-201) with ``_initialize_rnn_cells`` (l.220-241),
``_initialize_scale_decay`` (l.243-261), ``_initialize_input_decay``
(l.263-282) and ``_initialize_lr`` (l.284-301), and the variables the
original creates on first use inside its step: the bias affines of
``_update_rnn_cells`` (l.549-566), the learning-rate momentum and step-size
offset of ``_compute_new_learning_rate`` (l.675-685) and the gradient
shortcuts of ``_compute_rnn_state_projections`` (l.600-624).

Each function takes the optimizer (its options, its ``_meta_variable`` and
``_register``) and returns what it created; ``HierarchicalRNN._build_variables``
calls them in the order that fixes the random initial values for a seed.
"""
# The functions create variables on the optimizer's behalf, through its
# variable hooks (_meta_variable, _register).
# pylint: disable=protected-access

import math

import tensorflow as tf

from optimizer import rnn_cells
from optimizer import trainable_optimizer as opt
from optimizer import utils

SCOPE = opt.OPTIMIZER_SCOPE
PER_TENSOR = SCOPE + "/PerTensor"


def rnn_input_width(hrnn):
  """Width of the per-parameter RNN input (``_extend_rnn_input``,
  l.484-527, on the scaled gradients of l.437-482)."""
  g = hrnn.num_gradient_scales
  n = g
  if g > 1 and hrnn.use_grad_products:
    n += g - 1
  if hrnn.use_log_means_squared:
    n += g
  if hrnn.use_relative_lr:
    n += 1
  if hrnn.use_extreme_indicator:
    n += 1
  if hrnn.use_lr_shortcut:
    n += 1
  return n


def rnn_cells_and_init_vectors(hrnn):
  """The RNN cells of each level and their initial states (l.220-241).

  Returns (cells, init_vectors); the initial states are meta-parameters
  with ``learnable_rnn_init``, else random constants.
  """
  init, seed, sizes = hrnn.init_scales, hrnn.random_seed, hrnn.level_sizes
  n_in = hrnn.num_rnn_inputs
  cell_inputs = [n_in]
  if hrnn.num_layers > 1:
    cell_inputs.append(sizes[0] + (n_in if hrnn._uses_additional_features
                                   else 0))
  if hrnn.num_layers > 2:
    cell_inputs.append(sizes[1])
  cell_scopes = [PER_TENSOR + "/Layer0_RNN", PER_TENSOR + "/Layer1_RNN",
                 SCOPE + "/Layer2_RNN"]
  cells, init_vectors = [], []
  for level in range(hrnn.num_layers):
    cell = rnn_cells.BiasGRUCell(
        sizes[level], cell_inputs[level], cell_scopes[level],
        scale=init["biasgrucell_scale"],
        gate_bias_init=init["biasgrucell_gate_bias_init"], random_seed=seed)
    cells.append(cell)
    hrnn._register(cell.tf1_variables())
    init_vec = tf.random.uniform([1, sizes[level]], -1., 1., seed=seed)
    if hrnn.learnable_rnn_init:
      init_vec = hrnn._meta_variable(
          "{}/Level{}_RNN/init_vector".format(SCOPE, level), init_vec)
    init_vectors.append(init_vec)
  return cells, init_vectors


def bias_affines(hrnn):
  """The per-tensor and global biases of the lower levels (l.549-566).

  Returns (param_bias_affine, global_bias_affine, layer_bias_affine), None
  where the hierarchy has no level above.
  """
  sizes, seed = hrnn.level_sizes, hrnn.random_seed
  affine_scale = hrnn.init_scales["hrnn_affine_scale"]
  param_bias = global_bias = layer_bias = None
  if hrnn.num_layers > 1:
    param_bias = utils.Affine(
        PER_TENSOR + "/Layer0_RNN/Param/Affine", sizes[1], 3 * sizes[0],
        scale=affine_scale, random_seed=seed)
    hrnn._register(param_bias.tf1_variables())
  if hrnn.num_layers == 3:
    global_bias = utils.Affine(
        PER_TENSOR + "/Layer0_RNN/Global/Affine", sizes[2], 3 * sizes[0],
        scale=affine_scale, random_seed=seed)
    layer_bias = utils.Affine(
        PER_TENSOR + "/Layer1_RNN/Affine", sizes[2], 3 * sizes[1],
        scale=affine_scale, random_seed=seed)
    hrnn._register(global_bias.tf1_variables())
    hrnn._register(layer_bias.tf1_variables())
  return param_bias, global_bias, layer_bias


def readout_init(hrnn):
  """The readouts' random initial values: shape -> normal values of
  standard deviation ``hrnn_rnn_readout_scale / sqrt(level_sizes[0])``
  (l.177-182)."""
  readout_std = hrnn.init_scales["hrnn_rnn_readout_scale"] / math.sqrt(
      hrnn.level_sizes[0])

  def scaled_init(shape):
    return tf.random.normal(shape, 0., readout_std, seed=hrnn.random_seed)

  return scaled_init


def scale_decay(hrnn, scaled_init):
  """(weights, bias) of the RMS decay readout (l.243-261)."""
  return _decay_readout(hrnn, scaled_init, hrnn.learnable_decay, "scl_decay",
                        hrnn.init_scales["scale_decay_bias_init"], 0.93)


def input_decay(hrnn, scaled_init):
  """(weights, bias) of the input (accumulator) decay readout
  (l.263-282)."""
  learnable = (hrnn.learnable_decay and hrnn.num_gradient_scales > 1 and
               hrnn.learnable_inp_decay)
  return _decay_readout(hrnn, scaled_init, learnable, "inp_decay",
                        hrnn.init_scales["hrnn_default_decay_var_init"], 0.89)


def _decay_readout(hrnn, scaled_init, learnable, name, bias_init, fixed):
  """(weights, bias) of a decay readout: meta-parameters ``<name>_weights``
  and ``<name>_bias`` where ``learnable``, else zero weights and the bias
  of the fixed decay ``fixed``."""
  shape = (hrnn.level_sizes[0], 1)
  if not learnable:
    return tf.zeros(shape), tf.constant(math.log(fixed / (1. - fixed)))
  weights = hrnn._meta_variable("{}/{}_weights".format(SCOPE, name),
                                scaled_init(shape))
  bias = hrnn._meta_variable("{}/{}_bias".format(SCOPE, name),
                             tf.fill([1], bias_init))
  return weights, bias


def learning_rate(hrnn, scaled_init):
  """(weights, bias) of the learning-rate readout (l.284-301)."""
  shape = (hrnn.level_sizes[0], 1)
  if not hrnn.dynamic_output_scale:
    return tf.zeros(shape), tf.zeros([1, 1])
  wt = tf.zeros(shape) if hrnn.zero_init_lr_weights else scaled_init(shape)
  weights = hrnn._meta_variable(SCOPE + "/learning_rate_weights", wt)
  bias = hrnn._meta_variable(SCOPE + "/learning_rate_bias", tf.zeros([1]))
  return weights, bias


def learning_rate_dynamics(hrnn):
  """(momentum logit, parameter step-size offset) of the learning rate, with
  ``dynamic_output_scale`` (l.675-685)."""
  momentum_logit = hrnn._meta_variable(
      PER_TENSOR + "/learning_rate_momentum_logit",
      tf.constant(float(hrnn.init_scales["learning_rate_momentum_logit_init"])))
  stepsize_offset = hrnn._meta_variable(PER_TENSOR + "/param_stepsize_offset",
                                        tf.constant(-1.))
  return momentum_logit, stepsize_offset


def gradient_shortcut(hrnn):
  """The affine shortcuts from the scaled gradients to the update and
  attention directions (l.600-624): (grads_to_delta, grads_to_attn_delta),
  None where not used."""
  if not hrnn.use_gradient_shortcut:
    return None, None
  g, seed = hrnn.num_gradient_scales, hrnn.random_seed
  to_delta = utils.Affine(PER_TENSOR + "/GradsToDelta", g, 1,
                          include_bias=False, vec_mean=1. / g,
                          random_seed=seed)
  hrnn._register(to_delta.tf1_variables())
  to_attn_delta = None
  if hrnn.use_attention:
    to_attn_delta = utils.Affine(PER_TENSOR + "/GradsToAttnDelta", g, 1,
                                 include_bias=False, vec_mean=1. / g,
                                 random_seed=seed)
    hrnn._register(to_attn_delta.tf1_variables())
  return to_delta, to_attn_delta


def stacked_readout(hrnn):
  """All linear readouts of the per-parameter state as one matrix.

  Returns (weights [level_sizes[0], k], bias [k, 1], names, sizes): the
  update direction, the attention direction, the two decay logits and the
  learning-rate logit/change in one matmul, instead of one [N, 1] matmul
  each (the original's ``utils.project`` calls, l.599-638 and l.655-656);
  ``tf.split(result, sizes)`` gives the pieces named
  ``names``. The update and attention readouts have no bias (a 0 is
  added).
  """
  cols, biases = [hrnn.update_weights], [tf.zeros([1])]
  names, sizes = ["update"], [1]
  if hrnn.use_attention:
    cols.append(hrnn.attention_weights)
    biases.append(tf.zeros([1]))
    names.append("attention")
    sizes.append(1)
  cols += [hrnn.scl_decay_weights, hrnn.inp_decay_weights, hrnn.lr_weights]
  biases += [tf.reshape(hrnn.scl_decay_bias, [1]),
             tf.reshape(hrnn.inp_decay_bias, [1]),
             tf.reshape(hrnn.lr_bias, [1])]
  names += ["decays", "lr"]
  sizes += [2, 1]
  weights = tf.concat([tf.convert_to_tensor(c) for c in cols], 1)
  bias = tf.reshape(tf.concat(biases, 0), [-1, 1])
  return weights, bias, names, sizes
