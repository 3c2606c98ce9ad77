"""A trained learned optimizer as a Keras 3 optimizer.

``model.compile(optimizer=LearnedOptimizer.from_checkpoint(path), ...)`` then
``model.fit(...)`` trains any Keras model with the learned optimizer.

:class:`LearnedOptimizer` holds the Keras hooks; each of its jobs is one
module of :mod:`l2o_scale.keras_parts` (as Keras keeps ``adam.py`` over its
base optimizer): its arguments checked (``checks``), the native kernel's
switch (``native``), the learned optimizer's state of all variables as
Keras optimizer variables (``packed_state``), the step of all variables
together (``joint_step``), saving and loading (``saving``), and the learned
optimizer restored from a checkpoint or shipped by name (``restore``).

Why it cannot be a plain ``update_step`` optimizer: the hierarchical RNN mixes
information across tensors, so the original ``apply_gradients``
(L2O-Scale-Evaluation ``optimizer/trainable_optimizer.py`` l.127-199,
``hierarchical_rnn.py`` ``_compute_updates`` l.363-432) updates *all*
variables in one call and advances one shared global state
(:mod:`l2o_scale.keras_parts.joint_step`). Keras still applies its own
features around it (gradient clipping, loss scaling, EMA, the ``iterations``
counter).

The meta-parameters are the learned optimizer's own ``tf.Variable``s,
restored from a checkpoint written by the original TF1 ``metarun.py`` or by
this port. They are saved with the optimizer's variables (beside the
schedule head's state) and its options with its config (with the schedule
head's parameters and bounds and ``total_steps``), so a ``.keras`` file is
self-contained: it loads in a fresh
process, anywhere, without the checkpoint, once this module is imported
(``keras.saving.register_keras_serializable`` registers the class; ``import
l2o_scale`` imports this module when Keras is already imported). A config
alone (``from_config``) gives an optimizer that refuses to step until its
meta-parameters are loaded.

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

A step whose gradients hold a NaN or an inf is skipped and counted
(:attr:`LearnedOptimizer.skipped_steps`): the learned step mixes every
gradient into every tensor's update, so taking it would turn every weight
into NaN (:meth:`l2o_scale.keras_parts.joint_step.JointStep.apply`).

Limitation: only the default distribution strategy is supported (the joint
update cannot be split per replica variable).
"""

import warnings

from l2o_scale.runs import quiet_cuda
# A quiet start where TensorFlow is not imported yet: no info lines (unless
# TF_CPP_MIN_LOG_LEVEL says otherwise), and the CUDA probing filtered as in
# the command-line programs (on a machine without CUDA).
quiet_cuda.hide_info_lines()
quiet_cuda.import_tensorflow()

import keras  # pylint: disable=g-import-not-at-top,g-bad-import-order
import numpy as np  # pylint: disable=g-import-not-at-top,g-bad-import-order
import tensorflow as tf  # pylint: disable=g-import-not-at-top,g-bad-import-order

