"""Base class of the trainable (learned) optimizers.

Port of ``optimizer/trainable_optimizer.py`` (L2O-Scale-Training, l.51-200 for
the optimizer interface; the meta-training unroll ``train`` of l.202-560 lives
in :mod:`l2o_scale.meta_training.unroll`). In TF1 the class was a ``tf.train.Optimizer``
whose variables were created by ``tf.get_variable`` inside scopes. Here it is
a ``tf.Module``:

* every meta-parameter is a ``tf.Variable`` created once in ``__init__`` and
  registered under its TF1 name (``tf1_variables()``), which is what the TF1
  checkpoint reader and the fidelity replayer use;
* the optimizer math is a pure function, :meth:`compute_updates`, of
  (params, grads, states, global_state) so it can be differentiated through
  (meta-training) and compiled with ``tf.function``;
* the original's "black box" use, ``apply_gradients`` on ``tf.Variable``s with
  per-variable slots and a global state, is kept (:meth:`apply_gradients`).
"""

import collections

import tensorflow as tf

OPTIMIZER_SCOPE = "LOL"
EPSILON = 1e-6


def flatten_and_sort(dictionary):
  """Values of a dict sorted by key (trainable_optimizer.py, last function)."""
  return [dictionary[k] for k in sorted(dictionary.keys())]


def state_variables(state, name_prefix):
  """A state dict of tensors as non-trainable ``tf.Variable``s, sorted by key.

  The optimizer's per-tensor state (the original's slots) lives in variables
  in the black-box ``apply_gradients`` below (the compiled meta-test loop
  keeps the packed state instead, see :class:`PackedStateDefaults`).
  """
  return collections.OrderedDict(
      (key, tf.Variable(tf.convert_to_tensor(value), trainable=False,
                        name="{}_{}".format(name_prefix, key)))
      for key, value in sorted(state.items()))


def read_state(variables):
  """Current values of a dict of state variables."""
  return {key: tf.convert_to_tensor(var) for key, var in variables.items()}


def assign_state(variables, values):
  """Assigns a state dict to its variables; returns the assign ops."""
  return [var.assign(values[key]) for key, var in variables.items()]


def list_mult(values):
  """Product of a list of ints (the original's ``list_mult`` helper)."""
  m = 1
  for v in values:
    m *= v
  return m


class PackedStateDefaults(object):
  """The packed-state interface, for optimizers whose state is per tensor.

  Callers that keep an optimizer's state across steps (the meta-test loop,
  the benchmark) hold it as the optimizer's *packed* state: whatever layout
  makes its step cheapest (the hierarchical RNN lays all tensors end to end,
  see ``HierarchicalRNN.pack_state``). These defaults make the packed state
  the list of per-tensor state dicts, so every optimizer, learned or
  baseline, serves the same callers. (The Keras optimizer keeps per-tensor
  slots and calls ``compute_updates``: which variables get gradients can
  change between its calls.)
  """

  def initial_states(self, params, seed=None):
    """The per-tensor initial states of ``params``.

    ``seed``: None, or a ``[2]`` integer seed. With a seed, an optimizer
    whose initial state is random (the learned optimizers' initial learning
    rates) draws it statelessly, tensor ``i`` from the seed folded with
    ``i``: the state is a function of the seed alone, whatever the process
    ran before (meta-training's exact resume). Without one it draws from
    TensorFlow's random stream, as the original does.
    """
    if seed is None:
      return [self.initialize_state(p) for p in params]
    seed = tf.convert_to_tensor(seed, tf.int64)
    return [self.initialize_state(
        p, seed=tf.random.experimental.stateless_fold_in(seed, i))
            for i, p in enumerate(params)]

  def initialize_packed_state(self, params, seed=None):
    """The initial state of all tensors, packed (``seed``: see
    :meth:`initial_states`)."""
    return self.initial_states(params, seed)

  def pack_state(self, states):
    """Per-tensor state dicts (TF1 slot names) -> the packed state."""
    return list(states)

  def unpack_state(self, packed, params):
    """The packed state -> per-tensor state dicts (TF1 slot names)."""
    del params  # Only needed by layouts that do not keep tensor shapes.
    return list(packed)

  def compute_updates_packed(self, params, grads, packed, global_state,
                             mode_mt=None, update_steps_mt=None):
    """``compute_updates`` with the state in the packed layout."""
    return self.compute_updates(params, grads, packed, global_state,
                                mode_mt, update_steps_mt)


