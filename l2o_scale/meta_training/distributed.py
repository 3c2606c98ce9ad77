"""Meta-training on a tf.distribute parameter-server cluster (chief/ps/worker).

What the original ``metarun.py`` kept flags for (``task``, ``worker_tasks``,
``ps_tasks``: meta-parameters and RMSProp slots on parameter servers, every
worker applying its meta-gradients asynchronously with ``use_locking=True``,
the chief restoring and saving) but never ran, built on
``tf.distribute.experimental.ParameterServerStrategy`` and its
``ClusterCoordinator``:

* the meta-parameters, the RMSProp slots and the progress counters are created
  under ``strategy.scope()`` and live on ``/job:ps``;
* one scheduled closure is one whole meta-iteration: its partial unrolls (the
  single-process run's compiled ``meta_step``, unchanged), and after each the
  made-finite, clipped meta-gradient applied on the ps with TF1's locked
  ``ApplyRMSProp`` kernel, all in one ``tf.function`` on a worker; about two
  closures per worker are in flight, so updates are asynchronous as in the
  original;
* evaluation epochs are closures too, scheduled in parallel and averaged;
* everything else stays on the coordinator (the chief): every numpy/``random``
  draw (passed to closures as indices and arrays), progress lines, NaN
  warnings, evaluation decisions, checkpoints (same ``CheckpointWriter``, same
  ``model.ckpt-K`` layout) and summaries;
* the training data goes to each worker once (a per-worker dataset of the
  whole array); closures get row indices.

Differences from the single-process run, inherent to closures that cannot
chain state (``ClusterCoordinator.schedule`` rejects remote values as inputs):
the optimizer state carried between partial unrolls stays inside one
meta-iteration; each meta-iteration and each evaluation series starts from a
freshly initialised optimizer state (the single-process run carries the
original's TF1 local variables across meta-iterations). Evaluation and
checkpoints read the ps variables while later meta-iterations may already be
updating them, as the original's asynchronous chief did. Only the common
modes are supported (fixed unrolls, one problem, no curriculum, no imitation);
:func:`unsupported` names the others.
"""

import collections
import json
import logging as std_logging
import os
import random
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from l2o_scale.meta_training import meta_learner
from l2o_scale.runs import summaries as summaries_lib
from l2o_scale.meta_training import tf1_optimizers
from l2o_scale.meta_training import training
from l2o_scale.meta_training import unroll as unroll_lib

JOBS = ("chief", "worker", "ps")


def cluster_task():
  """(task_type, task_index, cluster dict) from TF_CONFIG, or None without it."""
  raw = os.environ.get("TF_CONFIG", "")
  if not raw.strip():
    return None
  try:
    conf = json.loads(raw)
  except ValueError as e:
    raise ValueError("TF_CONFIG is not valid JSON ({})".format(e)) from e
  task = conf.get("task", {})
  return task.get("type"), int(task.get("index", 0)), conf.get("cluster", {})


def flag_mismatches(flag_values, task_type, task_index, cluster):
  """The original's --task/--worker_tasks/--ps_tasks, given explicitly, must
  agree with TF_CONFIG (which decides); returns error lines."""
  errors = []
  if task_type not in JOBS:
    errors.append("TF_CONFIG task type {!r} is not one of {}".format(
        task_type, ", ".join(JOBS)))
  if "chief" not in cluster or "ps" not in cluster or "worker" not in cluster:
    errors.append("TF_CONFIG cluster needs chief, worker and ps jobs")
  expected = dict(worker_tasks=len(cluster.get("worker", [])),
                  ps_tasks=len(cluster.get("ps", [])))
  if task_type == "worker":
    expected["task"] = task_index
  for name, value in expected.items():
    if flag_values[name].present and flag_values[name].value != value:
      errors.append("--{}={} disagrees with TF_CONFIG ({})".format(
          name, flag_values[name].value, value))
  return errors


