"""Meta-training of a learned optimizer in this process:
``run_meta_training``.

Port of ``train_optimizer`` of the L2O-Entropy training code
(``L2O-ScalewHessian/L2O-Scale-Training/metaopt.py`` l.95-600), with the TF1
graph/session/Supervisor machinery replaced by eager Python around compiled
unrolls. The loop is short: problems are drawn as the original drew them
(l.180-195), and a :class:`~l2o_scale.meta_training.trainer.MetaTrainer` runs
each meta-iteration (:meth:`~l2o_scale.meta_training.trainer.MetaTrainer.
run_meta_iteration`), the same one the distributed chief runs
(:mod:`l2o_scale.meta_training.distributed`).

New in the port: progress lines, TensorBoard summaries written for real (the
original defined them but never wrote them), exact resumption from the last
checkpoint, and a clear message when ``mini_batch_size`` exceeds the data.
"""

import collections
import random
import sys

from l2o_scale.meta_training import trainer as trainer_lib
from l2o_scale.meta_training import validation
from l2o_scale.runs import checkpoints


def sample_problems(problems_and_data, num_problems, select_random_problems):
  """The problems of the run, one per outer iteration (l.180-195)."""
  problems_and_data = list(problems_and_data)
  if select_random_problems:
    return [random.choice(problems_and_data) for _ in range(num_problems)]
  num_repeats = num_problems // len(problems_and_data) + 1
  random.shuffle(problems_and_data)
  return (problems_and_data * num_repeats)[:num_problems]


def problem_sequence(trainer, problems_and_data, num_problems,
                     select_random_problems):
  """The run's sub-problems in order, drawn by :func:`sample_problems`
  (as indices: the same draws) and kept in ``trainer.state`` for the
  checkpoints; a resumed run takes the order its checkpoint saved (its own
  draw may differ: another seed, or none), and refuses one that does not
  fit the problems it is given."""
  problems_and_data = list(problems_and_data)
  state, count = trainer.state, len(problems_and_data)
  order = state.saved("problem_order") if trainer.resumed else None
  if order is None:
    order = sample_problems(range(count), num_problems,
                            select_random_problems)
  elif (state.saved("num_given_problems") != count or
        len(order) != num_problems):
    raise checkpoints.CheckpointMismatchError(
        "{} continues sub-problem {} of a run of {} sub-problems drawn from "
        "{} problems; this run has --num_problems={} and {} problems (other "
        "--include_* flags or data)".format(
            trainer.latest, trainer.start_problem + 1, len(order),
            state.saved("num_given_problems"), num_problems, count))
  state.problem_order, state.num_given_problems = [int(i) for i in order], count
  return [problems_and_data[i] for i in order]


def mixed_problem_index(k, count):
  """``--mix_problems``: which of ``count`` problems meta-iteration ``k``
  trains on. A draw seeded by ``k`` alone: a resumed run draws the same
  sequence without a stream to restore, and the run's other random draws
  stay as they are."""
  return random.Random(7919 * k + 1).randrange(count)


class CompiledTasks(object):
  """Keeps the compiled functions of at most ``size`` tasks (0: no bound):
  :meth:`use` of one more releases those of the task used least recently
  (:meth:`~l2o_scale.meta_training.task.MetaTrainingTask.release_compiled`).
  A task's compiled unrolls hold tens of MB, so a mixture of many problems
  is bounded by ``size`` of them, not by the number it has drawn."""

  def __init__(self, size):
    self.size = size
    self._recent = collections.OrderedDict()  # index -> task, oldest first

  def use(self, index, task):
    self._recent.pop(index, None)
    self._recent[index] = task
    while self.size and len(self._recent) > self.size:
      self._recent.popitem(last=False)[1].release_compiled()


def _train_mixed(trainer, problems_and_data):
  """``--mix_problems`` (new in the port): one run of
  ``num_meta_iterations``, each on a problem drawn by
  :func:`mixed_problem_index`, from a fresh optimizee and optimizer state.
  Every problem's task is built once, up front and in order (so a resumed
  run draws its numbers as an uninterrupted one did), and reused; at most
  ``max_compiled_problems`` of them keep their compiled functions
  (:class:`CompiledTasks`)."""
  trainer.begin_problem(0)
  built = [trainer.build_task(*p) for p in problems_and_data]
  compiled = CompiledTasks(trainer.training.max_compiled_problems)
  resuming = trainer.resumed
  for k in range(trainer.start_k, trainer.schedule.num_meta_iterations):
    index = mixed_problem_index(k, len(built))
    compiled.use(index, built[index][0])
    trainer.use_task(built[index], 0, resuming=resuming, load_carried=False)
    resuming = False
    trainer.state.reset_next_series = True
    trainer.run_meta_iteration(trainer.plan(k))
    if trainer.stopped:
      break
  trainer.end_problem()


def run_meta_training(config, optimizer_spec, problems_and_data,
                      out=sys.stdout, selection_problems=None):
  """Trains the meta-parameters of an optimizer, as ``config``
  (:class:`~l2o_scale.meta_training.config.TrainerConfig`: the log dir, the
  :class:`~l2o_scale.meta_training.config.Schedule`, the
  :class:`~l2o_scale.meta_training.config.TrainingConfig`, resume and
  summaries) says. ``l2o_scale.metaopt.train_optimizer`` takes the
  original's arguments instead. Returns :meth:`MetaTrainer.close`'s dict:
  the best evaluation, the last checkpoint, the final meta learning rate
  and counts of what happened. ``selection_problems`` (``--selection_set``):
  the problems the robust selection scores on, instead of the current one.
  A ``config`` that breaks a rule of
  :func:`l2o_scale.meta_training.validation.validate` is refused with a
  ValueError naming it, before any work.
  """
  validation.require_valid(config)
  schedule = config.schedule
  trainer = trainer_lib.MetaTrainer(config, optimizer_spec, out)
  if not trainer.start():
    return trainer.close()
  if selection_problems:
    trainer.build_selection_tasks(selection_problems)
  if config.training.mix_problems:
    _train_mixed(trainer, problems_and_data)
    return trainer.close()
  problems = problem_sequence(trainer, problems_and_data,
                              schedule.num_problems,
                              schedule.select_random_problems)
  for problem_itr in range(trainer.start_problem, len(problems)):
    trainer.set_task(*problems[problem_itr], problem_itr)
    for k in trainer.meta_iterations():
      trainer.run_meta_iteration(trainer.plan(k))
      if trainer.stopped:
        break
    trainer.end_problem()
    if trainer.stopped:
      break
  return trainer.close()
