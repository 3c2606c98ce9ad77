"""Meta-training of a learned optimizer: ``train_optimizer``.

Port of ``train_optimizer`` and ``validate`` of the L2O-Entropy training code
(``L2O-ScalewHessian/L2O-Scale-Training/metaopt.py`` l.95-600), with the TF1
graph/session/Supervisor machinery replaced by eager Python around compiled
unrolls (:mod:`l2o_scale.meta_training.meta_step`):

* problems are drawn from ``problems_and_data``; each meta-iteration starts
  from fresh standard-normal optimizee parameters (as the L2O-Entropy code
  draws them with ``numpy.random.normal``);
* a meta-iteration is a series of partial unrolls (fixed lengths, sampled
  with ``sample_numiter``, or from the curriculum), each on a fresh
  ``mini_batch_size`` subset of the data (or the same one with
  ``data_freeze``); the full objective is computed on that subset, gradients
  on batches of it;
* after each unroll the meta-gradient (made finite, clipped to
  ``gradient_clip``) is applied with the original's RMSProp, and the
  optimizee and optimizer state carry over to the next unroll exactly as the
  original's local variables do (including their quirks, see
  :class:`CarriedState`);
* evaluation every ``evaluation_period`` meta-iterations keeps the best
  model as ``model.ckpt-0``; ``save_period`` checkpoints are
  ``model.ckpt-<k>``; the curriculum (``if_cl``) and imitation (``if_mt``)
  follow the original.

New in the port: progress lines, TensorBoard summaries written for real (the
original defined them but never wrote them), resumption from the last
checkpoint, and a clear message when ``mini_batch_size`` exceeds the data.
"""

import collections
import dataclasses
import json
import os
import random
import sys
import time

import numpy as np
import tensorflow as tf

from l2o_scale.runs import atomic_file
from l2o_scale.runs import checkpoints
from l2o_scale.config import config_flags
from l2o_scale.meta_training import curriculum as curriculum_lib
from l2o_scale.meta_training import meta_learner as meta_learner_lib
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import mt_utils as mt_utils_lib
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.meta_training import stability
from l2o_scale.runs import summaries as summaries_lib
from l2o_scale.meta_testing import testing as testing_lib
from l2o_scale.meta_training import tf1_optimizers
from l2o_scale.meta_training import unroll as unroll_lib
from optimizer import utils
from problems import datasets

flag = config_flags.flag


OPTIMIZEE_INITS = ("normal", "problem")


@dataclasses.dataclass
class TrainingConfig:
  """The meta-training settings metarun.py takes as flags, each declared once
  here with its default and ``--help`` text (l2o_scale.config.config_flags defines
  the flags from these fields).

  The original defined them as module-level flags in ``metaopt.py``
  (l.34-75), ``optimizer/trainable_optimizer.py`` (alpha, beta,
  reg_optimizer, reg_optimizee) and ``problems/problem_generator.py``
  (hessian_itrs, reg_option); names, defaults and help are the original's.
  """
  mini_batch_size: int = flag(10000, "mini batch size.")
  l2_reg: float = flag(0., "Lambda value for parameter regularization.")
  # Defined by the original but unused there too.
  nan_l2_reg: float = flag(
      1e-2, "Strength of l2-reg when NaNs are encountered (unused, as in the "
      "original).")
  rms_decay: float = flag(0.9, "Decay value for the RMSProp metaoptimizer.")
  rms_epsilon: float = flag(1e-20,
                            "Epsilon value for the RMSProp metaoptimizer.")
  data_freeze: bool = flag(False,
                           "Freeze the data while training the optimizer.")
  reset_rnn_params: bool = flag(
      True, "Reset the optimizer state only at the first unroll of training "
      "(original semantics).")
  regularize_time: str = flag(
      "posterior", "When to add the regularization to the optimizer "
      "training: posterior, prior, none (= never), anything else = always.")
  reg_scale: float = flag(0.5, "The regularize scale for meta regularization.")
  if_mt: bool = flag(False, "Imitation learning of Adam (MT).")
  mt_ratio: float = flag(0.1, "Probability of an imitation meta-iteration.")
  mt_k: int = flag(1, "Teacher steps per imitation step.")
  reg_optimizer: bool = flag(False, "Whether to regularize the optimizer.")
  reg_optimizee: bool = flag(False, "Whether to regularize the optimizee.")
  alpha: float = flag(5e-4, "The scale for optimizer regularization.")
  beta: float = flag(1e-4, "The scale for optimizee regularization.")
  reg_option: str = flag("hessian", "Which regularization to use: hessian, "
                         "hessian-ev, hessian-esd, jacob.")
  hessian_itrs: int = flag(
      10, "Number of iterations for hessian information calculation.")
  # New in the port (defaults = the original's behaviour): meta-training
  # that learns and stays stable (README "Meta-training that learns";
  # l2o_scale/meta_training/stability.py, selection.py).
  optimizee_init: str = flag(
      "normal", "Initial optimizee parameters of each meta-iteration: "
      "'normal' = standard normal (the original), 'problem' = the problem's "
      "own initialisation, as meta-testing starts.", OPTIMIZEE_INITS)
  on_divergence: str = flag(
      "continue", "When an unroll diverges (non-finite meta-objective or "
      "meta-gradient, or the optimizee objective grows more than "
      "--divergence_growth_limit times): 'continue' = warn and apply it (the "
      "original), 'rollback' = undo the meta-iteration (back to "
      "model.ckpt-0 or its start) and lower the meta learning rate, 'stop' = "
      "end training.", stability.ON_DIVERGENCE)
  divergence_growth_limit: float = flag(
      100., "An unroll (and a --selection=robust run) diverged when its "
      "optimizee objective ends above this many times its start. <= 0: only "
      "non-finite values count.")
  divergence_lr_decay: float = flag(
      0.5, "--on_divergence=rollback multiplies the meta learning rate by "
      "this.")
  selection: str = flag(
      "original", "Which evaluation picks model.ckpt-0: 'original' = lowest "
      "evaluation cost (--evaluation_epochs runs of --fix_num_steps_eval "
      "steps from N(0,1) parameters); 'robust' = lowest mean final objective "
      "of --selection_steps-step meta-test runs on fixed --selection_seeds (a "
      "diverging optimizer never wins).", selection_lib.SELECTIONS)
  selection_steps: int = flag(1000, "Steps of each --selection=robust run.")
  # New in the port: speed (README "Speed").
  jit_compile: bool = flag(
      False, "Compile the optimizer's step inside each meta-training unroll "
      "with XLA (forward and meta-gradient); the numbers change by float "
      "rounding only.")
  selection_seeds: tuple = flag(
      (1001, 1002, 1003), "Seeds of the --selection=robust runs (each fixes "
      "the initial parameters, initial learning rates and batches).")


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


