"""One problem as meta-training sees it: its data, the regularizer's probes,
the compiled gradient estimator and evaluation unroll, and the inputs of
each partial unroll.

Port of the per-problem set-up of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.180-250: the problem, its dataset and the
feed of ``TrainableOptimizer.train``). :meth:`MetaTrainingTask.unroll_inputs`
is the one place an unroll's inputs are built from a plan, for the series of
this process (:mod:`l2o_scale.meta_training.series`) and for those a cluster
worker runs (:mod:`l2o_scale.meta_training.distributed`).
"""

import collections

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import compiled_run
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import mt_utils as mt_utils_lib
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.meta_testing import testing as testing_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.meta_training import unroll_method
from problems import datasets


class SeriesTensors(collections.namedtuple(
    "SeriesTensors",
    ["init_tensors", "obj_weights", "batches", "mini_rows", "switches",
     "state_seed"])):
  """A series' draws as tensors, per unroll where a list: what a series
  needs besides the data (and what a cluster worker's closure receives).
  ``state_seed``: the seed of a fresh optimizer state
  (:attr:`~l2o_scale.meta_training.plan.SeriesDraws.state_seed`)."""


def one_hot(labels, depth=None):
  """One-hot rows as the original training feed (np.eye(max + 1)[labels])."""
  if labels.ndim != 1:
    return labels.astype(np.float32)
  return datasets.one_hot_rows(labels, depth)


# Fixed, so that every seed and every resumed run holds back the same rows;
# a RandomState of its own leaves the run's numpy stream untouched.
VALIDATION_SPLIT_SEED = 0


def validation_split(num_rows, fraction):
  """(training rows, held-back rows) of ``--meta_objective=validation``: a
  fixed random ``fraction`` of ``num_rows`` (at least one row each side),
  both sorted."""
  held = min(max(int(round(fraction * num_rows)), 1), num_rows - 1)
  order = np.random.RandomState(VALIDATION_SPLIT_SEED).permutation(num_rows)
  return np.sort(order[held:]), np.sort(order[:held])


