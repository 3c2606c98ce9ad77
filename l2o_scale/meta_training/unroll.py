"""One partial unroll of the optimizee under the learned optimizer.

Port of ``TrainableOptimizer.train`` and its while loop (L2O-Scale-Training
``optimizer/trainable_optimizer.py`` l.202-480, the L2O-Entropy version with
the regularizer and imitation ("MODIFY") additions). In TF1 the unroll was a
graph fed through placeholders, with TF1 local variables carrying parameters
and optimizer state from one partial unroll to the next. Here the carried
values are an explicit :class:`LoopState` returned by one unroll and passed to
the next; truncation of back-propagation between unrolls is automatic because
a new ``GradientTape`` starts at each unroll. The optimizer state in it is the
optimizer's *packed* state (``initialize_packed_state``: for the
hierarchical RNN, feature-major blocks of all tensors end to end), the one
layout every loop carries: packing per step cost a concat, split and
transpose per state entry and step, and as much again in the meta-gradient.
Per-tensor dicts with the TF1 slot names come from :func:`per_tensor_states`
when somebody reads them (summaries).

Per step ``t`` (loop body, l.282-350):
  * ``obj`` = objective on the whole mini dataset at the current parameters
    (recorded in ``problem_objectives`` and weighted into the meta-objective);
  * gradients on batch ``t`` (at the attended parameters with attention),
    plus the problem's gradient noise;
  * optional L2O-Entropy regularizer of the batch objective (``reg_option``:
    Hessian trace / top eigenvalues / Lanczos density, or Jacobian trace),
    added to the optimizee objective (``reg_optimizee``) and/or accumulated
    as ``alpha * reg`` into the meta-objective while ``jacob_switch`` is on
    (``reg_optimizer``);
  * ``use_second_derivatives=False`` stops gradients through the gradients;
  * the optimizer step; in imitation mode the parameters follow the teacher's
    step and the squared error between own and teacher steps, divided by the
    number of parameters, is accumulated into ``metaobjmt``.
The loop stops early when the accumulated objective is not finite, or when
the objective exceeds ``obj_train_max_multiplier`` times the initial one.
"""

import collections

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import inner_step
from l2o_scale.meta_training import parallel_eval
from l2o_scale.meta_training import regularizer
from l2o_scale.meta_training import unroll_method

class LoopState(collections.namedtuple(
    "LoopState",
    ["initial_obj", "params", "attend_params", "states", "global_state"])):
  """What one partial unroll hands the next (the original's TF1 local
  variables): the initial objective, parameters, attended parameters, the
  optimizer's packed state and its global state."""


def per_tensor_states(optimizer, loop_state):
  """The carried optimizer state as per-tensor dicts (TF1 slot names)."""
  return optimizer.unpack_state(loop_state.states, list(loop_state.params))


class UnrollInputs(collections.namedtuple(
    "UnrollInputs",
    ["obj_weights", "batches", "mini_data", "mini_labels", "init_tensors",
     "jacob_switch", "mt_labels", "first_unroll", "reset_state", "obj_data",
     "obj_labels", "state_seed"], defaults=(None, None, None))):
  """What one partial unroll reads besides the carried :class:`LoopState`:
  the original's feed of ``train`` (trainable_optimizer.py l.202-240).

  obj_weights: float [T] weights of the per-step objectives.
  batches: int [T, batch_size] rows of ``mini_data`` for each step.
  mini_data, mini_labels: the unroll's mini dataset (or empty tensors).
  init_tensors: initial parameters (used if ``first_unroll``/``reset_state``).
  jacob_switch: whether the regularizer accumulates this unroll: a bool
    tensor (the original's placeholder: one trace serves both values) or a
    Python bool (one trace per value, each simpler and faster to build).
  mt_labels: list (one per parameter) of teacher steps [T, *shape].
  first_unroll, reset_state: bools or bool tensors (see the original).
  obj_data, obj_labels: the data the meta-objective is measured on, if not
    the mini dataset (``--meta_objective=validation``: rows the optimizee
    never trains on); None: the mini dataset (the original).
  state_seed: ``[2]`` int64 seed of the fresh optimizer state drawn when
    ``reset_state`` (stateless: the same on every call and after a resume);
    None: TensorFlow's random stream.
  """

  def objective_data(self):
    """(data, labels) of the meta-objective: ``obj_data`` if given, else the
    mini dataset."""
    if self.obj_data is None:
      return self.mini_data, self.mini_labels
    return self.obj_data, self.obj_labels


