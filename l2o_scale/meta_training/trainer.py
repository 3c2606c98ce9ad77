"""The meta-trainer: one meta-iteration at a time, for both loops.

Port of the body of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.95-600): restore or start, then per
meta-iteration a series of partial unrolls with their meta-updates, and the
evaluation that keeps the best model (``model.ckpt-0``), the curriculum's
decisions (``if_cl``, l.520-590) and the checkpoints. As google/
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
import time

import tensorflow as tf

from l2o_scale.meta_training import curriculum as curriculum_lib
from l2o_scale.meta_training import meta_learner as meta_learner_lib
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.meta_training import series as series_lib
from l2o_scale.meta_training import task as task_lib
from l2o_scale.meta_training import train_state as train_state_lib
from l2o_scale.runs import checkpoints
from l2o_scale.runs import summaries as summaries_lib


class MetaTrainer(object):
  """Meta-trains the optimizer of ``optimizer_spec`` as ``config``
  (:class:`~l2o_scale.meta_training.config.TrainerConfig`) says.

  Use: :meth:`start` (restore; False when the run already finished), then
  per problem :meth:`set_task`, :meth:`run_meta_iteration` of each
  :meth:`plan` in :meth:`meta_iterations` (until :attr:`stopped`), and
  :meth:`end_problem`; finally :meth:`close` returns the result.
  ``scope``: a context manager the meta-parameters and meta-optimizer slots
  are created in (a distribution strategy's scope).
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
    self.task = self.series = self.reporter = self.summary_writer = None
    self.selection_tasks = []
    self._said = set()  # Lines _log_once has written.
    self.latest, self.start_k, self.k = None, 0, 0
    self.problem_itr = self.start_problem = 0
    # A resumed run whose checkpoint ended a sub-problem starts the next one
    # (with the saved random streams, fresh carried state).
    self._starts_next_problem = False
    self._resume_pending = False  # Until the resumed sub-problem attaches.
    self._replayed_reg_seeds = []  # Of the tasks of a resumed sub-problem.
    self.summary_step = 0
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
  def resumed(self):
    """Whether :meth:`start` restored a checkpoint to continue from."""
    return bool(self.latest) and (self.start_k > 0 or self.start_problem > 0)

  @property
  def num_problems(self):
    """The sub-problems of the run, one after the other (1 with
    ``--mix_problems``: one run that draws a problem per meta-iteration)."""
    return 1 if self.training.mix_problems else self.schedule.num_problems

  # --------------------------------------------------------------- start
  def start(self):
    """Restores the latest checkpoint (with ``resume``); False (and a line
    saying so) when the run in ``logdir`` has already finished."""
    state, n = self.state, self.schedule.num_meta_iterations
    tf.io.gfile.makedirs(self.config.logdir)
    self.latest = state.latest() if self.config.resume else None
    if self.latest:
      if state.restore(self.latest) == "tf2":
        self.start_k = int(state.progress.meta_iteration.numpy())
        self.start_problem = int(state.progress.problem_itr.numpy())
      self._check_sub_problem()
      if self.start_k >= n and self.start_problem + 1 < self.num_problems:
        self.start_problem, self.start_k = self.start_problem + 1, 0
        self._starts_next_problem = True
        self._refuse_unrepeatable_start(self.start_problem)
      self.log("Resuming from {} ({} checkpoint) at meta-iteration {} of {}{}."
               .format(self.latest,
                       checkpoints.checkpoint_format(self.latest).upper(),
                       self.start_k, n, self._sub_problem_text()))
    if not self.latest and self.training.warm_start:
      self.log("Warm start: meta-parameters from {}.".format(
          checkpoints.restore_optimizer(
              _warm_start_path(self.training.warm_start), self.optimizer)))
    if self.resumed and self.curriculum is not None:
      self.curriculum.load_state_dict(state.curriculum_state())
    self.k = self.start_k - 1
    finished = (state.read_finished(n)
                if self.config.resume and self.schedule.if_cl else None)
    if finished is not None:
      self.k = finished - 1
      self.log("Training already complete (the curriculum run ended at "
               "meta-iteration {}); nothing to do. Checkpoints are in {}; "
               "model.ckpt-0 is the best model.".format(finished,
                                                        self.config.logdir))
      return False
    if self.start_k >= n:
      self.log("Training already complete ({} of {} meta-iterations{}); "
               "nothing to do. Checkpoints are in {}.".format(
                   self.start_k, n,
                   " of each of {} sub-problems".format(self.num_problems)
                   if self.num_problems > 1 else "", self.config.logdir))
      return False
    self._resume_pending = self.resumed
    saved = state.saved("run_start") if self.resumed else None
    if saved is not None:
      train_state_lib.set_random_streams(saved)
    state.run_start = train_state_lib.random_streams()
    self.summary_step = int(state.meta_optimizer.iterations.numpy())
    if self.config.summaries:
      self.summary_writer = summaries_lib.create_writer(
          self.config.logdir, self.summary_step if self.latest else None)
    return True

  def _check_sub_problem(self):
    """Refuses a checkpoint of a sub-problem this run does not have."""
    if self.start_problem >= self.num_problems:
      raise checkpoints.CheckpointMismatchError(
          "{} is of sub-problem {}, and this run has {} (--num_problems={})"
          .format(self.latest, self.start_problem + 1, self.num_problems,
                  self.schedule.num_problems))

  def _sub_problem_text(self):
    if self.num_problems == 1:
      return ""
    return " of sub-problem {} of {}{}".format(
        self.start_problem + 1, self.num_problems,
        " (sub-problem {} is done)".format(self.start_problem)
        if self._starts_next_problem else "")

  def set_task(self, problem_spec, dataset, batch_size, problem_itr,
               series=None):
    """Meta-trains on this problem from now on. ``series``: a callable
    ``(trainer) -> series runner``, default a
    :class:`~l2o_scale.meta_training.series.LocalSeries`."""
    self.begin_problem(problem_itr)
    self.use_task(self.build_task(problem_spec, dataset, batch_size),
                  problem_itr, series)

  def begin_problem(self, problem_itr):
    """Before the task(s) of sub-problem ``problem_itr`` are built (their
    probes are drawn from numpy): the random streams a resumed run's
    sub-problem was built with (or, when it starts the next sub-problem,
    those its checkpoint saved), kept for the checkpoints."""
    state = self.state
    self._replayed_reg_seeds = []
    if self._resume_pending and problem_itr == self.start_problem:
      saved = state.saved("now" if self._starts_next_problem
                          else "problem_start")
      if saved is not None:
        train_state_lib.set_random_streams(saved)
      if not self._starts_next_problem:
        self._replayed_reg_seeds = list(state.saved("reg_seeds") or [])
    state.problem_start = train_state_lib.random_streams()
    state.reg_seeds = []

  def _refuse_unrepeatable_start(self, problem_itr):
    """--reg_option=hessian-ev draws a task's start-vector seed from
    TensorFlow's random stream, which a new process does not continue: a
    sub-problem the interrupted run had not begun cannot start as it would
    have."""
    if self.training.reg_option == "hessian-ev":
      raise checkpoints.CheckpointMismatchError(
          "{} ends sub-problem {}, and sub-problem {} cannot start as in the "
          "uninterrupted run: --reg_option=hessian-ev draws its start "
          "vectors' seed from TensorFlow's random stream, which a resumed "
          "process does not continue".format(self.latest, problem_itr,
                                             problem_itr + 1))

  def build_task(self, problem_spec, dataset, batch_size):
    """The problem's task and reporter (what :meth:`use_task` takes)."""
    problem = problem_spec.build()
    name = getattr(problem_spec.callable, "__name__", "problem")
    task = task_lib.MetaTrainingTask(problem, name, dataset, batch_size,
                                     self.optimizer, self.training,
                                     self._log_once)
    if self.state.reg_seeds is not None:  # A training task, not selection's.
      if self._replayed_reg_seeds:
        # --reg_option=hessian-ev's seed, drawn from TensorFlow's stream:
        # the interrupted run's.
        task.reg = task.reg._replace(seed=self._replayed_reg_seeds.pop(0))
      self.state.reg_seeds.append(task.reg.seed)
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
    self.selection_tasks = [self.build_task(*p)[0] for p in problems_and_data]

  def use_task(self, built, problem_itr, series=None, resuming=None,
               load_carried=True):
    """Meta-trains on ``built`` (from :meth:`build_task`) from now on.
    ``resuming`` (default: the first problem of a resumed run) applies the
    restored checkpoint's random streams and, with ``load_carried``, its
    carried optimizee and optimizer state."""
    self.task, self.reporter = built
    self.problem_itr = problem_itr
    if resuming is None:
      resuming = self._resume_pending and problem_itr == self.start_problem
    if resuming:
      self._resume_pending = False
    starts = resuming and self._starts_next_problem
    lr = self.state.meta_optimizer.learning_rate
    if not self.state.attach_problem(self.task.problem, resuming,
                                     self.training.meta_batch_size,
                                     load_carried and not starts,
                                     restore_streams=not starts):
      self.log("Note: {} has no resume state (written by an older "
               "version): random streams and carried optimizer state "
               "restart, so the run differs from an uninterrupted one."
               .format(self.latest))
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
    state.progress.meta_iteration.assign(k + 1)
    state.progress.problem_itr.assign(self.problem_itr)
    if (k + 1) % self.schedule.evaluation_period == 0:
      self._evaluate(k, outcome)
    if not self.schedule.if_cl and (k + 1) % self.schedule.save_period == 0:
      state.save(state.checkpoint_path(k + 1))
    if self.stopped == "curriculum":
      state.write_finished(k + 1, stopped=True)

  def _diverged(self, k, reason):
    """``--on_divergence=stop`` ends training; ``rollback`` undoes the
    meta-iteration (:meth:`TrainState.roll_back`)."""
    state, prefix = self.state, self.reporter.prefix(k)
    state.values.divergences += 1
    if self.training.on_divergence == "stop":
      self.log("{} meta-training stopped: {}. {}".format(
          prefix, reason, self.best_model_line()))
      self.stopped = "divergence"
      return
    best = state.roll_back(self.training.divergence_lr_decay)
    self.reporter.rolled_back(k, best or "the start of this meta-iteration",
                              state.meta_optimizer.learning_rate)
    state.progress.meta_iteration.assign(k + 1)

  def best_model_line(self):
    best = self.state.best_checkpoint()
    if best is None:
      return "No model was evaluated as best yet (no model.ckpt-0)."
    return "The best model evaluated before is {}.".format(best)

  # ---------------------------------------------------------- evaluation
  def _evaluation_cost(self, k, outcome):
    """Mean final objective of ``evaluation_epochs`` evaluation series on
    the last training unroll's mini dataset (original ``validate``)."""
    lengths = plan_lib.evaluation_lengths(self.schedule, self.curriculum)
    planner = self.task.planner
    draw = lambda: planner.evaluation(k, lengths, outcome.switch,
                                      outcome.mini_rows)
    return self.series.evaluate([draw] * self.schedule.evaluation_epochs)

  def _evaluate(self, k, outcome):
    """One evaluation: the curriculum's step, or the (original or robust)
    selection of ``model.ckpt-0``."""
    cost = self._evaluation_cost(k, outcome)
    self.state.values.evaluations += 1
    number = (k + 1) // self.schedule.evaluation_period
    self.reporter.explain_once("evaluation", self._evaluation_meaning())
    if self.schedule.if_cl:
      self._curriculum_step(k, number, cost, outcome)
      return
    self.reporter.evaluation(number, cost, self.summary_step)
    value = cost
    if self.training.selection == "robust":
      value = self._robust_score(number, self.summary_step)
    self._keep_if_best(k, value, value < self.state.progress.best_evaluation)

  def _keep_if_best(self, k, value, better):
    values = self.state.values
    if values.first_evaluation is None:
      values.first_evaluation = float(value)
    if better:
      if not self.schedule.if_cl:
        self.state.progress.best_evaluation.assign(value)
      values.best_model_idx = k + 1
      self.state.save(self.state.checkpoint_path(0))

  def _evaluation_meaning(self):
    """The line saying what an evaluation's cost is."""
    schedule = self.schedule
    if schedule.if_cl:
      steps, kept = "the curriculum stage's number of", (
          "the curriculum promotes on it")
    else:
      steps = schedule.fix_num_steps_eval
      kept = ("the lowest is kept as model.ckpt-0"
              if self.training.selection == "original" else
              "reported only: the robust selection picks model.ckpt-0")
    return ("The evaluation cost below is the optimizee's training "
            "objective after {} steps of the learned optimizer from fresh "
            "parameters, mean of {} run(s) (--fix_num_steps_eval, "
            "--evaluation_epochs); lower is better, {}.".format(
                steps, schedule.evaluation_epochs, kept))

  def _robust_score(self, number, step):
    """Computes, logs and returns the robust selection score."""
    self.reporter.explain_once(
        "selection", "The robust selection score below is the mean over "
        "the seeds of "
        "the training objective over the last 5% of a {}-step meta-test run "
        "(--selection_steps; the problem's own initialisation{}); a run that "
        "diverges scores inf; lower is better, the lowest is kept as "
        "model.ckpt-0.".format(
            self.training.selection_steps,
            "; the held-back rows' objective with --meta_objective=validation"
            " or --selection_objective=validation"
            if "validation" in (self.training.meta_objective,
                                self.training.selection_objective) else ""))
    start = time.time()
    if self.selection_tasks:
      result = selection_lib.combine(
          [task.robust_score() for task in self.selection_tasks])
    else:
      result = self.task.robust_score()
    self.reporter.selection(number, result, self.training.selection_seeds,
                            time.time() - start, step)
    return result.score

  def _curriculum_step(self, k, number, cost, outcome):
    """Applies the curriculum's decision after an evaluation (l.520-590).

    With ``--selection=robust`` an improvement the curriculum sees becomes
    ``model.ckpt-0`` only if its robust score is lower too (the stage
    checkpoint the curriculum promotes from is written either way).
    """
    curriculum, state = self.curriculum, self.state
    self.reporter.evaluation(number, cost, None,
                             curriculum.num_steps[curriculum.stage])
    decision = curriculum.observe(cost)
    if decision.action == "improved":
      state.set_curriculum_state(curriculum.state_dict())
      if self.training.selection == "robust":
        score = self._robust_score(
            number, int(state.meta_optimizer.iterations.numpy()))
        better = score < state.values.robust_best
        if better:
          state.values.robust_best = score
        self._keep_if_best(k, score, better)
      else:
        self._keep_if_best(k, cost, True)
      state.save(state.checkpoint_path(decision.stage))
    elif decision.action == "promote":
      checkpoints.restore_optimizer(state.checkpoint_path(decision.stage),
                                    self.optimizer)
      new_cost = self._evaluation_cost(k, outcome)
      curriculum.reset_best(new_cost)
      self.reporter.promoted(number, curriculum.num_steps[curriculum.stage],
                             new_cost)
    elif decision.action == "stop":
      self.log("no improve during curriculum {} --> stop".format(
          decision.stage))
      self.stopped = "curriculum"
    state.set_curriculum_state(curriculum.state_dict())

  # ----------------------------------------------------------------- end
  def end_problem(self):
    """After a problem's meta-iterations: the original saves the last
    meta-iteration (except in a curriculum run)."""
    if not self.schedule.if_cl:
      self.state.progress.meta_iteration.assign(self.k + 1)
      self.state.save(self.state.checkpoint_path(self.k + 1))

  def close(self):
    """The end of a run: finished marker, last lines, the result dict."""
    values = self.state.values
    if self.schedule.if_cl and self.task is not None and not self.stopped:
      self.state.write_finished(self.k + 1, stopped=False)
    if self.summary_writer is not None:
      self.summary_writer.flush()
    if self.task is not None:
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
    return dict(
        best_evaluation=float(self.state.progress.best_evaluation.numpy()),
        last_checkpoint=self.state.latest(), meta_iterations=self.k + 1,
        nonfinite_unrolls=values.nonfinite, divergences=values.divergences,
        stopped_by_divergence=self.stopped == "divergence",
        best_model_idx=values.best_model_idx,
        first_evaluation=values.first_evaluation,
        evaluations=values.evaluations,
        meta_learning_rate=self.state.meta_optimizer.learning_rate)


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
