"""``LearnedAdamW``: the controlled AdamW rule as a Keras 3 optimizer.

``model.compile(optimizer=LearnedAdamW.pretrained("l2o-adamw",
total_steps=N))`` trains any Keras model with AdamW whose learning rate and
weight decay a learned controller sets per tensor and step
(:mod:`l2o_scale.steps.controlled_adamw`, which holds the rule; this class
holds its state, as Keras's ``adamw.py`` holds Adam's over the base
optimizer). ``total_steps`` is the run's length: the base learning rate
decays by a cosine to zero over it (``keras.optimizers.schedules.
CosineDecay``) and the controller reads the fraction done; after it the
learning rate stays at zero.

With no controller (``controller=None``) the optimizer is Keras's
``AdamW(CosineDecay(learning_rate, total_steps), weight_decay=...)`` step
for step.

State, created once in :meth:`build` and saved with the model: Adam's two
moments per variable (Keras's ``momentum`` and ``velocity``), the
controller's parameters, and its running inputs (a global and a per-tensor
state). ``get_config`` holds every argument, the controller's parameters
included, so a ``.keras`` file restores the optimizer completely.

Only the default distribution strategy is supported: the controller reads
all variables at once. Variables are float32.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from l2o_scale import pretrained
from l2o_scale.steps import controlled_adamw as rule

# The base settings of a controller-free LearnedAdamW: Keras AdamW's
# defaults (the shipped optimizer's card holds its own, chosen on its
# validation tasks).
DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_WEIGHT_DECAY = 0.004
CONTROLLER_FILE = "controller.npz"


def load_controller(path):
  """The controller's parameters saved at ``path`` (``.npz`` with
  ``theta``); ValueError with one line naming the file where it is not
  one."""
  if not os.path.isfile(path):
    raise FileNotFoundError("no controller file {}".format(path))
  try:
    with np.load(path, allow_pickle=False) as saved:
      theta = saved["theta"]
  except (OSError, ValueError, KeyError, EOFError) as e:
    raise ValueError("{} is not a saved controller ({})".format(
        path, str(e).splitlines()[0] if str(e) else type(e).__name__)) \
        from None
  except Exception as e:  # zipfile.BadZipFile and kin: a damaged file
    raise ValueError("{} is not a saved controller ({})".format(
        path, type(e).__name__)) from None
  return rule.check_theta(theta, path)


def save_controller(path, theta):
  np.savez(path, theta=rule.check_theta(theta))


def _check_total_steps(total_steps):
  if (isinstance(total_steps, bool) or
      not isinstance(total_steps, (int, np.integer)) or total_steps < 1):
    raise ValueError("LearnedAdamW needs total_steps, the run's length in "
                     "steps (a positive integer), got {!r}".format(
                         total_steps))
  return int(total_steps)


@keras.saving.register_keras_serializable(package="l2o_scale")
class LearnedAdamW(keras.optimizers.Optimizer):
  """AdamW with a learned per-tensor, per-step controller of its learning
  rate and weight decay.

  Args:
    total_steps: the run's length in steps (the cosine decay's length and
      the controller's progress input).
    controller: None (no controller: AdamW with the cosine decay), the
      controller's parameters (:data:`~l2o_scale.steps.controlled_adamw.
      NUM_PARAMETERS` numbers) or the path of a saved controller.
    learning_rate: the base learning rate the cosine decays from.
    weight_decay: the base decoupled weight decay (Keras's meaning: each
      step takes ``weight_decay * learning_rate`` of the value); the
      controller multiplies both per tensor.
    beta_1, beta_2, epsilon: Adam's, with Keras's defaults.
    **kwargs: the Keras base optimizer's (``clipnorm``, ``name``, ...).
  """

  def __init__(self, total_steps, controller=None,
               learning_rate=DEFAULT_LEARNING_RATE,
               weight_decay=DEFAULT_WEIGHT_DECAY, beta_1=0.9, beta_2=0.999,
               epsilon=1e-7, name="learned_adamw", **kwargs):
    total_steps = _check_total_steps(total_steps)
    settings = rule.Settings(learning_rate, weight_decay, beta_1, beta_2,
                             epsilon)
    if isinstance(controller, str):
      theta = load_controller(controller)
    elif controller is None:
      theta = np.zeros(rule.NUM_PARAMETERS, np.float32)
    else:
      theta = rule.check_theta(controller, "controller")
    super().__init__(
        learning_rate=keras.optimizers.schedules.CosineDecay(
            settings.learning_rate, total_steps),
        weight_decay=settings.weight_decay or None, name=name, **kwargs)
    self.total_steps = total_steps
    self.settings = settings
    self._theta_value = theta

  @property
  def beta_1(self):
    return self.settings.beta_1

  @property
  def beta_2(self):
    return self.settings.beta_2

  @property
  def epsilon(self):
    return self.settings.epsilon

  @property
  def controller(self):
    """The controller's parameters (float32 numpy [NUM_PARAMETERS])."""
    if self.built:
      return self._theta.numpy()
    return self._theta_value.copy()

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._momentums, self._velocities = self.add_optimizer_variables(
        var_list, ["momentum", "velocity"])
    theta = self._theta_value
    self._theta = self.add_variable(
        (rule.NUM_PARAMETERS,), name="controller",
        initializer=lambda shape, dtype=None: tf.constant(theta))
    self._global_state = self.add_variable(
        (rule.GLOBAL_STATE_SIZE,), initializer="zeros",
        name="controller_global_state")
    self._tensor_state = self.add_variable(
        (len(var_list), rule.TENSOR_STATE_SIZE), initializer="zeros",
        name="controller_tensor_state")

  def _apply_weight_decay(self, variables):
    # The decay is part of the controlled step (per tensor, scaled by the
    # controller): see _backend_update_step.
    return

  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    variables = [v.value if isinstance(v, keras.Variable) else v
                 for v in trainable_variables]
    indices = [self._get_variable_index(v) for v in trainable_variables]
    grads = [tf.convert_to_tensor(g) for g in grads]
    ms = [self._momentums[i] for i in indices]
    vs = [self._velocities[i] for i in indices]
    tensor_state = tf.gather(self._tensor_state, indices)
    lr = tf.cast(self._get_current_learning_rate(), tf.float32)
    new_params, new_ms, new_vs, (new_global, new_tensor), _ = rule.step(
        self._theta, self.settings, [tf.convert_to_tensor(v)
                                     for v in variables],
        grads, [tf.convert_to_tensor(m) for m in ms],
        [tf.convert_to_tensor(v) for v in vs],
        (tf.convert_to_tensor(self._global_state), tensor_state),
        self._iterations, self.total_steps, lr=lr,
        decays=[self._use_weight_decay(v) for v in trainable_variables])
    for var, m, v, new_p, new_m, new_v in zip(variables, ms, vs, new_params,
                                              new_ms, new_vs):
      self.assign(m, new_m)
      self.assign(v, new_v)
      self.assign(var, new_p)
    self._global_state.assign(new_global)
    self._tensor_state.assign(tf.tensor_scatter_nd_update(
        tf.convert_to_tensor(self._tensor_state),
        [[i] for i in indices], new_tensor))

  def get_config(self):
    config = super().get_config()
    config.pop("learning_rate", None)
    config.update(total_steps=self.total_steps,
                  controller=[float(x) for x in self.controller],
                  **{k: v for k, v in self.settings.as_dict().items()})
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)

  @classmethod
  def pretrained(cls, name, total_steps, **kwargs):
    """The shipped optimizer ``name`` (``python -m l2o_scale.pretrained``
    lists them): its controller and the base settings of its card, for a
    run of ``total_steps`` steps; ``kwargs`` override the card's base
    settings or give Keras options."""
    shipped = pretrained.controller(name)
    settings = dict(shipped.settings)
    settings.update(kwargs)
    return cls(total_steps=total_steps, controller=shipped.theta,
               **settings)
