"""AdamW whose learning rate and weight decay a small learned controller sets
per tensor and per step.

Not in the original. Its starting point is the original's
``optimizer/trainable_adam.py`` (:mod:`optimizer.trainable_adam`: Adam whose
learning rate and betas are meta-parameters, one value for a whole run);
here the hyper-parameters are not learned constants but the outputs of a
network that reads, at every step, signals that mean the same on every task
(the approach of Almeida et al. 2021, "A Generalizable Approach to Learning
Optimizers"):

* the fraction of the run done, embedded at several timescales (the inputs
  of :mod:`l2o_scale.steps.learned_schedule`);
* the global gradient norm relative to the first step's and to two running
  averages (also from :mod:`l2o_scale.steps.learned_schedule`);
* per tensor: whether it is a vector (a bias, a normalisation scale); the
  size of AdamW's proposed update relative to the tensor's values; the
  agreement of the gradient with the momentum of the previous gradients
  (their cosine, and its running average: positive where successive steps
  point the same way, the online sign that the step is too small, negative
  where they oscillate); the tensor's gradient norm relative to its running
  average.

The base rule is Keras's AdamW term for term (``keras/src/optimizers/
adam.py``'s ``update_step`` after the base optimizer's decoupled decay
``variable - variable * weight_decay * learning_rate``), with the base
learning rate decayed by a cosine to zero over the run
(``keras.optimizers.schedules.CosineDecay``). The controller gives each
tensor ``i`` a learning-rate multiplier ``a_i`` and a weight-decay multiplier
``d_i``::

    lr_i = lr(t) * a_i            wd_i = weight_decay * d_i
    p   <- p - p * wd_i * lr_i                           (decoupled decay)
    m   <- m + (g - m) (1 - beta_1);  v <- v + (g^2 - v) (1 - beta_2)
    p   <- p - m * alpha_i / (sqrt(v) + epsilon),
           alpha_i = lr_i sqrt(1 - beta_2^(t+1)) / (1 - beta_1^(t+1))

``a_i = exp(tanh(o_1 / 4) log(MAX_LR_MULTIPLIER))`` spans
``[1 / MAX_LR_MULTIPLIER, MAX_LR_MULTIPLIER]`` and ``d_i`` likewise with
:data:`MAX_DECAY_MULTIPLIER`; both are exactly 1 where the output layer is
zero, so a zero-initialised controller gives AdamW with the cosine decay,
bit for bit (``tests/test_learned_adamw.py``). The output is divided by 4 so
that an evolution-strategies perturbation of the output weights moves a
multiplier by tens of percent, not by orders of magnitude.

The controller's parameters are one flat float32 vector ``theta``
(:data:`NUM_PARAMETERS`), so that meta-training evaluates many perturbed
controllers side by side; every function here is pure (tensors in, tensors
out): the Keras optimizer (:class:`l2o_scale.learned_adamw.LearnedAdamW`) and the
meta-training runs (:mod:`l2o_scale.controller_training`) call the same
code.
"""

import math

import numpy as np
import tensorflow as tf

from l2o_scale.steps import learned_schedule

# Per-tensor inputs: is a vector, log relative update size, gradient /
# momentum cosine, its running average, log gradient norm over its running
# average.
NUM_TENSOR_FEATURES = 5
NUM_INPUTS = learned_schedule.NUM_GLOBAL_FEATURES + NUM_TENSOR_FEATURES
HIDDEN_UNITS = 16
NUM_OUTPUTS = 2
NUM_PARAMETERS = (NUM_INPUTS * HIDDEN_UNITS + HIDDEN_UNITS +
                  HIDDEN_UNITS * NUM_OUTPUTS + NUM_OUTPUTS)
MAX_LR_MULTIPLIER = 100.
MAX_DECAY_MULTIPLIER = 30.
OUTPUT_SCALE = 0.25
# Decays of the per-tensor running averages (agreement, log gradient norm).
AGREEMENT_DECAY = 0.9
NORM_DECAY = 0.99
# Per-tensor state: [running agreement, running log gradient norm].
TENSOR_STATE_SIZE = 2
GLOBAL_STATE_SIZE = learned_schedule.STATE_SIZE

_TINY = 1e-30
_CLIP = 5.


def initial_theta(seed=0):
  """The controller's initial parameters (float32 [NUM_PARAMETERS]): the
  hidden layer drawn with unit-variance fan-in scaling from ``seed``, the
  output layer zero (the optimizer is then AdamW with the cosine decay)."""
  rng = np.random.default_rng(seed)
  hidden = rng.standard_normal((NUM_INPUTS, HIDDEN_UNITS)) / math.sqrt(
      NUM_INPUTS)
  theta = np.zeros(NUM_PARAMETERS, np.float32)
  theta[:NUM_INPUTS * HIDDEN_UNITS] = hidden.reshape(-1)
  return theta


