"""Meta-training of a learned optimizer in this process: ``train_optimizer``.

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

import random
import sys

from l2o_scale.meta_training import config as config_lib
from l2o_scale.meta_training import trainer as trainer_lib


def sample_problems(problems_and_data, num_problems, select_random_problems):
  """The problems of the run, one per outer iteration (l.180-195)."""
  problems_and_data = list(problems_and_data)
  if select_random_problems:
    return [random.choice(problems_and_data) for _ in range(num_problems)]
  num_repeats = num_problems // len(problems_and_data) + 1
  random.shuffle(problems_and_data)
  return (problems_and_data * num_repeats)[:num_problems]


def trainer_config(logdir, num_problems, num_meta_iterations, num_unroll_func,
                   num_partial_unroll_itrs_func, config=None, resume=True,
                   summaries=True, **schedule):
  """The :class:`~l2o_scale.meta_training.config.TrainerConfig` of
  ``train_optimizer``'s arguments."""
  return config_lib.TrainerConfig(
      logdir=logdir,
      schedule=config_lib.Schedule(
          num_meta_iterations=num_meta_iterations,
          num_unroll_func=num_unroll_func,
          num_partial_unroll_itrs_func=num_partial_unroll_itrs_func,
          num_problems=num_problems, **schedule),
      training=config or config_lib.TrainingConfig(), resume=resume,
      summaries=summaries)


def train_optimizer(logdir, optimizer_spec, problems_and_data, num_problems,
                    num_meta_iterations, num_unroll_func,
                    num_partial_unroll_itrs_func, learning_rate=1e-4,
                    gradient_clip=5., is_chief=False,
                    select_random_problems=True, callbacks=None,
                    obj_train_max_multiplier=-1, out=sys.stdout,
                    fix_unroll=False, fix_unroll_length=20, fix_num_steps=100,
                    fix_num_steps_eval=100, evaluation_period=1,
                    evaluation_epochs=20, save_period=1, if_cl=False,
                    config=None, resume=True, summaries=True):
  """Trains the meta-parameters of an optimizer (the original's arguments).

  New arguments: ``config`` (TrainingConfig: the flags the original read
  from ``FLAGS`` inside metaopt.py), ``resume`` (continue from the latest
  checkpoint in ``logdir``) and ``summaries`` (write TensorBoard summaries).
  ``is_chief``/``callbacks`` are accepted for compatibility; there is one
  worker. Returns :meth:`MetaTrainer.close`'s dict: the best evaluation, the
  last checkpoint, the final meta learning rate and counts of what
  happened.
  """
  del is_chief, callbacks
  trainer = trainer_lib.MetaTrainer(trainer_config(
      logdir, num_problems, num_meta_iterations, num_unroll_func,
      num_partial_unroll_itrs_func, config, resume, summaries,
      learning_rate=learning_rate, gradient_clip=gradient_clip,
      select_random_problems=select_random_problems,
      obj_train_max_multiplier=obj_train_max_multiplier,
      fix_unroll=fix_unroll, fix_unroll_length=fix_unroll_length,
      fix_num_steps=fix_num_steps, fix_num_steps_eval=fix_num_steps_eval,
      evaluation_period=evaluation_period,
      evaluation_epochs=evaluation_epochs, save_period=save_period,
      if_cl=if_cl), optimizer_spec, out)
  if not trainer.start():
    return trainer.close()
  for problem_itr, (problem_spec, dataset, batch_size) in enumerate(
      sample_problems(problems_and_data, num_problems,
                      select_random_problems)):
    trainer.set_task(problem_spec, dataset, batch_size, problem_itr)
    for k in trainer.meta_iterations():
      trainer.run_meta_iteration(trainer.plan(k))
      if trainer.stopped:
        break
    trainer.end_problem()
    if trainer.stopped:
      break
  return trainer.close()
