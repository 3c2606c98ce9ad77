"""What one meta-iteration will do, drawn before it runs: its plan.

Port of the draws of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.78-117 helpers, l.255-310 the draws of a
meta-iteration, l.395-430 those of ``validate``). Every random number a
meta-iteration needs is drawn here, from the run's single numpy and Python
streams and in the original's order, so that the series can then run
anywhere (this process, or a worker of a cluster) and a run resumed from a
checkpoint draws what the uninterrupted one draws:

* the imitation coin (``random.random() < mt_ratio``), then the unroll
  lengths (fixed, sampled with :func:`sample_numiter`, or the curriculum's);
* the batches of the whole series (one draw, split per unroll; ``mt_k``
  times more for an imitation series), the mini dataset of every unroll
  (a shuffle of the rows each, unless ``data_freeze``), and the initial
  optimizee parameters (:class:`SeriesDraws`);
* an evaluation series draws its initial parameters first and then fresh
  batches for every unroll, as the original's ``validate`` did.

A fresh optimizer state's random initial learning rates are drawn
statelessly from :attr:`SeriesDraws.state_seed`, a digest of the series'
initial parameters: a function of the plan alone, so a resumed run draws
them as the uninterrupted one does (TensorFlow's random stream would depend
on everything the process ran before), and nothing more is drawn from the
run's streams.
"""

import collections
import hashlib
import random

import numpy as np

from problems import datasets


def sigmoid_weights(n, slope=0.1, offset=5):
  """A sigmoid ramp normalised to sum to one (original l.78-100)."""
  x = np.arange(n)
  y = 1. / (1. + np.exp(-slope * (x - offset)))
  return y / np.sum(y)


def sample_numiter(scale, min_steps=50):
  """round(Exponential(scale)) + min_steps, clipped to 3*min_steps (l.103-117)."""
  sample = np.round(np.random.exponential(scale=scale)) + min_steps
  sample = np.clip(sample, 0, 3 * min_steps)
  return int(sample)


def regularizer_switch(unroll_itr, num_unrolls, regularize_time, reg_scale):
  """Whether the optimizer regularizer accumulates in this unroll (l.330-345).

  Reproduces the original: 'posterior' -> on after the first
  ``int(num_unrolls * reg_scale + 1)`` unrolls, 'prior' -> on before it,
  'none' -> never on (so ``--regularize_time=none`` silently disables the
  regularizer even with ``--reg_optimizer=True``), anything else -> always on.
  """
  threshold = int(num_unrolls * reg_scale + 1)
  if regularize_time == "posterior":
    return unroll_itr > threshold
  if regularize_time == "prior":
    return unroll_itr < threshold
  if regularize_time == "none":
    return False
  return True


def split_batches(all_batches, lengths, stride=1):
  """Cuts a list of batches into consecutive groups of ``length * stride``,
  keeping every ``stride``-th batch (the original's MT slicing, l.290-305)."""
  groups, start = [], 0
  for n in lengths:
    groups.append(all_batches[start:start + n * stride:stride])
    start += n * stride
  return groups


