"""One optimizer-on-problem run as compiled chunks of steps.

The original ran one ``sess.run([train_op, obj])`` per step (evaluation
``metaopt.py`` l.690-745). Here one compiled ``tf.function`` runs a whole
*chunk* of steps in a ``tf.while_loop`` (loss, gradients and optimizer
update per step, the dataset captured once as a tensor, each step gathering
its minibatch by index), and the per-step objectives are collected in a
``TensorArray`` and fetched once per chunk. The function is traced once per
run: the chunk length is a dynamic dimension of the index tensor. This keeps
the learned optimizer's step close to an Adam step in cost (no host round
trip per step).
"""

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import inner_step
from l2o_scale.steps import transform

EVAL_CHUNK = 10000  # examples per forward pass in held-out evaluation


def to_tensor(array):
  array = np.asarray(array)
  if array.dtype.kind == "f":
    array = array.astype(np.float32)
  elif array.dtype.kind in "iu":
    array = array.astype(np.int32)
  return tf.constant(array)



class CompiledRun(object):
  """Variables and compiled functions of one optimizer-on-problem run.

  Parameters, the optimizer's packed state (``initialize_packed_state``:
  for the hierarchical RNN, all tensors end to end; for the others, the
  per-tensor dicts) and the global state live in ``tf.Variable``s between
  chunks; inside a chunk they are loop tensors. ``transforms`` (a
  :func:`l2o_scale.steps.transform.chain`, default none) change every
  step; they are traced into the loop, their per-step inputs are fed with
  each chunk.
  """

  def __init__(self, optimizer, problem, params, data, labels, jit_compile,
               transforms=None):
    self.optimizer = optimizer
    self.transforms = transform.chain(*([] if transforms is None else
                                        [transforms]))
    self.problem = problem
    self.data_source = data  # kept alive: part of the cache key
    self.data = None if data is None else to_tensor(data)
    self.labels = None if labels is None else to_tensor(labels)
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

  def reset(self, params, seed=None):
    """Starts a new run from ``params`` (fresh optimizer state; ``seed``: a
    ``[2]`` integer seed of its random draws, or None for TensorFlow's
    random stream)."""
    for var, value in zip(self.param_vars, params):
      var.assign(value)
    for var, value in zip(
        tf.nest.flatten(self.state_vars),
        tf.nest.flatten(self.optimizer.initialize_packed_state(params,
                                                               seed=seed))):
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
  def _step(self, params, states, glob, idx, inputs):
    # With attention the variables hold the attended location and the
    # objective is reported at the real parameters (metaopt.py l.672-679).
    data, labels = self._batch(idx)
    obj, new_params, new_states, new_glob = inner_step.inner_step(
        self.problem, self.optimizer, params, states, glob, data, labels,
        packed=True, transforms=self.transforms, step_inputs=inputs)
    new_states = tf.nest.map_structure(tf.convert_to_tensor, new_states)
    return tf.cast(obj, tf.float32), new_params, new_states, new_glob

  def _run_chunk(self, indices, inputs=None):
    """Runs ``len(indices)`` steps; returns their objectives ([K] float32).

    ``inputs``: the per-step inputs of the transforms, a dict of [K]
    float32 tensors (step i gets entry i of each)."""
    num = tf.shape(indices)[0]
    params, states, glob = self._read()
    objs = tf.TensorArray(tf.float32, size=num, element_shape=[])

    def body(i, params, states, glob, objs):
      obj, params, states, glob = self._step(
          params, states, glob, indices[i],
          {k: v[i] for k, v in (inputs or {}).items()})
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

  def evaluate(self, data, labels, chunk=EVAL_CHUNK):
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
      d = to_tensor(data[start:start + chunk])
      l = to_tensor(labels[start:start + chunk])
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

  def get(self, optimizer, problem, params, data, labels, jit_compile,
          transforms=None):
    transforms = transform.chain(*([] if transforms is None else
                                   [transforms]))
    key = (id(optimizer), id(problem), None if data is None else id(data),
           None if labels is None else id(labels), bool(jit_compile),
           transforms.key())
    run = self._run
    if (run is not None and self._key == key and
        [tuple(v.shape) for v in run.param_vars] ==
        [tuple(p.shape) for p in params]):
      run.reset(params)
      return run
    self._run = CompiledRun(optimizer, problem, params, data, labels,
                            jit_compile, transforms)
    self._key, self._keep = key, (data, labels)
    return self._run