def check_theta(theta, source="controller"):
  """``theta`` as float32 [NUM_PARAMETERS]; ValueError naming ``source``
  for another shape or a value that is not finite."""
  theta = np.asarray(theta, np.float32)
  if theta.shape != (NUM_PARAMETERS,):
    raise ValueError("{}: a controller has {} parameters, got shape {}".format(
        source, NUM_PARAMETERS, theta.shape))
  if not np.all(np.isfinite(theta)):
    raise ValueError("{}: the controller's parameters are not all "
                     "finite".format(source))
  return theta


def _unpack(theta):
  sizes = [NUM_INPUTS * HIDDEN_UNITS, HIDDEN_UNITS,
           HIDDEN_UNITS * NUM_OUTPUTS, NUM_OUTPUTS]
  w1, b1, w2, b2 = tf.split(theta, sizes)
  return (tf.reshape(w1, [NUM_INPUTS, HIDDEN_UNITS]), b1,
          tf.reshape(w2, [HIDDEN_UNITS, NUM_OUTPUTS]), b2)


def initial_state(num_tensors):
  """(global state [GLOBAL_STATE_SIZE], tensor state [T, 2]) before a run's
  first step."""
  return (learned_schedule.initial_state(),
          tf.zeros([num_tensors, TENSOR_STATE_SIZE]))


def _sum_sq(x):
  return tf.reduce_sum(tf.square(x))


def _safe_log(x):
  """log of a non-negative float32; a large finite value where it is not
  finite (a sum of squares that overflowed or a NaN)."""
  value = tf.math.log(x + _TINY)
  return tf.where(tf.math.is_finite(value), value, 100.)


def tensor_statistics(params, grads, momenta, proposed):
  """[T, 5] sums per tensor, one pass over each (float32, as the step):
  the squares of the gradient, the previous momentum, the values and the
  proposed update, and the gradient's product with the momentum."""
  return tf.stack([tf.stack([_sum_sq(g), _sum_sq(m), _sum_sq(p), _sum_sq(u),
                             tf.reduce_sum(g * m)])
                   for p, g, m, u in zip(params, grads, momenta, proposed)])


def tensor_inputs(params, grads, momenta, proposed, tensor_state, first,
                  stats=None):
  """(per-tensor inputs [T, NUM_TENSOR_FEATURES], new tensor state [T, 2]).

  ``momenta`` are the first moments before this step's update, ``proposed``
  AdamW's update of each tensor at the base learning rate (its size, not
  its sign, is read); ``first``: a bool, this is the run's first step (the
  running log gradient norm starts at its value); ``stats``: their
  :func:`tensor_statistics`, where computed already."""
  if stats is None:
    stats = tensor_statistics(params, grads, momenta, proposed)
  counts = tf.constant([float(max(int(np.prod(p.shape.as_list())), 1))
                        for p in params])
  gg, mm, pp, uu, gm = (stats[:, k] for k in range(5))
  cosine = tf.where(gg * mm > 0., gm / tf.sqrt(gg * mm + _TINY), 0.)
  cosine = tf.where(tf.math.is_finite(cosine), cosine, 0.)
  log_update = 0.5 * _safe_log(uu / counts)
  log_value = 0.5 * _safe_log(pp / counts)
  log_grad = 0.5 * _safe_log(gg)
  agreement = (AGREEMENT_DECAY * tensor_state[:, 0] +
               (1. - AGREEMENT_DECAY) * cosine)
  average = tf.where(first, log_grad, tensor_state[:, 1])
  vector = tf.constant([1. if p.shape.rank <= 1 else 0. for p in params])
  inputs = tf.stack([
      vector,
      tf.clip_by_value((log_update - log_value + 5.) / 3., -_CLIP, _CLIP),
      cosine, agreement,
      tf.clip_by_value(log_grad - average, -_CLIP, _CLIP)], 1)
  state = tf.stack([agreement,
                    NORM_DECAY * average + (1. - NORM_DECAY) * log_grad], 1)
  return inputs, state


def multipliers(theta, global_inputs, tensor_features):
  """(learning-rate multipliers [T], weight-decay multipliers [T]) of the
  controller ``theta``: exactly 1 where its output is 0."""
  w1, b1, w2, b2 = _unpack(tf.convert_to_tensor(theta, tf.float32))
  count = tf.shape(tensor_features)[0]
  inputs = tf.concat([tf.tile(global_inputs[tf.newaxis], [count, 1]),
                      tensor_features], 1)
  hidden = tf.tanh(tf.matmul(inputs, w1) + b1)
  out = OUTPUT_SCALE * (tf.matmul(hidden, w2) + b2)
  return (tf.exp(tf.tanh(out[:, 0]) * math.log(MAX_LR_MULTIPLIER)),
          tf.exp(tf.tanh(out[:, 1]) * math.log(MAX_DECAY_MULTIPLIER)))


def adam_alpha(lr, step, beta_1, beta_2):
  """Keras Adam's step size ``lr sqrt(1 - beta_2^t) / (1 - beta_1^t)`` at
  ``step`` = t (counted from 1)."""
  step = tf.cast(step, tf.float32)
  return (lr * tf.sqrt(1 - tf.pow(tf.cast(beta_2, tf.float32), step)) /
          (1 - tf.pow(tf.cast(beta_1, tf.float32), step)))


