"""Antithetic evolution strategies over whole runs, for a schedule head over
a frozen learned optimizer.

Why evolution strategies: the objective is the validation loss at the end of
a run of hundreds to thousands of steps. Backpropagating through such a run
costs memory in its length and gives the exploding, biased gradients of long
unrolls (Metz et al. 2019); truncated unrolls see only part of the run and
are biased towards short horizons. The antithetic estimator of
learned_optimization's ``outer_trainers/full_es.py`` needs forward runs only:
for perturbations ``e_k ~ N(0, I)``,

    g = 1 / K  sum_k  (F(theta + sigma e_k) - F(theta - sigma e_k)) / (2 sigma)  e_k,

an unbiased estimate of the gradient of the Gaussian-smoothed objective
``E[F(theta + sigma e)]``, and for a quadratic exactly ``C grad F`` with
``C`` the sample second moment of the ``e_k`` (the even terms cancel). The
runs of one task share their initial parameters, minibatches and length
(common random numbers), so the difference measures the head alone.

:class:`TaskRuns` runs the ``2K`` perturbed heads of one task as one traced
loop: each step takes one minibatch and advances every head's copy of the
model, its frozen optimizer state and its head state, so the ``2K`` runs are
independent branches of one graph that TensorFlow's executor runs side by
side. The head sees the step the optimizer proposes after clipping its
learning rate (:mod:`l2o_scale.steps.learned_schedule`).
"""

import contextlib
import functools

import numpy as np
import tensorflow as tf

from l2o_scale.steps import learned_schedule


def perturbed(theta, epsilons, sigma):
  """[2K, P]: ``theta + sigma e_k`` for each row of ``epsilons`` [K, P],
  then ``theta - sigma e_k`` in the same order."""
  theta = np.asarray(theta, np.float32)
  epsilons = np.asarray(epsilons, np.float32)
  return np.concatenate([theta + sigma * epsilons, theta - sigma * epsilons])


def antithetic_gradient(f_plus, f_minus, epsilons, sigma):
  """The antithetic estimate ``mean_k (f+_k - f-_k) / (2 sigma) e_k`` (float64
  [P]) from the objectives of :func:`perturbed`'s two halves."""
  diff = (np.asarray(f_plus, np.float64) - np.asarray(f_minus, np.float64))
  return (diff / (2. * sigma)) @ np.asarray(epsilons, np.float64) / len(diff)