UnrollOutput = collections.namedtuple(
    "UnrollOutput",
    ["metaobj", "metaobjmt", "problem_objectives", "initial_obj", "regular",
     "final_state", "early_stop", "regularizer_share"], defaults=(None,))
UnrollOutput.__doc__ = """What one partial unroll gives: the meta-objective
(scaled, plus the accumulated regularizer), the imitation objective, the
optimizee objectives (at the start and before each step), the initial
objective, the accumulated regularizer, the final :class:`LoopState`, and
``early_stop``: whether the original's stop rules (a non-finite accumulated
objective, ``obj_train_max_multiplier``) end the loop before its last step,
and ``regularizer_share``: the regularizer's share of the meta-gradient
where the meta-step measured it
(:func:`~l2o_scale.meta_training.meta_step.make_meta_step`), else None.
A time-parallel unroll (:func:`unroll` with ``time_parallel``) runs every
step and only reports it: its caller then runs the sequential unroll."""


def _step_gradients(problem, params, batch_data, batch_labels, reg,
                    jacob_switch, defer_reg=False):
  """Gradients fed to the optimizer and the regularizer value (l.290-330).

  The regularizer is only evaluated when it is used: always with
  ``reg_optimizee``, else only while ``jacob_switch`` is on (the original
  evaluates it through a ``tf.cond`` on the switch as well).
  """
  params = list(params)
  _, clean_grads = problem.objective_and_clean_gradients(params, batch_data,
                                                         batch_labels)
  grads = problem.add_gradient_noise(clean_grads)
  if reg.reg_optimizee:
    # The original takes tf.gradients of (batch objective + beta * reg): the
    # regularized gradient, without the gradient noise.
    with tf.GradientTape() as tape:
      tape.watch(params)
      obj_b, clean_b = problem.objective_and_clean_gradients(
          params, batch_data, batch_labels)
      value = regularizer.regularizer_value(problem, params, batch_data, batch_labels,
                                clean_b, reg)
      total = obj_b + reg.beta * value
    grads = tape.gradient(total, params)
    grads = [tf.zeros_like(p) if g is None else g
             for g, p in zip(grads, params)]
    return grads, value
  if reg.reg_optimizer and not defer_reg:
    return grads, regularizer.switched_regularizer(problem, params, batch_data,
                                       batch_labels, clean_grads, reg,
                                       jacob_switch)
  return grads, tf.constant(0.)


def objective_limit(initial_obj, multiplier):
  """The objective above which a run "grew more than ``multiplier`` times":
  ``initial + (multiplier - 1) * |initial|`` (the original's
  ``obj_train_max_multiplier`` stop, in the unroll's loop condition,
  trainable_optimizer.py, and between unrolls, metaopt.py). Tensors or
  numbers."""
  return initial_obj + (multiplier - 1) * abs(initial_obj)


def zero_loop_state(problem, optimizer):
  """A LoopState of zeros: what the original's local variables start as."""
  zeros = [tf.zeros(s) for s in problem.param_shapes]
  states = optimizer.pack_state(
      [tf.nest.map_structure(tf.zeros_like, optimizer.initialize_state(z))
       for z in zeros])
  global_state = [tf.zeros_like(g) for g in optimizer.initialize_global_state()]
  return LoopState(tf.constant(0.), zeros, list(zeros), states, global_state)


def _select(flag, if_true, if_false):
  """Element-wise choice between two nests of tensors on a scalar bool."""
  return tf.nest.map_structure(lambda a, b: tf.where(flag, a, b), if_true,
                               if_false)


