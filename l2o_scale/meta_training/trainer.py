"""The meta-trainer: one meta-iteration at a time, for both loops.

Port of the body of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.95-600): restore or start, then per
meta-iteration a series of partial unrolls with their meta-updates, and the
evaluation that keeps the best model (``model.ckpt-0``), the curriculum's
decisions (``if_cl``, l.520-590) and the checkpoints. The trainer runs a
problem (:meth:`MetaTrainer.train_problem`) in that order; its parts keep
where a resumed run continues (:mod:`l2o_scale.meta_training.resume`) and
evaluate (:mod:`l2o_scale.meta_training.evaluation`). As google/
learned_optimization's ``GradientLearner`` sits over its ``TruncatedStep``,
a :class:`MetaTrainer` sits over a *series runner*: the unrolls run in this
process (:class:`~l2o_scale.meta_training.series.LocalSeries`) or on the
workers of a cluster (:class:`~l2o_scale.meta_training.distributed.
ClusterSeries`); :meth:`MetaTrainer.run_meta_iteration` is the same for
both. Everything the run carries lives in one
:class:`~l2o_scale.meta_training.train_state.TrainState`.

New in the port (defaults keep the original): divergence handling
(``on_divergence``), robust selection of ``model.ckpt-0`` (``selection``),
exact resume, progress lines and TensorBoard summaries.
"""

import os

import tensorflow as tf

from l2o_scale.meta_training import curriculum as curriculum_lib
from l2o_scale.meta_training import evaluation
from l2o_scale.meta_training import meta_learner as meta_learner_lib
from l2o_scale.meta_training import mixing
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import resume as resume_lib
from l2o_scale.meta_training import series as series_lib
from l2o_scale.meta_training import task as task_lib
from l2o_scale.meta_training import train_state as train_state_lib
from l2o_scale.runs import checkpoints
from l2o_scale.runs import summaries as summaries_lib


