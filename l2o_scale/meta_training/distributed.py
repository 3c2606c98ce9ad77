"""Meta-training on a tf.distribute parameter-server cluster (chief/ps/worker).

What the original ``metarun.py`` kept flags for (``task``, ``worker_tasks``,
``ps_tasks``: meta-parameters and RMSProp slots on parameter servers, every
worker applying its meta-gradients asynchronously with ``use_locking=True``,
the chief restoring and saving) but never ran, built on
``tf.distribute.experimental.ParameterServerStrategy`` and its
``ClusterCoordinator``:

* the chief runs the same :class:`~l2o_scale.meta_training.trainer.
  MetaTrainer` as a single process, with the meta-parameters, the RMSProp
  slots and the progress counters created under ``strategy.scope()`` (they
  live on ``/job:ps``) and a :class:`ClusterSeries` as its series runner;
* one scheduled closure is one whole meta-iteration: its partial unrolls
  (the single-process run's compiled ``meta_step``, unchanged, with inputs
  built by the same :meth:`MetaTrainingTask.unroll_inputs`), and after each
  the made-finite, clipped meta-gradient applied on the ps with TF1's locked
  ``ApplyRMSProp`` kernel, all in one ``tf.function`` on a worker; about
  two closures per worker are in flight, so updates are asynchronous as in
  the original;
* evaluation epochs are closures too, scheduled in parallel and averaged;
* everything else stays on the chief: every numpy/``random`` draw (the
  plans, passed to closures as tensors), progress lines, warnings,
  evaluation decisions, checkpoints (same ``model.ckpt-K`` layout) and
  summaries;
* the training data goes to each worker once (a per-worker dataset of the
  whole array); closures get row indices.

Differences from the single-process run, inherent to closures that cannot
chain state (``ClusterCoordinator.schedule`` rejects remote values as inputs):
the optimizer state carried between partial unrolls stays inside one
meta-iteration; each meta-iteration and each evaluation series starts from a
freshly initialised optimizer state (the single-process run carries the
original's TF1 local variables across meta-iterations). Plans are drawn
ahead of the closures in flight, so the random stream interleaves training
and evaluation draws differently. Evaluation and checkpoints read the ps
variables while later meta-iterations may already be updating them, as the
original's asynchronous chief did. Only the common modes are supported
(fixed unrolls, one problem, no curriculum, no imitation);
:func:`l2o_scale.meta_training.validation.distributed_unsupported` names the
others, and :func:`run_distributed_meta_training` refuses them.
"""

import collections
import contextlib
import json
import logging as std_logging
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import series as series_lib
from l2o_scale.meta_training import task as task_lib
from l2o_scale.meta_training import trainer as trainer_lib
from l2o_scale.meta_training import training
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.meta_training import validation


def cluster_task():
  """This process's :class:`~l2o_scale.meta_training.training_config.ClusterTask`
  from TF_CONFIG, or None without it (a single process)."""
  raw = os.environ.get("TF_CONFIG", "")
  if not raw.strip():
    return None
  try:
    conf = json.loads(raw)
  except ValueError as e:
    raise ValueError("TF_CONFIG is not valid JSON ({})".format(e)) from e
  task = conf.get("task", {})
  return config_lib.ClusterTask(task.get("type"), int(task.get("index", 0)),
                                conf.get("cluster", {}))


def server_config(num_workers):
  """Session config of ps/worker servers.

  Each worker runs up to two closures whose functions call other functions;
  with the default pool (one thread per core) a 2-core machine deadlocks, so
  the inter-op pool gets at least ``num_workers + 1`` threads.
  """
  config = config_pb2.ConfigProto()
  config.inter_op_parallelism_threads = max(num_workers + 1, 4)
  return config


def serve(task, out=sys.stdout):
  """Starts the server of this ps/worker (``task``: its
  :class:`~l2o_scale.meta_training.training_config.ClusterTask`) and blocks (the
  chief drives it).

  ``tf.distribute.Server`` listens on all interfaces at the port TF_CONFIG
  gives, whatever host name it gives.
  """
  task_type, task_index, cluster = task.job, task.index, task.cluster
  spec = tf.train.ClusterSpec(cluster)
  server = tf.distribute.Server(
      spec, job_name=task_type, task_index=task_index, protocol="grpc",
      config=server_config(len(cluster.get("worker", []))), start=True)
  out.write("{} {} serving at {} (listening on all interfaces); waiting for "
            "the chief.\n".format(task_type, task_index,
                                   cluster[task_type][task_index]))
  out.flush()
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
        self.out.write("lost worker {}: its meta-iterations are re-run on "
                       "the other workers.\n".format(worker))
        self.out.flush()

  def filter(self, record):
    return not ("MultiDeviceSaver" in record.getMessage() and
                "retracing" in record.getMessage())

  @contextlib.contextmanager
  def attached(self):
    """Handles and filters the ``tensorflow`` logger's records meanwhile."""
    logger = std_logging.getLogger("tensorflow")
    logger.addHandler(self)
    logger.addFilter(self)
    try:
      yield self
    finally:
      logger.removeHandler(self)
      logger.removeFilter(self)


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