def initial_loop_state(problem, optimizer, init_tensors, obj_data, obj_labels,
                       carried, first_unroll, reset_state, state_seed=None):
  """Starting values of an unroll (``_initialize_training_loop_parameters``).

  ``obj_data``, ``obj_labels``: the data of the meta-objective
  (``UnrollInputs.objective_data()``: the mini dataset, or held-back rows).

  ``first_unroll`` takes parameters from ``init_tensors`` and recomputes the
  initial objective; otherwise parameters and the initial objective carry
  over. ``reset_state`` re-initialises the optimizer state from
  ``init_tensors`` (as the original, which builds it from the fed initial
  tensors); otherwise the state carries over. Both flags may be tensors (the
  original's ``tf.cond`` on placeholders), so one compiled unroll serves all
  cases. ``state_seed``: see :class:`UnrollInputs`.
  """
  init_tensors = [tf.convert_to_tensor(t, tf.float32) for t in init_tensors]
  if carried is None:
    carried = zero_loop_state(problem, optimizer)
  first_unroll = tf.convert_to_tensor(first_unroll, tf.bool)
  reset_state = tf.convert_to_tensor(reset_state, tf.bool)
  params = _select(first_unroll, init_tensors, list(carried.params))
  attend_params = _select(first_unroll, init_tensors,
                          list(carried.attend_params))
  start_obj = problem.objective(params, obj_data, obj_labels)
  initial_obj = tf.where(first_unroll, start_obj, carried.initial_obj)
  states = _select(reset_state,
                   optimizer.initialize_packed_state(init_tensors,
                                                     seed=state_seed),
                   carried.states)
  global_state = _select(reset_state,
                         list(optimizer.initialize_global_state()),
                         list(carried.global_state))
  return start_obj, LoopState(initial_obj, params, attend_params, states,
                              global_state)




class StepCarry(collections.namedtuple(
    "StepCarry",
    ["itr", "obj_accum", "obj_accum_mt", "regular", "objectives", "state",
     "trail"])):
  """What the unroll's while loop carries: the step counter, the weighted
  sums of the objectives (meta-objective) and of the imitation errors, the
  accumulated regularizer, the TensorArray of per-step objectives, the
  :class:`LoopState` (parameters, attended parameters, packed optimizer
  state, global state) and, in a time-parallel unroll, the trail:
  TensorArrays of the parameters (and, for a deferred regularizer with
  attention, the attended parameters) before each step."""


# Above this size the batches are gathered step by step in the loop.
ALL_BATCHES_MAX_BYTES = 64 * 2**20


def _all_batches(inputs):
  """(data, labels) of every step's batch, ``[T, batch, ...]``, gathered
  before the loop when their size is known and at most
  :data:`ALL_BATCHES_MAX_BYTES`, else None. Why: one gather of all rows
  costs less than a gather of scattered rows in each step (each a small
  op that TensorFlow may spread over its threads); in the loop a step then
  reads one contiguous block."""
  batches = tf.convert_to_tensor(inputs.batches)
  tensors = [tf.convert_to_tensor(t)
             for t in (inputs.mini_data, inputs.mini_labels)]
  shapes = [batches.shape.concatenate(t.shape[1:]) for t in tensors]
  if not all(s.is_fully_defined() for s in shapes):
    return None
  size = sum(s.num_elements() * t.dtype.size
             for s, t in zip(shapes, tensors))
  if size > ALL_BATCHES_MAX_BYTES:
    return None
  return [tf.gather(t, batches) for t in tensors]


