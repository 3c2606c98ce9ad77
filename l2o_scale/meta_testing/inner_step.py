"""One optimizee step under a (learned or hand-designed) optimizer, and the
attention rule, written once.

Why one place: the step "objective, gradients at the right point, optimizer
call, new parameters and state" was written in the meta-test loop
(:mod:`l2o_scale.meta_testing.testing`), the fixture replayer
(:mod:`l2o_scale.tools.replay`), the Keras optimizer
(:mod:`l2o_scale.keras_optimizer`), the benchmark (:mod:`l2o_scale.tools.bench`)
and the meta-training unroll (:mod:`l2o_scale.meta_training.unroll`), each deciding the
attention rule again.

The attention rule (original ``hierarchical_rnn.py`` ``_compute_updates``
l.363-432 and ``trainable_optimizer.py`` ``apply_gradients``; the training
loop body of L2O-Scale-Training ``optimizer/trainable_optimizer.py``
``train``, l.282-350, which takes ``tf.gradients`` at ``attend_params`` and
the objective at ``params``): with ``use_attention`` the optimizer proposes,
besides the new parameters, an *attended* point near them. Then

* the optimizee's variables hold the attended point, and the gradients are
  taken there (:func:`gradient_point`, :func:`next_variables`);
* the real parameters are the ``true_param`` state slot; the objective that
  is reported (and meta-optimized) is read there (:func:`true_params`).

Without attention the attended point, the real parameters and the variables
are one and the same.

:func:`inner_step` is the meta-test form of the step (objective and gradients
on the same batch, no imitation, no regularizer). The unroll measures the
objective on its whole mini dataset, adds the L2O-Entropy regularizer and the
imitation targets, and keeps true and attended parameters as separate loop
values; it shares only :func:`gradient_point`.
"""

import collections

import tensorflow as tf

StepResult = collections.namedtuple(
    "StepResult", ["objective", "variables", "states", "global_state"])


def uses_attention(optimizer):
  """Whether ``optimizer`` attends (baselines have no such option)."""
  return bool(getattr(optimizer, "use_attention", False))


def gradient_point(optimizer, params, attend_params):
  """Where the gradients are taken: the attended point with attention, else
  the (real) parameters (training ``trainable_optimizer.py`` l.290)."""
  return attend_params if uses_attention(optimizer) else params


def next_variables(optimizer, new_params, new_attend):
  """What the optimizee's variables hold after a step: the attended point
  with attention, else the new parameters (original ``apply_gradients``)."""
  return new_attend if uses_attention(optimizer) else new_params


def true_params(optimizer, variables, states, packed=False):
  """The real parameters: with attention the ``true_param`` slot of each
  tensor's state (``states`` in the optimizer's packed layout if
  ``packed``), else the variables themselves. A state without that slot (an
  optimizer that attends but keeps no real parameters) gives the variable."""
  variables = list(variables)
  if not uses_attention(optimizer):
    return variables
  per_tensor = optimizer.unpack_state(states, variables) if packed else states
  return [s.get("true_param", v) for s, v in zip(per_tensor, variables)]


def check_scalable(optimizer):
  """Refuses to scale or decay the updates of an optimizer that attends: its
  real parameters live in its state, which a changed step would leave
  behind."""
  if uses_attention(optimizer):
    raise ValueError("a scaled step (step schedule, Keras learning_rate) or a "
                     "weight decay does not go with an optimizer that attends "
                     "(use_attention): its real parameters live in its state")


def scaled_update(variables, proposed, scale):
  """``variables + scale * (proposed - variables)``: the proposed update
  scaled by ``scale`` (a scalar tensor, see
  :mod:`l2o_scale.meta_testing.step_schedule`). A scale of exactly 1 returns
  ``proposed`` bit for bit, so an unscaled run keeps its numbers, and takes
  a branch with no per-tensor work."""
  proposed = list(proposed)
  return tf.cond(tf.equal(scale, 1.), lambda: proposed,
                 lambda: [v + scale * (p - v)
                          for v, p in zip(variables, proposed)])


def weight_decayed(variables, new_variables, weight_decay, scale=None):
  """``new - scale * weight_decay * old``: a decoupled weight decay (the
  AdamW form, and what Keras' ``weight_decay`` does before an optimizer's
  update, with ``scale`` its learning rate: here the step schedule's
  scale). ``weight_decay`` is a Python float; 0 returns ``new_variables``
  untouched (no op in the graph).

  Why it exists: the learned optimizers' steps have a fixed RMS per tensor
  (``dynamic_output_scale``), so once the data is fit their weights keep
  growing along the loss's margin direction and held-out accuracy falls;
  the decay bounds that growth (docs/meta-testing.md)."""
  if not weight_decay:
    return list(new_variables)
  decay = float(weight_decay) if scale is None else scale * weight_decay
  return [new - decay * old for old, new in zip(variables, new_variables)]


def inner_step(problem, optimizer, variables, states, global_state, data,
               labels, packed=False, step_scale=None, weight_decay=0.):
  """One meta-test step: objective and gradients on one batch, then the update.

  Args:
    problem: a ``problems.problem_generator.Problem``.
    optimizer: an optimizer with the pure step interface (``compute_updates``
      and, if ``packed``, ``compute_updates_packed``/``unpack_state``).
    variables: the optimizee variables' values (the attended point with
      attention); the gradients, with the problem's gradient noise, are taken
      here.
    states: per-tensor state dicts, or the packed state if ``packed``.
    global_state: list of global state tensors.
    data, labels: the batch (None for problems without data).
    packed: whether ``states`` is in the optimizer's packed layout.
    step_scale: None, or a scalar tensor that scales the update
      (:func:`scaled_update`); not with attention, whose real parameters live
      in the optimizer's state.
    weight_decay: a Python float, the decoupled weight decay of every step
      (:func:`weight_decayed`, scaled by ``step_scale``); 0: none. Not with
      attention.

  Returns:
    StepResult: ``objective`` on the batch at the real parameters
    (:func:`true_params`) before the update, the variables' next values
    (:func:`next_variables`), the new state (same layout as ``states``) and
    the new global state (a list).
  """
  variables = list(variables)
  obj, grads = problem.objective_and_gradients(variables, data, labels)
  if uses_attention(optimizer):
    obj = problem.objective(true_params(optimizer, variables, states, packed),
                            data, labels)
  compute = (optimizer.compute_updates_packed if packed else
             optimizer.compute_updates)
  new_params, new_states, new_global, new_attend, _ = compute(
      variables, grads, states, global_state)
  new_variables = next_variables(optimizer, new_params, new_attend)
  if step_scale is not None or weight_decay:
    check_scalable(optimizer)
  if step_scale is not None:
    new_variables = scaled_update(variables, new_variables, step_scale)
  new_variables = weight_decayed(variables, new_variables, weight_decay,
                                 step_scale)
  return StepResult(obj, new_variables, new_states, list(new_global))
