"""Meta-testing: running a (learned or hand-designed) optimizer on a problem.

Port of ``test_optimizer`` and ``run_wall_clock_test`` of the evaluation
``metaopt.py`` (L2O-Entropy/L2O-ScalewHessian/L2O-Scale-Evaluation/metaopt.py,
l.606-745 and l.748-815), with minibatches from :func:`problems.datasets.batch_indices`.

How it differs from the TF1 code, and why:

* The original ran one ``sess.run([train_op, obj])`` per step; here
  compiled chunks of steps run
  (:class:`l2o_scale.meta_testing.compiled_run.CompiledRun`).
* Optimizers are used through their pure interface, with the state in the
  optimizer's packed layout (``initialize_packed_state`` /
  ``compute_updates_packed``, see
  :class:`optimizer.trainable_optimizer.PackedStateDefaults`); the
  baselines in :mod:`l2o_scale.meta_testing.baselines` implement the same interface with
  the TF1 update rules.
* ``objective_values[t]`` is the objective on minibatch ``t`` *before* update
  ``t`` (for an optimizer with attention: at the real, not the attended,
  parameters, as the original evaluated ``obj`` on ``real_params``).
* An integer ``seed`` fixes both the initial parameters
  (``tf.random.set_seed(seed)`` then ``problem.init_tensors(seed)``) and the
  minibatch order (``np.random.RandomState(seed)``), so different optimizers
  run with the same seed see the same start point and batches. The original
  drew the batch order from the unseeded global NumPy state.
* Optional, not in the original: held-out evaluation (loss and accuracy of
  the optimizee on another split every ``heldout_every`` steps), the point of
  the L2O-Entropy paper (generalization of the optimizee).
"""

import collections
import time

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import compiled_run
from l2o_scale.runs import checkpoints
from l2o_scale.steps import settings as step_settings_lib
from l2o_scale.steps import transform
from problems import datasets

DEFAULT_PROGRESS_EVERY = 1000  # the original printed every 1000 iterations
# The callers that repeat runs (metatest's seeds, the robust score) keep one.
RunCache = compiled_run.RunCache


# --------------------------------------------------------------------- data
def _dataset_arrays(dataset):
  """(data, labels) of a dataset, or (None, None) for problems without data."""
  if dataset is None:
    return None, None
  data = np.asarray(dataset.data)
  if data.size == 0:
    return None, None
  labels = np.asarray(dataset.labels)
  if len(data) != len(labels):
    raise ValueError("Labels and data must have the same number of samples "
                     "({} vs {}).".format(len(data), len(labels)))
  return data, labels


def _data_and_batch_size(dataset, batch_size):
  """(data, labels, batch size): the full data set by default, 0 without data."""
  data, labels = _dataset_arrays(dataset)
  if data is None:
    return None, None, 0
  return data, labels, len(data) if batch_size is None else int(batch_size)


# --------------------------------------------------------------- optimizer
def _check_pure_optimizer(optimizer):
  for method in ("initialize_state", "initialize_global_state",
                 "compute_updates", "initialize_packed_state",
                 "compute_updates_packed", "unpack_state"):
    if not callable(getattr(optimizer, method, None)):
      raise TypeError(
          "test_optimizer needs an optimizer with the pure step interface "
          "(initialize_state, initialize_global_state, compute_updates and "
          "their packed-state forms, see "
          "optimizer.trainable_optimizer.PackedStateDefaults): a "
          "learned optimizer from optimizer/ or a baseline from "
          "l2o_scale.meta_testing.baselines (SGD, Adam, Adagrad). Got {!r}.".format(
              type(optimizer).__name__))


def _is_trainable(optimizer):
  return callable(getattr(optimizer, "tf1_variables", None))


def restore_if_needed(optimizer, logdir, restore_model_name=None):
  """Restores a learned optimizer from ``logdir/restore_model_name``.

  As the original (metaopt.py l.684-691): the checkpoint is
  ``os.path.join(logdir, restore_model_name)``; an empty name takes the latest
  checkpoint in ``logdir``. Baselines (no meta-parameters) ignore ``logdir``.
  Returns the restored checkpoint path or None.
  """
  if logdir is None or not _is_trainable(optimizer):
    return None
  return checkpoints.restore_optimizer(
      checkpoints.checkpoint_in(logdir, restore_model_name), optimizer)


