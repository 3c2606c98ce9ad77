"""The line-by-line port of the original ``HierarchicalRNN._compute_updates``
(L2O-Scale ``optimizer/hierarchical_rnn.py`` l.363-727), tensor by tensor on
[N, 1] columns, as the original writes it.

It is the oracle the optimizer's packed step (``HierarchicalRNN
.compute_updates_packed``, the one step the port runs) is tested against over
the whole option grid (tests/test_hierarchical_rnn.py), so it lives with the
tests: nothing in the product calls it. The functions take the optimizer
(``opt``) for its meta-parameters, options and RNN cells (the cells are
checked on their own against the TF1 fixtures); every other piece of the
step -- the RMS scaling and its mean square, asinh, the projections, the
parameter and attention updates, the global RNN's input -- is written here
from the original's text (``optimizer/utils.py`` and
``optimizer/hierarchical_rnn.py`` of L2O-Scale-Training), not taken from the
port, so a change to the port's versions shows up as a difference.
"""

import math

import tensorflow as tf


# --- the original's optimizer/utils.py, transcribed ----------------------------


def _asinh(x):
  """utils.py l.31-33: log(x + sqrt(1 + x^2))."""
  return tf.math.log(x + tf.sqrt(1. + x ** 2))


def _project(inputs, weights, bias=0., activation=tf.identity):
  """utils.py l.90-105: activation(inputs @ weights + bias)."""
  return activation(tf.matmul(inputs, weights) + bias)


def _new_mean_squared(grad_vec, decay, ms):
  """utils.py l.108-134: the decay is ignored while ms is all zero (the
  first step); epsilon 1e-12 is added to the squared gradient."""
  decay = tf.where(tf.reduce_all(tf.equal(ms, 0.)), tf.zeros_like(decay),
                   decay)
  return (1. - decay) * (tf.square(grad_vec) + 1e-12) + decay * ms


def _rms_scaling(gradient, decay, ms):
  """utils.py l.137-160 with update_ms=True."""
  grad_vec = tf.reshape(gradient, [-1, 1])
  ms = _new_mean_squared(grad_vec, decay, ms)
  return _asinh(grad_vec / tf.sqrt(ms + 1e-16)), ms


def _stepped(opt, param, state, update_step, mode_mt, update_steps_mt, idx,
             lr_attend, attention_delta):
  """hierarchical_rnn.py l.393-405: the new parameter (the teacher's step in
  imitation mode) and the attended location."""
  if opt.use_attention:
    truth = state["true_param"]
    updated_param = truth - update_step
    if mode_mt is not None:
      updated_param = tf.where(mode_mt, truth - update_steps_mt[idx],
                               updated_param)
    attention_step = tf.reshape(lr_attend * attention_delta, truth.shape)
    return updated_param, truth - attention_step
  updated_param = param - update_step
  if mode_mt is not None:
    updated_param = tf.where(mode_mt, param - update_steps_mt[idx],
                             updated_param)
  return updated_param, updated_param


def _updated_global_state(opt, layer_states, global_state):
  """hierarchical_rnn.py l.708-727 (the caller's list around it, l.427-430):
  with three levels, the global RNN reads the mean of the layer states."""
  if opt.num_layers != 3:
    return []
  global_input = tf.reduce_mean(tf.concat(layer_states, 0), 0, keepdims=True)
  updated, _ = opt.cells[2](global_input, global_state[0])
  return [updated]


def compute_updates_reference(opt, params, grads, states, global_state,
                              mode_mt=None, update_steps_mt=None):
  """``HierarchicalRNN.compute_updates`` as a line-by-line port of the original.

  Same arguments and results (up to float rounding); slower because it
  runs tensor by tensor on [N, 1] columns. Kept as the readable reference
  that the fast path is tested against (tests/test_hierarchical_rnn.py).
  """
  mean_log_lr = _compute_mean_log_lr(opt, states)
  new_params, new_attend, new_states, steps = [], [], [], []
  layer_state = None
  for idx, (param, grad, state) in enumerate(zip(params, grads, states)):
    (new_state, layer_state, update_step, lr_attend,
     attention_delta) = _tensor_step_reference(opt, 
         grad, state, global_state, mean_log_lr)
    steps.append(update_step)
    updated_param, attended = _stepped(
        opt, param, state, update_step, mode_mt, update_steps_mt, idx,
        lr_attend, attention_delta)
    new_attend.append(attended)
    new_params.append(updated_param)
    new_state["true_param"] = updated_param
    new_states.append(new_state)
  # Quirk kept from the original (l.429): the global RNN reads the state of
  # the *last* tensor's layer RNN only, not a mean over all tensors.
  new_global = _updated_global_state(opt, [layer_state], global_state)
  return new_params, new_states, new_global, new_attend, steps