def unroll_lengths(schedule, curriculum):
  """Lengths of the partial unrolls of one meta-iteration (l.270-285)."""
  if schedule.if_cl:
    return [schedule.fix_unroll_length] * curriculum.train_unrolls
  if not schedule.fix_unroll:
    num_unrolls = schedule.num_unroll_func()
    return [schedule.num_partial_unroll_itrs_func()
            for _ in range(num_unrolls)]
  return ([schedule.fix_unroll_length] *
          (schedule.fix_num_steps // schedule.fix_unroll_length))


def evaluation_lengths(schedule, curriculum):
  """Lengths of the unrolls of one evaluation series."""
  if schedule.if_cl:
    return [schedule.fix_unroll_length] * curriculum.eval_unrolls
  return ([schedule.fix_unroll_length] *
          (schedule.fix_num_steps_eval // schedule.fix_unroll_length))


class SeriesDraws(collections.namedtuple(
    "SeriesDraws",
    ["init_tensors", "batches", "mini_rows", "teacher_batches",
     "fast_forward"], defaults=(None,))):
  """The random draws of one series of partial unrolls.

  init_tensors: initial optimizee parameters (numpy arrays).
  batches: per unroll, ``[length, batch_size]`` rows of its mini dataset.
  mini_rows: per unroll, the rows of the data forming its mini dataset.
  teacher_batches: per unroll, the ``mt_k * length`` batches the imitation
    teacher steps on (None outside imitation).
  fast_forward: ``[S, batch_size]`` rows of the whole training data for the
    S steps that precede the series (``--fast_forward_max_steps``), or None.
  """

  @property
  def state_seed(self):
    """The ``[2]`` int64 seed of the series' fresh optimizer state (its
    random initial learning rates): a digest of ``init_tensors``."""
    digest = hashlib.blake2b(digest_size=16)
    for tensor in self.init_tensors:
      digest.update(np.ascontiguousarray(tensor, np.float32).tobytes())
    return np.frombuffer(digest.digest(), np.int64).copy()


class MetaIterationPlan(collections.namedtuple(
    "MetaIterationPlan",
    ["k", "lengths", "mt_training", "instances", "switches", "reset_first"])):
  """One meta-iteration, decided before it runs.

  k: its 0-based index; lengths: its unroll lengths; mt_training: whether it
  is an imitation meta-iteration; instances: the :class:`SeriesDraws` of
  each optimizee instance it trains (one, as the original, or a
  meta-batch); switches: per unroll, whether the optimizer regularizer
  accumulates; reset_first: whether its first unroll re-initialises the
  optimizer state (:func:`resets_state`).
  """

  @property
  def num_unrolls(self):
    return len(self.lengths)

  @property
  def draws(self):
    """The first (or only) instance's draws."""
    return self.instances[0]


def resets_state(k, reset_rnn_params, after_rollback=False):
  """Whether the first unroll of meta-iteration ``k``'s series starts from a
  fresh optimizer state: with the original's ``reset_rnn_params=True`` only
  at the very first meta-iteration (later ones carry the state the previous
  series left, see :class:`~l2o_scale.meta_training.train_state.CarriedState`),
  otherwise at every series; and after a rollback (the carried state is
  stale)."""
  return (k == 0 if reset_rnn_params else True) or after_rollback


class Planner(object):
  """Draws plans of one problem's meta-iterations and evaluations.

  Holds what the draws depend on: the problem's parameter shapes and
  initialisation, the size of its data, the batch sizes and the
  :class:`~l2o_scale.meta_training.training_config.TrainingConfig`.
  """

  def __init__(self, problem, data_size, batch_size, mini_batch_size,
               config):
    self.problem = problem
    self.data_size = data_size
    self.batch_size = batch_size
    self.mini_batch_size = mini_batch_size
    self.config = config

  def init_tensors(self, kind=None):
    """Fresh optimizee parameters for a series (``kind``: one of
    ``OPTIMIZEE_INITS``, by default ``--optimizee_init``).

    ``optimizee_init="normal"`` (the original): standard normal, drawn with
    numpy. ``"problem"``: the problem's own initialisation, as meta-testing
    starts (e.g. N(0, 0.01) for the MNIST MLPs), with an op seed drawn from
    numpy's stream (a fresh op seed gives the first draw of its stream, so
    the values depend on the seeds only; no ``tf.random.set_seed``, which
    would clear TF's kernel cache).
    """
    if (kind or self.config.optimizee_init) == "problem":
      seed = int(np.random.randint(2**31 - 1))
      return [t.numpy() for t in self.problem.init_tensors(seed=seed)]
    return [np.random.normal(size=shape).astype(np.float32)
            for shape in self.problem.param_shapes]

  def batches(self, lengths, stride=1):
    """Batches per unroll for the learner, and for the MT teacher.

    One draw of ``sum(lengths) * stride`` batches (l.286-305): the teacher
    takes consecutive groups of ``stride * length`` (``stride`` = ``mt_k``
    teacher steps per imitation step), the learner every ``stride``-th of
    them.
    """
    if not self.data_size:
      empty = [np.zeros((n * stride, 0), np.int32) for n in lengths]
      return [g[::stride] for g in empty], empty
    all_batches = datasets.batch_indices(self.mini_batch_size,
                                         sum(lengths) * stride,
                                         self.batch_size)
    learner = [np.asarray(g, np.int32).reshape(n, -1) for g, n in zip(
        split_batches(all_batches, lengths, stride), lengths)]
    return learner, split_batches(all_batches, [n * stride for n in lengths])

  def mini_rows(self, num_unrolls):
    """Per unroll, the rows of its mini dataset."""
    if not self.data_size:
      return [np.zeros([0], np.int64)] * num_unrolls
    if self.config.data_freeze:
      return [np.arange(self.mini_batch_size)] * num_unrolls
    full_batch = np.arange(self.data_size)
    chosen = []
    for _ in range(num_unrolls):
      np.random.shuffle(full_batch)
      chosen.append(full_batch[:self.mini_batch_size].copy())
    return chosen

  def fast_forward(self):
    """Batches of the fast-forward before a series, or None: S drawn
    log-uniformly from 1..``fast_forward_max_steps`` with probability
    ``fast_forward_fraction``, else no fast-forward. Nothing is drawn when
    the flag is off, so the original's random streams stay as they were."""
    config = self.config
    if config.fast_forward_max_steps <= 0:
      return None
    if np.random.uniform() >= config.fast_forward_fraction:
      return None
    steps = int(np.exp(np.random.uniform(
        0., np.log(config.fast_forward_max_steps + 1.))))
    steps = min(max(steps, 1), config.fast_forward_max_steps)
    if not self.data_size:
      return np.zeros((steps, 0), np.int32)
    return np.random.randint(self.data_size,
                             size=(steps, self.batch_size or self.data_size),
                             dtype=np.int64).astype(np.int32)

  def switches(self, num_unrolls):
    return [regularizer_switch(u, num_unrolls, self.config.regularize_time,
                               self.config.reg_scale)
            for u in range(num_unrolls)]

  def meta_iteration(self, k, schedule, curriculum, after_rollback=False):
    """The :class:`MetaIterationPlan` of meta-iteration ``k``."""
    config = self.config
    mt_training = config.if_mt and random.random() < config.mt_ratio
    lengths = unroll_lengths(schedule, curriculum)
    stride = config.mt_k if mt_training else 1
    instances = []
    for _ in range(config.meta_batch_size):
      batches, teacher = self.batches(lengths, stride)
      mini_rows = self.mini_rows(len(lengths))
      init = self.init_tensors()
      # The teacher's steps start at the initial parameters.
      fast_forward = None if mt_training else self.fast_forward()
      if fast_forward is not None and config.fast_forward_init == "problem":
        # Drawn after the rest, so the other draws stay as they were.
        init = self.init_tensors("problem")
      instances.append(SeriesDraws(init, batches, mini_rows,
                                   teacher if mt_training else None,
                                   fast_forward))
    return MetaIterationPlan(
        k, lengths, mt_training, tuple(instances),
        self.switches(len(lengths)),
        resets_state(k, config.reset_rnn_params, after_rollback))

  def evaluation(self, k, lengths, switch, mini_rows):
    """An evaluation series (original ``validate``): fresh parameters, then
    a fresh draw of the series' batches for every unroll (of which the
    unroll takes its own group), all on the training series' last mini
    dataset ``mini_rows``; the regularizer switch of the last training
    unroll."""
    init = self.init_tensors()
    batches = [self.batches(lengths)[0][u] for u in range(len(lengths))]
    draws = SeriesDraws(init, batches, [mini_rows] * len(lengths), None)
    return MetaIterationPlan(k, lengths, False, (draws,),
                             [switch] * len(lengths),
                             resets_state(k, self.config.reset_rnn_params))