class ClusterSeries(object):
  """Series of a :class:`MetaTrainer`'s task run as closures on workers.

  :meth:`schedule` sends a plan's series to the cluster (the chief keeps
  about ``closures_per_worker`` per worker in flight); :meth:`run` takes its
  result, in order, and reports its unrolls as the single-process run does.
  """

  def __init__(self, trainer, coordinator, runs_counter):
    self.task = trainer.task
    self.learner = trainer.learner
    self.state = trainer.state
    self.reporter = trainer.reporter
    self.coordinator = coordinator
    self.runs = runs_counter
    self.pending = {}
    data, labels = self.task.data, self.task.labels
    if data is None:
      data, labels = np.zeros([1, 0], np.float32), np.zeros([1, 0], np.float32)
    else:
      labels = task_lib.one_hot(labels)
    dataset = coordinator.create_per_worker_dataset(
        lambda: tf.data.Dataset.from_tensors((data, labels)).repeat())
    self.data_iter = iter(dataset)
    self.train_closure = tf.function(self._train_closure)
    self.eval_closure = tf.function(self._eval_closure)

  # ------------------------------------------------------ worker graphs
  def _series(self, iterator, tensors, step):
    """Runs the partial unrolls of a series (``tensors``: its
    SeriesTensors), each as ``step(inputs, carried)``, carrying the loop
    state from one to the next; returns their outputs."""
    data, labels = next(iterator)
    carried = unroll_lib.zero_loop_state(self.task.problem,
                                         self.task.optimizer)
    outputs = []
    for u, rows in enumerate(tensors.mini_rows):
      mini = ((tf.zeros([0]), tf.zeros([0])) if self.task.data is None else
              (tf.gather(data, rows), tf.gather(labels, rows)))
      inputs = self.task.unroll_inputs(tensors, u, mini, tensors.switches[u],
                                       u == 0, u == 0)
      out = step(inputs, carried)
      carried = out.final_state
      outputs.append(out)
    return outputs

  def _train_closure(self, iterator, tensors):
    """One meta-iteration on a worker: unrolls, locked updates, ps counters."""
    results, last_grads = [], []
    meta_optimizer = self.learner.meta_optimizer

    def step(inputs, carried):
      out, grads = self.task.meta_step(inputs, carried, False)
      clipped, nonfinite = meta_learner.prepare(grads,
                                                self.learner.gradient_clip)
      locked_rmsprop(meta_optimizer, clipped)
      meta_optimizer.iterations.assign_add(1)
      with tf.control_dependencies([out.metaobj]):
        done = tf.timestamp()
      # -1: no share measured in this unroll (the term does not act).
      share = (tf.constant(-1., tf.float32) if out.regularizer_share is None
               else tf.cast(out.regularizer_share, tf.float32))
      results.append(dict(objective=out.metaobj, nonfinite=nonfinite,
                          first=out.problem_objectives[0],
                          last=out.problem_objectives[-1], done=done,
                          share=share))
      last_grads[:] = [grads, clipped]
      return out

    start = tf.timestamp()
    outputs = self._series(iterator, tensors, step)
    self.runs.assign_add(1)
    final = unroll_lib.per_tensor_states(self.task.optimizer,
                                         outputs[-1].final_state)
    return dict(start=start, unrolls=results, grads=last_grads[0],
                clipped=last_grads[1], states=final[0] if final else {})

  def _eval_closure(self, iterator, tensors):
    """One evaluation series on a worker: its last problem objective."""
    outputs = self._series(iterator, tensors, self.task.eval_unroll)
    return outputs[-1].problem_objectives[-1]

  # --------------------------------------------------------------- chief
  def schedule(self, plan):
    """Sends the series of ``plan`` to the cluster."""
    self.pending[plan.k] = self.coordinator.schedule(
        self.train_closure,
        args=(self.data_iter, self.task.series_tensors(plan)))

  def run(self, plan, step):
    """The result of ``plan``'s series (scheduled before), its unrolls
    reported as the single-process run reports them."""
    result = self.pending.pop(plan.k).fetch()
    for record in unroll_records(result, plan, step):
      if self.reporter.unroll(plan.k, record):
        self.state.count("nonfinite")
    return series_lib.SeriesOutcome(
        plan.num_unrolls, None, result["states"],
        (result["grads"], result["clipped"]), plan.switches[-1],
        plan.draws.mini_rows[-1])

  def evaluate(self, draws):
    """Mean final objective of the evaluation series ``draws`` (callables
    drawing each plan), run in parallel."""
    remotes = [self.coordinator.schedule(
        self.eval_closure,
        args=(self.data_iter, self.task.series_tensors(draw())))
               for draw in draws]
    progress = reporting.Progress(self.reporter, "evaluation", len(remotes))
    costs = []
    for remote in remotes:
      costs.append(float(remote.fetch()))
      progress.done(len(costs))
    return sum(costs) / len(costs)