def _tensor_step_reference(opt, grad_unflat, state, global_state,
                           mean_log_lr):
  """One tensor's step on [N, 1] columns, as the original writes it."""
  grad = tf.reshape(grad_unflat, [-1, 1])
  grads_scaled, mean_squared, grads_accum = (
      _compute_scaled_and_ms_grads(opt, grad, state))
  rnn_input = list(grads_scaled)
  _extend_rnn_input(opt, rnn_input, state, grads_scaled, mean_squared,
                         mean_log_lr)
  rnn_input_tensor = tf.concat(rnn_input, 1)
  layer_state, new_param_state = _update_rnn_cells(opt, 
      state, global_state, rnn_input_tensor)
  (scl_decay, inp_decay, new_log_lr, update_step, lr_attend,
   attention_delta) = _compute_rnn_state_projections(opt, 
       state, new_param_state, grads_scaled)
  new_state = {
      "parameter": new_param_state,
      "scl_decay": scl_decay,
      "inp_decay": inp_decay,
  }
  if layer_state is not None:
    new_state["layer"] = layer_state
  if opt.dynamic_output_scale:
    new_state["log_learning_rate"] = new_log_lr
  for i in range(opt.num_gradient_scales):
    new_state["grad_accum{}".format(i + 1)] = grads_accum[i]
    new_state["ms{}".format(i + 1)] = mean_squared[i]
  return new_state, layer_state, update_step, lr_attend, attention_delta

def _compute_mean_log_lr(opt, states):
  """Mean log learning rate over the whole problem (l.434-445)."""
  if not (opt.use_problem_lr_mean and opt.use_relative_lr):
    return None
  total = 0.
  count = 0.
  for state in states:
    total += tf.reduce_sum(state["log_learning_rate"])
    count += state["log_learning_rate"].shape.num_elements()
  return total / count

def _compute_scaled_and_ms_grads(opt, grad, state):
  """Gradients accumulated at several timescales and RMS-scaled (l.447-495)."""
  input_decays = [state["inp_decay"]]
  scale_decays = [state["scl_decay"]]
  if opt.use_multiple_scale_decays and opt.num_gradient_scales > 1:
    for i in range(opt.num_gradient_scales - 1):
      scale_decays.append(tf.sqrt(scale_decays[i]))
  for i in range(opt.num_gradient_scales - 1):
    # Each accumulator on twice the timescale of the one before.
    input_decays.append(tf.sqrt(input_decays[i]))
  grads_accum, grads_scaled, mean_squared = [], [], []
  for i, decay in enumerate(input_decays):
    if opt.num_gradient_scales == 1:
      grad_accum = grad
    else:
      old_accum = state["grad_accum{}".format(i + 1)]
      grad_accum = grad * (1. - decay) + old_accum * decay
    grads_accum.append(grad_accum)
    sd = scale_decays[i if opt.use_multiple_scale_decays else 0]
    grad_scaled, ms = _rms_scaling(grad_accum, sd,
                                   state["ms{}".format(i + 1)])
    grads_scaled.append(grad_scaled)
    mean_squared.append(ms)
  return grads_scaled, mean_squared, grads_accum

def _extend_rnn_input(opt, rnn_input, state, grads_scaled, mean_squared,
                      mean_log_lr):
  """Extra RNN input features (l.497-540)."""
  if opt.num_gradient_scales > 1 and opt.use_grad_products:
    rnn_input.extend([a * b for a, b in
                      zip(grads_scaled[:-1], grads_scaled[1:])])
  if opt.use_log_means_squared:
    log_ms = [tf.math.log(ms + 1e-16) for ms in mean_squared]
    avg = tf.reduce_mean(tf.stack(log_ms), axis=0)
    rnn_input.extend([m - avg for m in log_ms])
  if opt.use_relative_lr or opt.use_extreme_indicator:
    log_lr_vec = tf.reshape(state["log_learning_rate"], [-1, 1])
    if opt.use_relative_lr:
      if opt.use_problem_lr_mean:
        rnn_input.append(log_lr_vec - mean_log_lr)
      else:
        rnn_input.append(log_lr_vec - tf.reduce_mean(log_lr_vec))
    if opt.use_extreme_indicator:
      rnn_input.append(tf.nn.relu(log_lr_vec - math.log(1.)) -
                       tf.nn.relu(math.log(1e-6) - log_lr_vec))
  if opt.use_lr_shortcut:
    log_lr_vec = tf.reshape(state["log_learning_rate"], [-1, 1])
    rnn_input.append(log_lr_vec - math.log(1e-3))

