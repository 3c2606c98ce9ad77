"""(b)-(d) Meta-training: one 20-step unroll with its meta-update (as the
original's timing script times it), its floor with SGD, and one whole
meta-iteration (see :mod:`l2o_scale.speed.command`)."""

import io
import tempfile
import time

import numpy as np
import tensorflow as tf

from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import trainer as trainer_lib
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.speed import timing as core
from l2o_scale.steps import tf1_optimizers
from problems import datasets
from problems import problem_spec

def bench_unrolls(data_dir, cfg, xla=True, timer=time.perf_counter):
  """Times one 20-step meta-training unroll, as the original's
  ``time_original.py`` (b)/(c) time it: forward through 20 optimizer steps,
  the meta-gradient back through them, make-finite, clip and the RMSProp
  meta-update (``meta_learner.MetaLearner``); without and with hessian-esd,
  each also with the optimizer's step compiled by XLA
  (``make_meta_step(jit_compile=True)``, metarun's ``--jit_compile``)."""
  spec, _, batch_size = core.mlp_problem(data_dir)
  mini = core.mini_tensors(data_dir)
  out = {"unroll_length": core.UNROLL_LENGTH, "mini_dataset_rows": int(mini[2]),
         "batch_size": int(batch_size)}
  # (regularizer, XLA step, time-parallel objective): the default engine,
  # the step-by-step one, and the default with XLA.
  engines = [(False, True), (False, False)] + ([(True, True)] if xla else [])
  variants = [(reg, jit, parallel) for reg in ("noreg", "hessian_esd")
              for jit, parallel in engines]
  calls = {}
  for reg_name, jit, parallel in variants:
    calls[reg_name + ("_xla" if jit else "") +
          ("" if parallel else "_sequential")] = _unroll_call(
              spec, batch_size, mini, reg_name, jit, parallel)
  out.update(core.measure_interleaved(calls, 1, cfg["unroll_repeats"], 1, timer))
  return out


def _unroll_call(spec, batch_size, mini, reg_name, jit, parallel):
  """One variant of :func:`bench_unrolls`, built from numpy's seed 0: a call
  that runs the unroll with its meta-gradient and applies the meta-update.
  ``mini``: the mini dataset's (data, labels, rows)."""

  mini_data, mini_labels, n = mini
  np.random.seed(0)
  problem = spec.build()
  # As the original's timing script builds it: the batch gradients enter
  # the meta-gradient as constants (metarun's default differentiates
  # through them as well).
  optimizer = core.hrnn(use_second_derivatives=False)
  if reg_name == "noreg":
    reg = regularizer_lib.NO_REGULARIZER
  else:
    reg = regularizer_lib.make_regularizer_config(
        problem, reg_optimizer=True, reg_option="hessian-esd")
  meta_step = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                           jit_compile=jit,
                                           time_parallel=parallel)
  learner = meta_learner.MetaLearner(
      tf1_optimizers.RMSProp(optimizer.meta_variables, 1e-6), 1e4)
  batches = tf.constant(datasets.batch_indices(n, core.UNROLL_LENGTH, batch_size))
  init_tensors = [tf.constant(np.random.normal(size=s).astype(np.float32))
                  for s in problem.param_shapes]
  carried = unroll_lib.zero_loop_state(problem, optimizer)
  inputs = unroll_lib.UnrollInputs(
      obj_weights=tf.constant(
          np.ones(core.UNROLL_LENGTH, np.float32) / core.UNROLL_LENGTH),
      batches=batches, mini_data=mini_data, mini_labels=mini_labels,
      init_tensors=init_tensors, jacob_switch=reg_name != "noreg",
      mt_labels=[tf.constant(m) for m in unroll_lib.zero_mt_labels(
          problem.param_shapes, core.UNROLL_LENGTH)],
      first_unroll=tf.constant(True), reset_state=tf.constant(True))

  def call():
    result, grads = meta_step(inputs, carried, False)
    learner.apply(grads)
    result.metaobj.numpy()

  return call


def bench_unroll_floor(data_dir, cfg, timer=time.perf_counter):
  """The floor of (b): the same 20-step unroll with the learned optimizer
  replaced by SGD with one meta-parameter (its log learning rate). What is
  left is what any optimizer's unroll computes: the objective on the
  10,000-row mini dataset at every step (the meta-objective), the batch
  gradients and the meta-gradient back through both."""
  spec, _, batch_size = core.mlp_problem(data_dir)
  mini_data, mini_labels, n = core.mini_tensors(data_dir)
  np.random.seed(0)
  problem = spec.build()
  log_lr = tf.Variable(-3.)
  params0 = [tf.constant(np.random.normal(size=s).astype(np.float32))
             for s in problem.param_shapes]
  batches = tf.constant(datasets.batch_indices(n, core.UNROLL_LENGTH, batch_size))

  def body(i, params, total):
    obj = problem.objective(params, mini_data, mini_labels)
    rows = tf.gather(batches, i)
    _, grads = problem.objective_and_gradients(
        params, tf.gather(mini_data, rows), tf.gather(mini_labels, rows))
    return (i + 1, [p - tf.exp(log_lr) * g for p, g in zip(params, grads)],
            total + obj / core.UNROLL_LENGTH)

  @tf.function(autograph=False)
  def unroll_and_meta_gradient():
    with tf.GradientTape() as tape:
      _, _, total = tf.while_loop(lambda i, *_: i < core.UNROLL_LENGTH, body,
                                  (tf.constant(0), params0, tf.constant(0.)))
    return total, tape.gradient(total, log_lr)

  return core.measure(lambda: [t.numpy() for t in unroll_and_meta_gradient()], 1,
                 cfg["unroll_repeats"], 1, timer)


def bench_meta_iteration(data_dir, cfg, jit_compile=False,
                         timer=time.perf_counter):
  """One whole meta-iteration's series as metarun runs it (``MetaTrainer``'s
  plan and ``LocalSeries.run``: sampling, 5 unrolls of 20 steps with their
  meta-updates, progress lines), on the MLP with the 10,000-row test split
  as its data, without the evaluation that follows every
  ``evaluation_period``."""
  spec, _, batch_size = core.mlp_problem(data_dir)
  test, n = core.mini_dataset(data_dir)
  np.random.seed(0)
  with tempfile.TemporaryDirectory() as logdir:
    trainer = trainer_lib.MetaTrainer(config_lib.TrainerConfig(
        logdir=logdir,
        schedule=config_lib.Schedule(
            num_meta_iterations=10**6, learning_rate=1e-6,
            gradient_clip=1e4, fix_unroll=True,
            fix_unroll_length=core.UNROLL_LENGTH,
            fix_num_steps=5 * core.UNROLL_LENGTH),
        training=config_lib.TrainingConfig(mini_batch_size=int(n),
                                           jit_compile=jit_compile),
        resume=False, summaries=False), problem_spec.Spec(core.hrnn, (), {}), io.StringIO())
    trainer.start()
    trainer.set_task(spec, test, batch_size, 0)
    state = {"k": 0}

    def call():
      plan = trainer.plan(state["k"])
      trainer.series.run(plan, 0)
      state["k"] += 1

    result = core.measure(call, 1, max(2, cfg["unroll_repeats"] // 2), 1, timer)
  result["unrolls"] = 5
  # The process's peak so far: the unrolls timed before it included.
  result["peak_memory_gib"] = reporting.peak_memory_gib()
  return result