def initial_parameters(problem, seed):
  """Initial parameter tensors from an int/None seed or a list of arrays.

  Mirrors the original's ``init_fixed_variables(seed)`` for a list and
  ``problem.init_variables(seed)`` otherwise; an int seed also resets TF's
  global seed so the draw does not depend on earlier random ops.
  """
  if isinstance(seed, (list, tuple)):
    if len(seed) != len(problem.param_shapes):
      raise ValueError("seed gives {} initial arrays but the problem has {} "
                       "parameters".format(len(seed), len(problem.param_shapes)))
    params = []
    for i, (array, shape) in enumerate(zip(seed, problem.param_shapes)):
      array = np.asarray(array, dtype=np.float32)
      if tuple(array.shape) != tuple(shape):
        raise ValueError("Initial array {} has shape {} but the problem "
                         "parameter has shape {}".format(i, array.shape, shape))
      params.append(tf.constant(array))
    return params
  if seed is not None:
    tf.random.set_seed(int(seed))
  return [tf.convert_to_tensor(t, dtype=tf.float32)
          for t in problem.init_tensors(seed)]


def _print_progress(info):
  print("iteration {}/{}: objective {:.6g} ({:.1f} steps/s)".format(
      info["iteration"], info["num_iter"], info["objective"],
      info["steps_per_second"]), flush=True)


def _boundaries(num_iter, *periods):
  """Sorted step indices where a chunk must end (0 < b <= num_iter)."""
  points = {num_iter}
  for period in periods:
    if period:
      points.update(range(period, num_iter, period))
  return sorted(p for p in points if 0 < p <= num_iter)


def batch_schedule(num_iter, data, batch_size, seed, batches=None):
  """Rows of the data for each step, ``[num_iter, batch_size]`` int32.

  ``batches`` replaces the random schedule (e.g. to replay a recorded run);
  without data the rows are empty; otherwise random minibatches
  (:func:`problems.datasets.batch_indices`), from ``RandomState(seed)`` for
  an int ``seed`` (the same batches for every optimizer tested with it),
  else from the global numpy stream as the original.
  """
  if batches is not None:
    schedule = np.asarray(batches, dtype=np.int32)
    if schedule.ndim != 2 or schedule.shape[0] < num_iter:
      raise ValueError("batches must have shape [>= num_iter, batch_size], "
                       "got {}".format(schedule.shape))
    return schedule[:num_iter]
  if data is None:
    return np.zeros((num_iter, 0), dtype=np.int32)
  rng = np.random.RandomState(seed) if isinstance(
      seed, (int, np.integer)) else None
  return datasets.batch_indices(len(data), num_iter, batch_size, rng)


def check_batch_schedule(num_iter, dataset, batch_size):
  """ValueError (one line) when the minibatch schedule of a ``num_iter``-step
  run on ``dataset`` would not fit in memory
  (:func:`problems.datasets.check_batch_indices`): a caller can refuse such
  a run before any work."""
  data, _, batch_size = _data_and_batch_size(dataset, batch_size)
  if data is not None:
    datasets.check_batch_indices(num_iter, batch_size, len(data))


def _prepare(optimizer, problem, num_iter, dataset, batch_size, seed, logdir,
             restore_model_name, batches, jit_compile, run_cache,
             transforms=None):
  """What both tests need: the restored optimizer, the data, the batch
  schedule, and the compiled run from its initial parameters."""
  _check_pure_optimizer(optimizer)
  data, labels, batch_size = _data_and_batch_size(dataset, batch_size)
  restore_if_needed(optimizer, logdir, restore_model_name)
  params = initial_parameters(problem, seed)
  schedule = batch_schedule(num_iter, data, batch_size, seed, batches)
  run = (run_cache or RunCache()).get(optimizer, problem, params, data,
                                      labels, jit_compile, transforms)
  return run, schedule, data, labels


class _Recorder(object):
  """What a test records besides the per-step objectives: the original's
  ``record_every`` records and the held-out records, into ``records``."""

  def __init__(self, run, data, labels, record_every, heldout_dataset,
               heldout_every):
    self.run, self.data, self.labels = run, data, labels
    self.record_every = int(record_every) if record_every else None
    self.heldout = None
    if heldout_dataset is not None and heldout_every:
      self.heldout = _dataset_arrays(heldout_dataset)
      if self.heldout[0] is None:
        raise ValueError("heldout_dataset has no data.")
    self.heldout_every = heldout_every if self.heldout else None
    self.records = collections.defaultdict(list)

  def before_chunk(self, start, batch):
    if self.record_every and start % self.record_every == 0:
      self.run.record(self.records, start, batch, self.data, self.labels)
    if self.heldout_every and start % self.heldout_every == 0:
      self.heldout_record(start)

  def heldout_record(self, itr):
    train_loss, train_acc = self.run.evaluate(self.data, self.labels)
    loss, acc = self.run.evaluate(*self.heldout)
    for key, value in (("heldout_iter", itr), ("heldout_loss", loss),
                       ("heldout_accuracy", acc), ("train_loss", train_loss),
                       ("train_accuracy", train_acc)):
      self.records[key].append(value)


