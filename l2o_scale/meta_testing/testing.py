"""Meta-testing: running a (learned or hand-designed) optimizer on a problem.

Port of ``test_optimizer`` and ``run_wall_clock_test`` of the evaluation
``metaopt.py`` (L2O-Entropy/L2O-ScalewHessian/L2O-Scale-Evaluation/metaopt.py,
l.606-745 and l.748-815), with minibatches from :func:`problems.datasets.batch_indices`.

How it differs from the TF1 code, and why:

* The original ran one ``sess.run([train_op, obj])`` per step. Here one
  compiled ``tf.function`` runs a whole *chunk* of steps in a
  ``tf.while_loop`` (loss, gradients and optimizer update per step, the
  dataset captured once as a tensor, each step gathering its minibatch by
  index), and the per-step objectives are collected in a ``TensorArray`` and
  fetched once per chunk. The function is traced once per run: the chunk
  length is a dynamic dimension of the index tensor. This keeps the learned
  optimizer's step close to an Adam step in cost (no host round trip per
  step).
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

from l2o_scale.runs import checkpoints
from l2o_scale.meta_testing import inner_step
from problems import datasets

DEFAULT_PROGRESS_EVERY = 1000  # the original printed every 1000 iterations
_EVAL_CHUNK = 10000  # examples per forward pass in held-out evaluation


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


def _to_tensor(array):
  array = np.asarray(array)
  if array.dtype.kind == "f":
    array = array.astype(np.float32)
  elif array.dtype.kind in "iu":
    array = array.astype(np.int32)
  return tf.constant(array)


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


# ------------------------------------------------------------------ runner
class _Run(object):
  """Variables and compiled functions of one optimizer-on-problem run.

  Parameters, the optimizer's packed state (``initialize_packed_state``:
  for the hierarchical RNN, all tensors end to end; for the others, the
  per-tensor dicts) and the global state live in ``tf.Variable``s between
  chunks; inside a chunk they are loop tensors.
  """

  def __init__(self, optimizer, problem, params, data, labels, jit_compile):
    self.optimizer = optimizer
    self.problem = problem
    self.data_source = data  # kept alive: part of the cache key
    self.data = None if data is None else _to_tensor(data)
    self.labels = None if labels is None else _to_tensor(labels)
    self.param_vars = [tf.Variable(p, trainable=False, name="param{}".format(i))
                       for i, p in enumerate(params)]
    packed = optimizer.initialize_packed_state(params)
    self.state_vars = tf.nest.map_structure(
        lambda t: tf.Variable(t, trainable=False, name="optimizer_state"),
        packed)
    self.global_vars = [tf.Variable(tf.convert_to_tensor(g), trainable=False,
                                    name="global_state")
                        for g in optimizer.initialize_global_state()]
    self.run_chunk = tf.function(self._run_chunk, jit_compile=jit_compile,
                                 reduce_retracing=True)
    self._batch_fn = tf.function(self._batch_objective_and_grads,
                                 reduce_retracing=True)
    self._eval_fn = tf.function(self._evaluate, reduce_retracing=True)

  def reset(self, params):
    """Starts a new run from ``params`` (fresh optimizer state)."""
    for var, value in zip(self.param_vars, params):
      var.assign(value)
    for var, value in zip(
        tf.nest.flatten(self.state_vars),
        tf.nest.flatten(self.optimizer.initialize_packed_state(params))):
      var.assign(value)
    for var, value in zip(self.global_vars,
                          self.optimizer.initialize_global_state()):
      var.assign(value)

  # -- reading / writing the carried state
  def _read(self):
    params = [tf.convert_to_tensor(v) for v in self.param_vars]
    states = tf.nest.map_structure(tf.convert_to_tensor, self.state_vars)
    glob = [tf.convert_to_tensor(v) for v in self.global_vars]
    return params, states, glob

  def _write(self, params, states, glob):
    ops = []
    for var, value in zip(self.param_vars, params):
      ops.append(var.assign(value))
    for var, value in zip(tf.nest.flatten(self.state_vars),
                          tf.nest.flatten(states)):
      ops.append(var.assign(value))
    for var, value in zip(self.global_vars, glob):
      ops.append(var.assign(value))
    return ops

  def _batch(self, idx):
    if self.data is None:
      return None, None
    return tf.gather(self.data, idx), tf.gather(self.labels, idx)

  # -- one step and a chunk of steps
  def _step(self, params, states, glob, idx):
    # With attention the variables hold the attended location and the
    # objective is reported at the real parameters (metaopt.py l.672-679).
    data, labels = self._batch(idx)
    obj, new_params, new_states, new_glob = inner_step.inner_step(
        self.problem, self.optimizer, params, states, glob, data, labels,
        packed=True)
    new_states = tf.nest.map_structure(tf.convert_to_tensor, new_states)
    return tf.cast(obj, tf.float32), new_params, new_states, new_glob

  def _run_chunk(self, indices):
    """Runs ``len(indices)`` steps; returns their objectives ([K] float32)."""
    num = tf.shape(indices)[0]
    params, states, glob = self._read()
    objs = tf.TensorArray(tf.float32, size=num, element_shape=[])

    def body(i, params, states, glob, objs):
      obj, params, states, glob = self._step(params, states, glob, indices[i])
      return i + 1, params, states, glob, objs.write(i, obj)

    _, params, states, glob, objs = tf.while_loop(
        lambda i, *_: i < num, body, (tf.constant(0), params, states, glob,
                                      objs))
    with tf.control_dependencies(self._write(params, states, glob)):
      return objs.stack()

  # -- records and evaluation
  def _batch_objective_and_grads(self, idx):
    params, states, _ = self._read()
    data, labels = self._batch(idx)
    obj, grads = self.problem.objective_and_gradients(params, data, labels)
    return obj, grads

  def _evaluate(self, params, data, labels):
    obj = self.problem.objective(params, data, labels)
    if data is not None and callable(getattr(self.problem, "accuracy", None)):
      acc = self.problem.accuracy(params, data, labels)
    else:
      acc = tf.constant(float("nan"))
    return tf.cast(obj, tf.float32), tf.cast(acc, tf.float32)

  def real_params(self):
    params = [tf.convert_to_tensor(v) for v in self.param_vars]
    return inner_step.true_params(
        self.optimizer, params,
        tf.nest.map_structure(tf.convert_to_tensor, self.state_vars),
        packed=True)

  def evaluate(self, data, labels, chunk=_EVAL_CHUNK):
    """Mean objective and accuracy over a whole split, in chunks.

    Exact for objectives that are a mean over examples (all classification
    problems); the chunks keep memory bounded for large splits.
    """
    params = self.real_params()
    if data is None:
      obj, acc = self._eval_fn(params, None, None)
      return float(obj), float(acc)
    n = len(data)
    total_obj = total_acc = 0.
    for start in range(0, n, chunk):
      d = _to_tensor(data[start:start + chunk])
      l = _to_tensor(labels[start:start + chunk])
      obj, acc = self._eval_fn(params, d, l)
      weight = int(d.shape[0])
      total_obj += float(obj) * weight
      total_acc += float(acc) * weight
    return total_obj / n, total_acc / n

  def record(self, records, itr, idx, data, labels):
    """Appends what the original stored every ``record_every`` steps."""
    _, grads = self._batch_fn(tf.constant(idx))
    params = [v.numpy() for v in self.param_vars]
    grads = [g.numpy() for g in grads]
    full_obj, _ = self._eval_fn(self.real_params(),
                                None if data is None else self.data,
                                None if data is None else self.labels)
    records["objective"].append(float(full_obj))
    records["grad_norm"].append([np.linalg.norm(g.ravel()) for g in grads])
    records["param_norm"].append([np.linalg.norm(p.ravel()) for p in params])
    records["grad"].append(grads)
    records["param"].append(params)
    records["iter"].append(itr)
    # Optimizer state, keyed "<param name>_<slot name>" as the original.
    states = self.optimizer.unpack_state(
        tf.nest.map_structure(tf.convert_to_tensor, self.state_vars),
        [tf.convert_to_tensor(v) for v in self.param_vars])
    for i, state in enumerate(states):
      for k in sorted(state):
        records["param{}_{}".format(i, k)].append(np.asarray(state[k]))
    if self.global_vars:
      records["global_state"].append([v.numpy() for v in self.global_vars])


class RunCache(object):
  """The last compiled run, reused when the same optimizer, problem and data
  run again (metatest.py's seeds, the robust score's fixed runs): saves
  re-tracing and recompiling the loop. Owned by the caller that repeats
  runs (no module-level state); ``test_optimizer`` without one compiles
  afresh."""

  def __init__(self):
    self._key = None
    self._run = None
    self._keep = None  # Keeps data and labels alive: their ids are the key.

  def get(self, optimizer, problem, params, data, labels, jit_compile):
    key = (id(optimizer), id(problem), None if data is None else id(data),
           None if labels is None else id(labels), bool(jit_compile))
    run = self._run
    if (run is not None and self._key == key and
        [tuple(v.shape) for v in run.param_vars] ==
        [tuple(p.shape) for p in params]):
      run.reset(params)
      return run
    self._run = _Run(optimizer, problem, params, data, labels, jit_compile)
    self._key, self._keep = key, (data, labels)
    return self._run


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


def test_optimizer(optimizer,
                   problem,
                   num_iter,
                   dataset=None,
                   batch_size=None,
                   seed=None,
                   graph=None,
                   logdir=None,
                   record_every=None,
                   restore_model_name=None,
                   batches=None,
                   heldout_dataset=None,
                   heldout_every=None,
                   progress=None,
                   progress_every=DEFAULT_PROGRESS_EVERY,
                   jit_compile=False,
                   run_cache=None):
  """Tests an optimization algorithm on a given problem.

  Port of ``metaopt.test_optimizer`` (evaluation metaopt.py l.606-745), same
  arguments and results.

  Args:
    optimizer: a learned optimizer (``optimizer/``) or a baseline
      (:mod:`l2o_scale.meta_testing.baselines`).
    problem: a ``problems.problem_generator.Problem``.
    num_iter: number of optimizer steps.
    dataset: the problem's training data (``data``, ``labels``), or None.
    batch_size: samples per minibatch; None means the full dataset.
    seed: int/None (random initial parameters) or a list of arrays (explicit
      initial parameters, in ``problem.param_shapes`` order).
    graph: TF1 leftover; must be None.
    logdir: checkpoint folder of the learned optimizer; restored from
      ``logdir/restore_model_name`` (latest checkpoint if the name is empty).
      Ignored for baselines. None: use the optimizer's current meta-params.
    record_every: if an int, every ``record_every`` steps store (before the
      step) the full-data objective, per-tensor gradient and parameter norms,
      gradients, parameters and optimizer state in ``records``.
    restore_model_name: checkpoint name in ``logdir`` (e.g. ``model.ckpt-0``).
    batches: optional ``[num_iter, batch_size]`` row indices replacing the
      random minibatch schedule (e.g. to replay a recorded run).
    heldout_dataset: optional other split to measure generalization on.
    heldout_every: with ``heldout_dataset``: every ``heldout_every`` steps
      (and after the last step) record ``heldout_loss``/``heldout_accuracy``
      and, on the full training split, ``train_loss``/``train_accuracy``
      under ``records`` (with ``heldout_iter``: number of updates done).
    progress: callable receiving a dict (iteration, num_iter, objective,
      steps_per_second, includes_compile, elapsed) every ``progress_every``
      steps; default prints a line; False silences it. ``steps_per_second``
      counts the steps after the first chunk (which compiles the loop);
      while only that chunk has run it includes the compilation and
      ``includes_compile`` is True.
    jit_compile: compile the chunk with XLA.
    run_cache: a :class:`RunCache` to reuse the compiled loop of the
      previous call with the same optimizer, problem and data (new in the
      port; default: compile afresh).

  Returns:
    objective_values: list (``num_iter``) of the objective on each step's
      minibatch before that step's update (np.float32).
    parameters: list of numpy arrays, the parameters after the last step.
    records: dict of lists (empty unless ``record_every``/``heldout_every``).
  """
  if graph is not None:
    raise ValueError("graph is a TF1 argument; TF2 runs eagerly, pass None.")
  _check_pure_optimizer(optimizer)
  num_iter = int(num_iter)
  data, labels, batch_size = _data_and_batch_size(dataset, batch_size)
  restore_if_needed(optimizer, logdir, restore_model_name)

  params = initial_parameters(problem, seed)
  if batches is not None:
    schedule = np.asarray(batches, dtype=np.int32)
    if schedule.ndim != 2 or schedule.shape[0] < num_iter:
      raise ValueError("batches must have shape [>= num_iter, batch_size], "
                       "got {}".format(schedule.shape))
    schedule = schedule[:num_iter]
  elif data is None:
    schedule = np.zeros((num_iter, 0), dtype=np.int32)
  else:
    rng = np.random.RandomState(seed) if isinstance(
        seed, (int, np.integer)) else None
    schedule = datasets.batch_indices(len(data), num_iter, batch_size, rng)

  heldout_data = heldout_labels = None
  if heldout_dataset is not None and heldout_every:
    heldout_data, heldout_labels = _dataset_arrays(heldout_dataset)
    if heldout_data is None:
      raise ValueError("heldout_dataset has no data.")
  else:
    heldout_every = None
  if progress is None:
    progress = _print_progress
  record_every = int(record_every) if record_every else None

  run = (run_cache or RunCache()).get(optimizer, problem, params, data,
                                      labels, jit_compile)
  records = collections.defaultdict(list)
  objective_values = []

  def heldout_record(itr):
    train_loss, train_acc = run.evaluate(data, labels)
    loss, acc = run.evaluate(heldout_data, heldout_labels)
    records["heldout_iter"].append(itr)
    records["heldout_loss"].append(loss)
    records["heldout_accuracy"].append(acc)
    records["train_loss"].append(train_loss)
    records["train_accuracy"].append(train_acc)

  start_time = time.time()
  compiled_at = None  # (time, steps) when the first, compiling chunk ended.
  last_progress = 0
  start = 0
  for end in _boundaries(num_iter, record_every, heldout_every,
                         progress_every):
    if record_every and start % record_every == 0:
      run.record(records, start, schedule[start], data, labels)
    if heldout_every and start % heldout_every == 0:
      heldout_record(start)
    objs = run.run_chunk(tf.constant(schedule[start:end])).numpy()
    if compiled_at is None:
      compiled_at = (time.time(), end)
    objective_values.extend(objs)
    if progress and (end - last_progress >= (progress_every or num_iter) or
                     end == num_iter):
      now = time.time()
      progress(dict(iteration=end, num_iter=num_iter,
                    objective=float(objs[-1]), elapsed=now - start_time,
                    **_speed(start_time, compiled_at, now, end)))
      last_progress = end
    start = end
  if heldout_every:
    heldout_record(num_iter)

  parameters = [v.numpy() for v in run.param_vars]
  return objective_values, parameters, records


def _speed(start_time, compiled_at, now, steps):
  """Steps per second after the compiling first chunk (issue 13: the rate
  metatest printed included the 5-30 s of tracing and XLA compilation)."""
  compiled_time, compiled_steps = compiled_at
  if steps > compiled_steps and now > compiled_time:
    return dict(steps_per_second=(steps - compiled_steps) /
                (now - compiled_time), includes_compile=False)
  return dict(steps_per_second=steps / max(now - start_time, 1e-9),
              includes_compile=True)


def run_wall_clock_test(optimizer,
                        problem,
                        num_steps,
                        dataset=None,
                        seed=None,
                        logdir=None,
                        batch_size=None,
                        restore_model_name=None,
                        timing_chunk=10,
                        jit_compile=False):
  """Time per optimization step (seconds), as the original.

  Port of ``metaopt.run_wall_clock_test`` (evaluation metaopt.py l.748-815),
  which returned the median ``sess.run(train_op)`` time. Here steps run in
  the compiled chunk loop of :func:`test_optimizer`: one untimed warm-up chunk
  traces and compiles, then ``num_steps`` steps run in chunks of
  ``timing_chunk`` and the median of (chunk time / chunk length) is returned.
  """
  _check_pure_optimizer(optimizer)
  data, labels, batch_size = _data_and_batch_size(dataset, batch_size)
  restore_if_needed(optimizer, logdir, restore_model_name)
  params = initial_parameters(problem, seed)
  timing_chunk = max(1, min(int(timing_chunk), int(num_steps)))
  total = int(num_steps) + timing_chunk
  if data is None:
    schedule = np.zeros((total, 0), dtype=np.int32)
  else:
    rng = np.random.RandomState(seed) if isinstance(
        seed, (int, np.integer)) else None
    schedule = datasets.batch_indices(len(data), total, batch_size, rng)
  run = RunCache().get(optimizer, problem, params, data, labels, jit_compile)
  run.run_chunk(tf.constant(schedule[:timing_chunk])).numpy()  # warm-up
  times = []
  for start in range(timing_chunk, total, timing_chunk):
    chunk = tf.constant(schedule[start:min(start + timing_chunk, total)])
    t0 = time.time()
    run.run_chunk(chunk).numpy()
    times.append((time.time() - t0) / int(chunk.shape[0]))
  return float(np.median(np.array(times)))


# Not pytest tests, despite their names (the original's API).
test_optimizer.__test__ = False
