"""The line-by-line port of the original ``HierarchicalRNN._compute_updates``
(L2O-Scale ``optimizer/hierarchical_rnn.py`` l.363-727), tensor by tensor on
[N, 1] columns, as the original writes it.

It is the oracle the optimizer's packed step (``HierarchicalRNN
.compute_updates_packed``, the one step the port runs) is tested against over
the whole option grid (tests/test_hierarchical_rnn.py), so it lives with the
tests: nothing in the product calls it. The functions take the optimizer
(``opt``) for its meta-parameters and options.
"""

import math

import tensorflow as tf

from optimizer import utils


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
    base = state["true_param"] if opt.use_attention else param
    updated_param, attended = opt._stepped(
        base, update_step, mode_mt, update_steps_mt, idx, lr_attend,
        attention_delta)
    new_attend.append(attended)
    new_params.append(updated_param)
    new_state["true_param"] = updated_param
    new_states.append(new_state)
  # Quirk kept from the original (l.429): the global RNN reads the state of
  # the *last* tensor's layer RNN only, not a mean over all tensors.
  new_global = opt._compute_updated_global_state([layer_state],
                                                  global_state)
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
    grad_scaled, ms = utils.rms_scaling(grad_accum, sd,
                                        state["ms{}".format(i + 1)],
                                        update_ms=True)
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
  update_delta = utils.project(new_param_state, opt.update_weights)
  grads_scaled_tensor = None
  if opt.use_gradient_shortcut:
    grads_scaled_tensor = tf.concat(grads_scaled, 1)
    update_delta += opt.grads_to_delta(grads_scaled_tensor)
  if opt.dynamic_output_scale:
    update_delta /= tf.sqrt(tf.reduce_mean(update_delta ** 2) + 1e-16)

  attention_delta = None
  if opt.use_attention:
    attention_delta = utils.project(new_param_state, opt.attention_weights)
    if opt.use_gradient_shortcut:
      attention_delta += opt.grads_to_attn_delta(grads_scaled_tensor)
    if opt.dynamic_output_scale:
      attention_delta /= tf.sqrt(
          tf.reduce_mean(attention_delta ** 2) + 1e-16)

  scl_decay = utils.project(new_param_state, opt.scl_decay_weights,
                            bias=opt.scl_decay_bias,
                            activation=tf.nn.sigmoid)
  inp_decay = utils.project(new_param_state, opt.inp_decay_weights,
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
    lr_param = 2. * utils.project(new_param_state, opt.lr_weights,
                                  bias=opt.lr_bias,
                                  activation=tf.nn.sigmoid)
    return lr_param, lr_param, None
  lr_change = utils.project(new_param_state, opt.lr_weights,
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