def _update_rnn_cells(opt, state, global_state, rnn_input_tensor):
  """Advances the per-parameter and per-tensor RNNs (l.542-600)."""
  total_bias = None
  if opt.num_layers > 1:
    total_bias = opt.param_bias_affine([state["layer"]])
    if opt.num_layers == 3:
      total_bias += opt.global_bias_affine(list(global_state))
  new_param_state, _ = opt.cells[0](rnn_input_tensor, state["parameter"],
                                     bias=total_bias)
  if opt.num_layers == 1:
    return None, new_param_state
  if opt._uses_additional_features:
    layer_input = tf.reduce_mean(
        tf.concat((new_param_state, rnn_input_tensor), 1), 0, keepdims=True)
  else:
    layer_input = tf.reduce_mean(new_param_state, 0, keepdims=True)
  if opt.num_layers == 3:
    layer_bias = opt.layer_bias_affine(list(global_state))
    layer_state, _ = opt.cells[1](layer_input, state["layer"],
                                   bias=layer_bias)
  else:
    layer_state, _ = opt.cells[1](layer_input, state["layer"])
  return layer_state, new_param_state

def _compute_rnn_state_projections(opt, state, new_param_state,
                                   grads_scaled):
  """Update direction, decays and learning rate from the RNN state (l.602-660)."""
  update_delta = _project(new_param_state, opt.update_weights)
  grads_scaled_tensor = None
  if opt.use_gradient_shortcut:
    grads_scaled_tensor = tf.concat(grads_scaled, 1)
    update_delta += opt.grads_to_delta(grads_scaled_tensor)
  if opt.dynamic_output_scale:
    update_delta /= tf.sqrt(tf.reduce_mean(update_delta ** 2) + 1e-16)

  attention_delta = None
  if opt.use_attention:
    attention_delta = _project(new_param_state, opt.attention_weights)
    if opt.use_gradient_shortcut:
      attention_delta += opt.grads_to_attn_delta(grads_scaled_tensor)
    if opt.dynamic_output_scale:
      attention_delta /= tf.sqrt(
          tf.reduce_mean(attention_delta ** 2) + 1e-16)

  scl_decay = _project(new_param_state, opt.scl_decay_weights,
                            bias=opt.scl_decay_bias,
                            activation=tf.nn.sigmoid)
  inp_decay = _project(new_param_state, opt.inp_decay_weights,
                            bias=opt.inp_decay_bias,
                            activation=tf.nn.sigmoid)
  lr_param, lr_attend, new_log_lr = _compute_new_learning_rate(opt, 
      state, new_param_state)
  update_step = tf.reshape(lr_param * update_delta,
                           tf.shape(state["true_param"]))
  return (scl_decay, inp_decay, new_log_lr, update_step, lr_attend,
          attention_delta)

def _compute_new_learning_rate(opt, state, new_param_state):
  """Learning rate with momentum and a straight-through clip (l.662-705)."""
  if not opt.dynamic_output_scale:
    lr_param = 2. * _project(new_param_state, opt.lr_weights,
                                  bias=opt.lr_bias,
                                  activation=tf.nn.sigmoid)
    return lr_param, lr_param, None
  lr_change = _project(new_param_state, opt.lr_weights,
                            bias=opt.lr_bias)
  step_log_lr = state["log_learning_rate"] + lr_change
  # Clip the value but let the gradient of the unclipped value through.
  step_log_lr += tf.stop_gradient(
      tf.clip_by_value(step_log_lr, -33., opt.max_log_lr) - step_log_lr)
  lrm = tf.nn.sigmoid(opt.lr_momentum_logit)
  new_log_lr = lrm * state["log_learning_rate"] + (1. - lrm) * step_log_lr
  lr_param = tf.exp(step_log_lr + opt.param_stepsize_offset)
  lr_attend = tf.exp(step_log_lr) if opt.use_attention else lr_param
  return lr_param, lr_attend, new_log_lr
