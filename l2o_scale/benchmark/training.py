"""One training run of one task with one optimizer, compiled.

A :class:`Trainer` holds a task's model, an optimizer and two compiled
functions: ``K`` training steps in one XLA-compiled loop (the minibatches are
gathered on the device from precomputed indices), and the mean loss and
metric over a whole split. A run records the training loss on the *whole*
training split (a data-rich task's first ``Task.train_eval_size`` training
examples) every ``eval_every`` steps (and at step 0), so the step at which a
curve crosses a level can be read off; it stops early, marked diverged, when
that loss is not finite.

Gradients are made dense before the update (an embedding's gradient is
otherwise a sparse ``IndexedSlices``), so every optimizer sees the same kind
of gradient. The models are called with ``training=True`` in the steps
(batch normalisation uses batch statistics and updates its moving ones) and
``training=False`` for the recorded losses and metrics.
"""

import math
import time

import keras
import numpy as np
import tensorflow as tf

EVAL_CHUNK = 1000
# What a run's record holds (Trainer.run); a stored run without one of them
# is run again.
RECORD_KEYS = ("steps", "train_loss", "diverged", "final_train_loss",
               "validation_loss", "validation_metric", "test_loss",
               "test_metric", "wall_s")


@keras.saving.register_keras_serializable(package="l2o_scale_benchmark")
class CosineToZero(keras.optimizers.schedules.LearningRateSchedule):
  """``base * (1 + cos(pi * step / total_steps)) / 2``, the baselines'
  learning rate (:mod:`.optimizers`); ``base`` is a variable
  (:meth:`set_base`), so changing it needs no retracing."""

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


def loss_fn(kind):
  """Mean loss of a batch: ``sparse_ce`` (logits) or ``mse``."""
  if kind == "sparse_ce":
    return lambda y, out: tf.reduce_mean(
        keras.losses.sparse_categorical_crossentropy(y, out, from_logits=True))
  if kind == "mse":
    return lambda y, out: tf.reduce_mean(tf.square(y - out))
  raise ValueError("unknown loss {!r}".format(kind))


def metric_sum(kind, y, out):
  """Sum over the batch of ``accuracy`` (correct argmax) or ``mse``."""
  if kind == "accuracy":
    hit = tf.equal(tf.argmax(out, axis=-1, output_type=tf.int32),
                   tf.cast(y, tf.int32))
    return tf.reduce_sum(tf.cast(hit, tf.float32))
  if kind == "mse":
    return tf.reduce_sum(tf.reduce_mean(tf.square(y - out), axis=-1))
  raise ValueError("unknown metric {!r}".format(kind))


