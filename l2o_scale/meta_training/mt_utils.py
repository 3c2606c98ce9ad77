"""Teacher trajectories for imitation learning ("MT" mode).

Port of ``L2O-Scale-Training/mt_utils.py`` (l.15-95): starting from the
meta-iteration's initial parameters, a hand-designed optimizer (Adam with
learning rate 0.01 by default; RMSProp and Nesterov momentum also available,
as in the original) is run on the same mini datasets and batches that the
learned optimizer will see; its per-step parameter changes are the
imitation targets. With ``k > 1`` the teacher takes ``k`` steps per target
step. The teacher's optimizer state is reset once per call and carries over
between unrolls, as in the original.

The original ran this in a separate TF1 graph and session; here each teacher
step is a ``tf.function``.
"""

import numpy as np
import tensorflow as tf

from l2o_scale.steps import tf1_optimizers
from problems import datasets

TEACHER_LEARNING_RATE = 0.01
TEACHERS = ("adam", "rmsprop", "nag")


class MTUtils(object):
  """Computes teacher steps for a problem (the original class ``mt_utils``)."""

  def __init__(self, problem, opt_names="adam"):
    self.problem = problem
    self.opt_names = opt_names
    self._steps = {}

  def _teacher_step(self, opt_name):
    """Compiled teacher step: gradient on the batch, then the TF1 update."""
    if opt_name in self._steps:
      return self._steps[opt_name]
    problem = self.problem

    @tf.function
    def step(params, slots, t, data, labels, learning_rate):
      _, grads = problem.objective_and_gradients(params, data, labels)
      new_params, new_slots = [], []
      for p, g, s in zip(params, grads, slots):
        if opt_name == "adam":
          p2, m, v = tf1_optimizers.adam_update(p, g, s[0], s[1], t,
                                                learning_rate)
          new_slots.append((m, v))
        elif opt_name == "rmsprop":
          p2, ms, mom = tf1_optimizers.rmsprop_update(p, g, s[0], s[1],
                                                      learning_rate)
          new_slots.append((ms, mom))
        else:
          p2, acc = tf1_optimizers.nesterov_update(p, g, s[0], learning_rate)
          new_slots.append((acc, acc))
        new_params.append(p2)
      return new_params, new_slots

    self._steps[opt_name] = step
    return step

  def _initial_slots(self, params, opt_name):
    if opt_name == "rmsprop":
      return [(tf.ones_like(p), tf.zeros_like(p)) for p in params]
    return [(tf.zeros_like(p), tf.zeros_like(p)) for p in params]

  def get_mt_labels(self, init_tensors, data, labels, mini_batches,
                    dataset_batches, opt_name="adam", k=1,
                    learning_rate=TEACHER_LEARNING_RATE):
    """Teacher steps, nested as [unroll][step][param] (numpy arrays).

    Args:
      init_tensors: initial parameter arrays of the meta-iteration.
      data, labels: the whole dataset (labels as class indices; one-hot
        labels are derived here as the original does).
      mini_batches: per unroll, the rows of ``data`` of its mini dataset.
      dataset_batches: per unroll, ``k * unroll_length`` row batches of it.
      opt_name: 'adam', 'rmsprop' or 'nag'.
      k: teacher steps per imitation step.
    """
    if opt_name not in TEACHERS:
      raise ValueError("Unknown teacher optimizer {!r}; choose one of {}".format(
          opt_name, ", ".join(TEACHERS)))
    step = self._teacher_step(opt_name)
    params = [tf.constant(np.asarray(t, np.float32)) for t in init_tensors]
    slots = self._initial_slots(params, opt_name)
    if data is None:  # A problem without data (EMPTY_DATASET in the original).
      data, labels = np.zeros([0], np.float32), np.zeros([0], np.int32)
    one_hot = np.asarray(labels).ndim == 1
    label_range = int(np.max(labels)) + 1 if one_hot and len(labels) else 1
    t = 0
    mt_labels = []
    for unroll_batches, mini_batch in zip(dataset_batches, mini_batches):
      mini_data = np.asarray(data)[mini_batch]
      mini_labels = np.asarray(labels)[mini_batch]
      if one_hot:
        mini_labels = datasets.one_hot_rows(mini_labels, label_range)
      if len(unroll_batches) % k:
        raise ValueError("{} batches is not a multiple of k={}".format(
            len(unroll_batches), k))
      steps = []
      previous = [p.numpy() for p in params]
      for itr in range(len(unroll_batches) // k):
        for ki in range(k):
          batch = unroll_batches[itr * k + ki]
          t += 1
          params, slots = step(params, slots, tf.constant(t),
                               tf.constant(mini_data[batch]),
                               tf.constant(mini_labels[batch]),
                               tf.constant(learning_rate, tf.float32))
        current = [p.numpy() for p in params]
        steps.append([before - after for before, after in
                      zip(previous, current)])
        previous = current
      mt_labels.append(steps)
    return mt_labels


def stack_mt_labels(mt_labels_unroll, num_params):
  """[step][param] -> per param an array [steps, *shape] (the fed layout)."""
  return [np.stack([step[i] for step in mt_labels_unroll]).astype(np.float32)
          for i in range(num_params)]
