"""The optimizer state of all of a Keras model's variables, as Keras
optimizer variables of :class:`l2o_scale.keras_optimizer.LearnedOptimizer`.

The state is kept in the learned optimizer's packed layout
(``initialize_packed_state``: for the hierarchical RNN a few [k, N] blocks
with the coordinates of all variables end to end; the TF1 slots of
``optimizer/trainable_optimizer.py`` and ``hierarchical_rnn.py``: RNN
states, gradient accumulators, log learning rates, ``true_param``), one
Keras variable per block, then the global RNN state. Why: one variable per
TF1 slot of every tensor meant ~14 variables per model variable, each
repacked into that layout and back at every step (a transpose of the RNN
state among them), and thousands of captured variables in the traced step
of a large model. Being Keras optimizer variables, they are saved with the
optimizer and work inside the compiled (``tf.function``/XLA) train step of
``fit``.

On large models the step runs in passes (:func:`plan_passes`), each with
its own set of blocks, so that only one pass's intermediates exist at a
time.
"""

import tensorflow as tf

from l2o_scale.meta_testing import inner_step


def plan_passes(sizes, limit):
  """(first, last, start, end) of each pass of the step over variables of
  ``sizes`` coordinates: consecutive variables ``first`` to ``last - 1``,
  coordinates ``start`` to ``end - 1`` of the packed state, at most
  ``limit`` coordinates each (a larger variable alone). One pass where
  ``limit`` is None or all variables fit in one."""
  if not limit or sum(sizes) <= limit:
    return [(0, len(sizes), 0, sum(sizes))]
  passes, first, start, count = [], 0, 0, 0
  for t, size in enumerate(sizes):
    if count and count + size > limit:
      passes.append((first, t, start, start + count))
      first, start, count = t, start + count, 0
    count += size
  passes.append((first, len(sizes), start, start + count))
  return passes


class PackedState(object):
  """The packed state's blocks and the global state of one Keras optimizer.

  Args:
    optimizer: the Keras optimizer whose variables they are (its
      ``add_variable``, ``assign`` and ``iterations``).
    learned_optimizer: the learned optimizer with the packed interface
      (``initialize_packed_state``, ``join_packed``, ``packed_columns``,
      ``initialize_global_state``).
  """

  def __init__(self, optimizer, learned_optimizer):
    self._optimizer = optimizer
    self._learned = learned_optimizer
    self.passes = []  # (first, last, start, end) of each pass
    self._structures = []  # per pass: the packed structure, without values
    self.pass_slots = []  # per pass: its blocks, in tf.nest order
    self.packed_slots = []  # all passes' blocks
    self.global_slots = []
    self._variables = []  # the model's variables, in the optimizer's order
    self._values_at_first_step = False

  def build(self, var_list, limit):
    """Creates the blocks of each pass (:func:`plan_passes` with ``limit``)
    and the global state, from the variables' values where they can be
    read."""
    with tf.init_scope():
      values = [_value_now(v) for v in var_list]
      # With attention the state holds the variables' values (true_param):
      # those not readable yet are taken at the first step (read).
      self._values_at_first_step = (
          inner_step.uses_attention(self._learned) and
          any(value is None for value in values))
      values = [tf.zeros(v.shape) if value is None else value
                for v, value in zip(var_list, values)]
      self._build_passes(values, limit)
      self.global_slots = []
      for j, g in enumerate(self._learned.initialize_global_state()):
        g = tf.convert_to_tensor(g)
        self.global_slots.append(self._optimizer.add_variable(
            shape=tuple(g.shape), dtype="float32",
            initializer=_constant_initializer(g),
            name="global_state{}".format(j)))
    self._variables = list(var_list)

  def _build_passes(self, values, limit):
    """Each pass's blocks, created from its pass's initial state (drawn
    variable by variable in order, as in one pass), so that building never
    holds more than one pass's initial state beside the variables."""
    self.passes = plan_passes([int(v.shape.num_elements()) for v in values],
                              limit)
    self._structures, self.pass_slots, self.packed_slots = [], [], []
    several = len(self.passes) > 1
    for index, (first, last, _, _) in enumerate(self.passes):
      part = self._learned.initialize_packed_state(values[first:last])
      prefix = "state{}_".format(index) if several else "state_"
      slots = [self._optimizer.add_variable(
          shape=tuple(leaf.shape), dtype="float32",
          initializer=_constant_initializer(leaf), name=prefix + name)
               for name, leaf in _named_leaves(part)]
      # The structure only: the initial tensors themselves would stay
      # alive beside the variables, a second copy of the state.
      self._structures.append(tf.nest.map_structure(lambda _: 0, part))
      self.pass_slots.append(slots)
      self.packed_slots += slots

  def variable_count(self):
    """How many of the optimizer's variables are this state's (the last
    ones: Keras' own come first)."""
    return len(self.packed_slots) + len(self.global_slots)

  def pass_variables(self, index):
    """The packed structure of pass ``index``'s blocks (unread)."""
    return tf.nest.pack_sequence_as(self._structures[index],
                                    self.pass_slots[index])

  def all_pass_variables(self):
    return [self.pass_variables(i) for i in range(len(self.pass_slots))]

  def read(self, index):
    """The packed state of pass ``index``, read from its blocks."""
    packed = tf.nest.map_structure(tf.convert_to_tensor,
                                   self.pass_variables(index))
    if self._values_at_first_step:
      first, last = self.passes[index][:2]
      at_first = tf.equal(self._optimizer.iterations, 0)
      packed["true_param"] = [
          tf.where(at_first, tf.cast(var, tf.float32), saved)
          for var, saved in zip(self._variables[first:last],
                                packed["true_param"])]
    return packed

  def assign(self, index, packed):
    for slot, value in zip(self.pass_slots[index], tf.nest.flatten(packed)):
      self._optimizer.assign(slot, value)

  def read_all(self):
    """The packed state of all variables (the passes' states joined)."""
    parts = [self.read(i) for i in range(len(self.pass_slots))]
    return parts[0] if len(parts) == 1 else self._learned.join_packed(parts)

  def assign_all(self, packed):
    """Writes the packed state of all variables into the passes' blocks."""
    if len(self.passes) == 1:
      self.assign(0, packed)
      return
    for index, columns in enumerate(self.passes):
      self.assign(index, self._learned.packed_columns(packed, *columns))

  def read_global(self):
    return [tf.convert_to_tensor(v) for v in self.global_slots]

  def assign_global(self, values):
    for slot, value in zip(self.global_slots, values):
      self._optimizer.assign(slot, value)

  def reset(self, values):
    """The initial state of variables of ``values`` (float32 tensors)."""
    for index, (first, last, _, _) in enumerate(self.passes):
      self.assign(index, self._learned.initialize_packed_state(
          values[first:last]))
    for slot, g in zip(self.global_slots,
                       self._learned.initialize_global_state()):
      slot.assign(g)


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
