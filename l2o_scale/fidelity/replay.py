"""Replays of fixture runs with the port (used by :mod:`l2o_scale.fidelity.tf1_reference`).

``replay_meta_test`` reproduces the original evaluation loop
(``metaopt.test_optimizer``, L2O-Scale-Evaluation metaopt.py l.400-520): at
step t the objective and gradients are computed on batch t at the current
parameters, then the optimizer updates parameters and state. The step is one
``tf.function``.
"""

import os

import numpy as np
import tensorflow as tf

from l2o_scale.runs import checkpoints
from l2o_scale.meta_testing import inner_step
from l2o_scale.fidelity import fixture_spec
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import unroll as unroll_lib

META_TRAIN_AVAILABLE = True


def make_step(problem, optimizer):
  """Compiled step: objective + gradients on the batch, then the update
  (:func:`l2o_scale.meta_testing.inner_step.inner_step`).

  ``params`` are the values of the original's variables: with attention the
  attended location, where the gradients are taken; the objective is
  measured at the real parameters (the ``true_param`` slot), as the
  original's ``test_optimizer`` evaluated ``obj`` on ``real_params``.
  """

  @tf.function
  def step(params, states, global_state, data, labels):
    return tuple(inner_step.inner_step(problem, optimizer, params, states,
                                       global_state, data, labels))

  return step


def _state_arrays(prefix, states):
  out = {}
  for i, state in enumerate(states):
    for key, value in state.items():
      out["{}slot/param{}/{}".format(prefix, i, key)] = value.numpy()
  return out


def replay_meta_test(folder, spec, arrays, data_dir=None):
  """Replays a ``meta_test`` fixture; returns its arrays, named as the fixture's."""
  problem = fixture_spec.build_problem(spec["problem"], spec["kind"])
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
      results.update(_final_arrays("early/", params, states))
  results["objectives"] = np.array([o.numpy() for o in objectives])
  results.update(_final_arrays("", params, states))
  return results


def _final_arrays(prefix, params, states):
  """``final{i}``: the variables' values, as the original ``test_optimizer``
  returned them (the attended location with attention; the real parameters
  are the ``true_param`` slot)."""
  out = {"{}final{}".format(prefix, i): p.numpy() for i, p in enumerate(params)}
  out.update(_state_arrays(prefix, states))
  return out


def regularizer_config(spec, problem):
  """RegularizerConfig from a meta_train fixture's ``flags`` (original defaults)."""
  flags = spec.get("flags", {})
  return regularizer_lib.make_regularizer_config(
      problem,
      reg_optimizer=bool(flags.get("reg_optimizer", False)),
      reg_optimizee=bool(flags.get("reg_optimizee", False)),
      alpha=float(flags.get("alpha", 5e-4)),
      beta=float(flags.get("beta", 1e-4)),
      reg_option=flags.get("reg_option", "hessian"),
      hessian_itrs=int(flags.get("hessian_itrs", 10)))


def _unroll_inputs(spec, arrays, problem, lengths, mini, init_tensors,
                   has_data):
  """The recorded feed of each partial unroll of a ``meta_train`` fixture."""
  switches = spec.get("jacob_switch", [False] * len(lengths))
  batches = np.asarray(arrays["batches"]) if has_data else None
  offset = 0
  for u, length in enumerate(lengths):
    if batches is not None:
      unroll_batches = tf.constant(batches[offset:offset + length], tf.int32)
    else:
      unroll_batches = tf.zeros([length, 0], tf.int32)
    offset += length
    mt_labels = [tf.constant(np.asarray(arrays["mt_labels{}".format(i)][u],
                                        np.float32))
                 for i in range(len(problem.param_shapes))]
    yield unroll_lib.UnrollInputs(
        obj_weights=tf.constant(np.ones(length, np.float32) / length),
        batches=unroll_batches, mini_data=mini[0], mini_labels=mini[1],
        init_tensors=init_tensors,
        jacob_switch=bool(switches[u]), mt_labels=mt_labels,
        first_unroll=tf.constant(u == 0), reset_state=tf.constant(u == 0))


def replay_meta_train(folder, spec, arrays, data_dir=None,
                      time_parallel=True):
  """Replays a ``meta_train`` fixture: partial unrolls, no meta update between.

  ``time_parallel``: the unroll metarun runs by default (``--time_parallel``);
  False replays the step-by-step one.

  Returns per unroll u the meta-objective, the problem objectives and the
  gradient of the differentiated objective for every meta-parameter, named
  as the fixture (``unroll{u}/grad/<TF1 name>:0``).
  """
  problem = fixture_spec.build_problem(spec["problem"], spec["kind"])
  # Right after the problem (which seeds np.random and draws its data), as
  # the original drew its regularizer probes while building the graph.
  reg = regularizer_config(spec, problem)
  optimizer = fixture_spec.build_optimizer(spec["optimizer"])
  checkpoints.restore_optimizer(os.path.join(folder, "ckpt", "model.ckpt-0"),
                                optimizer)
  data, labels = fixture_spec.load_data(spec.get("data"), data_dir,
                                        one_hot=True)
  if data is not None:
    rows = np.asarray(arrays["mini_data_indices"])
    mini_data = tf.constant(data[rows])
    mini_labels = tf.constant(labels[rows])
  else:
    mini_data = mini_labels = tf.zeros([0])
  init_tensors = fixture_spec.initial_params(arrays, problem)
  lengths = [int(n) for n in spec["unroll_lengths"]]
  mode_mt = bool(spec.get("mode_mt", False))
  step = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                      time_parallel=time_parallel)
  names = list(optimizer.tf1_variables())
  results = {}
  carried = unroll_lib.zero_loop_state(problem, optimizer)
  for u, inputs in enumerate(_unroll_inputs(spec, arrays, problem, lengths,
                                            (mini_data, mini_labels),
                                            init_tensors, data is not None)):
    out, grads = step(inputs, carried, mode_mt)
    carried = out.final_state
    prefix = "unroll{}/".format(u)
    # The fixture's meta_objective is the differentiated objective.
    differentiated = out.metaobjmt if mode_mt else out.metaobj
    results[prefix + "meta_objective"] = differentiated.numpy()
    results[prefix + "problem_objectives"] = out.problem_objectives.numpy()
    for name, grad in zip(names, grads):
      results["{}grad/{}:0".format(prefix, name)] = grad.numpy()
  return results
