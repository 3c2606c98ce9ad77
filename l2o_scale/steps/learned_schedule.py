"""A learned schedule-and-decay head over a learned optimizer's step, as a
step transform (:mod:`l2o_scale.steps.transform`).

Not in the original. Why it exists: the hierarchical RNN gives each tensor's
update direction unit RMS and scales it by its learned learning rate, which
is capped (``max_log_lr``); trained optimizers sit at the cap for most of a
long run, so their steps never shrink and their weights keep growing once
the data is fit. The head is a small network (:data:`NUM_PARAMETERS`
parameters) that reads

* the fraction of the run done, embedded at several timescales
  (``tanh(10 (progress - c))`` for the centres :data:`PROGRESS_CENTRES`, the
  fractional embedding of VeLO and Celo);
* the step's gradient norm normalised per run: its log relative to the first
  step's and to two running averages (the per-task normalisation of
  learned_optimization's ``baselines/normalizers.py``, on the gradient
  because a Keras optimizer never sees the loss);
* per tensor: whether it is a vector (bias, normalisation scale), the log
  RMS of its values and the log of its proposed step's RMS relative to them;

and gives each tensor a multiplier ``m`` of the proposed step, in
``[min_multiplier, max_multiplier]``, and a decoupled weight decay ``w`` in
``[0, max_weight_decay]``::

    new = proposed + (m - 1) * (proposed - old) - w * old

(``m * w`` in place of ``w`` for a head built with
``decay_scaled_by_multiplier``, the form of the card's schedule-scaled
decay).

Its output layer starts at zero, so a fresh head gives ``m = 1`` and ``w =
0`` for every input and the step is the optimizer's, bit for bit (a tensor
whose multiplier is 1 and decay 0 takes ``proposed`` itself). The
multiplier acts on the step after the optimizer has clipped its learning
rate: where the hierarchical RNN's rate sits at its cap, the head still
moves the step, and the head's meta-training
(:mod:`l2o_scale.head_training`, evolution strategies over whole runs)
measures the loss of the clipped steps, with no gradient passed through the
clip.

The head's parameters are one flat float32 vector (:attr:`ScheduleHead.theta`),
so that the estimator evaluates many perturbed heads side by side
(:func:`head_outputs` takes any ``theta``).
"""

import math
import zipfile

import numpy as np
import tensorflow as tf

from l2o_scale.steps import transform

# The input that holds the fraction of the run done before this step.
PROGRESS = "progress"

# Centres of the fractional progress embedding (VeLO's ``_fractional_tanh
# _embed``, also Celo's scheduler input).
PROGRESS_CENTRES = (0.03, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1)
# Decays of the running averages of the log gradient norm.
GRADIENT_AVERAGE_DECAYS = (0.9, 0.99)
NUM_GLOBAL_FEATURES = len(PROGRESS_CENTRES) + 1 + len(GRADIENT_AVERAGE_DECAYS)
NUM_TENSOR_FEATURES = 3
NUM_INPUTS = NUM_GLOBAL_FEATURES + NUM_TENSOR_FEATURES
HIDDEN_UNITS = 16
NUM_OUTPUTS = 2
NUM_PARAMETERS = (NUM_INPUTS * HIDDEN_UNITS + HIDDEN_UNITS +
                  HIDDEN_UNITS * NUM_OUTPUTS + NUM_OUTPUTS)
# Length of the state carried between steps: [steps seen, log of the first
# gradient norm, the running averages of the log gradient norm].
STATE_SIZE = 2 + len(GRADIENT_AVERAGE_DECAYS)

# The run length the progress input assumes when none is given: the longest
# run the head is meta-trained on (its progress is held at 1 after it).
DEFAULT_TOTAL_STEPS = 2000

_EPS = 1e-12
_FEATURE_CLIP = 5.


def initial_theta(seed=0):
  """The head's initial parameters (float32 [NUM_PARAMETERS]): the hidden
  layer drawn with unit-variance fan-in scaling from ``seed``, the output
  layer zero (the head then changes no step)."""
  rng = np.random.default_rng(seed)
  hidden = rng.standard_normal((NUM_INPUTS, HIDDEN_UNITS)) / math.sqrt(
      NUM_INPUTS)
  theta = np.zeros(NUM_PARAMETERS, np.float32)
  theta[:NUM_INPUTS * HIDDEN_UNITS] = hidden.reshape(-1)
  return theta