SeriesResult = collections.namedtuple(
    "SeriesResult", ["last", "total_step", "diverged", "mini"])
SeriesResult.__doc__ = """One meta-iteration's series of unrolls: ``last``
(the last applied unroll's output and regularizer switch, or None), the
summary step counter after it, why it diverged (or None), and ``mini``: the
last unroll's mini dataset (data, labels), which the evaluation reuses as the
original's ``validate`` reused the fed placeholders."""


class CarriedState(object):
  """The original's TF1 local variables that carry state between unrolls.

  They start at zero and are overwritten with an unroll's final values only
  when another unroll of the same series follows (``unroll_itr + 1 <
  num_unrolls``, training and validation alike). With the default
  ``reset_rnn_params=True`` the optimizer state is re-initialised only at the
  very first unroll of training, so later meta-iterations start from these
  variables, i.e. from the state at the start of the previous series' last
  unroll (or zeros if it had a single unroll). That is what the original
  does; it is reproduced.
  """

  def __init__(self, problem, optimizer):
    self.optimizer = optimizer
    self.value = unroll_lib.zero_loop_state(problem, optimizer)

  def update(self, final_state):
    self.value = final_state

  def to_arrays(self):
    """The carried tensors, flattened, for the resume state."""
    return [t.numpy() for t in tf.nest.flatten(self.value)]

  def load_arrays(self, arrays):
    """Restores what :meth:`to_arrays` saved (same problem and optimizer).

    Also reads the layout of earlier versions, which carried per-tensor
    state dicts instead of the packed state.
    """
    value = _fit_arrays(self.value, arrays)
    if value is None:
      per_tensor = self.value._replace(states=unroll_lib.per_tensor_states(
          self.optimizer, self.value))
      value = _fit_arrays(per_tensor, arrays)
      if value is not None:
        value = value._replace(states=self.optimizer.pack_state(value.states))
    if value is None:
      raise ValueError("saved carried state does not fit this problem")
    self.value = value


def _fit_arrays(template, arrays):
  """``arrays`` in the structure of ``template``, or None if they differ."""
  flat = tf.nest.flatten(template)
  if len(arrays) != len(flat) or any(
      tuple(a.shape) != tuple(f.shape) for a, f in zip(arrays, flat)):
    return None
  return tf.nest.pack_sequence_as(
      template, [tf.constant(a, dtype=f.dtype) for a, f in zip(arrays, flat)])


class TrainingProgress(tf.Module):
  """Counters saved in checkpoints so an interrupted run resumes."""

  def __init__(self):
    super().__init__(name="progress")
    self.meta_iteration = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.problem_itr = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.best_evaluation = tf.Variable(float("inf"), dtype=tf.float64,
                                       trainable=False)
    self.stage = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.num_eval = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.improved = tf.Variable(False, trainable=False)


RESUME_STATE_SUFFIX = ".resume.npz"


def resume_state_path(checkpoint_path):
  """The sidecar of ``model.ckpt-K``: what the next meta-iteration depends on
  besides the checkpoint's variables (issue 13: exact resume)."""
  return checkpoint_path + RESUME_STATE_SUFFIX


def write_resume_state(path, carried, loop_state):
  """Writes numpy's and Python's random states, the carried optimizer/optimizee
  state and ``loop_state`` (a JSON-able dict of the training loop's own
  values: the best model's meta-iteration, the meta learning rate after
  rollbacks, the best robust score of a curriculum run), atomically
  (l2o_scale.runs.atomic_file).

  Saving the random states (rather than re-seeding per meta-iteration) keeps
  the single random stream of the original, so a run with ``--seed`` draws
  exactly what the original would, interrupted or not.
  """
  arrays = {"carried_{}".format(i): a
            for i, a in enumerate(carried.to_arrays())}
  np_state = np.random.get_state()
  meta = dict(numpy=[np_state[0], np_state[2], np_state[3], np_state[4]],
              python=random.getstate(), num_carried=len(arrays),
              **loop_state)
  with atomic_file.replace(path, "wb") as f:
    np.savez(f, numpy_keys=np_state[1], meta=np.array(json.dumps(meta)),
             **arrays)


def read_resume_state(path, carried):
  """Restores what :func:`write_resume_state` wrote; returns its loop state
  (a dict; keys missing in an older sidecar are absent).

  Returns ``False`` (nothing restored) when the checkpoint has no sidecar,
  e.g. one written before exact resume existed.
  """
  if not os.path.exists(path):
    return False
  with np.load(path) as saved:
    meta = json.loads(str(saved["meta"]))
    keys = saved["numpy_keys"]
    arrays = [saved["carried_{}".format(i)] for i in range(meta["num_carried"])]
  name, pos, has_gauss, cached = meta["numpy"]
  np.random.set_state((name, keys, pos, has_gauss, cached))
  version, internal, gauss = meta["python"]
  random.setstate((version, tuple(internal), gauss))
  carried.load_arrays(arrays)
  return {k: v for k, v in meta.items()
          if k not in ("numpy", "python", "num_carried")}