class _Progress(object):
  """Calls ``progress`` every ``every`` steps and after the last one, with
  the speed measured after the first, compiling chunk."""

  def __init__(self, progress, every, num_iter):
    self.progress, self.every, self.num_iter = progress, every, num_iter
    self.start_time = time.time()
    self.compiled_at = None  # (time, steps) when the first chunk ended.
    self.last = 0

  def after_chunk(self, end, objective):
    if self.compiled_at is None:
      self.compiled_at = (time.time(), end)
    if self.progress and (end - self.last >= (self.every or self.num_iter)
                          or end == self.num_iter):
      now = time.time()
      self.progress(dict(iteration=end, num_iter=self.num_iter,
                         objective=objective, elapsed=now - self.start_time,
                         **_speed(self.start_time, self.compiled_at, now,
                                  end)))
      self.last = end


def test_optimizer(optimizer, problem, num_iter, dataset=None, batch_size=None,
                   seed=None, logdir=None, record_every=None,
                   restore_model_name=None, batches=None,
                   heldout_dataset=None, heldout_every=None, progress=None,
                   progress_every=DEFAULT_PROGRESS_EVERY, jit_compile=False,
                   run_cache=None, step_transforms=None, **step_settings):
  """Tests an optimization algorithm on a given problem.

  Port of ``metaopt.test_optimizer`` (evaluation metaopt.py l.606-745), same
  arguments (but the TF1 ``graph``) and results.

  Why long: its docstring, one entry per argument of the original's; the
  body is a dozen lines over the helpers below.

  Args:
    optimizer: a learned optimizer (``optimizer/``) or a baseline
      (:mod:`l2o_scale.meta_testing.baselines`).
    problem, num_iter: a ``problems.problem_generator.Problem``; the steps.
    dataset, batch_size: the problem's training data (``data``,
      ``labels``) or None; samples per minibatch (None: the whole dataset).
    seed: int/None (random initial parameters) or a list of arrays (explicit
      initial parameters, in ``problem.param_shapes`` order).
    logdir: checkpoint folder of the learned optimizer, restored from
      ``logdir/restore_model_name`` (e.g. ``model.ckpt-0``; empty: the latest
      checkpoint). Ignored for baselines; None: the current meta-params.
    record_every: if an int, every ``record_every`` steps store (before the
      step) the full-data objective, per-tensor gradient and parameter norms,
      gradients, parameters and optimizer state in ``records``.
    batches: optional ``[num_iter, batch_size]`` row indices replacing the
      random minibatch schedule (:func:`batch_schedule`).
    heldout_dataset, heldout_every: another split; every ``heldout_every``
      steps and after the last, records ``heldout_loss``/``_accuracy``,
      ``train_loss``/``_accuracy`` (whole train split), ``heldout_iter``.
    progress: callable receiving a dict (iteration, num_iter, objective,
      steps_per_second, includes_compile, elapsed) every ``progress_every``
      steps (default: prints a line; False: none); the speed counts the
      steps after the compiling first chunk (else ``includes_compile``).
    jit_compile: compile the chunk with XLA. ``run_cache``: a
      :class:`RunCache` reusing the compiled loop of an earlier call with
      the same optimizer, problem and data (new in the port).
    step_transforms: a chain of step transforms applied to every update
      (:mod:`l2o_scale.steps`; new in the port); None: the original update.
      Or, instead, ``**step_settings``: metatest.py's ``step_schedule``,
      ``step_decay_start``, ``weight_decay`` and ``hold_zero_gradients``
      (:func:`l2o_scale.steps.settings.step_transforms_from`).

  Returns:
    (objective_values, parameters, records): per step, the objective on its
    minibatch before its update (np.float32); the parameters after the last
    step (numpy); dict of lists (empty unless record_every/heldout_every).
  """
  num_iter = int(num_iter)
  transforms = _step_transforms(step_transforms, step_settings)
  run, schedule, data, labels = _prepare(
      optimizer, problem, num_iter, dataset, batch_size, seed, logdir,
      restore_model_name, batches, jit_compile, run_cache, transforms)
  recorder = _Recorder(run, data, labels, record_every, heldout_dataset,
                       heldout_every)
  report = _Progress(_print_progress if progress is None else progress,
                     progress_every, num_iter)
  return (_run_chunks(run, schedule, transforms.step_inputs(num_iter),
                      recorder, report),
          [v.numpy() for v in run.param_vars], recorder.records)


