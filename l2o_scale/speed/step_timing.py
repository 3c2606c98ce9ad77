"""(a) One optimizer step on the L2O-Entropy MNIST MLP: the learned
optimizer against Keras Adam, alone and inside the compiled meta-test loop
(see :mod:`l2o_scale.speed.command`)."""

import time

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import baselines
from l2o_scale.meta_testing import inner_step
from l2o_scale.meta_testing import testing
from l2o_scale.speed import timing as core

def make_l2o_step(problem, optimizer, jit_compile=False, seed=0):
  """The learned step (:func:`l2o_scale.meta_testing.inner_step.inner_step` on the packed
  state) as one tf.function over variables; returns a callable
  ``step(x, y) -> loss``."""
  tf.random.set_seed(seed)
  params = [tf.Variable(t) for t in problem.init_tensors(seed)]
  state = tf.nest.map_structure(
      tf.Variable, optimizer.initialize_packed_state(params))
  global_state = [tf.Variable(g) for g in optimizer.initialize_global_state()]

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    obj, new_params, new_state, new_global = inner_step.inner_step(
        problem, optimizer, [p.read_value() for p in params],
        tf.nest.map_structure(tf.convert_to_tensor, state),
        [g.read_value() for g in global_state], x, y, packed=True)
    for var, value in zip(tf.nest.flatten(params + [state] + global_state),
                          tf.nest.flatten(new_params + [new_state] +
                                          new_global)):
      var.assign(value)
    return obj

  return step


def make_gru_core_step(problem, optimizer, jit_compile=True, seed=0):
  """A lower bound of the learned step: the MLP's loss and gradients plus
  the per-parameter GRU of ``optimizer`` alone, nothing else of the HRNN.

  Why: it splits the learned step's cost into the part no rewrite of the
  surrounding code can remove and the rest. The GRU runs exactly as in
  :meth:`HierarchicalRNN.compute_updates_packed` (``call_feature_major`` on
  the inputs and the packed state, with per-tensor biases, state read
  from and written back to a variable), but its 12 input features are a
  fixed variable instead of being computed from the gradients (timescales,
  RMS scaling, asinh, log mean squares), and there are no readouts, learning
  rates, per-tensor means or layer/global RNNs; the parameters take a plain
  SGD step. Returns ``step(x, y) -> loss``.
  """
  params = [tf.Variable(t) for t in problem.init_tensors(seed)]
  seg = optimizer.segments([p.shape.num_elements() for p in params])
  rng = np.random.RandomState(seed)
  n = sum(seg.sizes)
  features = tf.Variable(rng.randn(optimizer.num_rnn_inputs, n).astype(
      np.float32))
  state = tf.Variable(optimizer.initialize_packed_state(params)["parameter"])
  cell = optimizer.cells[0]
  bias = tf.Variable(rng.randn(seg.count, 3 * cell.state_size).astype(
      np.float32))

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    values = [p.read_value() for p in params]
    obj, grads = problem.objective_and_gradients(values, x, y)
    rows = tf.concat([features.read_value(), state.read_value()], 0)
    state.assign(cell.call_feature_major(rows, bias=bias, spread=seg.spread))
    for param, grad in zip(params, grads):
      param.assign_sub(1e-3 * grad)
    return obj

  return step


def make_adam_step(hidden=20, n_classes=10, n_features=784, seed=0,
                   jit_compile=False):
  """A Keras Sequential MLP of the same shape and an Adam step over it."""
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([
      keras.Input((n_features,)),
      keras.layers.Dense(hidden, activation="sigmoid"),
      keras.layers.Dense(n_classes),
  ])
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  opt = keras.optimizers.Adam()
  opt.build(model.trainable_variables)

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    x = tf.reshape(x, (-1, n_features))
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  return step


def bench_steps(data_dir, cfg, xla=True, timer=time.perf_counter):
  """Times the learned and the Adam step, without and (``xla``) with XLA."""
  spec, dataset, batch_size = core.mlp_problem(data_dir)
  problem = spec.build()
  rng = np.random.RandomState(0)
  rows = rng.choice(len(dataset.data), batch_size, replace=False)
  x = tf.constant(np.asarray(dataset.data[rows], np.float32))
  y = tf.constant(np.asarray(dataset.labels[rows], np.int32))

  def blocking(step):
    return lambda: step(x, y).numpy()

  out = {"batch_size": int(batch_size), "problem": repr(spec)}
  steps = {"l2o": make_l2o_step(problem, core.hrnn()), "adam": make_adam_step()}
  first_calls = {}
  if xla:
    # Compiled (and the first call timed) up front: if XLA cannot compile a
    # step, the error is reported and the other timings still run.
    for name, build in (
        ("l2o_xla", lambda: make_l2o_step(problem, core.hrnn(), jit_compile=True)),
        ("adam_xla", lambda: make_adam_step(jit_compile=True)),
        ("gru_core_xla", lambda: make_gru_core_step(problem, core.hrnn()))):
      try:
        steps[name] = build()
        start = timer()
        steps[name](x, y).numpy()
        first_calls[name] = timer() - start
      except Exception as e:  # pylint: disable=broad-except
        steps.pop(name, None)
        out[name] = {"error": "{}: {}".format(type(e).__name__, e)[:500]}
  out.update(core.measure_interleaved(
      {name: blocking(step) for name, step in steps.items()},
      cfg["step_warmup"], cfg["step_repeats"], cfg["step_inner"], timer))
  for name, seconds in first_calls.items():
    out[name]["first_call_seconds"] = seconds
  return out


def bench_loop_steps(data_dir, cfg):
  """Per-step time inside the compiled meta-test loop (no Python per step).

  ``testing.run_wall_clock_test`` (the original's ``run_wall_clock_test``)
  runs chunks of steps in one ``tf.while_loop``: what a 10,000-step
  ``metatest.py`` run costs per step. Learned optimizer without and with XLA,
  and the Adam baseline (TF1 rule, lr 1e-4) in the same loop, also without
  and with XLA: the XLA learned step is compared with both, since XLA speeds
  Adam's loop up too.
  """
  spec, dataset, batch_size = core.mlp_problem(data_dir)
  problem = spec.build()
  steps = cfg["step_repeats"] * cfg["step_inner"]
  out = {"steps": steps}
  for name, optimizer, jit in (("l2o", core.hrnn(), False),
                               ("l2o_xla", core.hrnn(), True),
                               ("adam", baselines.build("Adam"), False),
                               ("adam_xla", baselines.build("Adam"), True)):
    out[name] = testing.run_wall_clock_test(
        optimizer, problem, steps, dataset=dataset, batch_size=batch_size,
        seed=1, jit_compile=jit)
  return out