class CheckpointWriter(object):
  """``model.ckpt-K`` checkpoints of optimizer, meta-optimizer and progress,
  each with its resume-state sidecar (written first, so a checkpoint that the
  ``checkpoint`` file lists always has one)."""

  def __init__(self, logdir, optimizer, meta_optimizer, progress):
    self.logdir = logdir
    self.optimizer = optimizer
    self.resume_state = None  # () -> (CarriedState, loop state dict)
    self.ckpt = checkpoints.tf2_checkpoint(optimizer,
                                           meta_optimizer=meta_optimizer,
                                           progress=progress)
    self.manager = tf.train.CheckpointManager(
        self.ckpt, logdir, max_to_keep=None,
        checkpoint_name=checkpoints.CHECKPOINT_BASENAME)

  def save(self, number):
    if self.resume_state is not None:
      carried, loop_state = self.resume_state()
      write_resume_state(resume_state_path(os.path.join(
          self.logdir, "{}-{}".format(checkpoints.CHECKPOINT_BASENAME,
                                      number))), carried, loop_state)
    return self.manager.save(checkpoint_number=number)

  def meta_optimizer_iterations(self):
    return self.ckpt.meta_optimizer.iterations.numpy()

  def latest(self):
    return self.manager.latest_checkpoint

  def restore(self, path):
    """Restores a checkpoint written by this class, or a TF1 one.

    The configuration check runs first (CheckpointMismatchError names the
    first variable that does not fit); nothing is assigned before it passes.
    """
    try:
      checkpoints.read_meta_parameters(path, self.optimizer)
      if checkpoints.checkpoint_format(path) == "tf1":
        checkpoints.restore_optimizer(path, self.optimizer)
        return "tf1"
      self.ckpt.read(path).assert_existing_objects_matched()
      return "tf2"
    except (tf.errors.OpError, IndexError) as e:
      # The checkpoint reader's errors for a truncated .data / empty .index.
      message = (getattr(e, "message", None) or str(e)).strip()
      raise OSError("checkpoint {} is damaged ({})".format(
          path, message.splitlines()[0] if message else type(e).__name__))


def nonfinite_warning(k, unroll_itr, value, nonfinite, entries):
  """The warning for an unroll of (0-based) meta-iteration ``k`` whose
  meta-objective ``value`` or ``nonfinite`` of its ``entries`` meta-gradient
  entries are not finite; None when all are finite. Printed after the
  unroll's progress line and numbered as it is (single-process and
  distributed runs alike)."""
  if not nonfinite and np.isfinite(value):
    return None
  what = None if np.isfinite(value) else "meta-objective {:.6g}".format(value)
  counted = "{} of {} meta-gradient entries non-finite{}".format(
      nonfinite, entries,
      ", replaced by zeros as the original does" if nonfinite else "")
  return "warning: [meta-iteration {}] unroll {}: {}{}.".format(
      k + 1, unroll_itr + 1, what + "; " if what else "", counted)


def _log(out, message):
  out.write(message + "\n")
  out.flush()


def _problem_data(dataset, batch_size, mini_batch_size, out):
  """Data arrays, labels as class indices, and the usable mini batch size."""
  if dataset is None or dataset.size == 0:
    return None, None, 0, 0
  data = np.asarray(dataset.data, np.float32)
  labels = np.asarray(dataset.labels)
  n = data.shape[0]
  if mini_batch_size > n:
    _log(out, "mini_batch_size={} is larger than the dataset ({} rows): using "
         "the whole dataset as the mini dataset.".format(mini_batch_size, n))
    mini_batch_size = n
  return data, labels, batch_size, mini_batch_size


def _one_hot(labels):
  """One-hot rows as the original training feed (np.eye(max + 1)[labels])."""
  if labels.ndim != 1:
    return labels.astype(np.float32)
  return datasets.one_hot_rows(labels)