def unsupported(flag_values):
  """Modes distributed training refuses, one line each (see module doc)."""
  reasons = []
  if flag_values.if_cl:
    reasons.append("--if_cl (curriculum) is not supported in distributed mode")
  if flag_values.if_mt:
    reasons.append("--if_mt (imitation) is not supported in distributed mode")
  if not flag_values.fix_unroll:
    reasons.append("distributed mode needs --fix_unroll=True")
  if flag_values.num_problems != 1:
    reasons.append("distributed mode trains one problem (--num_problems=1)")
  if flag_values.jit_compile:
    # Measured: XLA refuses to read the meta-parameters that live on the
    # parameter servers ("Trying to access resource ... located in device
    # /job:ps").
    reasons.append("--jit_compile is not supported in distributed mode (XLA "
                   "cannot read variables on the parameter servers)")
  if flag_values.objective_training_max_multiplier > 0:
    reasons.append("--objective_training_max_multiplier is not supported in "
                   "distributed mode")
  for name, default in (("on_divergence", "continue"),
                        ("selection", "original"),
                        ("optimizee_init", "normal")):
    if getattr(flag_values, name) != default:
      reasons.append("--{}={} is single-process only for now (distributed "
                     "mode: --{}={})".format(name, getattr(flag_values, name),
                                             name, default))
  return reasons


def server_config(num_workers):
  """Session config of ps/worker servers.

  Each worker runs up to two closures whose functions call other functions;
  with the default pool (one thread per core) a 2-core machine deadlocks, so
  the inter-op pool gets at least ``num_workers + 1`` threads.
  """
  config = config_pb2.ConfigProto()
  config.inter_op_parallelism_threads = max(num_workers + 1, 4)
  return config


def serve(task_type, task_index, cluster, out=sys.stdout):
  """Starts this ps/worker's server and blocks (the chief drives it).

  ``tf.distribute.Server`` listens on all interfaces at the port TF_CONFIG
  gives, whatever host name it gives.
  """
  spec = tf.train.ClusterSpec(cluster)
  server = tf.distribute.Server(
      spec, job_name=task_type, task_index=task_index, protocol="grpc",
      config=server_config(len(cluster.get("worker", []))), start=True)
  training._log(out, "{} {} serving at {} (listening on all interfaces); "
                "waiting for the chief.".format(task_type, task_index,
                                                cluster[task_type][task_index]))
  server.join()


class LostWorkerReporter(std_logging.Handler):
  """Turns the coordinator's worker-failure log records into progress lines.

  The coordinator re-queues a failed worker's closures on the others and
  reports it only as an error record of the ``tensorflow`` logger; this makes
  it one clear line. As a filter of that logger it also drops the retracing
  warning that every checkpoint of ps variables triggers in TF's saver.
  """

  def __init__(self, out):
    super().__init__(level=std_logging.WARNING)
    self.out = out
    self.lost = set()

  def emit(self, record):
    message = record.getMessage()
    if "failed with" in message and message.startswith("Worker "):
      worker = message.split()[1]
      if worker not in self.lost:
        self.lost.add(worker)
        training._log(self.out, "lost worker {}: its meta-iterations are "
                      "re-run on the other workers.".format(worker))

  def filter(self, record):
    return not ("MultiDeviceSaver" in record.getMessage() and
                "retracing" in record.getMessage())


def locked_rmsprop(meta_optimizer, grads):
  """The original's meta-update on the ps: TF1 ``ApplyRMSProp`` with
  ``use_locking=True`` per variable (equal to ``rmsprop_update``), so
  concurrent workers cannot interleave the parts of one update."""
  opt = meta_optimizer
  for var, grad, ms, mom in zip(opt._variables_fn(), grads, opt.ms, opt.mom):  # pylint: disable=protected-access
    tf.raw_ops.ResourceApplyRMSProp(
        var=var.handle, ms=ms.handle, mom=mom.handle,
        lr=tf.cast(opt.learning_rate_tensor(), var.dtype),
        rho=tf.constant(opt.decay, var.dtype),
        momentum=tf.constant(opt.momentum, var.dtype),
        epsilon=tf.constant(opt.epsilon, var.dtype), grad=grad,
        use_locking=True)


