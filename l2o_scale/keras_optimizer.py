"""A trained learned optimizer as a Keras 3 optimizer.

``model.compile(optimizer=LearnedOptimizer.from_checkpoint(path), ...)`` then
``model.fit(...)`` trains any Keras model with the learned optimizer.

Why it cannot be a plain ``update_step`` optimizer: the hierarchical RNN mixes
information across tensors (the mean log learning rate of the whole problem,
the per-tensor RNN feeding the global RNN), so the original ``apply_gradients``
(L2O-Scale-Evaluation ``optimizer/trainable_optimizer.py`` l.127-199,
``hierarchical_rnn.py`` ``_compute_updates`` l.363-432) updates *all*
variables in one call and advances one shared global state. This class keeps
that: it overrides Keras' collective ``_backend_update_step`` (Keras 3 TF
backend) and calls the learned optimizer's pure ``compute_updates`` once on
all variables with gradients. Keras still applies its own features around it
(gradient clipping, loss scaling, EMA, the ``iterations`` counter).

The optimizer state of all variables (the TF1 slots: RNN states, gradient
accumulators, log learning rates, ``true_param``), in the learned
optimizer's packed layout (a few blocks with all variables' coordinates end
to end), and the global RNN state are Keras optimizer variables, so they are
saved with the optimizer and work inside the compiled
(``tf.function``/XLA) train step of ``fit``. The meta-parameters are the
learned optimizer's own ``tf.Variable``s, restored from a checkpoint written by
the original TF1 ``metarun.py`` or by this port. They are saved with the
optimizer's variables (``save_own_variables``, keys ``meta_<i>``) and its
options with its config, so a ``.keras`` file is self-contained: it loads in
a fresh process, anywhere, without the checkpoint, once this module is
imported (``keras.saving.register_keras_serializable`` registers the class;
``import l2o_scale`` imports this module when Keras is already imported). A
config alone (``from_config``) gives an optimizer that refuses to step until
its meta-parameters are loaded.

``learning_rate`` (default 1) scales the learned update: the learned optimizer
chooses its own step sizes, and a Keras schedule here decays them over a run
of known length, e.g. ``keras.optimizers.schedules.CosineDecay(1.0, steps)``
(the learned steps never shrink by themselves; see
:mod:`l2o_scale.steps.step_schedule`).

Keras' ``weight_decay`` (and ``exclude_from_weight_decay``) is the decoupled
decay of ``metatest.py --weight_decay``: each variable shrinks by
``weight_decay * learning_rate`` of its value before the step (the learned
steps keep a fixed size, so in long runs the weights otherwise keep growing
once the data is fit; see docs/keras.md). Both are the step transforms of
metatest.py (:mod:`l2o_scale.steps`), applied to the learned update in one
chain; neither goes with an optimizer that attends (its real parameters
live in its state).

Limitation: only the default distribution strategy is supported (the joint
update cannot be split per replica variable).
"""

import warnings

from l2o_scale.runs import quiet_cuda
# TensorFlow's start-up lines filtered as in the command-line programs
# (the CUDA probing on a machine without CUDA; nothing where it has CUDA).
quiet_cuda.import_tensorflow()

import keras  # pylint: disable=g-import-not-at-top,g-bad-import-order
import numpy as np  # pylint: disable=g-import-not-at-top,g-bad-import-order
import tensorflow as tf  # pylint: disable=g-import-not-at-top,g-bad-import-order

from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top,g-bad-import-order
from l2o_scale.runs import cpu_allocator
from l2o_scale.meta_testing import inner_step
from l2o_scale.config import optimizer_flags
from l2o_scale import pretrained as shipped
from l2o_scale.runs import run_record
from l2o_scale.steps import learned_schedule
from l2o_scale.steps import settings as step_settings
from l2o_scale.steps import step_schedule
from l2o_scale.steps import transform
from l2o_scale.steps import weight_decay as weight_decay_lib
from l2o_scale.steps import zero_gradient_hold
from optimizer import hierarchical_rnn
from optimizer import native_step as native_step_lib

# [PerParam, PerTensor, Global] RNN sizes of the original metarun.py.
DEFAULT_LEVEL_SIZES = tuple(optimizer_flags.HRNN_CELL_SIZES)

# Coordinates of one pass of the step (LearnedOptimizer's
# coordinates_per_pass): about 0.8 GiB of working memory for the
# hierarchical RNN; models up to this size (the MLPs of the speed
# benchmark, 670k) step in one pass.
COORDINATES_PER_PASS = 2**20