def unroll_records(result, plan, step):
  """The :class:`~l2o_scale.meta_training.reporting.UnrollRecord` of each
  unroll of a worker's meta-iteration ``result`` (``step``: the summary
  step before it); an unroll's time runs from the previous one's end."""
  previous = float(result["start"])
  for u, unroll in enumerate(result["unrolls"]):
    if unroll["first"] < 0 or unroll["last"] < 0:
      raise ValueError("Training problem objectives must be nonnegative.")
    done = float(unroll["done"])
    share = float(unroll.get("share", -1.))
    yield reporting.UnrollRecord(
        u, plan.num_unrolls, plan.lengths[u], float(unroll["objective"]),
        float(unroll["first"]), float(unroll["last"]), done - previous,
        False, int(unroll["nonfinite"]), step + u + 1,
        share if share >= 0 else None)
    previous = done


class ClusterLostError(RuntimeError):
  """The parameter server (or every worker) is gone; restart the cluster and
  the chief resumes from the last checkpoint."""


def run_distributed_meta_training(config, optimizer_spec, problems_and_data,
                                  out=sys.stdout, cluster_resolver=None,
                                  closures_per_worker=2):
  """``training.run_meta_training`` on a parameter-server cluster (the chief).

  Same ``config`` (:class:`~l2o_scale.meta_training.training_config.TrainerConfig`)
  and result dict, plus ``cluster_resolver`` (default: from TF_CONFIG) and
  ``closures_per_worker``; the result adds ``workers``, ``closure_runs``
  (meta-iteration closures executed on workers, counted on the ps: more
  than scheduled after re-runs) and ``lost_workers``. The cluster runs fixed
  unrolls of one problem without a curriculum, imitation or the
  objective-growth stop: a ``config`` that asks for another mode is refused
  with a ValueError naming it, before any work
  (:func:`l2o_scale.meta_training.validation.require_valid`, the rules
  metarun.py refuses too).
  """
  validation.require_valid(config, chief=True)
  strategy = tf.distribute.experimental.ParameterServerStrategy(
      cluster_resolver or
      tf.distribute.cluster_resolver.TFConfigClusterResolver())
  coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
      strategy)
  num_workers = strategy.extended._num_workers  # pylint: disable=protected-access
  trainer = trainer_lib.MetaTrainer(config, optimizer_spec, out,
                                    strategy.scope())
  with strategy.scope():
    runs = tf.Variable(0, dtype=tf.int64, trainable=False, name="closure_runs")
  lost = LostWorkerReporter(out)
  with lost.attached():
    try:
      if not trainer.start():
        return dict(trainer.close(), workers=num_workers, closure_runs=0,
                    lost_workers=[])
      _report_placement(trainer, out)
      _run_chief(trainer, coordinator, problems_and_data,
                 config.schedule.select_random_problems, num_workers,
                 closures_per_worker * num_workers, runs, out)
    except tf.errors.UnavailableError as e:
      raise ClusterLostError(str(e)) from e
  result = trainer.close()
  closure_runs = int(runs.numpy())
  trainer.log("{} workers ran {} meta-iteration closures for {} scheduled{}."
              .format(num_workers, closure_runs,
                      config.schedule.num_meta_iterations - trainer.start_k,
                      "; lost workers: " + ", ".join(sorted(lost.lost))
                      if lost.lost else ""))
  return dict(result, workers=num_workers, closure_runs=closure_runs,
              lost_workers=sorted(lost.lost))


def _report_placement(trainer, out):
  meta = trainer.optimizer.meta_variables
  out.write("{} meta-parameters ({} KB) and their RMSProp slots on {}\n"
            .format(len(meta), sum(v.shape.num_elements() * v.dtype.size
                                   for v in meta) // 1024,
                    ", ".join(sorted({v.device for v in meta}))))


def _run_chief(trainer, coordinator, problems_and_data,
               select_random_problems, num_workers, in_flight, runs, out):
  """The chief's loop: plans drawn and scheduled ahead, results processed in
  order by the trainer's ``run_meta_iteration``."""
  [(problem_spec, dataset, batch_size)] = training.problem_sequence(
      trainer, problems_and_data, 1, select_random_problems)
  trainer.set_task(problem_spec, dataset, batch_size, 0,
                   series=lambda t: ClusterSeries(t, coordinator, runs))
  out.write("Distributed meta-training: {} workers, up to {} "
            "meta-iterations in flight.\n".format(
                num_workers, in_flight))
  pending = collections.deque()
  ks = iter(trainer.meta_iterations())
  for _ in trainer.meta_iterations():
    while len(pending) < in_flight:
      k = next(ks, None)
      if k is None:
        break
      plan = trainer.plan(k)
      trainer.series.schedule(plan)
      pending.append(plan)
    trainer.run_meta_iteration(pending.popleft())
  coordinator.join()
  trainer.end_problem()