def _unpack(theta):
  """(w1 [I, H], b1 [H], w2 [H, 2], b2 [2]) of the flat ``theta``."""
  sizes = [NUM_INPUTS * HIDDEN_UNITS, HIDDEN_UNITS,
           HIDDEN_UNITS * NUM_OUTPUTS, NUM_OUTPUTS]
  w1, b1, w2, b2 = tf.split(theta, sizes)
  return (tf.reshape(w1, [NUM_INPUTS, HIDDEN_UNITS]), b1,
          tf.reshape(w2, [HIDDEN_UNITS, NUM_OUTPUTS]), b2)


def initial_state():
  """The state before a run's first step (float32 [STATE_SIZE])."""
  return tf.zeros([STATE_SIZE])


def _finite(x, fallback=0.):
  return tf.where(tf.math.is_finite(x), x, fallback)


def _log_rms(x):
  """log of the RMS of ``x``, in float64 (float32 squares overflow from
  about 1e19); a large finite value where ``x`` is not finite."""
  x = tf.cast(x, tf.float64)
  value = 0.5 * tf.math.log(tf.reduce_mean(tf.square(x)) + _EPS)
  return tf.cast(_finite(value, 100.), tf.float32)


def _log_norm(gradients):
  """log of the gradients' global norm (:func:`_log_rms`'s care)."""
  squares = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float64)))
                      for g in gradients])
  value = 0.5 * tf.math.log(squares + _EPS)
  return tf.cast(_finite(value, 100.), tf.float32)


def global_features(progress, gradients, state):
  """(features [NUM_GLOBAL_FEATURES], new state) of one step: the progress
  embedding and the log gradient norm relative to the first step's and to
  the running averages before this step (all 0 at the first step)."""
  return global_features_of_log_norm(progress, _log_norm(gradients), state)


def global_features_of_log_norm(progress, log_norm, state):
  """:func:`global_features` from the log of the gradients' global norm
  (float32 scalar), for a caller that has computed it already."""
  first = tf.equal(state[0], 0.)
  log_first = tf.where(first, log_norm, state[1])
  averages = tf.where(first, log_norm, state[2:])
  progress = tf.clip_by_value(tf.cast(progress, tf.float32), 0., 1.)
  embedding = tf.tanh(10. * (progress - tf.constant(PROGRESS_CENTRES)))
  relative = tf.clip_by_value(
      tf.concat([[log_norm - log_first], log_norm - averages], 0),
      -_FEATURE_CLIP, _FEATURE_CLIP)
  decays = tf.constant(GRADIENT_AVERAGE_DECAYS)
  new_state = tf.concat([[state[0] + 1., log_first],
                         decays * averages + (1. - decays) * log_norm], 0)
  return tf.concat([embedding, relative], 0), new_state


def tensor_features(old, proposed):
  """[T, NUM_TENSOR_FEATURES]: per tensor, whether it is a vector, the log
  RMS of its values and the log of its step's RMS relative to them."""
  rows = []
  for before, after in zip(old, proposed):
    log_rms = _log_rms(before)
    log_step = _log_rms(tf.cast(after, tf.float64) -
                        tf.cast(before, tf.float64))
    rows.append(tf.stack([
        tf.constant(1. if before.shape.rank <= 1 else 0.),
        tf.clip_by_value(log_rms / 4., -_FEATURE_CLIP, _FEATURE_CLIP),
        tf.clip_by_value((log_step - log_rms) / 4., -_FEATURE_CLIP,
                         _FEATURE_CLIP)]))
  return tf.stack(rows)


def head_outputs(theta, global_feats, tensor_feats, min_multiplier,
                 max_multiplier, max_weight_decay,
                 decay_scaled_by_multiplier=False):
  """(multipliers [T], weight decays [T]) of the head ``theta``.

  The multiplier is ``exp(tanh(a) * log(max_multiplier))`` for ``a >= 0``,
  ``exp(tanh(a) * log(1 / min_multiplier))`` below: exactly 1 at ``a = 0``.
  The decay is ``max_weight_decay * tanh(relu(b))``: exactly 0 for ``b <=
  0``, below ``max_weight_decay`` for every input. With
  ``decay_scaled_by_multiplier`` it is that times the tensor's multiplier,
  the AdamW form of the card's decay (scaled by its step schedule), so that
  a step annealed towards 0 takes its decay with it; below
  ``max_weight_decay * max_multiplier``.
  """
  w1, b1, w2, b2 = _unpack(tf.convert_to_tensor(theta, tf.float32))
  count = tf.shape(tensor_feats)[0]
  inputs = tf.concat([tf.tile(global_feats[tf.newaxis], [count, 1]),
                      tensor_feats], 1)
  hidden = tf.tanh(tf.matmul(inputs, w1) + b1)
  out = tf.matmul(hidden, w2) + b2
  a, b = out[:, 0], out[:, 1]
  log_range = tf.where(a >= 0., math.log(max_multiplier),
                       math.log(1. / min_multiplier))
  multipliers = tf.exp(tf.tanh(a) * log_range)
  decays = max_weight_decay * tf.tanh(tf.nn.relu(b))
  if decay_scaled_by_multiplier:
    decays = decays * multipliers
  return multipliers, decays