Plan = collections.namedtuple(
    "Plan", ["init_tensors", "weights", "batches", "mini_rows", "switches"])


class DistributedTrainer(object):
  """Closures of one problem's meta-training on top of a ``training._Trainer``.

  The wrapped trainer (built on the coordinator) provides the data arrays, the
  numpy draws, the compiled ``meta_step``/``eval_unroll`` and the progress
  lines and histograms of the single-process run.
  """

  def __init__(self, trainer, coordinator, gradient_clip, runs_counter):
    self.trainer = trainer
    self.coordinator = coordinator
    self.gradient_clip = gradient_clip
    self.runs = runs_counter
    data, labels = trainer.data, trainer.labels
    if data is None:
      data, labels = np.zeros([1, 0], np.float32), np.zeros([1, 0], np.float32)
    else:
      labels = training._one_hot(labels)
    self.dataset = coordinator.create_per_worker_dataset(
        lambda: tf.data.Dataset.from_tensors((data, labels)).repeat())
    self.data_iter = iter(self.dataset)
    self.train_closure = tf.function(self._train_closure)
    self.eval_closure = tf.function(self._eval_closure)

  # ---------------------------------------------------- coordinator draws
  def train_plan(self, lengths, regularize_time, reg_scale):
    """The single-process run's numpy draws for one meta-iteration."""
    t = self.trainer
    groups, _ = t.batches(sum(lengths), lengths)
    mini_rows = t.mini_batches(len(lengths))
    init = t.init_tensors()
    switches = [training.regularizer_switch(i, len(lengths), regularize_time,
                                            reg_scale)
                for i in range(len(lengths))]
    return self._plan(init, lengths, groups, mini_rows, switches)

  def eval_plan(self, lengths, mini_rows, switch):
    """Draws of one evaluation series (fresh batches per unroll, l. validate)."""
    t = self.trainer
    init = t.init_tensors()
    groups = [t.batches(sum(lengths), lengths)[0][i]
              for i in range(len(lengths))]
    return self._plan(init, lengths, groups, [mini_rows] * len(lengths),
                      [switch] * len(lengths))

  def _plan(self, init, lengths, groups, mini_rows, switches):
    t = self.trainer
    return Plan([tf.constant(x) for x in init],
                [tf.constant(np.ones(n, np.float32) / n) for n in lengths],
                [t._batch_tensor(g, n) for g, n in zip(groups, lengths)],  # pylint: disable=protected-access
                [tf.constant(np.asarray(r, np.int64)) for r in mini_rows],
                [tf.constant(s) for s in switches])

  # ------------------------------------------------------ worker graphs
  def _mini(self, data, labels, rows):
    if self.trainer.data is None:
      return tf.zeros([0]), tf.zeros([0])
    return tf.gather(data, rows), tf.gather(labels, rows)

  def _series(self, iterator, plan, step):
    """Runs the partial unrolls of ``plan``, each as ``step(inputs,
    carried)`` (unroll.UnrollInputs and the LoopState), carrying the loop
    state from one to the next; returns their outputs."""
    data, labels = next(iterator)
    problem = self.trainer.problem
    carried = unroll_lib.zero_loop_state(problem, self.trainer.optimizer)
    outputs = []
    for u, weights in enumerate(plan.weights):
      mini_data, mini_labels = self._mini(data, labels, plan.mini_rows[u])
      mt_labels = [tf.zeros((weights.shape[0],) + tuple(s))
                   for s in problem.param_shapes]
      first = tf.constant(u == 0)
      inputs = unroll_lib.UnrollInputs(
          obj_weights=weights, batches=plan.batches[u], mini_data=mini_data,
          mini_labels=mini_labels, init_tensors=plan.init_tensors,
          jacob_switch=plan.switches[u], mt_labels=mt_labels,
          first_unroll=first, reset_state=first)
      out = step(inputs, carried)
      carried = out.final_state
      outputs.append(out)
    return outputs

  def _train_closure(self, iterator, plan):
    """One meta-iteration on a worker: unrolls, locked updates, ps counters."""
    results, last_grads = [], []
    clip = self.gradient_clip

    def step(inputs, carried):
      out, grads = self.trainer.meta_step(inputs, carried, False)
      clipped, nonfinite = meta_learner.prepare(grads, clip)
      locked_rmsprop(self.trainer.meta_optimizer, clipped)
      self.trainer.meta_optimizer.iterations.assign_add(1)
      with tf.control_dependencies([out.metaobj]):
        done = tf.timestamp()
      results.append(dict(objective=out.metaobj, nonfinite=nonfinite,
                          first=out.problem_objectives[0],
                          last=out.problem_objectives[-1], done=done))
      last_grads[:] = [grads, clipped]
      return out

    start = tf.timestamp()
    outputs = self._series(iterator, plan, step)
    self.runs.assign_add(1)
    final = unroll_lib.per_tensor_states(self.trainer.optimizer,
                                         outputs[-1].final_state)
    return dict(start=start, unrolls=results, grads=last_grads[0],
                clipped=last_grads[1], states=final[0] if final else {})

  def _eval_closure(self, iterator, plan):
    """One evaluation series on a worker: its last problem objective."""
    outputs = self._series(iterator, plan, self.trainer.eval_unroll)
    return outputs[-1].problem_objectives[-1]

  def schedule_train(self, plan):
    return self.coordinator.schedule(self.train_closure,
                                     args=(self.data_iter, plan))

  def evaluate(self, lengths, mini_rows, switch, epochs):
    """Mean final objective of ``epochs`` evaluation series run in parallel."""
    values = [self.coordinator.schedule(
        self.eval_closure,
        args=(self.data_iter, self.eval_plan(lengths, mini_rows, switch)))
              for _ in range(epochs)]
    return sum(float(v.fetch()) for v in values) / epochs