def _run_chunks(run, schedule, inputs, recorder, report):
  """Runs every step of ``schedule`` in compiled chunks that end where the
  recorder or the progress report needs them to; returns the objectives."""
  num_iter = report.num_iter
  objective_values = []
  start = 0
  for end in _boundaries(num_iter, recorder.record_every,
                         recorder.heldout_every, report.every):
    recorder.before_chunk(start, schedule[start])
    objs = run.run_chunk(tf.constant(schedule[start:end]), *(
        [{k: tf.constant(v[start:end]) for k, v in inputs.items()}]
        if inputs else [])).numpy()
    objective_values.extend(objs)
    report.after_chunk(end, float(objs[-1]))
    start = end
  if recorder.heldout_every:
    recorder.heldout_record(num_iter)
  return objective_values


def _step_transforms(step_transforms, step_settings):
  """The chain of ``test_optimizer``'s ``step_transforms`` or, instead,
  its ``step_settings``."""
  if step_transforms is not None and step_settings:
    raise ValueError("give step_transforms or the settings that build them "
                     "({}), not both".format(", ".join(sorted(step_settings))))
  if step_transforms is None:
    return step_settings_lib.step_transforms_from(**step_settings)
  return transform.chain(step_transforms)


def _speed(start_time, compiled_at, now, steps):
  """Steps per second after the compiling first chunk (the rate otherwise
  includes the 5-30 s of tracing and XLA compilation)."""
  compiled_time, compiled_steps = compiled_at
  if steps > compiled_steps and now > compiled_time:
    return dict(steps_per_second=(steps - compiled_steps) /
                (now - compiled_time), includes_compile=False)
  return dict(steps_per_second=steps / max(now - start_time, 1e-9),
              includes_compile=True)


def chunk_runner(optimizer, problem, num_steps, dataset=None, seed=None,
                 batch_size=None, jit_compile=False, logdir=None,
                 restore_model_name=None):
  """``(run_chunk, schedule)``: the compiled loop of :func:`test_optimizer`
  from the problem's initial parameters, and the batch rows of
  ``num_steps`` steps. ``run_chunk(rows)`` runs one step per entry of
  ``rows`` (a slice of ``schedule``) in one ``tf.while_loop``, carrying
  parameters and optimizer state from one call to the next, and returns
  the objectives; what :func:`run_wall_clock_test` and the benchmark's size
  sweep time."""
  run, schedule, _, _ = _prepare(optimizer, problem, num_steps, dataset,
                                 batch_size, seed, logdir, restore_model_name,
                                 None, jit_compile, None)
  return run.run_chunk, schedule


def run_wall_clock_test(optimizer, problem, num_steps, dataset=None,
                        seed=None, logdir=None, batch_size=None,
                        restore_model_name=None, timing_chunk=10,
                        jit_compile=False):
  """Time per optimization step (seconds), as the original.

  Port of ``metaopt.run_wall_clock_test`` (evaluation metaopt.py l.748-815),
  which returned the median ``sess.run(train_op)`` time. Here steps run in
  the compiled chunk loop of :func:`test_optimizer`: one untimed warm-up chunk
  traces and compiles, then ``num_steps`` steps run in chunks of
  ``timing_chunk`` and the median of (chunk time / chunk length) is returned.
  """
  timing_chunk = max(1, min(int(timing_chunk), int(num_steps)))
  total = int(num_steps) + timing_chunk
  run_chunk, schedule = chunk_runner(
      optimizer, problem, total, dataset, seed, batch_size, jit_compile,
      logdir, restore_model_name)
  run_chunk(tf.constant(schedule[:timing_chunk])).numpy()  # warm-up
  times = []
  for start in range(timing_chunk, total, timing_chunk):
    chunk = tf.constant(schedule[start:min(start + timing_chunk, total)])
    t0 = time.time()
    run_chunk(chunk).numpy()
    times.append((time.time() - t0) / int(chunk.shape[0]))
  return float(np.median(np.array(times)))


# Not pytest tests, despite their names (the original's API).
test_optimizer.__test__ = False