from l2o_scale import learned_adamw  # pylint: disable=g-import-not-at-top,g-bad-import-order
from l2o_scale import pretrained as shipped  # pylint: disable=g-import-not-at-top,g-bad-import-order
from l2o_scale.config import optimizer_flags
from l2o_scale.keras_parts import checks
from l2o_scale.keras_parts import joint_step
from l2o_scale.keras_parts import native
from l2o_scale.keras_parts import packed_state
from l2o_scale.keras_parts import restore
from l2o_scale.keras_parts import saving
from l2o_scale.runs import cpu_allocator
from l2o_scale.steps import learned_schedule
from l2o_scale.steps import settings as step_settings
from l2o_scale.steps import step_schedule
from l2o_scale.steps import transform
from l2o_scale.steps import weight_decay as weight_decay_lib
from l2o_scale.steps import zero_gradient_hold
from optimizer import hierarchical_rnn

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
      :class:`l2o_scale.steps.learned_schedule.ScheduleHead`, the path of
      a saved one or its config) that scales each tensor's learned step and
      adds a decoupled weight decay from the run's progress and gradient
      norms (docs/schedule-head.md); with it the step takes one pass, and
      no ``weight_decay`` or ``learning_rate`` other than 1 (the head
      decides both: metatest.py's rule). Its parameters and bounds are in
      the optimizer's config, its per-run state is saved with the
      optimizer's variables.
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
    checks.check_numbers(learning_rate=learning_rate, **kwargs)
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    checks.check_learned_optimizer(learned_optimizer)
    zero_gradient_hold.hold_zero_gradients(hold_zero_gradients)  # Checks it.
    self.hold_zero_gradients = hold_zero_gradients
    self.native_step = native_step
    self._native = native.NativeStep(learned_optimizer, native_step)
    self.schedule_head = step_settings.attach_head(
        schedule_head, "LearnedOptimizer: the schedule_head",
        not checks.is_one(learning_rate), kwargs.get("weight_decay"))
    self.total_steps = learned_schedule.check_total_steps(total_steps)
    checks.check_transforms(learned_optimizer, schedule_head,
                            hold_zero_gradients, kwargs.get("weight_decay"),
                            learning_rate)
    self.learned_optimizer = learned_optimizer
    self.checkpoint_path = checkpoint_path
    self.optimizer_kwargs = dict(optimizer_kwargs or {})
    self.level_sizes = tuple(level_sizes)
    self.coordinates_per_pass = checks.coordinates_per_pass(
        coordinates_per_pass)
    self._state = packed_state.PackedState(self, learned_optimizer)
    self._step = joint_step.JointStep(learned_optimizer, self._state,
                                      self.assign)
    # Set by from_config until load_own_variables restores the
    # meta-parameters (a config holds the options only).
    self._meta_parameters_pending = False
    with tf.init_scope():
      # Not a Keras variable, so that files saved before it existed still
      # load their state (saving.SKIPPED_STEPS_KEY).
      self._skipped_steps = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="skipped_steps")

  @property
  def skipped_steps(self):
    """How many steps were skipped, as a gradient held a NaN or an inf
    (:meth:`_backend_update_step`); saved with the optimizer."""
    return int(self._skipped_steps.numpy())

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
    learned, resolved, kwargs = restore.from_checkpoint(
        path, level_sizes, optimizer_kwargs)
    return cls(learned, checkpoint_path=resolved, optimizer_kwargs=kwargs,
               level_sizes=level_sizes, **keras_kwargs)

  @classmethod
  def pretrained(cls, name, total_steps=None, **keras_kwargs):
    """A pretrained optimizer shipped with the package, by name (see
    ``python -m l2o_scale.pretrained`` for the names and their cards).

    ``total_steps``: the run's length in steps (e.g. epochs x steps per
    epoch), in one meaning for every shipped optimizer: each part of the
    optimizer that depends on the run's length reads it. For one whose card
    holds settings for long runs, those settings in their Keras form
    (:meth:`l2o_scale.steps.transform.StepTransform.keras_kwargs`): Keras'
    ``weight_decay`` and, as ``learning_rate``, the step schedule (e.g. the
    learned step held for the first ``step_decay_start`` of the run and
    decayed, cosine, over the rest); explicit ``weight_decay`` or
    ``learning_rate`` arguments win. For one with a ``schedule_head``
    (given, or shipped with it: ``l2o-scale-head``), the head's progress
    input; the head decides the schedule and the decay, so the card's
    settings do not apply. None: the length is not known, so no setting
    that needs it applies (the learned update as it is; a head assumes
    2,000 steps). An optimizer whose card has no such settings
    (``l2o-generalist``: meta-trained to run without them) ignores it.

    A shipped learned AdamW (``l2o-adamw``) is not a learned optimizer of
    this class: its name gives
    :meth:`l2o_scale.learned_adamw.LearnedAdamW.pretrained`, which needs
    ``total_steps``."""
    if shipped.is_learned_adamw(name):
      return learned_adamw.LearnedAdamW.pretrained(name, total_steps,
                                                   **keras_kwargs)
    keras_kwargs = restore.card_kwargs(name, total_steps, keras_kwargs)
    return cls.from_checkpoint(shipped.checkpoint(name), **keras_kwargs)

  # -------------------------------------------------------------- variables
  def build(self, var_list):
    """Creates the optimizer state of all variables and the global state
    (:class:`~l2o_scale.keras_parts.packed_state.PackedState`), after
    Keras' own."""
    if self.built:
      return
    super().build(var_list)
    note = cpu_allocator.slow_allocator_note(
        sum(int(np.prod(v.shape)) for v in var_list))
    if note:
      warnings.warn(note, stacklevel=2)
    self._state.build(var_list, self._pass_limit())

  def _pass_limit(self):
    """The most coordinates of one pass of the step: None (one pass) for a
    learned optimizer without packed columns (other than the hierarchical
    RNN) or with a schedule head, which reads the gradient norm of all
    variables at once."""
    if not hasattr(self.learned_optimizer, "packed_columns") or \
        not isinstance(self.schedule_head, transform.Identity):
      return None
    return self.coordinates_per_pass

  def reset_state(self):
    """Re-initialises the optimizer state from the variables' current
    values (and the schedule head's state, which reads their gradients)."""
    self._state.reset([tf.cast(tf.convert_to_tensor(v), tf.float32)
                       for v in self._trainable_variables])
    if isinstance(self.schedule_head, learned_schedule.ScheduleHead):
      self.schedule_head.state.assign(learned_schedule.initial_state())

  # ------------------------------------------------------------------ step
  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    """One joint learned-optimizer step on all variables with gradients
    (:class:`~l2o_scale.keras_parts.joint_step.JointStep`).

    Why this private hook of Keras 3 (``BaseOptimizer``, which the
    TensorFlow backend overrides for ``tf.distribute``) and not a public
    one: it is the one place where Keras hands an optimizer all variables
    and gradients of a step at once, after its gradient filtering, loss
    scaling, clipping and accumulation and before its EMA and constraints.
    The public ``update_step`` sees one variable at a time, and the learned
    step reads all of them at once; overriding the public ``apply`` instead
    would mean rewriting all those features of Keras.

    A step whose gradients hold a NaN or an inf is skipped (no variable,
    no state changes) and counted in :attr:`skipped_steps`."""
    checks.check_can_step(self._meta_parameters_pending)
    self._native.check_traced_step()
    given = {self._get_variable_index(var): grad
             for grad, var in zip(grads, trainable_variables)
             if grad is not None}
    if not given:
      return
    inputs = {transform.SCALE: tf.cast(learning_rate, tf.float32),
              learned_schedule.PROGRESS: learned_schedule.keras_progress(
                  self.iterations, self.total_steps)}
    self._step.apply(list(self._trainable_variables), given,
                     self._step_transforms, inputs, self._skip_step)

  def _skip_step(self):
    """In place of a step whose gradients are not all finite: no variable
    and no state changes (:meth:`JointStep.apply
    <l2o_scale.keras_parts.joint_step.JointStep.apply>` says why); the step
    is counted in :attr:`skipped_steps`, and in Keras' ``iterations``
    as every step is, so that a schedule over ``total_steps`` keeps to
    the batches of ``fit``."""
    self._skipped_steps.assign_add(1)

  def _step_transforms(self, variables):
    """The held coordinates, the learning rate's scale, the schedule head,
    then Keras' weight decay, of metatest's step transforms (the decay of
    the variables Keras does not exclude)."""
    return transform.chain(
        zero_gradient_hold.hold_zero_gradients(self.hold_zero_gradients),
        step_schedule.ScaleStep(),
        self.schedule_head,
        weight_decay_lib.decoupled_weight_decay(
            self.weight_decay or 0.,
            mask=[self._use_weight_decay(v) for v in variables]))

  def _apply_weight_decay(self, variables):
    """Nothing: Keras' weight decay is the last step transform of the
    learned update (:meth:`_step_transforms`).

    Why this private hook of Keras 3 is overridden: Keras decays the
    variables in place before the step, so the learned optimizer would read
    decayed parameters, and the decay would come before the held
    coordinates, the scale and the schedule head instead of after them
    (metatest.py's order). No public hook turns that off while keeping
    ``weight_decay`` and ``exclude_from_weight_decay`` Keras' own
    arguments (in the config, with their masks)."""
    del variables

  def update_step(self, gradient, variable, learning_rate):
    raise NotImplementedError(
        "LearnedOptimizer updates all variables together; use "
        "apply_gradients/apply (or model.fit).")

  # ---------------------------------------------------------------- config
  def save_own_variables(self, store):
    """Keras' variables (step counter, slots), then the meta-parameters, in
    the sorted order of their TF1 names (:mod:`l2o_scale.keras_parts.saving`)."""
    super().save_own_variables(store)
    saving.save_meta_parameters(self.learned_optimizer, store)
    saving.save_run_state(self._run_state(), store)

  def _run_state(self):
    """The state of the run that is not a Keras variable, by its key in
    the saved store: the count of skipped steps, the schedule head's
    state."""
    state = {saving.SKIPPED_STEPS_KEY: self._skipped_steps}
    if isinstance(self.schedule_head, learned_schedule.ScheduleHead):
      state[saving.HEAD_STATE_KEY] = self.schedule_head.state
    return state

  def load_own_variables(self, store):
    """Restores what :meth:`save_own_variables` wrote. State that does not
    fit this optimizer's (another model, or other passes) starts afresh
    from the variables, with a warning; so does a store saved before the
    optimizer was built, without one."""
    if saving.load_meta_parameters(self.learned_optimizer, store):
      self._meta_parameters_pending = False
    saving.load_run_state(self._run_state(), store)
    rest = saving.optimizer_store(store)
    if saving.fits(rest, self.variables):
      super().load_own_variables(rest)
    elif self.built:
      if len(rest) > len(self.variables) - self._state.variable_count():
        warnings.warn(
            "the saved LearnedOptimizer state ({} variables) does not fit "
            "this optimizer's ({}: another model, or other passes); its "
            "state starts afresh from the variables".format(
                len(rest), len(self.variables)), stacklevel=2)
      self.reset_state()

  def get_config(self):
    """Keras config: the options of the learned optimizer (all of them) and
    the schedule head's parameters and bounds, not the meta-parameters,
    which are saved as variables. ValueError, in one line, for a schedule
    head of another class, which a config cannot rebuild."""
    config = super().get_config()
    config.update(optimizer_kwargs=saving.json_ready(self.optimizer_kwargs),
                  level_sizes=list(self.level_sizes),
                  coordinates_per_pass=self.coordinates_per_pass,
                  hold_zero_gradients=self.hold_zero_gradients,
                  native_step=self.native_step,
                  schedule_head=self._head_config(),
                  total_steps=self.total_steps)
    return config

  def _head_config(self):
    head = self.schedule_head
    if isinstance(head, transform.Identity):
      return None
    if type(head) is not learned_schedule.ScheduleHead:  # pylint: disable=unidiomatic-typecheck
      raise ValueError(
          "LearnedOptimizer: its schedule head is a {}, which a saved "
          "config cannot rebuild (only a ScheduleHead); save the model with "
          "a ScheduleHead".format(type(head).__name__))
    return head.get_config()

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    if isinstance(config.get("learning_rate"), dict):  # A Keras schedule.
      config["learning_rate"] = keras.optimizers.schedules.deserialize(
          config["learning_rate"], custom_objects=custom_objects)
    kwargs = dict(config.pop("optimizer_kwargs"))
    level_sizes = tuple(config.pop("level_sizes"))
    learned = hierarchical_rnn.HierarchicalRNN(list(level_sizes), **kwargs)
    optimizer = cls(learned, optimizer_kwargs=kwargs, level_sizes=level_sizes,
                    **config)
    optimizer._meta_parameters_pending = True  # pylint: disable=protected-access
    return optimizer