def apply_outputs(old, proposed, multipliers, decays):
  """``proposed + (m - 1) (proposed - old) - w old`` per tensor; a tensor
  with ``m = 1`` and ``w = 0`` takes ``proposed`` itself."""
  out = []
  for t, (before, after) in enumerate(zip(old, proposed)):
    m, w = multipliers[t], decays[t]
    changed = after + (m - 1.) * (after - before) - w * before
    out.append(tf.where(tf.logical_and(tf.equal(m, 1.), tf.equal(w, 0.)),
                        after, changed))
  return out


class ScheduleHead(transform.StepTransform):
  """The head as a step transform; built by :func:`schedule_head`.

  It needs each step's :data:`PROGRESS` (given by :meth:`step_inputs` for a
  run of known length, by the Keras optimizer from its step counter) and
  :data:`~l2o_scale.steps.transform.GRADIENTS`. Its parameters
  (:attr:`theta`) and its per-run state (:attr:`state`, reset at every
  step whose progress is 0) are ``tf.Variable``s, so a compiled step reads
  and updates them in place.
  """

  def __init__(self, theta=None, min_multiplier=1e-3, max_multiplier=10.,
               max_weight_decay=3e-3, decay_scaled_by_multiplier=False):
    if not 0. < min_multiplier <= 1. <= max_multiplier < float("inf"):
      raise ValueError(
          "schedule head: need 0 < min_multiplier <= 1 <= max_multiplier, "
          "got {} and {}".format(min_multiplier, max_multiplier))
    if not 0. <= max_weight_decay < 1.:
      raise ValueError("schedule head: max_weight_decay must lie in [0, 1), "
                       "got {}".format(max_weight_decay))
    theta = initial_theta() if theta is None else np.asarray(theta,
                                                             np.float32)
    if theta.shape != (NUM_PARAMETERS,):
      raise ValueError("schedule head: theta must be {} numbers, got shape "
                       "{}".format(NUM_PARAMETERS, theta.shape))
    if not np.all(np.isfinite(theta)):
      raise ValueError("schedule head: theta holds {} values that are not "
                       "finite (NaN or inf)".format(
                           int(np.sum(~np.isfinite(theta)))))
    self.min_multiplier = float(min_multiplier)
    self.max_multiplier = float(max_multiplier)
    self.max_weight_decay = float(max_weight_decay)
    self.decay_scaled_by_multiplier = bool(decay_scaled_by_multiplier)
    self.theta = tf.Variable(theta, trainable=False, name="schedule_head")
    self.state = tf.Variable(initial_state(), trainable=False,
                             name="schedule_head_state")

  @property
  def bounds(self):
    """(min_multiplier, max_multiplier, max_weight_decay,
    decay_scaled_by_multiplier): what shapes the outputs besides
    :attr:`theta`, the trailing arguments of :func:`head_outputs`."""
    return (self.min_multiplier, self.max_multiplier, self.max_weight_decay,
            self.decay_scaled_by_multiplier)

  def outputs(self, old, proposed, progress, gradients, state):
    """(multipliers, decays, new state) of one step from ``state`` (pure:
    the variables are not touched)."""
    feats, new_state = global_features(progress, gradients, state)
    multipliers, decays = head_outputs(self.theta, feats,
                                       tensor_features(old, proposed),
                                       *self.bounds)
    return multipliers, decays, new_state

  def apply(self, old, proposed, inputs):
    if PROGRESS not in inputs or transform.GRADIENTS not in inputs:
      raise ValueError("the schedule head needs this step's progress and "
                       "gradients in the step's inputs")
    progress = tf.cast(inputs[PROGRESS], tf.float32)
    state = tf.where(tf.equal(progress, 0.), initial_state(),
                     tf.convert_to_tensor(self.state))
    multipliers, decays, new_state = self.outputs(
        old, proposed, progress, inputs[transform.GRADIENTS], state)
    with tf.control_dependencies([self.state.assign(new_state)]):
      return [tf.identity(v) for v in apply_outputs(old, proposed,
                                                    multipliers, decays)]

  def step_inputs(self, num_steps):
    return {PROGRESS: progress_inputs(num_steps)}

  def key(self):
    # The traced step reads this head's own variables.
    return ("schedule_head", id(self))

  def get_config(self):
    """The head's constructor arguments (its parameters as a list of
    floats, which JSON keeps exactly): what a Keras config holds of it
    (:meth:`from_config`); its per-run state is not among them."""
    return dict(theta=self.theta.numpy().tolist(),
                min_multiplier=self.min_multiplier,
                max_multiplier=self.max_multiplier,
                max_weight_decay=self.max_weight_decay,
                decay_scaled_by_multiplier=self.decay_scaled_by_multiplier)

  @classmethod
  def from_config(cls, config):
    return cls(**config)

  def save(self, path):
    """Writes the head (parameters and bounds) to ``path`` (``.npz``)."""
    np.savez(path, theta=self.theta.numpy(),
             bounds=np.array(self.bounds, np.float64))

  @classmethod
  def load(cls, path):
    """The head :meth:`save` wrote. A missing file raises
    FileNotFoundError, any other file (truncated, not an ``.npz``, without
    the head's arrays, with values a head cannot take) a
    :class:`HeadFileError`: one line naming the file and what is wrong."""
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError("no schedule head at {}".format(path))
    try:
      saved = np.load(path, allow_pickle=False)
      if not isinstance(saved, np.lib.npyio.NpzFile):
        raise ValueError("it is one numpy array, not an .npz archive of a "
                         "head's theta and bounds")
      with saved:
        missing = [k for k in ("theta", "bounds") if k not in saved.files]
        if missing:
          raise ValueError("it has no {} array (it holds: {})".format(
              " and no ".join(missing), ", ".join(saved.files) or "none"))
        theta, bounds = saved["theta"], saved["bounds"]
      bounds = np.asarray(bounds, np.float64).reshape(-1)
      if len(bounds) not in (3, 4):
        raise ValueError("its bounds hold {} numbers, not 3 or 4".format(
            len(bounds)))
      # Heads saved before the scaled decay existed hold three bounds.
      return cls(theta, *bounds[:3],
                 decay_scaled_by_multiplier=bool(len(bounds) > 3 and
                                                 bounds[3]))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
      raise HeadFileError(path, e) from None


