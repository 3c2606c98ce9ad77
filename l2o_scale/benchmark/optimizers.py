"""The optimizer under test and the tuned baselines.

The optimizer under test is given by a spec string (:func:`factory`):

* the name of a shipped learned optimizer (``l2o-scale``; ``python -m
  l2o_scale.pretrained`` lists them), built as
  ``LearnedOptimizer.pretrained(name, total_steps=budget)`` (the card's
  long-run settings for a run of the benchmark's budget);
* ``checkpoint:PATH`` (or a path that exists): a checkpoint written by
  ``metarun.py``, ``LearnedOptimizer.from_checkpoint(PATH)``;
* ``KERAS_NAME[:LR]``: a Keras optimizer by its identifier, e.g.
  ``adam:1e-3`` (constant learning rate);
* ``import:package.module.attr``: a callable returning a Keras optimizer,
  called with ``total_steps=budget`` when it accepts that argument.

A learned optimizer's spec (a shipped name or a checkpoint) may end in
``+hold_zero_gradients``: the same optimizer with
``LearnedOptimizer(hold_zero_gradients=True)`` (no step where a step's
gradient is exactly zero, :mod:`l2o_scale.steps.zero_gradient_hold`).

The baselines (:class:`Baseline`) are Adam, AdamW and SGD with momentum 0.9,
each with a cosine decay of the learning rate to 0 over the budget. The
decay's base value lives in a variable, so one compiled training step serves
every learning rate of the grid and every seed.
"""

import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import os

import keras
import tensorflow as tf

from l2o_scale import pretrained as shipped

# The suffix of a learned optimizer's spec that holds coordinates without a
# gradient (module doc).
HOLD_SUFFIX = "+hold_zero_gradients"

HALF_DECADES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)


@keras.saving.register_keras_serializable(package="l2o_scale_benchmark")
class CosineToZero(keras.optimizers.schedules.LearningRateSchedule):
  """``base * (1 + cos(pi * step / total_steps)) / 2``; ``base`` is a
  variable (:meth:`set_base`), so changing it needs no retracing."""

  def __init__(self, total_steps, base=1e-3):
    self.total_steps = int(total_steps)
    self.base = tf.Variable(float(base), trainable=False, dtype=tf.float32)

  def set_base(self, value):
    self.base.assign(float(value))

  def __call__(self, step):
    frac = tf.minimum(tf.cast(step, tf.float32) / self.total_steps, 1.)
    return self.base * 0.5 * (1. + tf.cos(math.pi * frac))

  def get_config(self):
    return {"total_steps": self.total_steps,
            "base": float(self.base.numpy())}


def next_half_decade(lr, up=True):
  """The next value of the 1, 3, 10, 30, ... ladder above (below) ``lr``,
  a value of that ladder."""
  exponent = math.floor(math.log10(lr) + 1e-9)
  mantissa = lr / 10 ** exponent
  if up:
    value = 3 * 10 ** exponent if mantissa < 2 else 10 ** (exponent + 1)
  else:
    value = 10 ** exponent / 10 * 3 if mantissa < 2 else 10 ** exponent
  return float("{:.1g}".format(value))


@dataclasses.dataclass(frozen=True)
class Baseline:
  """A baseline: its name, its learning-rate grid and its Keras class."""
  name: str
  label: str
  grid: tuple
  small_grid: tuple

  def make(self, total_steps):
    """A fresh optimizer and its schedule (``schedule.set_base(lr)``)."""
    schedule = CosineToZero(total_steps)
    if self.name == "adam":
      return keras.optimizers.Adam(schedule), schedule
    if self.name == "adamw":
      return keras.optimizers.AdamW(schedule), schedule
    if self.name == "sgd":
      return keras.optimizers.SGD(schedule, momentum=0.9), schedule
    raise ValueError("unknown baseline {!r}".format(self.name))


