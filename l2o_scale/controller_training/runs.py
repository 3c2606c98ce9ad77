"""Whole training runs of one task under several controllers of the
controlled AdamW rule at once (:mod:`l2o_scale.steps.controlled_adamw`),
for evolution strategies over whole runs.

Why one traced loop for several controllers: an antithetic estimate needs,
per task, the runs of ``2K`` perturbed controllers and of the unperturbed
reference on the same initial parameters, minibatches and length (common
random numbers, so that their differences measure the controllers alone).
:class:`TaskRuns` advances every controller's copy of the model and its
optimizer state with the same minibatch at each step of one XLA-compiled
``while`` loop; the task's data, initial parameters, augmentation and
length are inputs, so one trace serves every task of a model
configuration.

The model is a Keras model called statelessly (``model.stateless_call``) on
parameters given as tensors (:func:`l2o_scale.head_training.tasks.
stateless_loss`),
with the two augmentations of learned_optimization's
``tasks/task_augmentation.py``: each tensor ``p`` is trained as ``p / s``
with its own scale ``s`` (parameter scale) and the loss whose gradient the
optimizer sees is multiplied by a factor ``c`` (loss scale), so that no
absolute size of parameters or gradients can be memorised.
"""

import functools

import numpy as np
import tensorflow as tf

from l2o_scale.head_training import tasks
from l2o_scale.steps import controlled_adamw as rule


class TaskRuns:
  """Runs of one model configuration under ``num_controllers`` controllers.

  ``model``: a built Keras model (its variables' shapes fix the trace);
  ``loss_name``: ``"sparse_ce"`` or ``"mse"``. Calling it returns, for each
  controller, the validation loss at the end of the run and the training
  loss of its last minibatch (float32 [num_controllers] each).
  """

  def __init__(self, model, loss_name, settings, num_controllers,
               batch_size, jit=True):
    self.model = model
    self.loss_name = loss_name
    self.settings = settings
    self.num_controllers = int(num_controllers)
    self.batch_size = int(batch_size)
    self.fixed = [v.numpy() for v in model.non_trainable_variables]
    # A partial, not the method: TensorFlow counts traces per code object.
    self._run = tf.function(functools.partial(self._runs), jit_compile=jit,
                            autograph=False)

  def __call__(self, thetas, initial, train, validation, scales, loss_scale,
               seed, length):
    thetas = np.asarray(thetas, np.float32)
    if thetas.shape != (self.num_controllers, rule.NUM_PARAMETERS):
      raise ValueError("{} controllers of {} parameters for runs traced with "
                       "{}".format(thetas.shape[0], thetas.shape[1:],
                                   self.num_controllers))
    val, train_loss = self._run(
        tf.constant(thetas), [tf.constant(v, tf.float32) for v in initial],
        tf.constant(train[0]), tf.constant(train[1]),
        tf.constant(validation[0]), tf.constant(validation[1]),
        tf.constant(np.asarray(scales, np.float32)),
        tf.constant(float(loss_scale), tf.float32),
        tf.constant(int(seed), tf.int32), tf.constant(int(length), tf.int32))
    return val.numpy(), train_loss.numpy()

  def _loss(self, params, scales, x, y, training=True):
    return tasks.stateless_loss(self.model, self.fixed, self.loss_name,
                                [p * scales[i] for i, p in enumerate(params)],
                                x, y, training)

  def _runs(self, thetas, initial, x_train, y_train, x_val, y_val, scales,
            loss_scale, seed, length):
    count = tf.shape(x_train)[0]
    start = [p / scales[i] for i, p in enumerate(initial)]
    heads = range(self.num_controllers)
    zeros = [tf.zeros_like(p) for p in start]
    carry = ([list(start) for _ in heads], [list(zeros) for _ in heads],
             [list(zeros) for _ in heads],
             [rule.initial_state(len(start)) for _ in heads],
             tf.zeros([self.num_controllers]))

    def body(step, carry):
      params, ms, vs, states, _ = carry
      index = tf.random.stateless_uniform(
          [self.batch_size], tf.stack([seed, step + 1]), 0, count, tf.int32)
      x, y = tf.gather(x_train, index), tf.gather(y_train, index)
      out = ([], [], [], [], [])
      for k in heads:
        with tf.GradientTape() as tape:
          tape.watch(params[k])
          loss = self._loss(params[k], scales, x, y)
          scaled = loss * loss_scale
        grads = tape.gradient(scaled, params[k])
        new = rule.step(thetas[k], self.settings, params[k], grads, ms[k],
                        vs[k], states[k], step, length)
        for slot, value in zip(out, new[:4] + (loss,)):
          slot.append(value)
      return step + 1, tuple(out[:4]) + (tf.stack(out[4]),)

    _, carry = tf.while_loop(lambda step, _: step < length, body,
                             (tf.constant(0), carry))
    val = tf.stack([self._loss(params, scales, x_val, y_val, training=False)
                    for params in carry[0]])
    return val, carry[4]
