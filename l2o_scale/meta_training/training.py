"""Meta-training of a learned optimizer in this process:
``run_meta_training``.

Port of ``train_optimizer`` of the L2O-Entropy training code
(``L2O-ScalewHessian/L2O-Scale-Training/metaopt.py`` l.95-600), with the TF1
graph/session/Supervisor machinery replaced by eager Python around compiled
unrolls. The loop is short: problems are drawn as the original drew them
(l.180-195), and a :class:`~l2o_scale.meta_training.trainer.MetaTrainer`
trains on each (:meth:`~l2o_scale.meta_training.trainer.MetaTrainer.
train_problem`), with the meta-iterations the distributed chief runs too
(:mod:`l2o_scale.meta_training.distributed`).

New in the port: progress lines, TensorBoard summaries written for real (the
original defined them but never wrote them), exact resumption from the last
checkpoint, and a clear message when ``mini_batch_size`` exceeds the data.
"""

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
  resume_point = trainer.resume_point
  order = state.saved("problem_order") if resume_point.resumed else None
  if order is None:
    order = sample_problems(range(count), num_problems,
                            select_random_problems)
  elif (state.saved("num_given_problems") != count or
        len(order) != num_problems):
    raise checkpoints.CheckpointMismatchError(
        "{} continues sub-problem {} of a run of {} sub-problems drawn from "
        "{} problems; this run has --num_problems={} and {} problems (other "
        "--include_* flags or data)".format(
            resume_point.latest, resume_point.start_problem + 1, len(order),
            state.saved("num_given_problems"), num_problems, count))
  state.set_problem_order(order, count)
  return [problems_and_data[i] for i in order]


def run_meta_training(config, optimizer_spec, problems_and_data,
                      out=sys.stdout, selection_problems=None):
  """Trains the meta-parameters of an optimizer, as ``config``
  (:class:`~l2o_scale.meta_training.training_config.TrainerConfig`: the log dir, the
  :class:`~l2o_scale.meta_training.training_config.Schedule`, the
  :class:`~l2o_scale.meta_training.training_config.TrainingConfig`, resume and
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
    trainer.train_mixed(problems_and_data)
    return trainer.close()
  problems = problem_sequence(trainer, problems_and_data,
                              schedule.num_problems,
                              schedule.select_random_problems)
  for problem_itr in range(trainer.start_problem, len(problems)):
    trainer.train_problem(*problems[problem_itr], problem_itr)
    if trainer.stopped:
      break
  return trainer.close()
