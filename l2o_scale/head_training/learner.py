"""The evolution-strategies learner of the schedule head's and the
controller's meta-training (learned_optimization's ``learner``): the
parameters it moves, Adam's moments, the estimates done and the random
state the estimates are drawn from, kept in one structure that one
trainer owns, saved and restored whole (a resume draws exactly what the
uninterrupted run would), and the step that moves them (TF1 Adam's rule,
:func:`l2o_scale.steps.tf1_optimizers.adam_update`).
"""

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf

from l2o_scale.runs import atomic_file
from l2o_scale.steps import tf1_optimizers


@dataclasses.dataclass
class LearnerState:
  """What a resumed meta-training needs to go on exactly."""
  theta: np.ndarray  # the meta-parameters
  adam_m: np.ndarray
  adam_v: np.ndarray
  done: int  # estimates applied
  rng: np.random.Generator  # the draws of the estimates

  @classmethod
  def start(cls, theta, seed):
    """A fresh run from ``theta``, its draws seeded with ``seed``."""
    return cls(theta, np.zeros_like(theta), np.zeros_like(theta), 0,
               np.random.default_rng(seed))

  @classmethod
  def from_arrays(cls, saved):
    """The state saved by :meth:`arrays` (an open ``np.load``); KeyError,
    TypeError or ValueError where a field is missing or malformed."""
    rng = np.random.default_rng()
    rng.bit_generator.state = json.loads(str(saved["rng"]))
    return cls(saved["theta"], saved["adam_m"], saved["adam_v"],
               int(saved["done"]), rng)

  def arrays(self):
    """The fields as ``np.savez`` keywords."""
    return dict(theta=self.theta, adam_m=self.adam_m, adam_v=self.adam_v,
                done=self.done, rng=json.dumps(self.rng.bit_generator.state))

  def step(self, gradient, learning_rate):
    """Applies one estimate's ``gradient``: one Adam step of ``theta``."""
    theta, m, v = tf1_optimizers.adam_update(
        tf.constant(self.theta), tf.constant(gradient, tf.float32),
        tf.constant(self.adam_m), tf.constant(self.adam_v), self.done + 1,
        learning_rate)
    self.theta, self.adam_m, self.adam_v = theta.numpy(), m.numpy(), v.numpy()
    self.done += 1


def keep_settings(train_dir, file_name, settings, saved, what):
  """A run's settings, kept beside its state: written to ``file_name`` in
  ``train_dir`` when the run starts (``saved`` None); at a resume, a
  ValueError with one line naming each flag whose value differs from the
  ``saved`` ones (``what``: the kind of training, for the message)."""
  if saved is None:
    with atomic_file.replace(os.path.join(train_dir, file_name)) as f:
      json.dump(settings, f, indent=1, sort_keys=True)
    return
  differ = sorted(k for k in set(saved) | set(settings)
                  if saved.get(k) != settings.get(k))
  if differ:
    raise ValueError(
        "{} holds a {} with other settings ({}); resume it with the same "
        "flags or choose another --train_dir".format(
            train_dir, what, ", ".join("--{}={}".format(k, saved.get(k))
                                       for k in differ)))
