"""Where a meta-training run starts, and what a resumed one replays.

New in the port (the original restarted from the latest checkpoint's
meta-parameters only): a run killed at any moment and started again
continues exactly as the uninterrupted one. :class:`ResumePoint` restores
the latest checkpoint of the run's
:class:`~l2o_scale.meta_training.train_state.TrainState`, says where the
run continues (sub-problem, meta-iteration), and hands each sub-problem
the random streams and regularizer seeds the interrupted run drew it with.
"""

from l2o_scale.meta_training import train_state as train_state_lib
from l2o_scale.runs import checkpoints


class ResumePoint(object):
  """Where the run of ``state`` continues: ``latest`` (the restored
  checkpoint, or None), ``start_problem`` and ``start_k`` (its sub-problem
  and meta-iteration). ``num_problems``: the run's sub-problems (1 with
  ``--mix_problems``); ``training``: the
  :class:`~l2o_scale.meta_training.training_config.TrainingConfig`."""

  def __init__(self, state, schedule, training, num_problems):
    self.state = state
    self.schedule = schedule
    self.training = training
    self.num_problems = num_problems
    self.latest, self.start_k, self.start_problem = None, 0, 0
    # A resumed run whose checkpoint ended a sub-problem starts the next one
    # (with the saved random streams, fresh carried state).
    self.starts_next_problem = False
    self.pending = False  # Until the resumed sub-problem attaches.
    self._replayed_reg_seeds = []  # Of the tasks of a resumed sub-problem.

  @property
  def resumed(self):
    """Whether a checkpoint was restored to continue from."""
    return bool(self.latest) and (self.start_k > 0 or self.start_problem > 0)

  def restore(self, resume):
    """Restores the latest checkpoint (with ``resume``); the line saying
    where the run continues, or None when it starts afresh."""
    state, n = self.state, self.schedule.num_meta_iterations
    self.latest = state.latest() if resume else None
    if not self.latest:
      return None
    if state.restore(self.latest) == "tf2":
      self.start_k = int(state.progress.meta_iteration.numpy())
      self.start_problem = int(state.progress.problem_itr.numpy())
    self._check_sub_problem()
    if self.start_k >= n and self.start_problem + 1 < self.num_problems:
      self.start_problem, self.start_k = self.start_problem + 1, 0
      self.starts_next_problem = True
      self._refuse_unrepeatable_start(self.start_problem)
    return ("Resuming from {} ({} checkpoint) at meta-iteration {} of {}{}."
            .format(self.latest,
                    checkpoints.checkpoint_format(self.latest).upper(),
                    self.start_k, n, self._sub_problem_text()))

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
        if self.starts_next_problem else "")

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

  def finished(self, resume):
    """(the last meta-iteration run, the line saying so) when the run has
    already finished, else None."""
    n, logdir = self.schedule.num_meta_iterations, self.state.logdir
    finished = (self.state.read_finished(n)
                if resume and self.schedule.if_cl else None)
    if finished is not None:
      return finished - 1, (
          "Training already complete (the curriculum run ended at "
          "meta-iteration {}); nothing to do. Checkpoints are in {}; "
          "model.ckpt-0 is the best model.".format(finished, logdir))
    if self.start_k >= n:
      return self.start_k - 1, (
          "Training already complete ({} of {} meta-iterations{}); "
          "nothing to do. Checkpoints are in {}.".format(
              self.start_k, n,
              " of each of {} sub-problems".format(self.num_problems)
              if self.num_problems > 1 else "", logdir))
    return None

  def start_run(self):
    """Before the run draws its problems: the random streams the
    interrupted run drew them with (when resuming), kept for the
    checkpoints."""
    self.pending = self.resumed
    saved = self.state.saved("run_start") if self.resumed else None
    if saved is not None:
      train_state_lib.set_random_streams(saved)
    self.state.mark_run_start(train_state_lib.random_streams())

  def begin_problem(self, problem_itr):
    """Before the task(s) of sub-problem ``problem_itr`` are built (their
    probes are drawn from numpy): the random streams a resumed run's
    sub-problem was built with (or, when it starts the next sub-problem,
    those its checkpoint saved), kept for the checkpoints."""
    state = self.state
    self._replayed_reg_seeds = []
    if self.pending and problem_itr == self.start_problem:
      saved = state.saved("now" if self.starts_next_problem
                          else "problem_start")
      if saved is not None:
        train_state_lib.set_random_streams(saved)
      if not self.starts_next_problem:
        self._replayed_reg_seeds = list(state.saved("reg_seeds") or [])
    state.mark_problem_start(train_state_lib.random_streams())

  def keep_reg_seed(self, task):
    """A training task's regularizer seed, kept for the checkpoints; in a
    resumed sub-problem the interrupted run's (--reg_option=hessian-ev
    draws it from TensorFlow's stream)."""
    if self._replayed_reg_seeds:
      task.reg = task.reg._replace(seed=self._replayed_reg_seeds.pop(0))
    self.state.add_reg_seed(task.reg.seed)

  def attaching(self, problem_itr, resuming=None):
    """(whether the problem attached now continues the restored
    checkpoint, whether it starts the sub-problem after the checkpoint's);
    ``resuming`` default: the first problem of a resumed run."""
    if resuming is None:
      resuming = self.pending and problem_itr == self.start_problem
    if resuming:
      self.pending = False
    return resuming, resuming and self.starts_next_problem