class _Reporter(object):
  """Progress lines and histograms of the single-process run, reused as is:
  ``training._Trainer``'s methods only need these attributes."""

  log_unroll = training._Trainer.log_unroll  # pylint: disable=protected-access
  write_histograms = training._Trainer.write_histograms  # pylint: disable=protected-access

  def __init__(self, trainer):
    self.summary_writer = trainer.summary_writer
    self.problem_name = trainer.problem_name
    self.optimizer = trainer.optimizer
    self.out = trainer.out


def report_iteration(reporter, result, k, num_meta_iterations, lengths,
                     step):
  """Logs a finished meta-iteration's unrolls as the single-process run does.

  Returns the number of unrolls with non-finite values (warned, as zeroed)."""
  prefix = "[meta-iteration {}/{}]".format(k + 1, num_meta_iterations)
  training._log(reporter.out, "{} training on {}: {} unrolls of {} steps".format(
      prefix, reporter.problem_name, len(lengths), lengths[0]))
  previous = float(result["start"])
  entries = sum(v.shape.num_elements()
                for v in reporter.optimizer.meta_variables)
  nonfinite_unrolls = 0
  for u, unroll in enumerate(result["unrolls"]):
    objective = float(unroll["objective"])
    if unroll["first"] < 0 or unroll["last"] < 0:
      raise ValueError("Training problem objectives must be nonnegative.")
    done = float(unroll["done"])
    reporter.log_unroll(prefix, u, len(lengths), lengths[u],
                        tf.constant(objective),
                        np.array([unroll["first"], unroll["last"]]),
                        done - previous, False, step + u + 1)
    previous = done
    warning = training.nonfinite_warning(k, u, objective,
                                         int(unroll["nonfinite"]), entries)
    if warning:
      nonfinite_unrolls += 1
      training._log(reporter.out, warning)  # pylint: disable=protected-access
  return nonfinite_unrolls