class _Trainer(object):
  """One problem's meta-training loop (the body of the original's problem loop)."""

  def __init__(self, problem, problem_name, dataset, batch_size, optimizer,
               meta_optimizer, config, gradient_clip,
               obj_train_max_multiplier, summary_writer, out):
    self.problem = problem
    self.dataset = dataset
    self.problem_name = problem_name
    self.config = config
    self.optimizer = optimizer
    self.meta_optimizer = meta_optimizer
    self.learner = meta_learner_lib.MetaLearner(meta_optimizer, gradient_clip)
    self.pending_warning = None
    self.obj_train_max_multiplier = obj_train_max_multiplier
    self.summary_writer = summary_writer
    self.out = out
    self.data, self.labels, self.batch_size, self.mini_batch_size = (
        _problem_data(dataset, batch_size, config.mini_batch_size, out))
    # Probes of the regularizer are drawn right after the problem, as the
    # original drew them while building the graph.
    self.reg = unroll_lib.make_regularizer_config(
        problem, config.reg_optimizer, config.reg_optimizee, config.alpha,
        config.beta, config.reg_option, config.hessian_itrs)
    self.mt = mt_utils_lib.MTUtils(problem) if config.if_mt else None
    self.meta_step = meta_step_lib.make_meta_step(
        problem, optimizer, self.reg, config.l2_reg, config.jit_compile)
    self.eval_unroll = meta_step_lib.make_eval_unroll(
        problem, optimizer, self.reg, config.jit_compile)
    self.carried = CarriedState(problem, optimizer)
    self.num_nonfinite = 0
    self.reset_next_series = False  # Set after a rollback (stale state).
    self.selection_runs = None  # Built at the first robust evaluation.
    self.selection_run_cache = testing_lib.RunCache()

  # ------------------------------------------------------------- data
  def init_tensors(self):
    """Fresh optimizee parameters for a series.

    ``optimizee_init="normal"`` (the original): standard normal, drawn with
    numpy. ``"problem"``: the problem's own initialisation, as meta-testing
    starts (e.g. N(0, 0.01) for the MNIST MLPs), with an op seed drawn from
    numpy's stream (a fresh op seed gives the first draw of its stream, so
    the values depend on the seeds only; no ``tf.random.set_seed``, which
    would clear TF's kernel cache).
    """
    if self.config.optimizee_init == "problem":
      seed = int(np.random.randint(2**31 - 1))
      return [t.numpy() for t in self.problem.init_tensors(seed=seed)]
    return [np.random.normal(size=shape).astype(np.float32)
            for shape in self.problem.param_shapes]

  def robust_score(self):
    """``--selection=robust``'s score of the current meta-parameters."""
    if self.selection_runs is None:
      self.selection_runs = selection_lib.make_runs(
          self.problem, self.optimizer,
          0 if self.data is None else self.data.shape[0], self.batch_size,
          self.config.selection_steps, self.config.selection_seeds)
    return selection_lib.robust_score(
        self.optimizer, self.problem, self.dataset, self.batch_size or None,
        self.selection_runs, self.config.divergence_growth_limit,
        run_cache=self.selection_run_cache)

  def batches(self, total, lengths, stride=1):
    """Batches per unroll for the learner, and for the MT teacher.

    One draw of ``total * stride`` batches (l.286-305): the teacher takes
    consecutive groups of ``stride * length`` (``stride`` = ``mt_k`` teacher
    steps per imitation step), the learner every ``stride``-th of them.
    """
    if self.data is None:
      empty = [[[] for _ in range(n * stride)] for n in lengths]
      return [g[::stride] for g in empty], empty
    all_batches = datasets.batch_indices(self.mini_batch_size, total * stride,
                                         self.batch_size)
    return (split_batches(all_batches, lengths, stride),
            split_batches(all_batches, [n * stride for n in lengths]))

  def mini_batches(self, num_unrolls):
    if self.data is None:
      return [np.zeros([0], np.int64)] * num_unrolls
    if self.config.data_freeze:
      return [np.arange(self.mini_batch_size)] * num_unrolls
    full_batch = np.arange(self.data.shape[0])
    chosen = []
    for _ in range(num_unrolls):
      np.random.shuffle(full_batch)
      chosen.append(full_batch[:self.mini_batch_size].copy())
    return chosen

  def mini_dataset(self, rows):
    if self.data is None:
      return tf.zeros([0]), tf.zeros([0])
    return (tf.constant(self.data[rows]),
            tf.constant(_one_hot(self.labels[rows])))

  def _batch_tensor(self, batches, length):
    if self.data is None:
      return tf.zeros([length, 0], tf.int32)
    return tf.constant(np.asarray(batches, np.int32).reshape(length, -1))

  def static_switch(self, switch):
    """The unroll's ``jacob_switch`` as a Python bool, so each value gets its
    own simpler trace (unroll.switched_regularizer); always False when no
    regularizer accumulates, so that a run without one traces once."""
    return bool(switch) and bool(self.reg.reg_optimizer)

  # ---------------------------------------------------------- unrolls
  def run_series(self, k, lengths, mt_training, total_step, log_prefix):
    """Trains over one series of partial unrolls (one meta-iteration).

    Returns a :class:`SeriesResult`; its ``diverged`` names why an unroll
    diverged when ``on_divergence`` is not ``continue`` (the series then
    stops there without applying that unroll's meta-gradients).
    """
    num_unrolls = len(lengths)
    total = sum(lengths)
    weights = [np.ones(n, np.float32) / n for n in lengths]
    stride = self.config.mt_k if mt_training else 1
    batch_groups, mt_batches = self.batches(total, lengths, stride)
    mini_batches = self.mini_batches(num_unrolls)
    init_tensors = [tf.constant(t) for t in self.init_tensors()]
    if mt_training:
      teacher = self.mt.get_mt_labels(init_tensors, self.data, self.labels,
                                      mini_batches, mt_batches,
                                      k=self.config.mt_k)
    last = None
    for unroll_itr, length in enumerate(lengths):
      switch = regularizer_switch(unroll_itr, num_unrolls,
                                  self.config.regularize_time,
                                  self.config.reg_scale)
      first_unroll = unroll_itr == 0
      reset_state = (first_unroll and k == 0 if self.config.reset_rnn_params
                     else first_unroll) or (first_unroll and
                                            self.reset_next_series)
      mini_data, mini_labels = self.mini_dataset(mini_batches[unroll_itr])
      if mt_training:
        mt_labels = mt_utils_lib.stack_mt_labels(teacher[unroll_itr],
                                                 len(self.problem.param_shapes))
      else:
        mt_labels = unroll_lib.zero_mt_labels(self.problem.param_shapes, length)
      if not getattr(self, "compiled", False):
        _log(self.out, "compiling the unroll (tf.function), ~30 s the first "
             "time...")
        self.compiled = True
      start = time.time()
      inputs = unroll_lib.UnrollInputs(
          obj_weights=tf.constant(weights[unroll_itr]),
          batches=self._batch_tensor(batch_groups[unroll_itr], length),
          mini_data=mini_data, mini_labels=mini_labels,
          init_tensors=init_tensors, jacob_switch=self.static_switch(switch),
          mt_labels=[tf.constant(m) for m in mt_labels],
          first_unroll=tf.constant(first_unroll),
          reset_state=tf.constant(reset_state))
      out, grads = self.meta_step(inputs, self.carried.value,
                                  bool(mt_training))
      objective = out.metaobjmt if mt_training else out.metaobj
      sub_obj = out.problem_objectives.numpy()
      if not mt_training:
        if np.any(sub_obj < 0):
          raise ValueError("Training problem objectives must be nonnegative.")
        if self.obj_train_max_multiplier > 0 and (
            sub_obj[-1] > unroll_lib.objective_limit(
                out.initial_obj.numpy(), self.obj_train_max_multiplier)):
          _log(self.out, "{} broke early at unroll {} of {}: objective grew "
               "more than obj_train_max_multiplier.".format(
                   log_prefix, unroll_itr + 1, num_unrolls))
          break
      reason = stability.divergence_reason(
          sub_obj, objective, grads, self.config.divergence_growth_limit)
      if reason and self.config.on_divergence != "continue":
        self.warn_divergence(log_prefix, unroll_itr, num_unrolls, reason)
        return SeriesResult(last, total_step, reason,
                            (mini_data, mini_labels))
      self.apply(grads, objective, unroll_itr, k)
      if unroll_itr + 1 < num_unrolls:
        self.carried.update(out.final_state)
      last = (out, switch)
      total_step += 1
      self.log_unroll(log_prefix, unroll_itr, num_unrolls, length, objective,
                      sub_obj, time.time() - start, mt_training, total_step)
      # Warnings after the unroll's progress line, numbered as it is.
      if self.pending_warning:
        _log(self.out, self.pending_warning)
      if reason:
        self.warn_divergence(log_prefix, unroll_itr, num_unrolls, reason)
    self.reset_next_series = False
    return SeriesResult(last, total_step, None, (mini_data, mini_labels))

  def warn_divergence(self, prefix, unroll_itr, num_unrolls, reason):
    action = {
        "continue": ("its meta-gradients are applied as the original does "
                     "(--on_divergence=rollback undoes such meta-iterations)"),
        "rollback": "rolling back",
        "stop": "stopping (--on_divergence=stop)",
    }[self.config.on_divergence]
    _log(self.out, "warning: {} unroll {}/{} diverged: {}; {}.".format(
        prefix, unroll_itr + 1, num_unrolls, reason, action))

  def apply(self, grads, objective, unroll_itr, k):
    """The meta-update (:class:`meta_learner.MetaLearner`), and the warning
    about non-finite values, printed after the unroll's progress line and
    numbered as it is."""
    update = self.learner.apply(grads)
    self.pending_warning = nonfinite_warning(
        k, unroll_itr, float(objective.numpy()), update.nonfinite,
        update.entries)
    if self.pending_warning:
      self.num_nonfinite += 1

  def log_unroll(self, prefix, unroll_itr, num_unrolls, length, objective,
                 sub_obj, seconds, mt_training, step):
    value = float(objective.numpy())
    _log(self.out, "{} unroll {}/{} ({} steps{}) meta-objective {:.6g} "
         "problem objective {:.4g} -> {:.4g} {:.2f}s".format(
             prefix, unroll_itr + 1, num_unrolls, length,
             ", imitation" if mt_training else "", value, float(sub_obj[0]),
             float(sub_obj[-1]), seconds))
    if self.summary_writer is not None:
      with self.summary_writer.as_default(step=step):
        tf.summary.scalar("MetaObjective", value)
        tf.summary.scalar(self.problem_name + "_MetaObjective", value)

  def write_histograms(self, state, grads, step):
    """The original's histogram summaries (states, raw/clipped grads, vars).

    ``state``: the first tensor's optimizer state as a dict with the TF1
    slot names (as the original summarised it), or None. ``grads``: the last
    (raw, clipped) meta-gradients.
    """
    if self.summary_writer is None or state is None:
      return
    with self.summary_writer.as_default(step=step):
      if state:
        for key, val in sorted(state.items()):
          tf.summary.histogram("State/{}".format(key),
                               utils.make_finite(val, tf.zeros_like(val)))
      raw, clipped = grads
      for (name, var), g, c in zip(self.optimizer.tf1_variables().items(), raw,
                                   clipped):
        tf.summary.histogram(name + "_rawgrad",
                             utils.make_finite(g, tf.zeros_like(g)))
        tf.summary.histogram(name + "_var", var)
        tf.summary.histogram(name + "_grad", c)

  # --------------------------------------------------------- validation
  def validate(self, k, lengths, switch, mini):
    """Final objective of one evaluation series (original ``validate``)."""
    num_unrolls = len(lengths)
    total = sum(lengths)
    init_tensors = [tf.constant(t) for t in self.init_tensors()]
    mini_data, mini_labels = mini
    fetched = None
    for unroll_itr, length in enumerate(lengths):
      first_unroll = unroll_itr == 0
      reset_state = (first_unroll and k == 0 if self.config.reset_rnn_params
                     else first_unroll)
      # The original draws a fresh set of batches for every unroll.
      groups, _ = self.batches(total, lengths)
      fetched = self.eval_unroll(unroll_lib.UnrollInputs(
          obj_weights=tf.constant(np.ones(length, np.float32) / length),
          batches=self._batch_tensor(groups[unroll_itr], length),
          mini_data=mini_data, mini_labels=mini_labels,
          init_tensors=init_tensors, jacob_switch=self.static_switch(switch),
          mt_labels=[tf.constant(m) for m in unroll_lib.zero_mt_labels(
              self.problem.param_shapes, length)],
          first_unroll=tf.constant(first_unroll),
          reset_state=tf.constant(reset_state)), self.carried.value)
      if unroll_itr + 1 < num_unrolls:
        self.carried.update(fetched.final_state)
    return float(fetched.problem_objectives.numpy()[-1])

  def evaluate(self, k, lengths, switch, epochs, mini):
    """Mean final objective of ``epochs`` validation series on ``mini`` (the
    last training series' mini dataset, :class:`SeriesResult`)."""
    return sum(self.validate(k, lengths, switch, mini)
               for _ in range(epochs)) / epochs


