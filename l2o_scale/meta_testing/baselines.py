"""Hand-designed baseline optimizers of the evaluation: SGD, Adam, Adagrad.

The original ``L2O-Scale-Evaluation/metatest.py`` (l.366-380) compared the
learned optimizer with ``tf.train.GradientDescentOptimizer(0.001)``,
``tf.train.AdamOptimizer(0.0001)`` and ``tf.train.AdagradOptimizer(0.00001)``.
Keras 3 optimizers differ from those TF1 ones in small ways (Keras Adagrad
starts its accumulator at 0 and adds an epsilon; Keras Adam puts epsilon
differently), so the baselines here re-implement the TF1 update rules
(``training_ops.cc``: ApplyGradientDescent, ApplyAdam, ApplyAdagrad) in plain
TF ops.

They expose the same *pure* interface as the learned optimizers
(:class:`optimizer.trainable_optimizer.TrainableOptimizer`):
``initialize_state(var)``, ``initialize_global_state()`` and
``compute_updates(params, grads, states, global_state)``, so that
:func:`l2o_scale.meta_testing.testing.test_optimizer` runs every optimizer inside the same
compiled loop and their speeds are comparable.
"""

import tensorflow as tf

from l2o_scale.steps import tf1_optimizers
from optimizer import trainable_optimizer

# Learning rates of the original evaluation (metatest.py l.366-380).
EVAL_LEARNING_RATES = {"SGD": 1e-3, "Adam": 1e-4, "Adagrad": 1e-5}


class _PureOptimizer(trainable_optimizer.PackedStateDefaults):
  """Shared plumbing: slot names and the 5-tuple of ``compute_updates``."""

  state_keys = []
  use_attention = False

  def __init__(self, learning_rate):
    self.learning_rate = float(learning_rate)

  def get_slot_names(self):
    """TF1 slot names (what ``records`` of ``test_optimizer`` stores)."""
    return list(self.state_keys)

  def initialize_state(self, var, seed=None):
    del var, seed  # Deterministic, no state.
    return {}

  def initialize_global_state(self):
    return []

  def _update(self, param, grad, state, global_state):
    raise NotImplementedError

  def _advance_global_state(self, global_state):
    return list(global_state)

  def compute_updates(self, params, grads, states, global_state,
                      mode_mt=None, update_steps_mt=None):
    """One step on every tensor; same return values as the learned optimizers."""
    del mode_mt, update_steps_mt  # Imitation is for learned optimizers.
    new_params, new_states, steps = [], [], []
    for param, grad, state in zip(params, grads, states):
      step, new_state = self._update(param, grad, state, global_state)
      new_params.append(param - step)
      new_states.append(new_state)
      steps.append(step)
    new_global = self._advance_global_state(global_state)
    return new_params, new_states, new_global, list(new_params), steps

  def __repr__(self):
    return "{}(learning_rate={})".format(type(self).__name__,
                                         self.learning_rate)


class GradientDescent(_PureOptimizer):
  """``tf.train.GradientDescentOptimizer``: ``p -= lr * g``."""

  def _update(self, param, grad, state, global_state):
    return self.learning_rate * grad, {}


class Adam(_PureOptimizer):
  """``tf.train.AdamOptimizer`` (TF1 ApplyAdam).

  ``lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`` and
  ``p -= lr_t * m / (sqrt(v) + epsilon)``; the powers ``beta^t`` are the
  global (non-slot) state, as TF1 kept them in ``beta1_power``/``beta2_power``.
  """

  state_keys = ["m", "v"]

  def __init__(self, learning_rate=EVAL_LEARNING_RATES["Adam"], beta1=0.9,
               beta2=0.999, epsilon=1e-8):
    super().__init__(learning_rate)
    self.beta1 = float(beta1)
    self.beta2 = float(beta2)
    self.epsilon = float(epsilon)

  def initialize_state(self, var, seed=None):
    del seed  # Deterministic.
    zeros = tf.zeros_like(tf.convert_to_tensor(var, dtype=tf.float32))
    return {"m": zeros, "v": zeros}

  def initialize_global_state(self):
    # TF1 creates the powers at beta (the value used by the first step).
    return [tf.constant(self.beta1), tf.constant(self.beta2)]

  def _update(self, param, grad, state, global_state):
    beta1_power, beta2_power = global_state
    step, m, v = tf1_optimizers.adam_step(
        grad, state["m"], state["v"], beta1_power, beta2_power,
        self.learning_rate, self.beta1, self.beta2, self.epsilon)
    return step, {"m": m, "v": v}

  def _advance_global_state(self, global_state):
    return [global_state[0] * self.beta1, global_state[1] * self.beta2]


class Adagrad(_PureOptimizer):
  """``tf.train.AdagradOptimizer`` (TF1 ApplyAdagrad, no epsilon).

  The accumulator starts at ``initial_accumulator_value`` (TF1 default 0.1)
  and ``p -= lr * g / sqrt(accumulator)`` after adding ``g^2``.
  """

  state_keys = ["accumulator"]

  def __init__(self, learning_rate=EVAL_LEARNING_RATES["Adagrad"],
               initial_accumulator_value=0.1):
    super().__init__(learning_rate)
    self.initial_accumulator_value = float(initial_accumulator_value)

  def initialize_state(self, var, seed=None):
    del seed  # Deterministic.
    var = tf.convert_to_tensor(var, dtype=tf.float32)
    return {"accumulator": tf.fill(tf.shape(var),
                                   self.initial_accumulator_value)}

  def _update(self, param, grad, state, global_state):
    acc = state["accumulator"] + tf.square(grad)
    return self.learning_rate * grad * tf.math.rsqrt(acc), {"accumulator": acc}


BASELINES = {"SGD": GradientDescent, "Adam": Adam, "Adagrad": Adagrad}


def build(name, learning_rate=None):
  """The baseline ``name`` (SGD, Adam, Adagrad) with the evaluation's LR."""
  if name not in BASELINES:
    raise ValueError("Unknown baseline optimizer {!r}; choose one of {}".format(
        name, ", ".join(sorted(BASELINES))))
  lr = EVAL_LEARNING_RATES[name] if learning_rate is None else learning_rate
  return BASELINES[name](learning_rate=lr)