def train_optimizer(logdir, optimizer_spec, problems_and_data, num_problems,
                    num_meta_iterations, num_unroll_func,
                    num_partial_unroll_itrs_func, learning_rate=1e-4,
                    gradient_clip=5., is_chief=True,
                    select_random_problems=True, callbacks=None,
                    obj_train_max_multiplier=-1, out=sys.stdout,
                    fix_unroll=True, fix_unroll_length=20, fix_num_steps=100,
                    fix_num_steps_eval=100, evaluation_period=1,
                    evaluation_epochs=20, save_period=1, if_cl=False,
                    config=None, resume=True, summaries=True,
                    cluster_resolver=None, closures_per_worker=2):
  """``training.train_optimizer`` on a parameter-server cluster (the chief).

  Same arguments and result dict, plus ``cluster_resolver`` (default: from
  TF_CONFIG) and ``closures_per_worker``; the result adds ``workers``,
  ``closure_runs`` (meta-iteration closures executed on workers, counted on
  the ps: more than scheduled after re-runs) and ``lost_workers``.
  """
  del is_chief, callbacks, num_unroll_func, num_partial_unroll_itrs_func
  del obj_train_max_multiplier, fix_unroll, if_cl, num_problems
  config = config or training.TrainingConfig()
  resolver = (cluster_resolver or
              tf.distribute.cluster_resolver.TFConfigClusterResolver())
  strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
  coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
      strategy)
  num_workers = strategy.extended._num_workers  # pylint: disable=protected-access
  reporter_handler = LostWorkerReporter(out)
  tf_logger = std_logging.getLogger("tensorflow")
  tf_logger.addHandler(reporter_handler)
  tf_logger.addFilter(reporter_handler)
  try:
    return _train(strategy, coordinator, num_workers, reporter_handler, logdir,
                  optimizer_spec, problems_and_data, num_meta_iterations,
                  learning_rate, gradient_clip, out, fix_unroll_length,
                  fix_num_steps, fix_num_steps_eval, evaluation_period,
                  evaluation_epochs, save_period, config, resume, summaries,
                  closures_per_worker)
  except tf.errors.UnavailableError as e:
    raise ClusterLostError(str(e)) from e
  finally:
    tf_logger.removeHandler(reporter_handler)
    tf_logger.removeFilter(reporter_handler)


class ClusterLostError(RuntimeError):
  """The parameter server (or every worker) is gone; restart the cluster and
  the chief resumes from the last checkpoint."""


def _build(strategy, optimizer_spec, learning_rate, config, logdir, out):
  """Meta-parameters, RMSProp slots and counters, created on the ps."""
  with strategy.scope():
    optimizer = optimizer_spec.build()
    meta_optimizer = tf1_optimizers.RMSProp(
        optimizer.meta_variables, learning_rate, decay=config.rms_decay,
        epsilon=config.rms_epsilon)
    progress = training.TrainingProgress()
    runs = tf.Variable(0, dtype=tf.int64, trainable=False, name="closure_runs")
  devices = sorted({v.device for v in optimizer.meta_variables})
  training._log(out, "{} meta-parameters ({} KB) and their RMSProp slots on {}"
                .format(len(optimizer.meta_variables),
                        sum(v.shape.num_elements() * v.dtype.size
                            for v in optimizer.meta_variables) // 1024,
                        ", ".join(devices)))
  writer = training.CheckpointWriter(logdir, optimizer, meta_optimizer,
                                     progress)
  return optimizer, meta_optimizer, progress, runs, writer