BASELINES = (
    Baseline("adam", "Adam", HALF_DECADES[:5], (1e-3, 1e-2)),
    Baseline("adamw", "AdamW (weight decay 0.004)", HALF_DECADES[:5],
             (1e-3, 1e-2)),
    Baseline("sgd", "SGD, momentum 0.9", HALF_DECADES[2:7], (1e-2, 1e-1)),
)


def baseline(name):
  for b in BASELINES:
    if b.name == name:
      return b
  raise ValueError("unknown baseline {!r}; the baselines: {}".format(
      name, ", ".join(b.name for b in BASELINES)))


def _keras_optimizer(identifier, lr):
  try:
    optimizer = keras.optimizers.get(identifier)
  except ValueError:
    return None
  if lr is not None:
    optimizer.learning_rate = float(lr)
  return optimizer


def _from_import(path, total_steps):
  module, _, attr = path.rpartition(".")
  if not module:
    raise ValueError("import:{} is not a dotted path module.attr".format(path))
  target = getattr(importlib.import_module(module), attr)
  try:
    accepts = "total_steps" in inspect.signature(target).parameters
  except (TypeError, ValueError):
    accepts = False
  return target(total_steps=total_steps) if accepts else target()


def _split_hold(spec):
  """(the spec without :data:`HOLD_SUFFIX`, whether it ended in it)."""
  if spec.endswith(HOLD_SUFFIX):
    return spec[:-len(HOLD_SUFFIX)], True
  return spec, False


def identity(spec):
  """What names the optimizer of ``spec`` in a stored run's key: the spec,
  and for a shipped optimizer also a digest of its checkpoint and card
  settings, so that a changed shipped optimizer (new meta-parameters, new
  settings for long runs) never reuses the runs of the old one."""
  learned, hold = _split_hold(spec)
  if hold:
    return identity(learned) + HOLD_SUFFIX
  if spec not in shipped.names():
    return spec
  digest = hashlib.sha1(json.dumps(shipped.long_run_settings(spec),
                                   sort_keys=True).encode())
  prefix = shipped.checkpoint(spec)
  for suffix in (".index", ".data-00000-of-00001"):
    with open(prefix + suffix, "rb") as f:
      digest.update(f.read())
  return "{}@{}".format(spec, digest.hexdigest()[:12])


def factory(spec):
  """``total_steps -> a fresh Keras optimizer`` for the spec (module doc).

  Raises ``ValueError`` with one line for a spec that names nothing."""
  # Imported here: it restores TF checkpoints and pulls in the optimizer.
  from l2o_scale.keras_optimizer import LearnedOptimizer  # pylint: disable=g-import-not-at-top
  learned, hold = _split_hold(spec)
  if learned in shipped.names():
    return lambda total_steps: LearnedOptimizer.pretrained(
        learned, total_steps=total_steps, hold_zero_gradients=hold)
  if learned.startswith("checkpoint:") or os.path.exists(learned):
    path = (learned.split(":", 1)[1] if learned.startswith("checkpoint:")
            else learned)
    return lambda total_steps: LearnedOptimizer.from_checkpoint(
        path, hold_zero_gradients=hold)
  if hold:
    raise ValueError("--optimizer={!r}: {} goes with a learned optimizer (a "
                     "shipped name or checkpoint:PATH) only".format(
                         spec, HOLD_SUFFIX))
  if spec.startswith("import:"):
    return lambda total_steps: _from_import(spec[len("import:"):],
                                            total_steps)
  identifier, _, lr = spec.partition(":")
  try:
    lr = float(lr) if lr else None
  except ValueError:
    lr = "bad"
  if lr != "bad" and _keras_optimizer(identifier, lr) is not None:
    return lambda total_steps: _keras_optimizer(identifier, lr)
  raise ValueError(
      "--optimizer={!r} names no optimizer: give a shipped name ({}), "
      "checkpoint:PATH, a Keras optimizer as NAME[:LR] (e.g. adam:1e-3) or "
      "import:module.attr".format(spec, ", ".join(shipped.names())))