def default_hrnn_kwargs():
  """HierarchicalRNN options with the original ``metarun.py`` flag defaults."""
  return optimizer_flags.default_optimizer_kwargs()


def _use_native_step(learned_optimizer, native_step):
  """Checks ``native_step`` and turns the native kernel on where asked;
  warns where it cannot run."""
  if not isinstance(native_step, bool):
    raise ValueError("native_step must be True or False, got {!r}".format(
        native_step))
  if native_step:
    why = native_step_lib.enable(learned_optimizer)
    if why:
      _warn_native_step(why, stacklevel=4)
      return False
  return native_step


def _warn_native_step(why, stacklevel):
  warnings.warn("native_step=True: {}; TensorFlow's ops run instead."
                .format(why), stacklevel=stacklevel)


@keras.saving.register_keras_serializable(package="l2o_scale")
class LearnedOptimizer(keras.optimizers.Optimizer):
  """Keras optimizer driven by a trained learned optimizer.

  Args:
    learned_optimizer: a learned optimizer with the pure step interface
      (``initialize_state``, ``initialize_global_state``, ``compute_updates``),
      e.g. a restored ``HierarchicalRNN``.
    checkpoint_path: where its meta-parameters came from (information only).
    optimizer_kwargs: all its ``HierarchicalRNN`` constructor options (for
      ``get_config``, which also holds the meta-parameters).
    learning_rate: a float or a Keras schedule that multiplies the learned
      update (1: the update as learned, bit for bit).
    coordinates_per_pass: the step runs on groups of whole variables of at
      most this many coordinates (entries) at a time, one after the other
      (a larger variable alone): its working memory, about 0.8 KB per
      coordinate of a pass, then stays bounded on large models (ResNet50,
      23.6M: see docs/keras.md). The numbers are those of one pass over all
      variables. None: one pass (also for learned optimizers other than
      the hierarchical RNN).
    hold_zero_gradients: keep every coordinate whose gradient in a step is
      exactly zero where it is (metatest.py's ``--hold_zero_gradients``,
      :mod:`l2o_scale.steps.zero_gradient_hold`); False: the learned step
      moves every coordinate, as the original's.
    native_step: in steps compiled by XLA (``jit_compile=True``, Keras'
      default where it can), run the per-coordinate part of the
      hierarchical RNN's step as one native kernel
      (:mod:`optimizer.native_step`: built once per machine with its C++
      compiler, ~3 s; AVX2 and FMA; the configuration of the shipped
      optimizers): the same step up to float rounding, in about half the
      time from ~670k parameters on (docs/performance.md). Where the kernel
      cannot run, TensorFlow's ops do, with a warning that says why.
      False: TensorFlow's ops only.
    schedule_head: None, or a learned schedule-and-decay head (a
      :class:`l2o_scale.steps.learned_schedule.ScheduleHead` or the path of
      a saved one) that scales each tensor's learned step and adds a
      decoupled weight decay from the run's progress and gradient norms
      (docs/schedule-head.md); with it the step takes one pass. It is not
      part of the optimizer's config: pass it again after loading.
    total_steps: the run's length in steps, the head's progress input
      (``iterations / total_steps``); None: the head takes
      :data:`~l2o_scale.steps.learned_schedule.DEFAULT_TOTAL_STEPS`.
    name, clipnorm, clipvalue, global_clipnorm, use_ema, ...: as any Keras
      optimizer.
  """

  def __init__(self, learned_optimizer, checkpoint_path=None,
               optimizer_kwargs=None, level_sizes=DEFAULT_LEVEL_SIZES,
               learning_rate=1.0, coordinates_per_pass=COORDINATES_PER_PASS,
               hold_zero_gradients=False, native_step=False,
               schedule_head=None, total_steps=None,
               name="learned_optimizer", **kwargs):
    check_numbers(learning_rate=learning_rate, **kwargs)
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    for method in ("initialize_state", "initialize_global_state",
                   "compute_updates"):
      if not callable(getattr(learned_optimizer, method, None)):
        raise TypeError("learned_optimizer must implement {} (a learned "
                        "optimizer from optimizer/), got {!r}".format(
                            method, type(learned_optimizer).__name__))
    zero_gradient_hold.hold_zero_gradients(hold_zero_gradients)  # Checks it.
    self.hold_zero_gradients = hold_zero_gradients
    self.native_step = native_step
    # Whether the kernel can run, until a step not compiled by XLA says why
    # it does not (once).
    self._native_step_ready = _use_native_step(learned_optimizer,
                                               native_step)
    self.schedule_head = learned_schedule.schedule_head(schedule_head)
    self.total_steps = learned_schedule.check_total_steps(total_steps)
    if schedule_head is not None:
      transform.check_compatible(learned_optimizer)
    if hold_zero_gradients or kwargs.get("weight_decay") or not (
        isinstance(learning_rate, (int, float)) and learning_rate == 1):
      transform.check_compatible(learned_optimizer)
    self.learned_optimizer = learned_optimizer
    self.checkpoint_path = checkpoint_path
    self.optimizer_kwargs = dict(optimizer_kwargs or {})
    self.level_sizes = tuple(level_sizes)
    if coordinates_per_pass is not None and (
        isinstance(coordinates_per_pass, bool) or
        not isinstance(coordinates_per_pass, (int, np.integer)) or
        coordinates_per_pass < 1):
      raise ValueError("coordinates_per_pass must be a positive integer or "
                       "None, got {!r}".format(coordinates_per_pass))
    self.coordinates_per_pass = (None if coordinates_per_pass is None else
                                 int(coordinates_per_pass))
    self._state_slots = []  # per variable index: its place in the state
    # The packed state's blocks (Keras variables), one set per pass of the
    # step (_passes): the passes, their structures and variables.
    self._passes_built = []
    self._pass_structures = []
    self._pass_slots = []
    self._packed_slots = []
    self._global_slots = []
    # Set by from_config until load_own_variables restores the
    # meta-parameters (a config holds the options only).
    self._meta_parameters_pending = False
    self._values_at_first_step = False

  @classmethod
  def from_checkpoint(cls, path, level_sizes=DEFAULT_LEVEL_SIZES,
                      optimizer_kwargs=None, **keras_kwargs):
    """Builds a HierarchicalRNN and restores it from ``path``.

    ``path`` is a checkpoint prefix (``.../model.ckpt-0``) or a folder with a
    ``checkpoint`` file, TF1 (original code) or TF2 (this port).
    The options are those of the ``run_record.json`` in the checkpoint's
    folder (what metarun.py wrote); ``optimizer_kwargs`` override them.
    Without a record, a TF1 checkpoint takes :func:`default_hrnn_kwargs`
    updated by ``optimizer_kwargs`` (with a warning when none are given),
    and a TF2 checkpoint needs ``optimizer_kwargs`` (``{}`` for the
    defaults), or ``run_record.MissingRunRecordError`` says so. Options
    other than the checkpoint's raise a ``CheckpointMismatchError`` naming
    the variable that does not fit; a missing checkpoint raises
    ``FileNotFoundError`` listing those that exist, a damaged one
    ``checkpoints.DamagedCheckpointError`` naming the file.
    """
    try:
      resolved = checkpoints.resolve_checkpoint_path(path)
    except FileNotFoundError as e:
      if path in shipped.names():
        raise FileNotFoundError("{}; {!r} is the name of a pretrained "
                                "optimizer: LearnedOptimizer.pretrained({!r})"
                                .format(e, path, path)) from None
      raise
    record, note = run_record.record_for_checkpoint(
        resolved, checkpoints.checkpoint_format(resolved),
        optimizer_kwargs is not None,
        "pass the options it was trained with as optimizer_kwargs ({} for "
        "metarun.py's defaults)")
    if note:
      warnings.warn(note, stacklevel=2)
    kwargs = optimizer_flags.optimizer_kwargs_from_values(
        run_record.optimizer_flag_values(record))
    if optimizer_kwargs:
      unknown = set(optimizer_kwargs) - set(kwargs) - {"random_seed"}
      if unknown:
        raise TypeError("Unknown HierarchicalRNN options: {}".format(
            ", ".join(sorted(unknown))))
      kwargs.update(optimizer_kwargs)
    learned = hierarchical_rnn.HierarchicalRNN(list(level_sizes), **kwargs)
    checkpoints.restore_optimizer(resolved, learned)
    return cls(learned, checkpoint_path=resolved, optimizer_kwargs=kwargs,
               level_sizes=level_sizes, **keras_kwargs)

  @classmethod
  def pretrained(cls, name, total_steps=None, **keras_kwargs):
    """A pretrained optimizer shipped with the package, by name (see
    ``python -m l2o_scale.pretrained`` for the names and their cards).

    ``total_steps``: the length of a long run (e.g. epochs x steps per
    epoch). It applies the card's settings for long runs, metatest.py's
    step transforms in their Keras form
    (:meth:`l2o_scale.steps.transform.StepTransform.keras_kwargs`): Keras'
    ``weight_decay`` and, as ``learning_rate``, the step schedule (e.g. the
    learned step held for the first ``step_decay_start`` of the run and
    decayed, cosine, over the rest). Explicit ``weight_decay`` or
    ``learning_rate`` arguments win. Without it, or for an optimizer whose
    card has no such settings (``l2o-generalist``: meta-trained to run
    without them), the learned update as it is. With a ``schedule_head``,
    ``total_steps`` feeds the head's progress input instead and the card's
    settings are not applied: the head decides the schedule and the
    decay."""
    if keras_kwargs.get("schedule_head") is not None:
      return cls.from_checkpoint(shipped.checkpoint(name),
                                 total_steps=total_steps, **keras_kwargs)
    settings = (shipped.long_run_settings(name) if total_steps is not None
                else None)
    if settings is not None:
      card = step_settings.step_transforms_from(**settings)
      for key, value in card.keras_kwargs(total_steps).items():
        keras_kwargs.setdefault(key, value)
    return cls.from_checkpoint(shipped.checkpoint(name), **keras_kwargs)

  # -------------------------------------------------------------- variables
  def build(self, var_list):
    """Creates the optimizer state of all variables and the global state.

    The state is kept in the learned optimizer's packed layout
    (``initialize_packed_state``: for the hierarchical RNN a few [k, N]
    blocks with the coordinates of all variables end to end), one Keras
    variable per block. Why: one variable per TF1 slot of every tensor
    meant ~14 variables per model variable, each repacked into that layout
    and back at every step (a transpose of the RNN state among them), and
    thousands of captured variables in the traced step of a large model.
    """
    if self.built:
      return
    super().build(var_list)
    note = cpu_allocator.slow_allocator_note(
        sum(int(np.prod(v.shape)) for v in var_list))
    if note:
      warnings.warn(note, stacklevel=2)
    with tf.init_scope():
      values = [_value_now(v) for v in var_list]
      # With attention the state holds the variables' values (true_param):
      # those not readable yet are taken at the first step (_pass_state).
      self._values_at_first_step = (
          inner_step.uses_attention(self.learned_optimizer) and
          any(value is None for value in values))
      values = [tf.zeros(v.shape) if value is None else value
                for v, value in zip(var_list, values)]
      self._build_state(values)
      self._global_slots = []
      for j, g in enumerate(self.learned_optimizer.initialize_global_state()):
        g = tf.convert_to_tensor(g)
        self._global_slots.append(self.add_variable(
            shape=tuple(g.shape), dtype="float32",
            initializer=_constant_initializer(g),
            name="global_state{}".format(j)))
    # One entry per variable: its place in the packed state.
    self._state_slots = [{"index": i, "name": _var_name(v, i)}
                         for i, v in enumerate(var_list)]

  def _build_state(self, values):
    """The packed state's variables: one set per pass of the step
    (:meth:`_passes`), each created from its pass's initial state (drawn
    variable by variable in order, as in one pass), so that building never
    holds more than one pass's initial state beside the variables."""
    self._passes_built = self._passes(values)
    self._pass_structures, self._pass_slots, self._packed_slots = [], [], []
    several = len(self._passes_built) > 1
    for index, (first, last, _, _) in enumerate(self._passes_built):
      part = self.learned_optimizer.initialize_packed_state(
          values[first:last])
      prefix = "state{}_".format(index) if several else "state_"
      slots = [self.add_variable(shape=tuple(leaf.shape), dtype="float32",
                                 initializer=_constant_initializer(leaf),
                                 name=prefix + name)
               for name, leaf in _named_leaves(part)]
      # The structure only: the initial tensors themselves would stay
      # alive beside the variables, a second copy of the state.
      self._pass_structures.append(tf.nest.map_structure(lambda _: 0, part))
      self._pass_slots.append(slots)
      self._packed_slots += slots

  def _pass_variables(self, index):
    """The packed structure of pass ``index``'s state variables (unread)."""
    return tf.nest.pack_sequence_as(self._pass_structures[index],
                                    self._pass_slots[index])

  def _pass_state(self, index):
    """The packed state of pass ``index``, read from its variables."""
    packed = tf.nest.map_structure(tf.convert_to_tensor,
                                   self._pass_variables(index))
    if self._values_at_first_step:
      first, last = self._passes_built[index][:2]
      at_first = tf.equal(self.iterations, 0)
      packed["true_param"] = [
          tf.where(at_first, tf.cast(var, tf.float32), saved)
          for var, saved in zip(self._trainable_variables[first:last],
                                packed["true_param"])]
    return packed

  def _assign_pass_state(self, index, packed):
    for slot, value in zip(self._pass_slots[index], tf.nest.flatten(packed)):
      self.assign(slot, value)

  def _packed_state(self):
    """The packed state of all variables (the passes' states joined)."""
    parts = [self._pass_state(i) for i in range(len(self._pass_slots))]
    return (parts[0] if len(parts) == 1 else
            self.learned_optimizer.join_packed(parts))

  def _assign_packed_state(self, packed):
    """Writes the packed state of all variables into the passes'
    variables."""
    if len(self._passes_built) == 1:
      self._assign_pass_state(0, packed)
      return
    for index, columns in enumerate(self._passes_built):
      self._assign_pass_state(
          index, self.learned_optimizer.packed_columns(packed, *columns))

  # ------------------------------------------------------------------ step
  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    """One joint learned-optimizer step on all variables (see module doc)."""
    self._check_can_step()
    if self._native_step_ready:
      why = native_step_lib.outside_xla_reason(self.learned_optimizer)
      if why:
        self._native_step_ready = False
        _warn_native_step(why, stacklevel=2)
    given = {self._get_variable_index(var): grad
             for grad, var in zip(grads, trainable_variables)
             if grad is not None}
    if not given:
      return
    variables = list(self._trainable_variables)
    params = [tf.cast(tf.convert_to_tensor(v), tf.float32)
              for v in variables]
    indices = sorted(given)
    # A gradient may lack a static shape where its variable has one (a
    # Dense kernel applied to a sequence: the gradient of a tensordot); the
    # packed step sizes its segments from the gradients' static shapes.
    dense_grads = [tf.reshape(tf.cast(tf.convert_to_tensor(given[i]),
                                      tf.float32), variables[i].shape)
                   for i in indices]
    global_state = [tf.convert_to_tensor(v) for v in self._global_slots]
    if len(self._passes_built) > 1 and len(indices) == len(variables):
      new_global = self._step_in_passes(variables, params, dense_grads,
                                        global_state, learning_rate)
      for slot, value in zip(self._global_slots, new_global):
        self.assign(slot, value)
      return
    packed = self._packed_state()
    if len(indices) == len(variables):
      new_params, new_packed, new_global, new_attend, _ = \
          self.learned_optimizer.compute_updates_packed(
              params, dense_grads, packed, global_state)
    else:
      new_params, new_packed, new_global, new_attend = self._subset_update(
          params, indices, dense_grads, packed, global_state)
    for slot, value in zip(self._global_slots, new_global):
      self.assign(slot, value)
    self._assign_packed_state(new_packed)
    self._assign_variables([variables[i] for i in indices],
                           [params[i] for i in indices], dense_grads,
                           new_params, new_attend, learning_rate)

  def _assign_variables(self, variables, old, grads, new_params, new_attend,
                        learning_rate):
    """The variables take their values after the step: the attended
    location with attention, otherwise the new parameter (original
    apply_gradients), through the step transforms."""
    values = inner_step.next_variables(self.learned_optimizer, new_params,
                                       new_attend)
    if not inner_step.uses_attention(self.learned_optimizer):
      values = self._step_transforms(variables).apply(
          old, values, {transform.SCALE: tf.cast(learning_rate, tf.float32),
                        transform.GRADIENTS: grads,
                        learned_schedule.PROGRESS:
                            learned_schedule.keras_progress(
                                self.iterations, self.total_steps)})
    for var, value in zip(variables, values):
      self.assign(var, tf.cast(tf.reshape(value, var.shape), var.dtype))

  def _passes(self, params):
    """(first, last, start, end) of each pass of the step
    (``coordinates_per_pass``): consecutive variables ``first`` to ``last -
    1``, coordinates ``start`` to ``end - 1`` of the packed state. One pass
    where the model fits in one or the learned optimizer has no packed
    columns (other than the hierarchical RNN)."""
    sizes = [int(p.shape.num_elements()) for p in params]
    limit = self.coordinates_per_pass
    # The head reads the gradient norm of all variables at once.
    if not limit or sum(sizes) <= limit or not hasattr(
        self.learned_optimizer, "packed_columns") or not isinstance(
            self.schedule_head, transform.Identity):
      return [(0, len(sizes), 0, sum(sizes))]
    passes, first, start, count = [], 0, 0, 0
    for t, size in enumerate(sizes):
      if count and count + size > limit:
        passes.append((first, t, start, start + count))
        first, start, count = t, start + count, 0
      count += size
    passes.append((first, len(sizes), start, start + count))
    return passes

  def _step_in_passes(self, variables, params, grads, global_state,
                      learning_rate):
    """The step of all variables, one pass after the other, so that only one
    pass's intermediates exist at a time. Returns the new global state (of
    the last pass, which holds the last variable, the one the global RNN
    reads)."""
    opt = self.learned_optimizer
    # The variables, not their values: only the log learning rates are read.
    lr_mean = opt.problem_mean_log_lr(
        [self._pass_variables(i) for i in range(len(self._pass_slots))])
    new_global, done = None, []
    for index, (first, last, _, _) in enumerate(self._passes_built):
      # Each pass's state is read once the pass before has computed its
      # results: without this the executor may run the passes side by side
      # (they share no variables) and hold all their intermediates at once.
      with tf.control_dependencies(done):
        packed = self._pass_state(index)
      new_params, new_packed, new_global, new_attend, _ = \
          opt.compute_updates_packed(params[first:last], grads[first:last],
                                     packed, global_state,
                                     problem_lr_mean=lr_mean)
      done = tf.nest.flatten(new_packed) + list(new_params)
      self._assign_pass_state(index, new_packed)
      self._assign_variables(variables[first:last], params[first:last],
                             grads[first:last], new_params, new_attend,
                             learning_rate)
    return new_global

  def _subset_update(self, params, indices, grads, packed, global_state):
    """The step on the variables with gradients only (``indices``): as the
    original's ``apply_gradients``, the others keep their state and take no
    part (not in the per-tensor means, not the last tensor the global RNN
    reads). Their state is taken out of the packed layout and put back."""
    opt = self.learned_optimizer
    states = opt.unpack_state(packed, params)
    sub_params = [params[i] for i in indices]
    new_params, new_sub, new_global, new_attend, _ = \
        opt.compute_updates_packed(sub_params, grads,
                                   opt.pack_state([states[i] for i in indices]),
                                   global_state)
    for i, state in zip(indices, opt.unpack_state(new_sub, new_params)):
      states[i] = state
    return new_params, opt.pack_state(states), new_global, new_attend

  def _check_can_step(self):
    if self._meta_parameters_pending:
      raise ValueError(
          "This LearnedOptimizer was rebuilt from a config, which holds its "
          "options but not its meta-parameters: load them with the model "
          "(keras.models.load_model of a .keras file) or build it with "
          "LearnedOptimizer.from_checkpoint / LearnedOptimizer.pretrained.")
    if tf.distribute.has_strategy() and \
        tf.distribute.get_strategy().num_replicas_in_sync > 1:
      raise NotImplementedError(
          "LearnedOptimizer updates all variables jointly and does not "
          "support multi-replica distribution strategies.")

  def _step_transforms(self, variables):
    """The held coordinates, the learning rate's scale, then Keras' weight
    decay, of metatest's step transforms (the decay of the variables Keras
    does not exclude)."""
    return transform.chain(
        zero_gradient_hold.hold_zero_gradients(self.hold_zero_gradients),
        step_schedule.ScaleStep(),
        self.schedule_head,
        weight_decay_lib.decoupled_weight_decay(
            self.weight_decay or 0.,
            mask=[self._use_weight_decay(v) for v in variables]))

  def _apply_weight_decay(self, variables):
    """Keras' weight decay is a step transform of the learned update
    (:meth:`_step_transforms`), not a change of the variables before it."""
    del variables

  def update_step(self, gradient, variable, learning_rate):
    raise NotImplementedError(
        "LearnedOptimizer updates all variables together; use "
        "apply_gradients/apply (or model.fit).")

  def reset_state(self):
    """Re-initialises the optimizer state from the variables' current
    values."""
    values = [tf.cast(tf.convert_to_tensor(v), tf.float32)
              for v in self._trainable_variables]
    for index, (first, last, _, _) in enumerate(self._passes_built):
      self._assign_pass_state(
          index, self.learned_optimizer.initialize_packed_state(
              values[first:last]))
    for slot, g in zip(self._global_slots,
                       self.learned_optimizer.initialize_global_state()):
      slot.assign(g)

  # ---------------------------------------------------------------- config
  META_KEY = "meta_{}"

  def save_own_variables(self, store):
    """Keras' variables (step counter, slots), then the meta-parameters, in
    the sorted order of their TF1 names."""
    super().save_own_variables(store)
    for i, var in enumerate(self.learned_optimizer.tf1_variables().values()):
      store[self.META_KEY.format(i)] = var.numpy()

  def load_own_variables(self, store):
    """Restores what :meth:`save_own_variables` wrote.

    The state saved by an optimizer that stepped in one pass (every file
    written before ``coordinates_per_pass`` existed, or with it None) is
    split into this optimizer's passes, so such a file restores exactly
    under the default. State that fits neither layout (another model, or
    other passes) starts afresh from the variables, with a warning; so does
    a store saved before the optimizer was built, without one."""
    keys = list(store.keys())
    meta = sorted((k for k in keys if k.startswith("meta_")),
                  key=lambda k: int(k[len("meta_"):]))
    variables = list(self.learned_optimizer.tf1_variables().items())
    if meta:
      if len(meta) != len(variables):
        raise ValueError(
            "the saved LearnedOptimizer has {} meta-parameters, its options "
            "build {}".format(len(meta), len(variables)))
      for key, (name, var) in zip(meta, variables):
        value = store[key]
        if tuple(value.shape) != tuple(var.shape):
          raise ValueError(
              "saved meta-parameter {} has shape {}, its options build "
              "{}".format(name, tuple(value.shape), tuple(var.shape)))
        var.assign(value)
      self._meta_parameters_pending = False
    rest = {k: store[k] for k in keys if not k.startswith("meta_")}
    saved = [np.asarray(rest[str(i)]) for i in range(len(rest))]
    if _shapes(saved) == _shapes(self.variables):
      super().load_own_variables(rest)
    elif self.built and not self._load_one_pass_state(saved):
      if len(saved) > self._keras_variable_count():
        warnings.warn(
            "the saved LearnedOptimizer state ({} variables) does not fit "
            "this optimizer's ({}: another model, or other passes); its "
            "state starts afresh from the variables".format(
                len(saved), len(self.variables)), stacklevel=2)
      self.reset_state()

  def _keras_variable_count(self):
    """How many of :attr:`variables` are Keras' own (step counter, learning
    rate, EMA...): they come first, then the packed state, then the global
    state."""
    return (len(self.variables) - len(self._packed_slots) -
            len(self._global_slots))

  def _load_one_pass_state(self, saved):
    """Assigns ``saved`` (the arrays of ``save_own_variables`` without the
    meta-parameters) if they are this optimizer's variables in the layout of
    one pass; returns whether they were (never where this optimizer takes
    one pass: its own layout is checked before)."""
    if len(self._pass_slots) == 1:
      return False
    variables, globals_ = self.variables, len(self._global_slots)
    base = self._keras_variable_count()
    specs = [tf.nest.map_structure(
        lambda v: tf.TensorSpec(v.shape, tf.float32), self._pass_variables(i))
             for i in range(len(self._pass_slots))]
    # The joined layout's shapes, traced, not computed: joining the state
    # itself would hold a second copy of it.
    joined = tf.function(
        self.learned_optimizer.join_packed).get_concrete_function(
            specs).structured_outputs
    expected = (_shapes(variables[:base]) + _shapes(tf.nest.flatten(joined))
                + _shapes(self._global_slots))
    if _shapes(saved) != expected:
      return False
    for variable, value in zip(variables[:base], saved[:base]):
      variable.assign(value)
    self._assign_packed_state(tf.nest.pack_sequence_as(
        joined, saved[base:len(saved) - globals_]))
    for slot, value in zip(self._global_slots, saved[len(saved) - globals_:]):
      slot.assign(value)
    return True

  def get_config(self):
    """Keras config: the options of the learned optimizer (all of them), not
    its meta-parameters, which are saved as variables."""
    config = super().get_config()
    config.update(optimizer_kwargs=_json_ready(self.optimizer_kwargs),
                  level_sizes=list(self.level_sizes),
                  coordinates_per_pass=self.coordinates_per_pass,
                  hold_zero_gradients=self.hold_zero_gradients,
                  native_step=self.native_step)
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    if isinstance(config.get("learning_rate"), dict):  # A Keras schedule.
      config["learning_rate"] = keras.optimizers.schedules.deserialize(
          config["learning_rate"], custom_objects=custom_objects)
    path = config.pop("checkpoint_path", None)
    if path is not None:  # A config that named its checkpoint (older files).
      return cls.from_checkpoint(path, **config)
    kwargs = dict(config.pop("optimizer_kwargs"))
    level_sizes = tuple(config.pop("level_sizes"))
    learned = hierarchical_rnn.HierarchicalRNN(list(level_sizes), **kwargs)
    optimizer = cls(learned, optimizer_kwargs=kwargs, level_sizes=level_sizes,
                    **config)
    optimizer._meta_parameters_pending = True
    return optimizer