def _unroll_plan(k, if_cl, curriculum, fix_unroll, fix_unroll_length,
                 fix_num_steps, num_unroll_func, num_partial_unroll_itrs_func):
  """Lengths of the partial unrolls of meta-iteration ``k`` (l.270-285)."""
  del k
  if if_cl:
    return [fix_unroll_length] * curriculum.train_unrolls
  if not fix_unroll:
    num_unrolls = num_unroll_func()
    return [num_partial_unroll_itrs_func() for _ in range(num_unrolls)]
  return [fix_unroll_length] * (fix_num_steps // fix_unroll_length)


def train_optimizer(logdir,
                    optimizer_spec,
                    problems_and_data,
                    num_problems,
                    num_meta_iterations,
                    num_unroll_func,
                    num_partial_unroll_itrs_func,
                    learning_rate=1e-4,
                    gradient_clip=5.,
                    is_chief=False,
                    select_random_problems=True,
                    callbacks=None,
                    obj_train_max_multiplier=-1,
                    out=sys.stdout,
                    fix_unroll=False,
                    fix_unroll_length=20,
                    fix_num_steps=100,
                    fix_num_steps_eval=100,
                    evaluation_period=1,
                    evaluation_epochs=20,
                    save_period=1,
                    if_cl=False,
                    config=None,
                    resume=True,
                    summaries=True):
  """Trains the meta-parameters of an optimizer (the original's arguments).

  New arguments: ``config`` (TrainingConfig: the flags the original read
  from ``FLAGS`` inside metaopt.py), ``resume`` (continue from the latest
  checkpoint in ``logdir``) and ``summaries`` (write TensorBoard summaries).
  ``is_chief``/``callbacks`` are accepted for compatibility; there is one
  worker. Returns a dict with the best evaluation, the last checkpoint and
  counts of what happened.
  """
  del is_chief, callbacks
  config = config or TrainingConfig()
  schedule = _Schedule(num_meta_iterations, num_unroll_func,
                       num_partial_unroll_itrs_func, fix_unroll,
                       fix_unroll_length, fix_num_steps, fix_num_steps_eval,
                       evaluation_period, evaluation_epochs, save_period,
                       if_cl)
  run, finished = _open_run(logdir, optimizer_spec, learning_rate, config,
                            schedule, resume, out)
  if finished is not None:
    return finished
  summary_writer = None
  if summaries:
    summary_writer = summaries_lib.create_writer(
        logdir, int(run.meta_optimizer.iterations.numpy()) if run.latest
        else None)
  loop = MetaLoopState(
      best_evaluation=float(run.progress.best_evaluation.numpy()),
      total_step=int(run.meta_optimizer.iterations.numpy()), k=run.start_k,
      robust_best=[float("inf")] if config.selection == "robust" else None)
  start_k = run.start_k
  for problem_itr, (problem_spec, dataset, batch_size) in enumerate(
      _sample_problems(problems_and_data, num_problems,
                       select_random_problems)):
    problem = problem_spec.build()
    trainer = _Trainer(problem, getattr(problem_spec.callable, "__name__",
                                        "problem"),
                       dataset, batch_size, run.optimizer, run.meta_optimizer,
                       config, gradient_clip, obj_train_max_multiplier,
                       summary_writer, out)
    run.writer.resume_state = lambda t=trainer: (t.carried, dict(
        best_model_idx=loop.best_model_idx,
        meta_learning_rate=float(run.meta_optimizer.learning_rate),
        robust_best=loop.robust_best[0] if loop.robust_best else None,
        improvements=loop.improvements))
    if run.latest and problem_itr == 0 and start_k > 0:
      _resume_trainer(run, trainer, loop, out)
    _train_on_problem(run, trainer, loop, schedule, start_k, problem_itr,
                      summary_writer, out)
    loop.nonfinite += trainer.num_nonfinite
    if not if_cl:
      run.progress.meta_iteration.assign(loop.k + 1)
      run.writer.save(loop.k + 1)
    start_k = 0
    if loop.stop or loop.stopped_by_divergence:
      break
  return _close_run(run, loop, schedule, config, summary_writer, out)


@dataclasses.dataclass
class MetaLoopState:
  """What the meta-training loop carries from one meta-iteration to the next
  (besides the checkpointed variables): the best selection value and the
  meta-iteration it came from, the step counter of the summaries, counts
  for the final report, and whether to stop. ``robust_best`` is a one-item
  list (the curriculum's robust score, shared with ``_curriculum_step``) or
  None."""
  best_evaluation: float
  total_step: int
  k: int
  robust_best: list = None
  best_model_idx: int = None
  divergences: int = 0
  stopped_by_divergence: bool = False
  nonfinite: int = 0
  num_evaluations: int = 0
  stop: bool = False
  # Evaluations that beat an earlier finite best (a curriculum promotion is
  # none): 0 at the end of a run means it learned nothing. None: unknown
  # (resumed from a sidecar without the count).
  improvements: int = 0


_Schedule = collections.namedtuple("_Schedule", [
    "num_meta_iterations", "num_unroll_func", "num_partial_unroll_itrs_func",
    "fix_unroll", "fix_unroll_length", "fix_num_steps", "fix_num_steps_eval",
    "evaluation_period", "evaluation_epochs", "save_period", "if_cl"])
_Schedule.__doc__ = """The original's schedule arguments of
``train_optimizer``: how many meta-iterations, how long their unrolls, when
to evaluate and save."""

_Run = collections.namedtuple("_Run", [
    "logdir", "optimizer", "meta_optimizer", "progress", "writer",
    "curriculum", "latest", "start_k"])
_Run.__doc__ = """What one call of ``train_optimizer`` works on: the
optimizer and its meta-optimizer, the checkpointed progress counters, the
checkpoint writer, the curriculum (or None), and where it resumed."""


def _open_run(logdir, optimizer_spec, learning_rate, config, schedule, resume,
              out):
  """Builds the optimizer and meta-optimizer and resumes from ``logdir``.

  Returns (_Run, None), or (None, result) when the run in ``logdir`` has
  already finished (the same command run again says so and does nothing).
  """
  tf.io.gfile.makedirs(logdir)
  optimizer = optimizer_spec.build()
  meta_optimizer = tf1_optimizers.RMSProp(
      optimizer.meta_variables, learning_rate, decay=config.rms_decay,
      epsilon=config.rms_epsilon)
  progress = TrainingProgress()
  writer = CheckpointWriter(logdir, optimizer, meta_optimizer, progress)
  curriculum = (curriculum_lib.Curriculum(schedule.fix_unroll_length)
                if schedule.if_cl else None)
  latest, start_k = resume_point(writer, progress, resume,
                                 schedule.num_meta_iterations, out)
  if latest and start_k and curriculum is not None:
    curriculum.load_state_dict(dict(
        stage=progress.stage.numpy(), num_eval=progress.num_eval.numpy(),
        improved=progress.improved.numpy(),
        best=progress.best_evaluation.numpy()))
  done = dict(best_evaluation=float(progress.best_evaluation.numpy()),
              last_checkpoint=latest, nonfinite_unrolls=0)
  finished = (_read_finished(logdir, schedule.num_meta_iterations)
              if resume and schedule.if_cl else None)
  if finished is not None:
    _log(out, "Training already complete (the curriculum run ended at "
         "meta-iteration {}); nothing to do. Checkpoints are in {}; "
         "model.ckpt-0 is the best model.".format(finished, logdir))
    return None, dict(done, meta_iterations=finished)
  if start_k >= schedule.num_meta_iterations:
    _log(out, "Training already complete ({} of {} meta-iterations); nothing "
         "to do. Checkpoints are in {}.".format(
             start_k, schedule.num_meta_iterations, logdir))
    return None, dict(done, meta_iterations=start_k)
  return _Run(logdir, optimizer, meta_optimizer, progress, writer, curriculum,
              latest, start_k), None


def _sample_problems(problems_and_data, num_problems, select_random_problems):
  """The problems of the run, one per outer iteration (l.180-195)."""
  problems_and_data = list(problems_and_data)
  if select_random_problems:
    return [random.choice(problems_and_data) for _ in range(num_problems)]
  num_repeats = num_problems // len(problems_and_data) + 1
  random.shuffle(problems_and_data)
  return (problems_and_data * num_repeats)[:num_problems]


def _resume_trainer(run, trainer, loop, out):
  """Restores the carried optimizer state, the random streams and the loop's
  own state saved with the checkpoint the run resumes from."""
  restored = read_resume_state(resume_state_path(run.latest), trainer.carried)
  if restored is False:
    _log(out, "Note: {} has no resume state (written by an older "
         "version): random streams and carried optimizer state restart, "
         "so the run differs from an uninterrupted one.".format(run.latest))
    loop.improvements = None
    return
  loop.best_model_idx = restored.get("best_model_idx")
  loop.improvements = restored.get("improvements")
  _restore_loop_state(restored, run.meta_optimizer, loop.robust_best, out)


def _train_on_problem(run, trainer, loop, schedule, start_k, problem_itr,
                      summary_writer, out):
  """Meta-iterations ``start_k`` .. ``num_meta_iterations - 1`` on one
  problem: a series of unrolls each, then rollback, evaluation and saving
  as the flags say."""
  config = trainer.config
  snapshot = stability.MetaSnapshot(run.meta_optimizer,
                                    run.optimizer.meta_variables)
  n = schedule.num_meta_iterations
  for k in range(start_k, n):
    loop.k = k
    if config.on_divergence == "rollback":
      snapshot.take()
    mt_training = config.if_mt and random.random() < config.mt_ratio
    lengths = _unroll_plan(k, schedule.if_cl, run.curriculum,
                           schedule.fix_unroll, schedule.fix_unroll_length,
                           schedule.fix_num_steps, schedule.num_unroll_func,
                           schedule.num_partial_unroll_itrs_func)
    prefix = "[meta-iteration {}/{}]".format(k + 1, n)
    _log(out, "{} {} on {}: {} unrolls of {} steps".format(
        prefix, "imitation" if mt_training else "training",
        trainer.problem_name, len(lengths),
        lengths[0] if len(set(lengths)) == 1 else lengths))
    last, loop.total_step, diverged, mini = trainer.run_series(
        k, lengths, mt_training, loop.total_step, prefix)
    if diverged:
      loop.divergences += 1
      if config.on_divergence == "stop":
        _log(out, "{} meta-training stopped: {}. {}".format(
            prefix, diverged, _best_model_line(run.writer)))
        loop.stopped_by_divergence = True
        return
      _roll_back(snapshot, run.writer, run.optimizer, run.meta_optimizer,
                 trainer, config.divergence_lr_decay, prefix, out)
      run.progress.meta_iteration.assign(k + 1)
      continue
    trainer.write_histograms(
        unroll_lib.per_tensor_states(run.optimizer, last[0].final_state)[0]
        if last else None, trainer.learner.last_grads, loop.total_step)
    run.progress.meta_iteration.assign(k + 1)
    run.progress.problem_itr.assign(problem_itr)
    if (k + 1) % schedule.evaluation_period == 0:
      _evaluate(run, trainer, loop, schedule, k, last[1] if last else False,
                mini, summary_writer, out)
    if not schedule.if_cl and (k + 1) % schedule.save_period == 0:
      run.writer.save(k + 1)
    if loop.stop:
      _write_finished(run.logdir, k + 1, stopped=True)
      return


def _evaluate(run, trainer, loop, schedule, k, switch, mini, summary_writer,
              out):
  """One evaluation: the curriculum's step, or the (original or robust)
  selection of ``model.ckpt-0``."""
  length = schedule.fix_unroll_length
  if schedule.if_cl:
    eval_lengths = [length] * run.curriculum.eval_unrolls
  else:
    eval_lengths = [length] * (schedule.fix_num_steps_eval // length)
  cost = trainer.evaluate(k, eval_lengths, switch, schedule.evaluation_epochs,
                          mini)
  loop.num_evaluations += 1
  before = (run.curriculum.stage, run.curriculum.best) if schedule.if_cl \
      else (None, loop.best_evaluation)
  if schedule.if_cl:
    loop.stop = _curriculum_step(
        run.curriculum, cost, k, schedule.evaluation_period, run.writer,
        run.progress, trainer, switch, length, schedule.evaluation_epochs,
        out, robust_best=loop.robust_best, mini=mini)
    loop.best_evaluation = run.curriculum.best
    _count_improvement(loop, before,
                       (run.curriculum.stage, loop.best_evaluation))
    return
  score_fn = None
  if trainer.config.selection == "robust":
    score_fn = lambda: _log_robust_score(  # pylint: disable=g-long-lambda
        trainer, k, schedule.evaluation_period, summary_writer,
        loop.total_step, out)
  new_best = record_evaluation(cost, loop.best_evaluation, k,
                               schedule.evaluation_period, summary_writer,
                               loop.total_step, run.writer, run.progress, out,
                               score_fn)
  if new_best is not None:
    loop.best_evaluation = new_best
    loop.best_model_idx = k + 1
  _count_improvement(loop, before, (None, loop.best_evaluation))


def _count_improvement(loop, before, after):
  """Counts an evaluation whose best value beat an earlier finite one at the
  same curriculum stage (``before``/``after``: (stage, best))."""
  if (loop.improvements is not None and before[0] == after[0] and
      np.isfinite(before[1]) and after[1] < before[1]):
    loop.improvements += 1


def _close_run(run, loop, schedule, config, summary_writer, out):
  """The end of a run: finished marker, last lines, the result dict."""
  if schedule.if_cl and not loop.stop and not loop.stopped_by_divergence:
    _write_finished(run.logdir, loop.k + 1, stopped=False)
  if summary_writer is not None:
    summary_writer.flush()
  if not schedule.if_cl:
    _log(out, "best model index={}".format(loop.best_model_idx))
  if loop.nonfinite:
    _log(out, "{} unroll(s) had non-finite values (gradients zeroed).".format(
        loop.nonfinite))
  if loop.divergences:
    _log(out, "{} meta-iteration(s) diverged (--on_divergence={}).".format(
        loop.divergences, config.on_divergence))
  return dict(best_evaluation=loop.best_evaluation,
              last_checkpoint=run.writer.latest(),
              meta_iterations=loop.k + 1, nonfinite_unrolls=loop.nonfinite,
              divergences=loop.divergences,
              stopped_by_divergence=loop.stopped_by_divergence,
              best_model_idx=loop.best_model_idx,
              evaluations=loop.num_evaluations,
              improvements=loop.improvements)


def resume_point(writer, progress, resume, num_meta_iterations, out):
  """(latest checkpoint or None, meta-iteration to start at), restoring it.

  A TF1 checkpoint (the original's) gives meta-parameters only: start at 0.
  Shared with the distributed chief.
  """
  latest = writer.latest() if resume else None
  start_k = 0
  if latest:
    if writer.restore(latest) == "tf2":
      start_k = int(progress.meta_iteration.numpy())
    _log(out, "Resuming from {} ({} checkpoint) at meta-iteration {} of {}."
         .format(latest, checkpoints.checkpoint_format(latest).upper(),
                 start_k, num_meta_iterations))
  return latest, start_k


def _restore_loop_state(saved, meta_optimizer, robust_best, out):
  """The meta learning rate lowered by rollbacks and a curriculum run's best
  robust score, as they were when the resumed checkpoint was written."""
  lr = saved.get("meta_learning_rate")
  if lr is not None and lr != meta_optimizer.learning_rate:
    meta_optimizer.set_learning_rate(lr)
    _log(out, "Meta learning rate {:.3g} (as lowered by rollbacks before the "
         "interruption).".format(lr))
  if robust_best is not None and saved.get("robust_best") is not None:
    robust_best[0] = float(saved["robust_best"])


def _best_checkpoint(writer):
  path = os.path.join(writer.logdir, "{}-0".format(
      checkpoints.CHECKPOINT_BASENAME))
  return path if tf.io.gfile.exists(path + ".index") else None


def _best_model_line(writer):
  best = _best_checkpoint(writer)
  if best is None:
    return "No model was evaluated as best yet (no model.ckpt-0)."
  return "The best model evaluated before is {}.".format(best)


def _roll_back(snapshot, writer, optimizer, meta_optimizer, trainer, lr_decay,
               prefix, out):
  """Undoes a diverged meta-iteration (``--on_divergence=rollback``).

  The meta-parameters go back to the best evaluated model (``model.ckpt-0``)
  or, before there is one, to their values at the start of the
  meta-iteration; the meta-optimizer's slots to the start of the
  meta-iteration; the meta learning rate is multiplied by ``lr_decay``; the
  next series starts from a fresh optimizer state (the carried one is
  stale).
  """
  snapshot.restore()
  best = _best_checkpoint(writer)
  if best is not None:
    checkpoints.restore_optimizer(best, optimizer)
  meta_optimizer.set_learning_rate(meta_optimizer.learning_rate * lr_decay)
  trainer.reset_next_series = True
  _log(out, "{} rolled back to {}; meta learning rate now {:.3g}.".format(
      prefix, best or "the start of this meta-iteration",
      meta_optimizer.learning_rate))


def _log_robust_score(trainer, k, evaluation_period, summary_writer,
                      total_step, out):
  """Computes, logs and returns the robust selection score (lower = better)."""
  start = time.time()
  result = trainer.robust_score()
  _log(out, "selection {}, robust score={:.6g} (mean final objective over "
       "seeds {}: {}{}) {:.1f}s".format(
           (k + 1) // evaluation_period, result.score,
           ",".join(str(s) for s in trainer.config.selection_seeds),
           ", ".join("{:.4g}".format(f) for f in result.finals),
           "; diverged on seeds {}".format(result.diverged_runs)
           if result.diverged_runs else "", time.time() - start))
  if summary_writer is not None and np.isfinite(result.score):
    with summary_writer.as_default(step=total_step):
      tf.summary.scalar("SelectionScore", result.score)
  return result.score


def record_evaluation(cost, best_evaluation, k, evaluation_period,
                      summary_writer, step, writer, progress, out,
                      score_fn=None):
  """Logs an evaluation (line and summary) and keeps the model as
  ``model.ckpt-0`` if its selection value beats ``best_evaluation``.

  The selection value is ``cost`` (the original rule) or, with ``score_fn``
  (``--selection=robust``), what it returns. Returns the new best value, or
  None. Shared with the distributed chief so both write the same files.
  """
  _log(out, "evaluation {}, cost={:.6g}".format(
      (k + 1) // evaluation_period, cost))
  if summary_writer is not None:
    with summary_writer.as_default(step=step):
      tf.summary.scalar("EvaluationCost", cost)
  value = cost if score_fn is None else score_fn()
  if value < best_evaluation:
    progress.best_evaluation.assign(value)
    writer.save(0)
    return value
  return None


FINISHED_FILE = "curriculum_finished.json"


def _write_finished(logdir, meta_iteration, stopped):
  """Marks a curriculum run that stopped as finished (atomically), so the same
  command run again says so instead of training on (issue 13)."""
  with atomic_file.replace(os.path.join(logdir, FINISHED_FILE)) as f:
    json.dump({"meta_iteration": meta_iteration, "stopped": stopped}, f)


def _read_finished(logdir, num_meta_iterations):
  """The meta-iteration a finished curriculum run ended at, or None when it
  has not finished (or ran to fewer meta-iterations than now asked for)."""
  path = os.path.join(logdir, FINISHED_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    done = json.load(f)
  if done["stopped"] or done["meta_iteration"] >= num_meta_iterations:
    return int(done["meta_iteration"])
  return None


def _curriculum_step(curriculum, cost, k, evaluation_period, writer, progress,
                     trainer, switch, fix_unroll_length, evaluation_epochs, out,
                     robust_best=None, *, mini):
  """Applies the curriculum decision after an evaluation; True means stop.

  ``robust_best`` (``--selection=robust``): a one-element list holding the
  best robust score so far; an improvement the curriculum sees then becomes
  ``model.ckpt-0`` only if its robust score is lower too (the stage
  checkpoint the curriculum promotes from is written either way).
  """
  _log(out, "evaluation {}, num_steps={}, cost={:.6g}".format(
      (k + 1) // evaluation_period, curriculum.num_steps[curriculum.stage],
      cost))
  decision = curriculum.observe(cost)
  stop = False
  if decision.action == "improved":
    _sync_progress(progress, curriculum)
    if robust_best is None:
      writer.save(0)
    else:
      score = _log_robust_score(trainer, k, evaluation_period,
                                trainer.summary_writer,
                                int(writer.meta_optimizer_iterations()), out)
      if score < robust_best[0]:
        robust_best[0] = score
        writer.save(0)
    writer.save(decision.stage)
  elif decision.action == "promote":
    stage_ckpt = os.path.join(writer.logdir, "{}-{}".format(
        checkpoints.CHECKPOINT_BASENAME, decision.stage))
    checkpoints.restore_optimizer(stage_ckpt, writer.optimizer)
    eval_lengths = [fix_unroll_length] * curriculum.eval_unrolls
    new_cost = trainer.evaluate(k, eval_lengths, switch, evaluation_epochs,
                                mini)
    curriculum.reset_best(new_cost)
    _log(out, "curriculum: promoted to num_steps={}; evaluation {}, "
         "num_steps={}, cost={:.6g}".format(
             curriculum.num_steps[curriculum.stage],
             (k + 1) // evaluation_period,
             curriculum.num_steps[curriculum.stage], new_cost))
  elif decision.action == "stop":
    _log(out, "no improve during curriculum {} --> stop".format(
        decision.stage))
    stop = True
  _sync_progress(progress, curriculum)
  return stop


def _sync_progress(progress, curriculum):
  state = curriculum.state_dict()
  progress.stage.assign(state["stage"])
  progress.num_eval.assign(state["num_eval"])
  progress.improved.assign(state["improved"])
  progress.best_evaluation.assign(state["best"])