class _UnrollStep(object):
  """The loop body and condition of one partial unroll (original
  trainable_optimizer.py l.282-350): what stays fixed during the unroll is
  held here, what changes is the :class:`StepCarry`.

  ``time_parallel``: the body leaves out the objective on the mini dataset
  (and a regularizer that only enters the meta-objective) and records the
  parameters instead; :func:`unroll` evaluates them at all steps at once
  after the loop.
  """

  def __init__(self, problem, optimizer, inputs, mode_mt, reg, update,
               initial_obj, time_parallel=False):
    self.problem = problem
    self.optimizer = optimizer
    self.inputs = inputs
    self.mode_mt = bool(mode_mt)
    self.reg = reg
    self.update = update
    self.initial_obj = initial_obj
    # Static where known (XLA needs the trail's size at compile time).
    self.num_iter = (inputs.obj_weights.shape[0] or
                     tf.shape(inputs.obj_weights)[0])
    switch = inputs.jacob_switch
    if not regularizer.decided_while_tracing(switch):
      switch = tf.convert_to_tensor(switch, tf.bool)
    self.switch = switch
    self.time_parallel = bool(time_parallel)
    self.defer_reg = self.time_parallel and regularizer.defers_regularizer(reg, switch)
    self.attends = inner_step.uses_attention(optimizer)
    self.batch_rows = _all_batches(inputs)
    # The batch gradients join the fused step where nothing else acts on
    # them in the loop: no gradient noise, no regularizer in the loop.
    self.fuse_gradients = (
        update.fuses_gradients and
        not getattr(problem, "noise_stdev", 0.) and
        not reg.reg_optimizee and (not reg.reg_optimizer or self.defer_reg))

  def trail(self, params):
    """Empty TensorArrays for the parameters at each step (time-parallel)."""
    if not self.time_parallel:
      return ()
    tensors = list(params)
    if self.defer_reg and self.attends:
      tensors += list(params)
    return tuple(tf.TensorArray(tf.float32, size=self.num_iter,
                                element_shape=p.shape) for p in tensors)

  def keep_going(self, carry):
    """Steps remain, the accumulated objective is finite and (with
    ``obj_train_max_multiplier``) the last objective is below the limit."""
    keep = carry.itr < self.num_iter
    if self.time_parallel:
      return keep
    keep = tf.logical_and(keep, tf.math.is_finite(carry.obj_accum))
    multiplier = self.optimizer.obj_train_max_multiplier
    if multiplier > 0:
      keep = tf.logical_and(keep, carry.objectives.read(carry.itr) <
                            objective_limit(self.initial_obj, multiplier))
    return keep

  def _accumulated_regularizer(self, regular, reg_value):
    """Original: reg = cond(switch, reg, regular); regular += alpha * reg."""
    if not self.reg.reg_optimizer or self.defer_reg:
      return regular
    if regularizer.decided_while_tracing(self.switch):
      picked = reg_value if self.switch else regular
    else:
      picked = tf.where(self.switch, reg_value, regular)
    return regular + self.reg.alpha * picked

  def _batch(self, itr):
    """Step ``itr``'s minibatch (data, labels) of the mini dataset."""
    if self.batch_rows is None:
      batch = tf.gather(self.inputs.batches, itr)
      return (tf.gather(self.inputs.mini_data, batch),
              tf.gather(self.inputs.mini_labels, batch))
    return [tf.gather(rows, itr) for rows in self.batch_rows]

  def __call__(self, carry):
    problem, optimizer, inputs = self.problem, self.optimizer, self.inputs
    itr, state = carry.itr, carry.state
    batch_data, batch_labels = self._batch(itr)
    teacher_steps = [tf.gather(m, itr) for m in inputs.mt_labels]
    # Objective at the real parameters, gradients at the attended ones.
    eval_params = inner_step.gradient_point(optimizer, state.params,
                                            state.attend_params)
    mode_mt = tf.constant(True) if self.mode_mt else None
    teacher = teacher_steps if self.mode_mt else None
    weight = tf.gather(inputs.obj_weights, itr)
    if self.fuse_gradients:
      reg_value = tf.constant(0.)
      new_params, new_states, new_global, new_attend, steps = (
          self.update.with_gradients(
              problem, eval_params if self.attends else state.params,
              batch_data, batch_labels, state.params, state.states,
              state.global_state, mode_mt, teacher))
    else:
      grads, reg_value = _step_gradients(problem, eval_params, batch_data,
                                         batch_labels, self.reg, self.switch,
                                         self.defer_reg)
      if not optimizer.use_second_derivatives:
        grads = [tf.stop_gradient(g) for g in grads]
      new_params, new_states, new_global, new_attend, steps = self.update(
          state.params, grads, state.states, state.global_state, mode_mt,
          teacher)
    mse = tf.add_n([tf.reduce_sum(0.5 * tf.square(own - teacher))
                    for own, teacher in zip(steps, teacher_steps)])
    obj_accum, objectives, trail = carry.obj_accum, carry.objectives, ()
    if self.time_parallel:
      recorded = list(state.params)
      if self.defer_reg and self.attends:
        recorded += list(eval_params)
      trail = tuple(ta.write(itr, p) for ta, p in zip(carry.trail, recorded))
    else:
      obj = problem.objective(state.params, *inputs.objective_data())
      obj_accum += weight * obj
      objectives = objectives.write(itr + 1, obj)
    return StepCarry(
        itr + 1, obj_accum,
        carry.obj_accum_mt + weight * (mse / problem.num_params),
        self._accumulated_regularizer(carry.regular, reg_value), objectives,
        LoopState(state.initial_obj, list(new_params), list(new_attend),
                  new_states, list(new_global)), trail)


