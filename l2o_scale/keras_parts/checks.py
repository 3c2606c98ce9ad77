"""The arguments of :class:`l2o_scale.keras_optimizer.LearnedOptimizer`
checked when it is built, and what refuses a step: each bad value is one
``ValueError`` or ``TypeError`` line naming the argument."""

import numpy as np
import tensorflow as tf

from l2o_scale.steps import transform

# The learned optimizer's pure step interface the Keras optimizer calls.
STEP_INTERFACE = ("initialize_state", "initialize_global_state",
                  "compute_updates")

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


def check_learned_optimizer(learned_optimizer):
  """TypeError unless ``learned_optimizer`` has the pure step interface."""
  for method in STEP_INTERFACE:
    if not callable(getattr(learned_optimizer, method, None)):
      raise TypeError("learned_optimizer must implement {} (a learned "
                      "optimizer from optimizer/), got {!r}".format(
                          method, type(learned_optimizer).__name__))


def check_transforms(learned_optimizer, schedule_head, hold_zero_gradients,
                     weight_decay, learning_rate):
  """Refuses a change of the learned step (a schedule head, held
  coordinates, a weight decay, a learning rate other than 1) for an
  optimizer that attends (:func:`l2o_scale.steps.transform.check_compatible`
  says why)."""
  if schedule_head is not None:
    transform.check_compatible(learned_optimizer)
  if hold_zero_gradients or weight_decay or not (
      isinstance(learning_rate, (int, float)) and learning_rate == 1):
    transform.check_compatible(learned_optimizer)


def is_one(learning_rate):
  """Whether ``learning_rate`` is the number 1 (an unscaled step)."""
  return (isinstance(learning_rate, (int, float, np.number)) and
          not isinstance(learning_rate, bool) and learning_rate == 1)


def coordinates_per_pass(value):
  """``value`` as an int, or None; ValueError unless it is a positive
  integer or None."""
  if value is not None and (
      isinstance(value, bool) or
      not isinstance(value, (int, np.integer)) or value < 1):
    raise ValueError("coordinates_per_pass must be a positive integer or "
                     "None, got {!r}".format(value))
  return None if value is None else int(value)


def check_can_step(meta_parameters_pending):
  """Refuses a step of an optimizer whose meta-parameters are not loaded
  yet, or under a strategy with several replicas."""
  if meta_parameters_pending:
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
