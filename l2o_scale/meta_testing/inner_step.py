"""One optimizee step under a (learned or hand-designed) optimizer, and the
attention rule, written once.

Why one place: the meta-test loop (:mod:`l2o_scale.meta_testing.testing`),
the fixture replayer (:mod:`l2o_scale.fidelity.replay`), the Keras optimizer
(:mod:`l2o_scale.keras_optimizer`), the benchmark
(:mod:`l2o_scale.speed.command`) and the meta-training unroll
(:mod:`l2o_scale.meta_training.unroll`) all take this step (objective,
gradients at the right point, optimizer call, new parameters and state);
with the attention rule written once they cannot disagree on it.

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

from l2o_scale.steps import step_schedule
from l2o_scale.steps import transform
from l2o_scale.steps import weight_decay as weight_decay_lib

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


# The closed form of the weight decay, where callers of the step look for it.
weight_decayed = weight_decay_lib.weight_decayed


def shorthand_transforms(step_scale=None, weight_decay=0.):
  """(chain, inputs) of :func:`inner_step`'s ``step_scale`` and
  ``weight_decay`` shorthands: the step scaled by ``step_scale`` (a scalar
  tensor), then decayed."""
  return (transform.chain(
      transform.identity() if step_scale is None else
      step_schedule.ScaleStep(),
      weight_decay_lib.decoupled_weight_decay(weight_decay)),
          {} if step_scale is None else {transform.SCALE: step_scale})


def inner_step(problem, optimizer, variables, states, global_state, data,
               labels, packed=False, transforms=None, step_inputs=None,
               step_scale=None, weight_decay=0.):
  """One meta-test step: objective and gradients on one batch, then the update.

  Args:
    problem: a ``problems.problem_generator.Problem``.
    optimizer: an optimizer with the pure step interface (``compute_updates``
      and, if ``packed``, ``compute_updates_packed``/``unpack_state``).
    variables: the optimizee variables' values (the attended point with
      attention), where the gradients (with the problem's noise) are taken.
    states: per-tensor state dicts, or the packed state if ``packed``.
    global_state: list of global state tensors.
    data, labels: the batch (None for problems without data).
    packed: whether ``states`` is in the optimizer's packed layout.
    transforms: None, or a step transform chain
      (:func:`l2o_scale.steps.transform.chain`) applied to the proposed
      step; not with attention, whose real parameters live in the
      optimizer's state.
    step_inputs: this step's inputs of ``transforms`` (e.g. its scale).
    step_scale, weight_decay: instead of ``transforms``, the chain of a
      step scaled by the scalar tensor ``step_scale`` then decayed by the
      float ``weight_decay`` (:func:`shorthand_transforms`).

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
    if transforms is not None:
      raise ValueError("give transforms or their shorthands, not both")
    transforms, step_inputs = shorthand_transforms(step_scale, weight_decay)
  if transforms is not None and not transforms.is_identity:
    transforms.check(optimizer)
    inputs = dict(step_inputs or {})
    inputs[transform.GRADIENTS] = list(grads)
    new_variables = transforms.apply(variables, new_variables, inputs)
  return StepResult(obj, new_variables, new_states, list(new_global))