def unroll(problem, optimizer, inputs, carried, mode_mt=False,
           reg=regularizer.NO_REGULARIZER, update=None, time_parallel=False,
           budget_bytes=None, differentiable=True):
  """Runs one partial unroll; differentiable with respect to the optimizer.

  Args:
    problem, optimizer: a problem_generator.Problem, a TrainableOptimizer.
    inputs: UnrollInputs.
    carried: LoopState from the previous unroll, or None.
    mode_mt: Python bool: imitation mode.
    reg: regularizer.RegularizerConfig.
    update: the optimizer's step, a
      :class:`~l2o_scale.meta_training.step_update.StepUpdate` (default:
      :func:`~l2o_scale.meta_training.unroll_method.optimizer_update`, uncompiled).
    time_parallel: evaluate the objective on the mini dataset (and a
      regularizer that only enters the meta-objective,
      :func:`~l2o_scale.meta_training.regularizer.defers_regularizer`) at
      all steps after the trajectory, in one vectorized pass: the sequential
      result up to float rounding (neither feeds the trajectory), except
      where the original's stop rules end the loop early: then every step
      still runs and ``early_stop`` says so (the caller runs it again).
    budget_bytes: with ``time_parallel``, the memory budget of that pass,
      above which it goes a chunk of steps at a time (None: all at once).
    differentiable: whether the meta-gradient is taken through the result
      (False: the chunked pass computes no gradients).

  Returns:
    UnrollOutput. ``metaobj`` is the scaled meta-objective plus the
    accumulated regularizer, ``metaobjmt`` the imitation objective.
  """
  obj_data, obj_labels = inputs.objective_data()
  start_obj, state = initial_loop_state(
      problem, optimizer, inputs.init_tensors, obj_data, obj_labels, carried,
      inputs.first_unroll, inputs.reset_state, inputs.state_seed)
  # A fused step reads the meta-parameters here, once, outside the loop.
  update = (update or unroll_method.optimizer_update(optimizer)).bind()
  step = _UnrollStep(problem, optimizer, inputs, mode_mt, reg, update,
                     state.initial_obj, time_parallel)
  end = _run_loop(step, start_obj, state)
  if time_parallel:
    obj_accum, problem_objectives, regular, early_stop = _evaluate_trail(
        step, start_obj, state, end, budget_bytes, differentiable)
  else:
    obj_accum, regular = end.obj_accum, end.regular
    problem_objectives = end.objectives
    early_stop = end.itr < tf.shape(inputs.obj_weights)[0]
  scaled = optimizer.scale_objective(obj_accum, problem_objectives,
                                     state.initial_obj)
  return UnrollOutput(scaled + regular, end.obj_accum_mt, problem_objectives,
                      state.initial_obj, regular, end.state, early_stop)


def _evaluate_trail(step, start_obj, state, end, budget_bytes,
                    differentiable):
  """The time-parallel unroll's objectives, evaluated after its trajectory
  (:func:`~l2o_scale.meta_training.parallel_eval.after_trajectory`)."""
  multiplier = step.optimizer.obj_train_max_multiplier
  limit = (objective_limit(state.initial_obj, multiplier)
           if multiplier > 0 else None)
  return parallel_eval.after_trajectory(
      step.problem, step.reg if step.defer_reg and step.switch else None,
      step.inputs, start_obj, end.trail, len(state.params), limit,
      end.regular, budget_bytes, differentiable)


def _run_loop(step, start_obj, state):
  """The while loop over the unroll's steps, from ``state``; its last
  :class:`StepCarry` with the per-step objectives (step by step) or the
  trail (time-parallel) stacked into tensors."""
  carry = StepCarry(tf.constant(0), tf.constant(0.), tf.constant(0.),
                    tf.constant(0.), tf.constant(0.), state, ())
  if step.time_parallel:
    carry = carry._replace(trail=step.trail(state.params))
  else:
    objectives = tf.TensorArray(tf.float32, size=0, dynamic_size=True,
                                clear_after_read=False,
                                element_shape=tf.TensorShape([]))
    carry = carry._replace(objectives=objectives.write(0, start_obj))
  [end] = tf.while_loop(
      step.keep_going, lambda c: [step(c)], [carry],
      maximum_iterations=step.num_iter if step.time_parallel else None)
  if step.time_parallel:
    return end._replace(trail=tuple(ta.stack() for ta in end.trail))
  return end._replace(objectives=end.objectives.stack())


def zero_mt_labels(param_shapes, num_steps):
  """Teacher steps of zeros, fed when imitation is off (as the original)."""
  return [np.zeros((num_steps,) + tuple(s), np.float32) for s in param_shapes]