class HeadFileError(ValueError):
  """A file that is not a schedule head :meth:`ScheduleHead.save` wrote:
  one line naming it and what is wrong."""

  def __init__(self, path, error):
    what = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, (zipfile.BadZipFile, EOFError)):
      what = "it is truncated or damaged ({})".format(what)
    elif "pickled" in what:
      # numpy's words for a file that is neither an array nor an archive.
      what = "it is not an .npz file"
    super().__init__("{} is not a saved schedule head: {}".format(
        path, what.replace("schedule head: ", "")))
    self.path = path


def check_no_hand_set_schedule(head, step_scaled, weight_decay, names):
  """The one rule of every caller that takes a schedule head (metatest.py's
  flags, the Keras optimizer's arguments): the head decides the step's
  scale and the weight decay, so neither is also set by hand. ``head``
  names the head (a flag, an argument), ``step_scaled`` and
  ``weight_decay`` say whether each is set, ``names`` are the two settings
  as the caller spells them; a ValueError in one line otherwise."""
  if step_scaled or weight_decay:
    raise ValueError("{} decides the step's scale and the weight decay: "
                     "drop {}".format(head, " and ".join(names)))


def progress_inputs(num_steps):
  """The progress before each of ``num_steps`` steps (float32
  [num_steps]): ``t / num_steps``."""
  return (np.arange(num_steps, dtype=np.float64) / float(num_steps)).astype(
      np.float32)


def schedule_head(head=None):
  """The step transform of a schedule head: None gives the identity (no
  op); a :class:`ScheduleHead`, the path of a saved one or its
  :meth:`~ScheduleHead.get_config` gives it."""
  if head is None:
    return transform.identity()
  if isinstance(head, str):
    return ScheduleHead.load(head)
  if isinstance(head, dict):
    return ScheduleHead.from_config(head)
  if not isinstance(head, ScheduleHead):
    raise ValueError("schedule_head must be a ScheduleHead, the path of a "
                     "saved one, its config or None, got {!r}".format(
                         type(head).__name__))
  return head


def check_total_steps(total_steps):
  """``total_steps`` (None or a positive integer) as it is; a ValueError
  otherwise."""
  if total_steps is not None and (
      isinstance(total_steps, bool) or
      not isinstance(total_steps, (int, np.integer)) or total_steps < 1):
    raise ValueError("total_steps must be a positive integer or None, got "
                     "{!r}".format(total_steps))
  return total_steps


def keras_progress(iterations, total_steps=None):
  """The progress input of a Keras step: ``iterations / total_steps``
  (:data:`DEFAULT_TOTAL_STEPS` where ``total_steps`` is None)."""
  total = float(total_steps or DEFAULT_TOTAL_STEPS)
  return tf.cast(iterations, tf.float32) / total