def _train(strategy, coordinator, num_workers, lost, logdir, optimizer_spec,
           problems_and_data, num_meta_iterations, learning_rate,
           gradient_clip, out, fix_unroll_length, fix_num_steps,
           fix_num_steps_eval, evaluation_period, evaluation_epochs,
           save_period, config, resume, summaries, closures_per_worker):
  """The chief's loop: schedule ahead, process results in order, evaluate
  and save as the single-process run does.

  Long on purpose: the scheduling queue (closures in flight, results taken
  in order, lost workers) is one piece of state read and written in every
  branch here.
  """
  tf.io.gfile.makedirs(logdir)
  optimizer, meta_optimizer, progress, runs, writer = _build(
      strategy, optimizer_spec, learning_rate, config, logdir, out)
  latest, start_k = training.resume_point(writer, progress, resume,
                                          num_meta_iterations, out)
  if start_k >= num_meta_iterations:
    training._log(out, "Training already complete ({} of {} meta-iterations); "
                  "nothing to do. Checkpoints are in {}.".format(
                      start_k, num_meta_iterations, logdir))
    return dict(best_evaluation=float(progress.best_evaluation.numpy()),
                last_checkpoint=latest, meta_iterations=start_k,
                nonfinite_unrolls=0, workers=num_workers, closure_runs=0,
                lost_workers=[])
  summary_writer = None
  if summaries:
    summary_writer = summaries_lib.create_writer(
        logdir, int(meta_optimizer.iterations.numpy()) if latest else None)
  problem_spec, dataset, batch_size = random.choice(list(problems_and_data))
  name = getattr(problem_spec.callable, "__name__", "problem")
  trainer = training._Trainer(
      problem_spec.build(), name, dataset, batch_size, optimizer,
      meta_optimizer, config, gradient_clip, -1, summary_writer, out)
  dist = DistributedTrainer(trainer, coordinator, gradient_clip, runs)
  reporter = _Reporter(trainer)
  lengths = [fix_unroll_length] * (fix_num_steps // fix_unroll_length)
  eval_lengths = [fix_unroll_length] * (fix_num_steps_eval // fix_unroll_length)
  training._log(out, "Distributed meta-training: {} workers, up to {} "
                "meta-iterations in flight.".format(
                    num_workers, closures_per_worker * num_workers))
  step0 = int(meta_optimizer.iterations.numpy())
  best_evaluation = float(progress.best_evaluation.numpy())
  best_model_idx, nonfinite = None, 0
  pending = collections.deque()
  next_k = start_k
  for k in range(start_k, num_meta_iterations):
    while (next_k < num_meta_iterations and
           len(pending) < closures_per_worker * num_workers):
      plan = dist.train_plan(lengths, config.regularize_time, config.reg_scale)
      pending.append((plan, dist.schedule_train(plan)))
      next_k += 1
    plan, remote = pending.popleft()
    result = remote.fetch()
    step = step0 + (k - start_k) * len(lengths)
    nonfinite += report_iteration(reporter, result, k, num_meta_iterations,
                                  lengths, step)
    step += len(lengths)
    reporter.write_histograms(result["states"],
                              (result["grads"], result["clipped"]), step)
    progress.meta_iteration.assign(k + 1)
    if (k + 1) % evaluation_period == 0:
      cost = dist.evaluate(eval_lengths, plan.mini_rows[-1],
                           plan.switches[-1], evaluation_epochs)
      new_best = training.record_evaluation(
          cost, best_evaluation, k, evaluation_period, summary_writer, step,
          writer, progress, out)
      if new_best is not None:
        best_evaluation = new_best
        best_model_idx = k + 1
    if (k + 1) % save_period == 0:
      writer.save(k + 1)
  coordinator.join()
  writer.save(num_meta_iterations)
  if summary_writer is not None:
    summary_writer.flush()
  training._log(out, "best model index={}".format(best_model_idx))
  scheduled = num_meta_iterations - start_k
  closure_runs = int(runs.numpy())
  training._log(out, "{} workers ran {} meta-iteration closures for {} "
                "scheduled{}.".format(
                    num_workers, closure_runs, scheduled,
                    "; lost workers: " + ", ".join(sorted(lost.lost))
                    if lost.lost else ""))
  if nonfinite:
    training._log(out, "{} unroll(s) had non-finite values (gradients "
                  "zeroed).".format(nonfinite))
  return dict(best_evaluation=best_evaluation, last_checkpoint=writer.latest(),
              meta_iterations=num_meta_iterations, nonfinite_unrolls=nonfinite,
              workers=num_workers, closure_runs=closure_runs,
              lost_workers=sorted(lost.lost))