class MetaTrainingTask(object):
  """A problem, its data and its compiled unrolls.

  Building one draws the regularizer's probes from numpy right after the
  problem, as the original drew them while building its graph.
  """

  def __init__(self, problem, name, dataset, batch_size, optimizer, config,
               log):
    self.problem = problem
    self.name = name
    self.dataset = dataset
    self.optimizer = optimizer
    self.config = config
    self.data = self.labels = None
    # held_rows: the validation split (data, one-hot labels) when one is
    # held back; objective_rows: the same rows when the meta-objective is
    # measured on them, else None (the mini dataset).
    self.held_rows = self.objective_rows = None
    self.batch_size = self.mini_batch_size = 0
    if dataset is not None and dataset.size:
      self.data = np.asarray(dataset.data, np.float32)
      self.labels = np.asarray(dataset.labels)
      if "validation" in (config.meta_objective,
                          config.selection_objective):
        self.dataset = self._hold_back(config.validation_fraction)
        if config.meta_objective == "validation":
          self.objective_rows = self.held_rows
      self.batch_size = batch_size
      self.mini_batch_size = config.mini_batch_size
      if self.mini_batch_size > self.data.shape[0]:
        log(reporting.paragraph(
            "Note: the dataset has {} rows, fewer than --mini_batch_size={}, "
            "so each unroll's mini dataset (the rows it draws its "
            "minibatches from and measures the meta-objective on) is the "
            "whole dataset. Nothing to change; a smaller --mini_batch_size "
            "draws that many rows per unroll.".format(
                self.data.shape[0], self.mini_batch_size)))
        self.mini_batch_size = self.data.shape[0]
    self.reg = regularizer_lib.make_regularizer_config(
        problem, config.reg_optimizer, config.reg_optimizee, config.alpha,
        config.beta, config.reg_option, config.hessian_itrs)
    self.mt = mt_utils_lib.MTUtils(problem) if config.if_mt else None
    self.planner = plan_lib.Planner(
        problem, 0 if self.data is None else self.data.shape[0],
        self.batch_size, self.mini_batch_size, config)
    self._selection_runs = None
    self._meta_step = self._eval_unroll = None
    self._selection_cache = self._fast_forward_run = None

  # The compiled functions are made on first use and dropped by
  # release_compiled: a traced unroll and its meta-gradient hold tens of MB
  # (graphs, their instantiations and kernels) until nothing refers to it,
  # and a --mix_problems run that kept every drawn problem's would grow with
  # each one. Retracing gives the same graph, so the same numbers.
  @property
  def meta_step(self):
    """The compiled meta-gradient of an unroll
    (:func:`~l2o_scale.meta_training.meta_step.make_meta_step`)."""
    if self._meta_step is None:
      method = unroll_method.UnrollMethod.from_config(self.config)
      self._meta_step = meta_step_lib.make_meta_step(
          self.problem, self.optimizer, self.reg, self.config.l2_reg,
          method.jit_compile, method.time_parallel, method.memory_budget,
          method.recompute_budget, self.config.record_regularizer_share)
    return self._meta_step

  @property
  def eval_unroll(self):
    """The compiled unroll without gradients (evaluation series)."""
    if self._eval_unroll is None:
      method = unroll_method.UnrollMethod.from_config(self.config)
      self._eval_unroll = meta_step_lib.make_eval_unroll(
          self.problem, self.optimizer, self.reg, method.jit_compile,
          method.time_parallel, method.memory_budget)
    return self._eval_unroll

  @property
  def holds_compiled(self):
    """Whether the task holds compiled functions (made since it was built
    or last released)."""
    return any(f is not None for f in (
        self._meta_step, self._eval_unroll, self._fast_forward_run,
        self._selection_cache))

  def release_compiled(self):
    """Drops the compiled unrolls, fast-forward loop and selection runs, and
    with them their memory; the next use traces them again."""
    self._meta_step = self._eval_unroll = None
    self._selection_cache = self._fast_forward_run = None

  def _hold_back(self, fraction):
    """Keeps the training rows of :func:`validation_split` as the task's data
    and the held-back ones as ``held_rows`` (data, one-hot labels); returns
    the training rows as a Dataset (for the robust selection)."""
    if self.data.shape[0] < 2:
      raise ValueError("a validation split (--meta_objective=validation or "
                       "--selection_objective=validation) needs at least 2 "
                       "rows of data, the problem has {}".format(
                           self.data.shape[0]))
    train, held = validation_split(self.data.shape[0], fraction)
    depth = (int(np.max(self.labels)) + 1 if self.labels.ndim == 1 else None)
    self.held_rows = (tf.constant(self.data[held]),
                      tf.constant(one_hot(self.labels[held], depth)))
    self.data, self.labels = self.data[train], self.labels[train]
    return datasets.Dataset(self.data, self.labels, self.data.shape[0])

  @property
  def has_data(self):
    return self.data is not None

  def objective_data(self, mini):
    """(data, labels) the meta-objective is measured on: the held-back rows
    with ``--meta_objective=validation``, else the mini dataset ``mini``."""
    return mini if self.objective_rows is None else self.objective_rows

  def static_switch(self, switch):
    """The unroll's ``jacob_switch`` as a Python bool, so each value gets its
    own simpler trace (unroll.switched_regularizer); always False when no
    regularizer accumulates, so that a run without one traces once."""
    return bool(switch) and bool(self.reg.reg_optimizer)

  def mini_dataset(self, rows):
    """The mini dataset of an unroll (its rows of the data, one-hot labels)."""
    if self.data is None:
      return tf.zeros([0]), tf.zeros([0])
    return (tf.constant(self.data[rows]),
            tf.constant(one_hot(self.labels[rows], self.label_depth)))

  @property
  def label_depth(self):
    """One-hot depth of the whole data's labels (the original's
    ``np.eye(np.max(labels) + 1)``, labels of the full dataset), so a mini
    dataset that lacks the top class keeps the width of the logits."""
    if self.labels is None or self.labels.ndim != 1 or not self.labels.size:
      return None
    return int(np.max(self.labels)) + 1

  def teacher_steps(self, plan, instance=0):
    """Per unroll, the imitation teacher's steps (one array per parameter,
    ``[length, *shape]``) for an instance of ``plan``; None outside
    imitation."""
    shapes = self.problem.param_shapes
    if not plan.mt_training:
      return [None] * plan.num_unrolls
    draws = plan.instances[instance]
    teacher = self.mt.get_mt_labels(draws.init_tensors, self.data,
                                    self.labels, draws.mini_rows,
                                    draws.teacher_batches,
                                    k=self.config.mt_k)
    return [mt_utils_lib.stack_mt_labels(t, len(shapes)) for t in teacher]

  def series_tensors(self, plan, instance=0):
    """The draws of an instance of ``plan`` as tensors
    (:class:`SeriesTensors`)."""
    draws = plan.instances[instance]
    return SeriesTensors(
        init_tensors=[tf.constant(t) for t in draws.init_tensors],
        obj_weights=[tf.constant(np.ones(n, np.float32) / n)
                     for n in plan.lengths],
        batches=[tf.constant(b) for b in draws.batches],
        mini_rows=[tf.constant(np.asarray(r, np.int64))
                   for r in draws.mini_rows],
        switches=[tf.constant(s) for s in plan.switches],
        state_seed=tf.constant(draws.state_seed))

  def unroll_inputs(self, tensors, u, mini, switch, first, reset,
                    mt_labels=None):
    """The :class:`~l2o_scale.meta_training.unroll.UnrollInputs` of unroll
    ``u`` of a series (``tensors``: its :class:`SeriesTensors`) on the mini
    dataset ``mini`` (data, labels): the original's feed of ``train``.

    ``switch``, ``first``, ``reset``: the regularizer switch and whether the
    unroll is the first / resets the optimizer state, as Python values or
    tensors. ``mt_labels``: the teacher's steps (zeros by default, as the
    original fed outside imitation).
    """
    weights = tensors.obj_weights[u]
    held = self.objective_rows or (None, None)
    if mt_labels is None:
      mt_labels = [tf.zeros((weights.shape[0],) + tuple(s))
                   for s in self.problem.param_shapes]
    return unroll_lib.UnrollInputs(
        obj_weights=weights, batches=tensors.batches[u],
        mini_data=mini[0], mini_labels=mini[1],
        init_tensors=tensors.init_tensors, jacob_switch=switch,
        mt_labels=[tf.convert_to_tensor(m) for m in mt_labels],
        first_unroll=tf.convert_to_tensor(first),
        reset_state=tf.convert_to_tensor(reset),
        obj_data=held[0], obj_labels=held[1], state_seed=tensors.state_seed)

  def fast_forward(self, draws, mini):
    """The carried state after the fast-forward of ``draws`` (a
    :class:`~l2o_scale.meta_training.unroll.LoopState`): the current learned
    optimizer trains ``draws.init_tensors`` for ``len(draws.fast_forward)``
    steps from a fresh optimizer state (drawn from the series'
    ``state_seed``), as a meta-test run does (one compiled loop, no
    meta-gradient). Its initial objective is that of the
    initial parameters on the first unroll's mini dataset ``mini``, so the
    series' meta-objective stays relative to the start of the trajectory.
    """
    init = [tf.constant(t) for t in draws.init_tensors]
    if self._fast_forward_run is None:
      self._fast_forward_run = compiled_run.CompiledRun(
          self.optimizer, self.problem, init, self.data, self.labels,
          self.config.jit_compile)
    run = self._fast_forward_run
    run.reset(init, seed=draws.state_seed)
    run.run_chunk(tf.constant(draws.fast_forward))
    attend = [tf.convert_to_tensor(v) for v in run.param_vars]
    return unroll_lib.LoopState(
        initial_obj=self.problem.objective(init, *self.objective_data(mini)),
        params=list(run.real_params()), attend_params=attend,
        states=tf.nest.map_structure(tf.convert_to_tensor, run.state_vars),
        global_state=[tf.convert_to_tensor(v) for v in run.global_vars])

  def robust_score(self):
    """``--selection=robust``'s score of the current meta-parameters
    (:mod:`l2o_scale.meta_training.selection`)."""
    if self._selection_runs is None:
      self._selection_runs = selection_lib.make_runs(
          self.problem, self.optimizer, self.planner.data_size,
          self.batch_size, self.config.selection_steps,
          self.config.selection_seeds)
    return selection_lib.robust_score(
        self.optimizer, self.problem, self.dataset, self.batch_size or None,
        self._selection_runs, self.config.divergence_growth_limit,
        run_cache=self._selection_cache_or_new(),
        score_data=self.held_rows)

  def _selection_cache_or_new(self):
    if self._selection_cache is None:
      self._selection_cache = testing_lib.RunCache()
    return self._selection_cache
