"""The hierarchical RNN's step on the packed state, every tensor in one pass.

Port of the per-tensor step of ``optimizer/hierarchical_rnn.py`` (line
numbers of the L2O-Scale-Evaluation copy): ``_compute_updates`` (l.352-423)
and the functions it calls, ``_compute_mean_log_lr`` (l.425-435),
``_compute_scaled_and_ms_grads`` (l.437-482), ``_extend_rnn_input``
(l.484-527), ``_update_rnn_cells`` (l.529-591),
``_compute_rnn_state_projections`` (l.593-648), ``_compute_new_learning_rate``
(l.650-693) and ``_compute_updated_global_state`` (l.695-715).

Why one pass: the per-parameter RNN does ~20 features of work per
coordinate, so the step's cost is the number of ops and of passes over
memory, not arithmetic. The original runs its whole graph once per tensor;
here the coordinates of all T tensors are laid end to end and every
per-coordinate quantity (the k gradient scales, the RNN input features, the
RNN state, the readouts) is a row of one [k, N] matrix, which is also how
the state is kept (``HierarchicalRNN.pack_state``), so nothing is transposed
or re-assembled between steps. What differs between tensors is per-tensor:
the bias each tensor's layer RNN injects into the per-parameter GRU is
spread over the tensor's coordinates in the elementwise pass after the GRU's
matmul, per-tensor means (the layer RNN's input, the RMS normalisation of
the update) are sums over slices (:class:`optimizer.hrnn_segments.Segments`),
nothing in the graph has T * N entries, and the layer RNNs of all tensors
run as one batch of T.

The functions are pieces of one traced step: each takes the optimizer
``hrnn`` for its options and meta-parameters and returns tensors, so a
``tf.function`` of the step traces the same graph as one function would.
"""

import math

import tensorflow as tf

from optimizer import hrnn_variables
from optimizer import native_step
from optimizer import utils


def packed_core(hrnn, grads, packed, global_state, problem_lr_mean=None):
  """Every tensor's step in one pass (``HierarchicalRNN.compute_updates_packed``).

  Returns (new packed state without ``true_param``, per-tensor update steps
  shaped like the grads, per-tensor lr_attend rows and attention_delta rows,
  the last two None without attention).
  """
  seg = hrnn.segments([grad.shape.num_elements() for grad in grads])
  if hrnn.native_step and native_step.applies(hrnn):
    return packed_core_native(hrnn, grads, packed, global_state,
                              problem_lr_mean, seg)
  grads_accum, grads_scaled, mean_squared = scaled_gradients(
      hrnn, seg, grads, packed)
  log_lr = (packed["log_learning_rate"]
            if hrnn.dynamic_output_scale or hrnn.use_lr_shortcut else None)
  inputs = rnn_input(hrnn, seg, grads_scaled, mean_squared, log_lr,
                     problem_lr_mean)
  new_packed = rnn_states(hrnn, seg, inputs, packed, global_state)
  pieces = readouts(hrnn, new_packed["parameter"])
  update_deltas, attention_deltas = directions(hrnn, seg, pieces,
                                               grads_scaled)
  new_packed["decays"] = tf.nn.sigmoid(pieces["decays"])
  new_log_lr, lr_param, lr_attend = learning_rates(hrnn, log_lr,
                                                   pieces["lr"])
  if new_log_lr is not None:
    new_packed["log_learning_rate"] = new_log_lr
  new_packed["grad_accum"] = grads_accum
  new_packed["ms"] = mean_squared
  steps = update_steps(lr_param, update_deltas, grads, seg)
  if hrnn.use_attention:
    return new_packed, steps, seg.split(lr_attend), attention_deltas
  return new_packed, steps, None, None


def scaled_gradients(hrnn, seg, grads, packed):
  """The gradient accumulators, the RMS-scaled gradients and the new mean
  squares, one row per timescale (``_compute_scaled_and_ms_grads``,
  l.437-482): (grads_accum, grads_scaled, mean_squared), each [g, N]."""
  g = hrnn.num_gradient_scales

  def sqrt_chain(decay):
    # Each accumulator on twice the timescale of the one before.
    decays = [decay]
    for _ in range(g - 1):
      decays.append(tf.sqrt(decays[-1]))
    return decays

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
  if hrnn.use_multiple_scale_decays and g > 1:
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
  return grads_accum, grads_scaled, mean_squared