def normalized_objective(loss, reference, clip):
  """``log(loss / reference)`` clipped to ``[-clip, clip]``; a loss that is
  not finite (a run that diverged) counts as ``clip``."""
  loss = np.asarray(loss, np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    value = np.log(np.maximum(loss, 1e-30) / max(float(reference), 1e-30))
  value = np.where(np.isfinite(loss) & np.isfinite(value), value, clip)
  return np.clip(value, -clip, clip)


@contextlib.contextmanager
def same_numerics_per_head():
  """Grappler's arithmetic optimizer off while the runs are built and run.
  Why: it rewrites the heads' identical branches differently (it merges and
  reorders their ops), so two heads with the same parameters round
  differently, and over hundreds of steps of a small model the trajectories
  drift apart (a tenth of the validation loss after 300 steps); an
  antithetic pair then differs by more than its heads. Restored after."""
  before = tf.config.optimizer.get_experimental_options()
  tf.config.optimizer.set_experimental_options(
      {"arithmetic_optimization": False})
  try:
    yield
  finally:
    tf.config.optimizer.set_experimental_options(
        {"arithmetic_optimization": before.get("arithmetic_optimization",
                                               True)})


class TaskRuns:
  """Runs of one :class:`~l2o_scale.head_training.tasks.HeadTask` under a
  frozen learned optimizer (the pure step interface of
  ``optimizer/hierarchical_rnn.py``) and ``num_heads`` schedule heads at
  once, traced once per task and number of heads.

  Calling it with ``thetas`` [num_heads, P] (all zero: the optimizer alone),
  the run's ``seed``, the augmentation ``scales`` (one per tensor) and its
  ``length`` returns (validation losses [num_heads], training losses on the
  last minibatch [num_heads]) at the end of the run.
  """

  def __init__(self, task, optimizer, num_heads, batch_size, bounds):
    self.task = task
    self.optimizer = optimizer
    self.num_heads = int(num_heads)
    self.batch_size = int(batch_size)
    self.bounds = tuple(bounds)
    # A partial, not the method: TensorFlow counts traces per code object,
    # so the instances' single traces would add up to a retracing warning.
    self._run = tf.function(functools.partial(self._runs), autograph=False)

  def __call__(self, thetas, seed, scales, length):
    thetas = np.asarray(thetas, np.float32)
    if thetas.shape[0] != self.num_heads:
      raise ValueError("{} heads for runs traced with {}".format(
          thetas.shape[0], self.num_heads))
    initial = [tf.constant(v) for v in self.task.initial_parameters(seed)]
    with same_numerics_per_head():
      val, train = self._run(tf.constant(thetas), initial,
                           tf.constant(np.asarray(scales, np.float32)),
                           tf.constant(int(seed), tf.int32),
                             tf.constant(int(length), tf.int32))
    return val.numpy(), train.numpy()

  def _loss_and_grads(self, params, scales, x, y):
    with tf.GradientTape() as tape:
      tape.watch(params)
      loss = self.task.loss([p * scales[i] for i, p in enumerate(params)],
                            x, y)
    return loss, tape.gradient(loss, params)

  def _runs(self, thetas, initial, scales, seed, length):
    task, opt = self.task, self.optimizer
    x_train = tf.constant(task.train[0])
    y_train = tf.constant(task.train[1])
    count = int(task.train[0].shape[0])
    # Trained as p / s (parameter-scale augmentation).
    start = [p / scales[i] for i, p in enumerate(initial)]
    packed = opt.initialize_packed_state(
        start, seed=tf.stack([tf.cast(seed, tf.int64), tf.constant(0, tf.int64)]))
    global_state = [tf.convert_to_tensor(g)
                    for g in opt.initialize_global_state()]
    heads = range(self.num_heads)
    carry = ([list(start) for _ in heads], [packed for _ in heads],
             [list(global_state) for _ in heads],
             [learned_schedule.initial_state() for _ in heads],
             tf.zeros([self.num_heads]))

    def body(step, carry):
      params, packs, globals_, states, _ = carry
      index = tf.random.stateless_uniform(
          [self.batch_size], tf.stack([seed, step + 1]), 0, count, tf.int32)
      x, y = tf.gather(x_train, index), tf.gather(y_train, index)
      progress = tf.cast(step, tf.float32) / tf.cast(length, tf.float32)
      out = ([], [], [], [], [])
      for m in heads:
        loss, grads = self._loss_and_grads(params[m], scales, x, y)
        new_params, new_pack, new_global, _, _ = opt.compute_updates_packed(
            params[m], grads, packs[m], globals_[m])
        feats, state = learned_schedule.global_features(progress, grads,
                                                        states[m])
        multipliers, decays = learned_schedule.head_outputs(
            thetas[m], feats,
            learned_schedule.tensor_features(params[m], new_params),
            *self.bounds)
        new_params = learned_schedule.apply_outputs(params[m], new_params,
                                                    multipliers, decays)
        for slot, value in zip(out, (new_params, new_pack, list(new_global),
                                     state, loss)):
          slot.append(value)
      return step + 1, out[:4] + (tf.stack(out[4]),)

    _, carry = tf.while_loop(lambda step, _: step < length, body,
                             (tf.constant(0), carry))
    x_val = tf.constant(task.validation[0])
    y_val = tf.constant(task.validation[1])
    val = tf.stack([task.loss([p * scales[i] for i, p in enumerate(params)],
                              x_val, y_val) for params in carry[0]])
    return val, carry[4]