def moments(grad, m, v, beta_1, beta_2):
  """Keras Adam's new first and second moments."""
  return (m + (grad - m) * (1 - beta_1),
          v + (tf.square(grad) - v) * (1 - beta_2))


def direction(m, v, alpha, epsilon):
  """Keras Adam's update ``m alpha / (sqrt(v) + epsilon)``."""
  return (m * alpha) / (tf.sqrt(v) + epsilon)


def decayed(param, weight_decay, lr):
  """Keras's decoupled decay ``p - p * weight_decay * lr``."""
  return param - param * weight_decay * lr


class Settings:
  """The base rule's settings: base learning rate, weight decay, betas,
  epsilon (Keras AdamW's names and defaults where they are Keras's)."""

  def __init__(self, learning_rate, weight_decay, beta_1=0.9, beta_2=0.999,
               epsilon=1e-7):
    self.learning_rate = float(learning_rate)
    self.weight_decay = float(weight_decay)
    self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
    self.epsilon = float(epsilon)
    for name, value in (("learning_rate", self.learning_rate),
                        ("epsilon", self.epsilon)):
      if not (math.isfinite(value) and value > 0):
        raise ValueError("{} must be a positive finite number, got {!r}"
                         .format(name, value))
    if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
      raise ValueError("weight_decay must be a finite number >= 0, got "
                       "{!r}".format(self.weight_decay))
    for name, value in (("beta_1", self.beta_1), ("beta_2", self.beta_2)):
      if not 0. <= value < 1.:
        raise ValueError("{} must lie in [0, 1), got {!r}".format(name,
                                                                  value))

  def as_dict(self):
    return dict(learning_rate=self.learning_rate,
                weight_decay=self.weight_decay, beta_1=self.beta_1,
                beta_2=self.beta_2, epsilon=self.epsilon)


def cosine_learning_rate(base, step, total_steps):
  """The base learning rate at ``step`` (steps done before this one), in
  the arithmetic of ``keras.optimizers.schedules.CosineDecay(base,
  total_steps)`` (the Keras optimizer's schedule; the tests check they
  agree bit for bit), for a ``total_steps`` that may be a tensor."""
  base = tf.convert_to_tensor(base, tf.float32)
  total = tf.cast(total_steps, tf.float32)
  frac = tf.minimum(tf.cast(step, tf.float32), total) / total
  decayed = 0.5 * (1.0 + tf.cos(tf.constant(math.pi, tf.float32) * frac))
  return base * ((1 - 0.0) * decayed + 0.0)


def step(theta, settings, params, grads, ms, vs, state, iterations,
         total_steps, lr=None, decays=None):
  """One step of all tensors (pure): (new params, new ms, new vs, new
  state, (lr multipliers, decay multipliers)).

  ``iterations``: steps done before this one; ``lr``: the base learning rate
  at this step (default: the cosine decay of ``settings.learning_rate`` over
  ``total_steps``); ``decays``: per tensor, whether it takes the weight
  decay (default: all). ``state``: (global, tensor) as
  :func:`initial_state`.

  Each tensor's update is its proposed update (at the base learning rate)
  times ``alpha_i / alpha``, exactly 1 where the multiplier is 1, so that
  the update is computed once."""
  global_state, tensor_state = state
  if lr is None:
    lr = cosine_learning_rate(settings.learning_rate, iterations,
                              total_steps)
  progress = tf.cast(iterations, tf.float32) / tf.cast(total_steps,
                                                       tf.float32)
  t = tf.cast(iterations, tf.float32) + 1.
  alpha = adam_alpha(lr, t, settings.beta_1, settings.beta_2)
  new_moments = [moments(g, m, v, settings.beta_1, settings.beta_2)
                 for g, m, v in zip(grads, ms, vs)]
  proposed = [direction(m, v, alpha, settings.epsilon)
              for m, v in new_moments]
  stats = tensor_statistics(params, grads, ms, proposed)
  global_inputs, new_global = learned_schedule.global_features_of_log_norm(
      progress, 0.5 * _safe_log(tf.reduce_sum(stats[:, 0])), global_state)
  feats, new_tensor = tensor_inputs(params, grads, ms, proposed,
                                    tensor_state,
                                    tf.equal(global_state[0], 0.), stats)
  lr_mult, decay_mult = multipliers(theta, global_inputs, feats)
  new_params = []
  for i, (p, u) in enumerate(zip(params, proposed)):
    lr_i = lr * lr_mult[i]
    if settings.weight_decay and (decays is None or decays[i]):
      p = decayed(p, settings.weight_decay * decay_mult[i], lr_i)
    # 0 where the base step is 0 (past the end of the decay), so that the
    # zero update stays zero.
    ratio = tf.math.divide_no_nan(
        adam_alpha(lr_i, t, settings.beta_1, settings.beta_2), alpha)
    new_params.append(p - u * ratio)
  return (new_params, [m for m, _ in new_moments],
          [v for _, v in new_moments], (new_global, new_tensor),
          (lr_mult, decay_mult))
