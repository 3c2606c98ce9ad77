"""The evaluation every ``evaluation_period`` meta-iterations, and what it
decides.

Port of the evaluation part of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.395-430 ``validate``, and l.520-590:
the best model ``model.ckpt-0`` and the curriculum's decisions, ``if_cl``).
New in the port: the robust selection of ``model.ckpt-0``
(``--selection=robust``, :mod:`l2o_scale.meta_training.selection`).
The :class:`~l2o_scale.meta_training.trainer.MetaTrainer` calls
:meth:`Evaluator.evaluate` after a meta-iteration's series.
"""

import collections
import time

from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.runs import checkpoints

Attached = collections.namedtuple("Attached", ["task", "reporter", "series"])
Attached.__doc__ = """What the trainer trains on now: the
:class:`~l2o_scale.meta_training.task.MetaTrainingTask`, its
:class:`~l2o_scale.meta_training.reporting.Reporter` and its series runner."""


class Evaluator(object):
  """Evaluates the learned optimizer (mean final objective of evaluation
  series), keeps the best model as ``model.ckpt-0`` (the lowest evaluation
  cost, or robust score) and applies the curriculum's decisions (with
  ``if_cl``). ``selection_tasks``: the ``--selection_set`` tasks the robust
  score runs on instead of the current one."""

  def __init__(self, schedule, training, state, curriculum, optimizer, log):
    self.schedule = schedule
    self.training = training
    self.state = state
    self.curriculum = curriculum
    self.optimizer = optimizer
    self.log = log
    self.selection_tasks = []

  def evaluate(self, k, outcome, attached, step):
    """One evaluation after meta-iteration ``k`` (``outcome``: its
    :class:`~l2o_scale.meta_training.series.SeriesOutcome`; ``step``: the
    summary step): the curriculum's step, or the (original or robust)
    selection of ``model.ckpt-0``. Returns True when the curriculum stops
    training."""
    cost = self._cost(k, outcome, attached)
    self.state.count("evaluations")
    number = (k + 1) // self.schedule.evaluation_period
    attached.reporter.explain_once("evaluation", self._meaning())
    if self.schedule.if_cl:
      return self._curriculum_step(k, number, cost, outcome, attached)
    attached.reporter.evaluation(number, cost, step)
    value = cost
    if self.training.selection == "robust":
      value = self._robust_score(number, step, attached)
    self._keep_if_best(k, value, value < self.state.progress.best_evaluation)
    return False

  def _cost(self, k, outcome, attached):
    """Mean final objective of ``evaluation_epochs`` evaluation series on
    the last training unroll's mini dataset (original ``validate``)."""
    lengths = plan_lib.evaluation_lengths(self.schedule, self.curriculum)
    planner = attached.task.planner
    draw = lambda: planner.evaluation(k, lengths, outcome.switch,
                                      outcome.mini_rows)
    return attached.series.evaluate([draw] * self.schedule.evaluation_epochs)

  def _keep_if_best(self, k, value, better):
    self.state.record_evaluation(k, value, better,
                                 keep_value=not self.schedule.if_cl)
    if better:
      self.state.save(self.state.checkpoint_path(0))

  def _meaning(self):
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

  def _robust_score(self, number, step, attached):
    """Computes, logs and returns the robust selection score."""
    training = self.training
    attached.reporter.explain_once(
        "selection", "The robust selection score below is the mean over "
        "the seeds of "
        "the training objective over the last 5% of a {}-step meta-test run "
        "(--selection_steps; the problem's own initialisation{}); a run that "
        "diverges scores inf; lower is better, the lowest is kept as "
        "model.ckpt-0.".format(
            training.selection_steps,
            "; the held-back rows' objective with --meta_objective=validation"
            " or --selection_objective=validation"
            if "validation" in (training.meta_objective,
                                training.selection_objective) else ""))
    start = time.time()
    if self.selection_tasks:
      result = selection_lib.combine(
          [task.robust_score() for task in self.selection_tasks])
    else:
      result = attached.task.robust_score()
    attached.reporter.selection(number, result, training.selection_seeds,
                                time.time() - start, step)
    return result.score

  def _curriculum_step(self, k, number, cost, outcome, attached):
    """Applies the curriculum's decision after an evaluation (l.520-590);
    True when it stops training.

    With ``--selection=robust`` an improvement the curriculum sees becomes
    ``model.ckpt-0`` only if its robust score is lower too (the stage
    checkpoint the curriculum promotes from is written either way).
    """
    curriculum, state, reporter = self.curriculum, self.state, (
        attached.reporter)
    reporter.evaluation(number, cost, None,
                        curriculum.num_steps[curriculum.stage])
    decision = curriculum.observe(cost)
    if decision.action == "improved":
      state.set_curriculum_state(curriculum.state_dict())
      if self.training.selection == "robust":
        score = self._robust_score(
            number, int(state.meta_optimizer.iterations.numpy()), attached)
        self._keep_if_best(k, score, state.improve_robust_best(score))
      else:
        self._keep_if_best(k, cost, True)
      state.save(state.checkpoint_path(decision.stage))
    elif decision.action == "promote":
      checkpoints.restore_optimizer(state.checkpoint_path(decision.stage),
                                    self.optimizer)
      new_cost = self._cost(k, outcome, attached)
      curriculum.reset_best(new_cost)
      reporter.promoted(number, curriculum.num_steps[curriculum.stage],
                        new_cost)
    elif decision.action == "stop":
      self.log("no improve during curriculum {} --> stop".format(
          decision.stage))
    state.set_curriculum_state(curriculum.state_dict())
    return decision.action == "stop"