def batch_indices(seed, steps, batch_size, n):
  """Minibatch indices [steps, batch_size]: shuffled epochs, the same for
  every optimizer at a seed (common random numbers)."""
  rng = np.random.default_rng(10007 + seed)
  epochs = -(-steps * batch_size // n)
  order = np.concatenate([rng.permutation(n) for _ in range(epochs)])
  return order[:steps * batch_size].reshape(steps, batch_size).astype(
      np.int32)


def initial_weights(task, seed, tiny):
  """The weights a model of ``task`` starts from at ``seed`` (the same for
  every optimizer)."""
  keras.utils.set_random_seed(seed)
  return task.build(tiny).get_weights()


class AveragedPoint:
  """Schedule-free's averaged point ``x = (y - (1 - beta_1) z) / beta_1``
  in the model's trainable variables (which hold ``y``) while a
  measurement runs, ``y`` restored after (``with AveragedPoint(...):``).
  ``z`` is the optimizer's ``momentum`` slot of each variable (Keras's
  ``ScheduleFreeAdamW``)."""

  def __init__(self, optimizer, variables):
    self.variables = list(variables)
    slots = [optimizer._momentums[optimizer._get_variable_index(v)]  # pylint: disable=protected-access
             for v in self.variables]
    beta_1 = float(optimizer.beta_1)
    self._saved = [tf.Variable(v, trainable=False) for v in self.variables]

    def to_x():
      for var, z, saved in zip(self.variables, slots, self._saved):
        saved.assign(var)
        var.assign((var - (1. - beta_1) * z) / beta_1)

    def back():
      for var, saved in zip(self.variables, self._saved):
        var.assign(saved)
    self._to_x, self._back = tf.function(to_x), tf.function(back)

  def __enter__(self):
    self._to_x()
    return self

  def __exit__(self, *exc):
    self._back()
    return False


class Trainer:
  """A task's model and one optimizer with their compiled step loop.

  ``averaged``: the optimizer is schedule-free, whose method evaluates at
  its averaged point (:class:`AveragedPoint`): every measurement is taken
  there, and the record's ``at_y`` holds the same measurements at the
  model's own weights."""

  def __init__(self, task, splits, model, optimizer, jit_compile=True,
               averaged=False):
    self.task, self.model, self.optimizer = task, model, optimizer
    self.splits = {name: tuple(tf.constant(a) for a in arrays)
                   for name, arrays in (("train", splits.train),
                                        ("validation", splits.validation),
                                        ("test", splits.test))}
    # The split the recorded training loss is measured on.
    self.splits["train_eval"] = tuple(
        a[:task.train_eval_size] for a in self.splits["train"])
    optimizer.build(model.trainable_variables)
    self.averaged = (AveragedPoint(optimizer, model.trainable_variables)
                     if averaged else None)
    self._loss = loss_fn(task.loss)
    self._steps = tf.function(self._steps_py, jit_compile=jit_compile)
    self._evaluate = tf.function(self._evaluate_py, jit_compile=jit_compile)

  def _steps_py(self, indices):
    x, y = self.splits["train"]
    variables = self.model.trainable_variables
    for i in tf.range(tf.shape(indices)[0]):
      batch = indices[i]
      with tf.GradientTape() as tape:
        loss = self._loss(tf.gather(y, batch),
                          self.model(tf.gather(x, batch), training=True))
      grads = [tf.convert_to_tensor(g)
               for g in tape.gradient(loss, variables)]
      self.optimizer.apply_gradients(zip(grads, variables))
    return tf.constant(0)

  def _evaluate_py(self, x, y):
    out = self.model(x, training=False)
    n = tf.cast(tf.shape(x)[0], tf.float32)
    return (self._loss(y, out) * n,
            metric_sum(self.task.metric, y, out))

  def evaluate(self, split):
    """(mean loss, mean metric) over the whole split."""
    x, y = self.splits[split]
    n = int(x.shape[0])
    loss = metric = 0.
    for start in range(0, n, EVAL_CHUNK):
      l, m = self._evaluate(x[start:start + EVAL_CHUNK],
                            y[start:start + EVAL_CHUNK])
      loss, metric = loss + float(l), metric + float(m)
    return loss / n, metric / n

  def _measure(self, split, at_y=False):
    """(mean loss, mean metric) over ``split``, at the averaged point of a
    schedule-free optimizer unless ``at_y``."""
    if self.averaged is None or at_y:
      return self.evaluate(split)
    with self.averaged:
      return self.evaluate(split)

  def run(self, indices, eval_every, log=None):
    """Trains for ``len(indices)`` steps; returns the run's record."""
    start = time.perf_counter()
    views = [False] + ([True] if self.averaged is not None else [])
    losses = {v: [self._measure("train_eval", v)[0]] for v in views}
    steps = [0]
    diverged = not np.isfinite(losses[False][0])
    total = len(indices)
    while steps[-1] < total and not diverged:
      stop = min(steps[-1] + eval_every, total)
      self._steps(tf.constant(indices[steps[-1]:stop]))
      steps.append(stop)
      for v in views:
        losses[v].append(self._measure("train_eval", v)[0])
      diverged = not np.isfinite(losses[False][-1])
      if log is not None:
        log(stop, losses[False][-1])
    records = {}
    for v in views:
      bad = diverged or not np.isfinite(losses[v][-1])
      record = dict(steps=list(steps), train_loss=losses[v],
                    diverged=bool(bad),
                    final_train_loss=None if bad else losses[v][-1])
      for split in ("validation", "test"):
        loss, metric = (None, None) if bad else self._measure(split, v)
        record[split + "_loss"], record[split + "_metric"] = loss, metric
      records[v] = record
    record = records[False]
    if True in records:
      record["at_y"] = records[True]
    record["wall_s"] = time.perf_counter() - start
    if "at_y" in record:
      record["at_y"]["wall_s"] = record["wall_s"]
    return record