# Keras' numeric arguments and the values they must take (None: not given).
_NUMBER_RULES = {
    "learning_rate": (lambda v: v >= 0, ">= 0"),
    "weight_decay": (lambda v: v >= 0, ">= 0"),
    "clipnorm": (lambda v: v > 0, "> 0"),
    "clipvalue": (lambda v: v > 0, "> 0"),
    "global_clipnorm": (lambda v: v > 0, "> 0"),
    "ema_momentum": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "loss_scale_factor": (lambda v: v > 0, "> 0"),
}


def check_numbers(**kwargs):
  """ValueError, in one line, for a numeric Keras argument that is not a
  finite number in its range (a schedule as ``learning_rate`` is taken as
  it is). Why: Keras stores NaN or inf without a word and the first step
  then silently turns every variable into NaN."""
  for key, (ok, rule) in _NUMBER_RULES.items():
    value = kwargs.get(key)
    if value is None or not isinstance(value, (int, float, np.number)) or \
        isinstance(value, bool):
      continue
    if not (np.isfinite(value) and ok(value)):
      raise ValueError("LearnedOptimizer: {} must be a finite number {}, "
                       "got {!r}".format(key, rule, value))


def long_run_schedule(total_steps, decay_start=0.8):
  """Keras' ``CosineDecay`` that holds 1 for the first ``decay_start`` of a
  run of ``total_steps`` and decays to 0 over the rest: metatest.py's
  ``--step_schedule=cosine --step_decay_start``, as a ``learning_rate`` of
  :class:`LearnedOptimizer` (:func:`l2o_scale.steps.step_schedule.keras_schedule`)."""
  return step_schedule.keras_schedule("cosine", total_steps, decay_start)