def rnn_input(hrnn, seg, grads_scaled, mean_squared, log_lr,
              problem_lr_mean):
  """The per-parameter RNN's input features, [num_rnn_inputs, N]
  (``_extend_rnn_input``, l.484-527, with ``_compute_mean_log_lr``,
  l.425-435: ``problem_lr_mean``, or None for the mean over ``log_lr``)."""
  g = hrnn.num_gradient_scales
  features = [grads_scaled]
  if g > 1 and hrnn.use_grad_products:
    scales = tf.split(grads_scaled, g, 0)
    features.append(tf.concat([a * b for a, b in zip(scales[:-1],
                                                      scales[1:])], 0))
  if hrnn.use_log_means_squared:
    log_ms = tf.math.log(mean_squared + 1e-16)
    features.append(log_ms - tf.reduce_mean(log_ms, 0, keepdims=True))
  if hrnn.use_relative_lr:
    if hrnn.use_problem_lr_mean:
      # _compute_mean_log_lr: the mean over all of the problem's entries.
      features.append(log_lr - (tf.reduce_mean(log_lr)
                                if problem_lr_mean is None
                                else problem_lr_mean))
    else:
      features.append(log_lr - seg.spread(seg.means(log_lr)))
  if hrnn.use_extreme_indicator:
    features.append(tf.nn.relu(log_lr - math.log(1.)) -
                    tf.nn.relu(math.log(1e-6) - log_lr))
  if hrnn.use_lr_shortcut:
    features.append(log_lr - math.log(1e-3))
  return tf.concat(features, 0)


def rnn_states(hrnn, seg, inputs, packed, global_state):
  """The new per-parameter and per-tensor RNN states (``_update_rnn_cells``,
  l.529-591), the latter as one batch of T: a dict of ``parameter`` and,
  with 2 or 3 levels, ``layer``."""
  # The cell's operand: inputs, then the state.
  cell_rows = tf.concat([inputs, packed["parameter"]], 0)
  param_state = hrnn.cells[0].call_feature_major(
      cell_rows, bias=injected_bias(hrnn, packed, global_state),
      spread=seg.spread)
  new_states = {"parameter": param_state}
  if hrnn.num_layers > 1:
    layer_input = seg.means(param_state)
    if hrnn._uses_additional_features:  # pylint: disable=protected-access
      # Means of the cell's operand, not of ``inputs``: XLA then reads
      # the matmul's operand again where it would write the features out
      # a second time for the reduction.
      input_means = seg.means(cell_rows)[:int(inputs.shape[0])]
      layer_input = tf.concat([layer_input, input_means], 0)
    new_states["layer"] = layer_step(hrnn, layer_input, packed, global_state)
  return new_states


def injected_bias(hrnn, packed, global_state):
  """[T, 3 units]: the bias each tensor's layer RNN (and the global RNN)
  injects into the per-parameter cell (l.549-562); None with one level."""
  if hrnn.num_layers == 1:
    return None
  total_bias = hrnn.param_bias_affine(packed["layer"])
  if hrnn.num_layers == 3:
    total_bias += hrnn.global_bias_affine(list(global_state))
  return total_bias


def layer_step(hrnn, layer_input, packed, global_state):
  """The layer RNNs' new state from their inputs [k, T], as one batch of T
  (l.567-589)."""
  layer_input = tf.transpose(layer_input)
  if hrnn.num_layers == 3:
    layer_bias = hrnn.layer_bias_affine(list(global_state))
    return hrnn.cells[1](layer_input, packed["layer"], bias=layer_bias)[0]
  return hrnn.cells[1](layer_input, packed["layer"])[0]


def readouts(hrnn, param_state):
  """The linear readouts of the per-parameter state, by name (``update``,
  ``attention``, ``decays``, ``lr``; :func:`optimizer.hrnn_variables.stacked_readout`)."""
  weights, bias, names, sizes = hrnn_variables.stacked_readout(hrnn)
  projected = tf.matmul(weights, param_state, transpose_a=True) + bias
  # tf.split, not slicing: see BiasGRUCell.call_feature_major.
  return dict(zip(names, tf.split(projected, sizes, 0)))


def directions(hrnn, seg, pieces, grads_scaled):
  """The per-tensor update directions and, with attention, attention
  directions (else None), with the gradient shortcut added and, with a
  dynamic output scale, unit RMS per tensor
  (``_compute_rnn_state_projections``, l.593-629)."""

  def per_tensor(delta):
    # Split per tensor; with a dynamic output scale each piece gets unit
    # RMS. Normalising the pieces (not the packed row) needs no per-tensor
    # RMS spread back over the coordinates.
    pieces = seg.split(delta)
    if not hrnn.dynamic_output_scale:
      return pieces
    return unit_rms(pieces, seg.means(tf.square(delta)))

  update_delta = pieces["update"]
  if hrnn.use_gradient_shortcut:
    update_delta += tf.matmul(hrnn.grads_to_delta.matrix, grads_scaled,
                              transpose_a=True)
  update_deltas = per_tensor(update_delta)
  attention_deltas = None
  if hrnn.use_attention:
    attention_delta = pieces["attention"]
    if hrnn.use_gradient_shortcut:
      attention_delta += tf.matmul(hrnn.grads_to_attn_delta.matrix,
                                   grads_scaled, transpose_a=True)
    attention_deltas = per_tensor(attention_delta)
  return update_deltas, attention_deltas