class MetaTrainer(object):
  """Meta-trains the optimizer of ``optimizer_spec`` as ``config``
  (:class:`~l2o_scale.meta_training.training_config.TrainerConfig`) says.

  Use: :meth:`start` (restore; False when the run already finished), then
  :meth:`train_problem` for each sub-problem from :attr:`start_problem` on
  (or :meth:`train_mixed` once, with ``--mix_problems``) until
  :attr:`stopped`; finally :meth:`close` returns the result. A caller that
  schedules meta-iterations ahead (the distributed chief) drives
  :meth:`set_task`, :meth:`plan`, :meth:`run_meta_iteration` and
  :meth:`end_problem` itself. ``scope``: a context manager the
  meta-parameters and meta-optimizer slots are created in (a distribution
  strategy's scope).
  """

  def __init__(self, config, optimizer_spec, out, scope=None):
    self.config = config
    self.schedule = config.schedule
    self.training = config.training
    self.out = out
    with scope or _no_scope():
      optimizer = optimizer_spec.build()
      meta_optimizer = meta_learner_lib.build_meta_optimizer(
          optimizer.meta_variables, self.schedule.learning_rate,
          self.training)
      self.state = train_state_lib.TrainState(config.logdir, optimizer,
                                              meta_optimizer)
    self.optimizer = optimizer
    self.learner = meta_learner_lib.MetaLearner(meta_optimizer,
                                                self.schedule.gradient_clip)
    self.curriculum = (curriculum_lib.Curriculum(
        self.schedule.fix_unroll_length) if self.schedule.if_cl else None)
    self.resume_point = resume_lib.ResumePoint(
        self.state, self.schedule, self.training, self.num_problems)
    self.evaluator = evaluation.Evaluator(
        self.schedule, self.training, self.state, self.curriculum, optimizer,
        self.log)
    self.task = self.series = self.reporter = self.summary_writer = None
    self._said = set()  # Lines _log_once has written.
    self.k = self.problem_itr = self.summary_step = 0
    self.stopped = None  # "curriculum" or "divergence" once training ends.

  def log(self, message):
    self.out.write(message + "\n")
    self.out.flush()

  def _log_once(self, message):
    # A mixture builds many tasks that would say the same thing.
    if message not in self._said:
      self._said.add(message)
      self.log(message)

  @property
  def start_k(self):
    """The meta-iteration the run continues at (0 unless resumed)."""
    return self.resume_point.start_k

  @property
  def start_problem(self):
    """The sub-problem the run continues at (0 unless resumed)."""
    return self.resume_point.start_problem

  @property
  def num_problems(self):
    """The sub-problems of the run, one after the other (1 with
    ``--mix_problems``: one run that draws a problem per meta-iteration)."""
    return 1 if self.training.mix_problems else self.schedule.num_problems

  # --------------------------------------------------------------- start
  def start(self):
    """Restores the latest checkpoint (with ``resume``); False (and a line
    saying so) when the run in ``logdir`` has already finished."""
    state = self.state
    tf.io.gfile.makedirs(self.config.logdir)
    resumed_line = self.resume_point.restore(self.config.resume)
    if resumed_line:
      self.log(resumed_line)
    if not resumed_line and self.training.warm_start:
      self.log("Warm start: meta-parameters from {}.".format(
          checkpoints.restore_optimizer(
              _warm_start_path(self.training.warm_start), self.optimizer)))
    if self.resume_point.resumed and self.curriculum is not None:
      self.curriculum.load_state_dict(state.curriculum_state())
    self.k = self.start_k - 1
    finished = self.resume_point.finished(self.config.resume)
    if finished:
      self.k, line = finished
      self.log(line)
      return False
    self.resume_point.start_run()
    self.summary_step = int(state.meta_optimizer.iterations.numpy())
    if self.config.summaries:
      self.summary_writer = summaries_lib.create_writer(
          self.config.logdir, self.summary_step if resumed_line else None)
    return True

  # ------------------------------------------------------------ problems
  def train_problem(self, problem_spec, dataset, batch_size, problem_itr):
    """Meta-trains sub-problem ``problem_itr``: its meta-iterations (from
    the resumed one on the first problem of a resumed run) until the
    schedule ends or training stops, then :meth:`end_problem`."""
    self.set_task(problem_spec, dataset, batch_size, problem_itr)
    for k in self.meta_iterations():
      self.run_meta_iteration(self.plan(k))
      if self.stopped:
        break
    self.end_problem()

  def train_mixed(self, problems_and_data):
    """``--mix_problems`` (new in the port): one run of
    ``num_meta_iterations``, each on a problem drawn by
    :func:`~l2o_scale.meta_training.mixing.mixed_problem_index`, from a
    fresh optimizee and optimizer state. Every problem's task is built
    once, up front and in order (so a resumed run draws its numbers as an
    uninterrupted one did), and reused; at most ``max_compiled_problems``
    of them keep their compiled functions
    (:class:`~l2o_scale.meta_training.mixing.CompiledTasks`)."""
    self.resume_point.begin_problem(0)
    built = [self._build_task(*p) for p in problems_and_data]
    compiled = mixing.CompiledTasks(self.training.max_compiled_problems)
    resuming = self.resume_point.resumed
    for k in range(self.start_k, self.schedule.num_meta_iterations):
      index = mixing.mixed_problem_index(k, len(built))
      compiled.use(index, built[index][0])
      self._use_task(built[index], 0, resuming=resuming, load_carried=False)
      resuming = False
      self.state.restart_next_series()
      self.run_meta_iteration(self.plan(k))
      if self.stopped:
        break
    self.end_problem()

  def set_task(self, problem_spec, dataset, batch_size, problem_itr,
               series=None):
    """Meta-trains on this problem from now on. ``series``: a callable
    ``(trainer) -> series runner``, default a
    :class:`~l2o_scale.meta_training.series.LocalSeries`."""
    self.resume_point.begin_problem(problem_itr)
    self._use_task(self._build_task(problem_spec, dataset, batch_size),
                  problem_itr, series)

  def _build_task(self, problem_spec, dataset, batch_size):
    """The problem's task and reporter (what :meth:`_use_task` takes)."""
    problem = problem_spec.build()
    name = getattr(problem_spec.callable, "__name__", "problem")
    task = task_lib.MetaTrainingTask(problem, name, dataset, batch_size,
                                     self.optimizer, self.training,
                                     self._log_once)
    if self.state.reg_seeds is not None:  # A training task, not selection's.
      self.resume_point.keep_reg_seed(task)
    reporter = reporting.Reporter(
        self.out, self.summary_writer, name, self.optimizer,
        self.schedule.num_meta_iterations,
        os.path.join(self.config.logdir, reporting.EVENTS)
        if self.config.logdir else None)
    return task, reporter

  def build_selection_tasks(self, problems_and_data):
    """``--selection_set``: the problems the robust score runs on instead
    of the current one. Built once, before any training problem's state is
    attached, so that a resumed run draws its numbers in the same order."""
    self.evaluator.selection_tasks = [self._build_task(*p)[0]
                                      for p in problems_and_data]

  def _use_task(self, built, problem_itr, series=None, resuming=None,
               load_carried=True):
    """Meta-trains on ``built`` (from :meth:`_build_task`) from now on.
    ``resuming`` (default: the first problem of a resumed run) applies the
    restored checkpoint's random streams and, with ``load_carried``, its
    carried optimizee and optimizer state."""
    self.task, self.reporter = built
    self.problem_itr = problem_itr
    resuming, starts = self.resume_point.attaching(problem_itr, resuming)
    lr = self.state.meta_optimizer.learning_rate
    if not self.state.attach_problem(self.task.problem, resuming,
                                     self.training.meta_batch_size,
                                     load_carried and not starts,
                                     restore_streams=not starts):
      self.log("Note: {} has no resume state (written by an older "
               "version): random streams and carried optimizer state "
               "restart, so the run differs from an uninterrupted one."
               .format(self.resume_point.latest))
    if self.state.meta_optimizer.learning_rate != lr:
      self.log("Meta learning rate {:.3g} (as lowered by rollbacks before "
               "the interruption).".format(
                   self.state.meta_optimizer.learning_rate))
    self.series = (series or _local_series)(self)

  def meta_iterations(self):
    """The meta-iterations of the current problem: from the resumed one on
    the first problem of a resumed run, else all."""
    start = self.start_k if self.problem_itr == self.start_problem else 0
    return range(start, self.schedule.num_meta_iterations)

  def plan(self, k):
    """Draws meta-iteration ``k`` (:mod:`l2o_scale.meta_training.plan`)."""
    return self.task.planner.meta_iteration(
        k, self.schedule, self.curriculum, self.state.reset_next_series)

  # ------------------------------------------------------ meta-iteration
  def run_meta_iteration(self, plan):
    """One meta-iteration: its series of unrolls and meta-updates, then
    rollback or evaluation and checkpoints, as the flags say."""
    k, state, training = plan.k, self.state, self.training
    self.k = k
    if training.on_divergence == "rollback":
      state.take_snapshot()
    self.reporter.meta_iteration(plan)
    outcome = self.series.run(plan, self.summary_step)
    self.summary_step += outcome.applied
    if outcome.diverged:
      self._diverged(k, outcome.diverged)
      return
    self.reporter.histograms(outcome.state, outcome.grads, self.summary_step)
    state.finish_meta_iteration(k, self.problem_itr)
    if (k + 1) % self.schedule.evaluation_period == 0:
      attached = evaluation.Attached(self.task, self.reporter, self.series)
      if self.evaluator.evaluate(k, outcome, attached, self.summary_step):
        self.stopped = "curriculum"
    if not self.schedule.if_cl and (k + 1) % self.schedule.save_period == 0:
      state.save(state.checkpoint_path(k + 1))
    if self.stopped == "curriculum":
      state.write_finished(k + 1, stopped=True)

  def _diverged(self, k, reason):
    """``--on_divergence=stop`` ends training; ``rollback`` undoes the
    meta-iteration (:meth:`TrainState.roll_back`)."""
    state, prefix = self.state, self.reporter.prefix(k)
    state.count("divergences")
    if self.training.on_divergence == "stop":
      self.log("{} meta-training stopped: {}. {}".format(
          prefix, reason, self.best_model_line()))
      self.stopped = "divergence"
      return
    best = state.roll_back(self.training.divergence_lr_decay)
    self.reporter.rolled_back(k, best or "the start of this meta-iteration",
                              state.meta_optimizer.learning_rate)
    state.finish_meta_iteration(k)

  def best_model_line(self):
    best = self.state.best_checkpoint()
    if best is None:
      return "No model was evaluated as best yet (no model.ckpt-0)."
    return "The best model evaluated before is {}.".format(best)

  # ----------------------------------------------------------------- end
  def end_problem(self):
    """After a problem's meta-iterations: the original saves the last
    meta-iteration (except in a curriculum run)."""
    if not self.schedule.if_cl:
      self.state.finish_meta_iteration(self.k)
      self.state.save(self.state.checkpoint_path(self.k + 1))

  def close(self):
    """The end of a run: finished marker, last lines, the result dict."""
    values = self.state.values
    if self.schedule.if_cl and self.task is not None and not self.stopped:
      self.state.write_finished(self.k + 1, stopped=False)
    if self.summary_writer is not None:
      self.summary_writer.flush()
    if self.task is not None:
      self._last_lines()
    return dict(
        best_evaluation=float(self.state.progress.best_evaluation.numpy()),
        best_checkpoint=self.state.best_checkpoint(),
        last_checkpoint=self.state.latest(), meta_iterations=self.k + 1,
        nonfinite_unrolls=values.nonfinite, divergences=values.divergences,
        stopped_by_divergence=self.stopped == "divergence",
        best_model_idx=values.best_model_idx,
        first_evaluation=values.first_evaluation,
        evaluations=values.evaluations,
        meta_learning_rate=self.state.meta_optimizer.learning_rate)

  def _last_lines(self):
    """The best model and what went wrong, at the end of a run."""
    values = self.state.values
    if not self.schedule.if_cl:
      self.log("best model index={}".format(values.best_model_idx))
      self.reporter.event("best", index=values.best_model_idx)
    if values.nonfinite:
      self.log("{} unroll(s) had non-finite values (gradients zeroed)."
               .format(values.nonfinite))
    if values.divergences:
      self.log("{} meta-iteration(s) diverged (--on_divergence={})."
               .format(values.divergences, self.training.on_divergence))
    self.reporter.peak_memory()


def _warm_start_path(name_or_path):
  """``--warm_start``: a shipped optimizer's checkpoint, or the path."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  if name_or_path in pretrained.names():
    return pretrained.checkpoint(name_or_path)
  return name_or_path


def _local_series(trainer):
  return series_lib.LocalSeries(trainer.task, trainer.learner, trainer.state,
                                trainer.reporter, trainer.schedule)


class _no_scope(object):
  def __enter__(self):
    return self

  def __exit__(self, *exc):
    return False