def _value_now(var):
  """``var``'s value (float32), or None where it has none yet: a model built
  by its first call inside a traced step (a ``Sequential`` without
  ``keras.Input`` in ``fit``) creates its variables in that trace, and they
  are initialised only when the traced step runs (read before, they are
  empty). The learned optimizers' initial state depends on the variables'
  shapes only, except with attention (``true_param``)."""
  backing = getattr(var, "value", var)  # A Keras variable's tf.Variable.
  is_initialized = getattr(backing, "is_initialized", None)
  if is_initialized is not None and not bool(is_initialized()):
    return None
  return tf.cast(tf.convert_to_tensor(var), tf.float32)


def _shapes(arrays):
  return [tuple(a.shape) for a in arrays]


def _json_ready(kwargs):
  """Options as JSON keeps them (tuples as lists)."""
  return {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}


def _constant_initializer(value):
  value = tf.convert_to_tensor(value)

  def initializer(shape, dtype=None):
    del shape
    return tf.cast(value, dtype or value.dtype)
  return initializer


def _named_leaves(structure, prefix=""):
  """(name, tensor) of every leaf of a nest of dicts and lists, in
  ``tf.nest.flatten`` order (dict keys sorted)."""
  if isinstance(structure, dict):
    items = [(str(k), structure[k]) for k in sorted(structure)]
  elif isinstance(structure, (list, tuple)):
    items = [(str(i), v) for i, v in enumerate(structure)]
  else:
    return [(prefix, tf.convert_to_tensor(structure))]
  out = []
  for key, value in items:
    out += _named_leaves(value, key if not prefix else prefix + "_" + key)
  return out


def _var_name(var, index):
  name = getattr(var, "path", None) or getattr(var, "name", None) or \
      "var{}".format(index)
  return str(name).replace("/", "_").replace(":", "_")