def learning_rates(hrnn, log_lr, lr_logit):
  """(new log learning rate or None, the parameters' learning rate, the
  attention's learning rate) from the learning-rate readout ``lr_logit``
  (``_compute_new_learning_rate``, l.650-693)."""
  if not hrnn.dynamic_output_scale:
    lr_param = 2. * tf.nn.sigmoid(lr_logit)
    return None, lr_param, lr_param
  step_log_lr = log_lr + lr_logit
  # Clip the value but let the gradient of the unclipped value through.
  step_log_lr += tf.stop_gradient(
      tf.clip_by_value(step_log_lr, -33., hrnn.max_log_lr) - step_log_lr)
  lrm = tf.nn.sigmoid(hrnn.lr_momentum_logit)
  new_log_lr = lrm * log_lr + (1. - lrm) * step_log_lr
  lr_param = tf.exp(step_log_lr + hrnn.param_stepsize_offset)
  lr_attend = tf.exp(step_log_lr) if hrnn.use_attention else lr_param
  return new_log_lr, lr_param, lr_attend


def unit_rms(pieces, mean_squares):
  """Each tensor's piece over its RMS (``mean_squares`` [1, T]; l.610-613)."""
  rms = tf.sqrt(mean_squares + 1e-16)
  return [piece / rms[:, t] for t, piece in enumerate(pieces)]


def update_steps(lr_param, update_deltas, grads, seg):
  """Each tensor's step: learning rate times update direction
  (l.643-644)."""
  return [tf.reshape(lr * delta, tf.shape(grad)) for lr, delta, grad
          in zip(seg.split(lr_param), update_deltas, grads)]


def packed_core_native(hrnn, grads, packed, global_state, problem_lr_mean,
                       seg):
  """:func:`packed_core` with its per-coordinate part as one native kernel
  (:mod:`optimizer.native_step`); the same results up to float rounding."""
  lr_mean = (tf.reduce_mean(packed["log_learning_rate"])
             if problem_lr_mean is None else problem_lr_mean)
  out = native_step.per_coordinate_step(
      hrnn, grads, packed, injected_bias(hrnn, packed, global_state),
      lr_mean)
  new_packed = {key: out[key] for key in ("parameter", "decays",
                                          "log_learning_rate",
                                          "grad_accum", "ms")}
  state_means, input_means, delta_ms = tf.split(
      seg.means_of_sums(out["sums"]),
      [native_step.UNITS, native_step.INPUTS, 1], 0)
  if hrnn.num_layers > 1:
    new_packed["layer"] = layer_step(
        hrnn, tf.concat([state_means, input_means], 0), packed, global_state)
  update_deltas = unit_rms(seg.split(out["delta"]), delta_ms)
  return (new_packed, update_steps(out["lr"], update_deltas, grads, seg),
          None, None)


def stepped(hrnn, base, update_step, mode_mt, update_steps_mt, idx,
            lr_attend, attention_delta):
  """One tensor's new parameter and attended location (l.389-399).

  ``base`` is the true parameter with attention, else the parameter. In
  imitation mode (``mode_mt`` true) the teacher's step ``update_steps_mt
  [idx]`` replaces the optimizer's own (the training code's "MODIFY").
  """
  updated_param = base - update_step
  if mode_mt is not None and update_steps_mt is not None:
    updated_param = tf.where(mode_mt, base - update_steps_mt[idx],
                             updated_param)
  if not hrnn.use_attention:
    return updated_param, updated_param
  attention_step = tf.reshape(lr_attend * attention_delta, tf.shape(base))
  return updated_param, base - attention_step


def updated_global_state(hrnn, layer_states, global_state):
  """Advances the global RNN (``_compute_updated_global_state``,
  l.695-715)."""
  if hrnn.num_layers < 3:
    return []
  global_input = tf.reduce_mean(tf.concat(layer_states, 0), 0, keepdims=True)
  new_global, _ = hrnn.cells[2](global_input, global_state[0])
  return [new_global]
