"""Replays of fixture runs with the port (used by :mod:`l2o_scale.tf1_reference`).

``replay_meta_test`` reproduces the original evaluation loop
(``metaopt.test_optimizer``, L2O-Scale-Evaluation metaopt.py l.400-520): at
step t the objective and gradients are computed on batch t at the current
parameters, then the optimizer updates parameters and state. The step is one
``tf.function``.
"""

import os

import numpy as np
import tensorflow as tf

from l2o_scale import checkpoints
from l2o_scale import fixture_spec

META_TRAIN_AVAILABLE = False


def make_step(problem, optimizer):
  """Compiled step: objective + gradients on the batch, then the update."""

  @tf.function
  def step(params, states, global_state, data, labels):
    obj, grads = problem.objective_and_gradients(params, data, labels)
    new_params, new_states, new_global, new_attend, _ = (
        optimizer.compute_updates(params, grads, states, global_state))
    # The next objective/gradient is evaluated where the optimizer attends.
    eval_params = new_attend if optimizer.use_attention else new_params
    return obj, eval_params, new_states, new_global

  return step


def _state_arrays(prefix, states):
  out = {}
  for i, state in enumerate(states):
    for key, value in state.items():
      out["{}slot/param{}/{}".format(prefix, i, key)] = value.numpy()
  return out


def replay_meta_test(folder, spec, arrays, data_dir=None):
  """Replays a ``meta_test`` fixture; returns its arrays, named as the fixture's."""
  problem = fixture_spec.build_problem(spec["problem"])
  optimizer = fixture_spec.build_optimizer(spec["optimizer"])
  checkpoints.restore_optimizer(os.path.join(folder, "ckpt", "model.ckpt-0"),
                                optimizer)
  data, labels = fixture_spec.load_data(spec.get("data"), data_dir)
  params = fixture_spec.initial_params(arrays, problem)
  states = [optimizer.initialize_state(p) for p in params]
  global_state = optimizer.initialize_global_state()
  step = make_step(problem, optimizer)
  batches = arrays["batches"] if data is not None else None
  early_steps = int(spec.get("early_steps", 0))
  # The true parameters live in the "true_param" slot with attention.
  results = {}
  objectives = []
  dummy = tf.zeros([0])
  for t in range(int(spec["num_steps"])):
    if data is not None:
      batch = batches[t]
      batch_data = tf.constant(data[batch])
      batch_labels = tf.constant(labels[batch])
    else:
      batch_data, batch_labels = dummy, dummy
    obj, params, states, global_state = step(params, states, global_state,
                                             batch_data, batch_labels)
    objectives.append(obj)
    if t + 1 == early_steps:
      results.update(_final_arrays("early/", params, states, optimizer))
  results["objectives"] = np.array([o.numpy() for o in objectives])
  results.update(_final_arrays("", params, states, optimizer))
  return results


def _final_arrays(prefix, params, states, optimizer):
  out = {}
  for i, (param, state) in enumerate(zip(params, states)):
    real = state["true_param"] if "true_param" in state else param
    out["{}final{}".format(prefix, i)] = real.numpy()
  out.update(_state_arrays(prefix, states))
  return out