class TrainableOptimizer(PackedStateDefaults, tf.Module):
  """An optimizer whose own parameters are meta-trained.

  Subclasses either implement ``_compute_update(param, grad, state)`` (per
  tensor, as the coordinatewise optimizers do) or override
  ``compute_updates`` (the hierarchical RNN, which mixes information across
  tensors). ``state_keys`` are the original TF1 slot names.
  """

  def __init__(self, name, state_keys, use_attention=False,
               use_log_objective=False, obj_train_max_multiplier=-1,
               use_second_derivatives=True, use_numerator_epsilon=False,
               **kwargs):
    # The original metarun.py passes cell_cls to every optimizer; the TF1
    # base class swallowed it (and any other keyword). It is accepted and
    # ignored here; anything else is a typo and is reported.
    kwargs.pop("cell_cls", None)
    if kwargs:
      raise TypeError("Unknown optimizer arguments: {}".format(
          ", ".join(sorted(kwargs))))
    super().__init__(name=name)
    self.opt_name = name
    self.use_second_derivatives = use_second_derivatives
    self.state_keys = sorted(state_keys)
    self.use_attention = use_attention
    self.use_log_objective = use_log_objective
    self.obj_train_max_multiplier = obj_train_max_multiplier
    self.use_numerator_epsilon = use_numerator_epsilon
    if not hasattr(self, "meta"):
      self.meta = {}
    self._slots = {}
    self._global_state_vars = None

  # ---------------------------------------------------------------- variables
  def _meta_variable(self, tf1_name, initial_value):
    """Creates a meta-parameter registered under its TF1 name."""
    if not hasattr(self, "meta"):
      self.meta = {}
    var = tf.Variable(initial_value, dtype=tf.float32,
                      name=tf1_name.rsplit("/", 1)[-1])
    self.meta[tf1_name] = var
    return var

  def _register(self, named_variables):
    """Registers variables of a sub-module (dict TF1 name -> variable)."""
    if not hasattr(self, "meta"):
      self.meta = {}
    self.meta.update(named_variables)

  def tf1_variables(self):
    """Ordered mapping TF1 variable name (no ``:0``) -> ``tf.Variable``."""
    return collections.OrderedDict(sorted(self.meta.items()))

  @property
  def meta_variables(self):
    """The meta-parameters, sorted by TF1 name (the order of gradients)."""
    return list(self.tf1_variables().values())

  # -------------------------------------------------------------- pure math
  def initialize_state(self, var, seed=None):
    """Initial per-tensor state: dict state key -> tensor
    (``_initialize_state``). ``seed``: None, or a ``[2]`` integer seed for
    the stateless draws of a random initial state."""
    del var, seed  # No state by default.
    return {}

  def initialize_global_state(self):
    """Initial global (problem-level) state: list of tensors."""
    return []

  def _compute_update(self, param, grad, state):
    raise NotImplementedError

  def compute_updates(self, params, grads, states, global_state,
                      mode_mt=None, update_steps_mt=None):
    """One optimizer step on every tensor.

    Args:
      params: list of parameter tensors.
      grads: list of gradients (same shapes).
      states: list of state dicts (one per parameter).
      global_state: list of global state tensors.
      mode_mt: optional boolean (tensor): imitation mode. When true the
        parameters follow ``update_steps_mt`` (the teacher's steps) instead of
        the optimizer's own steps; the states still advance (original
        ``_compute_updates`` of the training code, "MODIFY").
      update_steps_mt: list of teacher steps, needed when ``mode_mt`` is given.

    Returns:
      (new_params, new_states, new_global_state, new_attend_params,
       update_steps) where ``update_steps[i] = params[i] - own_new_param[i]``.
    """
    new_params, new_states, steps = [], [], []
    for param, grad, state in zip(params, grads, states):
      own_new, new_state = self._compute_update(param, grad, state)
      step = param - own_new
      steps.append(step)
      new_params.append(own_new)
      new_states.append(new_state)
    new_params = self._follow_teacher(params, new_params, mode_mt,
                                      update_steps_mt)
    for new_param, new_state in zip(new_params, new_states):
      if "true_param" in new_state:
        new_state["true_param"] = new_param
    return new_params, new_states, list(global_state), list(new_params), steps

  @staticmethod
  def _follow_teacher(params, own_new_params, mode_mt, update_steps_mt):
    """In imitation mode, ``param - teacher_step`` replaces the own update."""
    if mode_mt is None or update_steps_mt is None:
      return own_new_params
    return [tf.where(mode_mt, p - t, own)
            for p, t, own in zip(params, update_steps_mt, own_new_params)]

  def scale_objective(self, total_obj, all_objs, initial_obj,
                      obj_scale_eps=1e-6):
    """Normalises the meta-objective by the initial objective (l.481-504).

    With ``use_log_objective`` it is the mean over the unroll of
    ``log(obj_t / (obj_0 + eps) + eps)`` (or ``log((obj_t + eps)/(obj_0 + eps))``
    with ``use_numerator_epsilon``); otherwise ``total_obj / (obj_0 + eps)``.
    """
    if self.use_log_objective:
      if self.use_numerator_epsilon:
        scaled = (all_objs + obj_scale_eps) / (initial_obj + obj_scale_eps)
        log_scaled = tf.math.log(scaled)
      else:
        scaled = all_objs / (initial_obj + obj_scale_eps)
        log_scaled = tf.math.log(scaled + obj_scale_eps)
      return tf.reduce_mean(log_scaled)
    return total_obj / (initial_obj + obj_scale_eps)

  # ------------------------------------------------------- black-box usage
  def build(self, var_list):
    """Creates the slots (per-variable state) and the global state variables.

    Equivalent of the original ``_create_slots`` plus the ``global_state``
    variable of ``apply_gradients``. Slot values start from
    :meth:`initialize_state`; ``true_param`` starts at the variable's value.
    """
    with tf.init_scope():
      for var in var_list:
        key = var.ref()
        if key in self._slots:
          continue
        self._slots[key] = state_variables(
            self.initialize_state(tf.convert_to_tensor(var)), self.opt_name)
      if self._global_state_vars is None:
        self._global_state_vars = [
            tf.Variable(g, trainable=False, name="global_state")
            for g in self.initialize_global_state()]

  def get_slot(self, var, name):
    return self._slots[var.ref()][name]

  def get_slot_names(self):
    return list(self.state_keys)

  @property
  def global_state_variables(self):
    return list(self._global_state_vars or [])

  def reset_slots(self):
    """Re-initialises every slot from its variable's current value and the
    global state (e.g. before a new optimizee run)."""
    for key, slots in self._slots.items():
      assign_state(slots, self.initialize_state(tf.convert_to_tensor(
          key.deref())))
    for gvar, g in zip(self.global_state_variables,
                       self.initialize_global_state()):
      gvar.assign(g)

  def apply_gradients(self, grads_and_vars):
    """Updates variables in place, as the original ``apply_gradients``.

    All variables are updated together (the hierarchical RNN shares
    information across them) and the global state advances once. With
    attention the variable receives the attended location and the
    ``true_param`` slot the real one. Returns the list of real parameters.
    """
    grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
    if not grads_and_vars:
      raise ValueError("No gradients provided for any variable.")
    var_list = [v for _, v in grads_and_vars]
    self.build(var_list)
    grads = [tf.convert_to_tensor(g) for g, _ in grads_and_vars]
    states = [read_state(self._slots[v.ref()]) for v in var_list]
    params = [tf.convert_to_tensor(v) for v in var_list]
    global_state = [tf.convert_to_tensor(g) for g in self.global_state_variables]
    new_params, new_states, new_global, new_attend, _ = self.compute_updates(
        params, grads, states, global_state)
    for gvar, value in zip(self.global_state_variables, new_global):
      gvar.assign(value)
    for var, new_state, new_attend_param in zip(var_list, new_states,
                                                new_attend):
      assign_state(self._slots[var.ref()], new_state)
      var.assign(new_attend_param if self.use_attention else
                 new_state.get("true_param", new_attend_param))
    return [self._slots[v.ref()]["true_param"] if "true_param" in
            self._slots[v.ref()] else v for v in var_list]
