"""Helpers for training and testing learned optimizers, under the original's
names and signatures (façade).

The original ``metaopt.py`` (L2O-Scale-Evaluation / -Training) held both
meta-training and meta-testing. In this port they live in
:mod:`l2o_scale.meta_testing` and :mod:`l2o_scale.meta_training`, which
take configuration objects; this module keeps the original's functions and
arguments as thin adapters, so ``from l2o_scale import metaopt;
metaopt.train_optimizer(...)`` reads as in the TF1 code.
"""

import sys

# pylint: disable=unused-import
from l2o_scale.meta_testing.testing import run_wall_clock_test  # noqa: F401
from l2o_scale.meta_testing.testing import test_optimizer  # noqa: F401
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import training
from l2o_scale.meta_training.training_config import TrainingConfig  # noqa: F401
from l2o_scale.meta_training.plan import regularizer_switch  # noqa: F401
from l2o_scale.meta_training.plan import sample_numiter  # noqa: F401
from l2o_scale.meta_training.plan import sigmoid_weights  # noqa: F401
from l2o_scale.meta_training.regularizer import REG_OPTIONS  # noqa: F401


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
  """The original ``train_optimizer`` (L2O-Entropy
  ``L2O-Scale-Training/metaopt.py`` l.117-140; its defaults), run by
  :func:`l2o_scale.meta_training.training.run_meta_training`.

  New arguments: ``config`` (TrainingConfig: the flags the original read
  from ``FLAGS`` inside metaopt.py), ``resume`` (continue from the latest
  checkpoint in ``logdir``) and ``summaries`` (write TensorBoard summaries).
  ``is_chief``/``callbacks`` are accepted for compatibility; there is one
  worker. Arguments that break a rule of
  :func:`l2o_scale.meta_training.validation.validate` (the combinations
  metarun.py refuses) raise a ValueError naming it, before any work.
  """
  del is_chief, callbacks
  schedule = config_lib.Schedule(
      num_meta_iterations=num_meta_iterations,
      num_unroll_func=num_unroll_func,
      num_partial_unroll_itrs_func=num_partial_unroll_itrs_func,
      learning_rate=learning_rate, gradient_clip=gradient_clip,
      obj_train_max_multiplier=obj_train_max_multiplier,
      fix_unroll=fix_unroll, fix_unroll_length=fix_unroll_length,
      fix_num_steps=fix_num_steps, fix_num_steps_eval=fix_num_steps_eval,
      evaluation_period=evaluation_period,
      evaluation_epochs=evaluation_epochs, save_period=save_period,
      if_cl=if_cl, num_problems=num_problems,
      select_random_problems=select_random_problems)
  return training.run_meta_training(config_lib.TrainerConfig(
      logdir=logdir, schedule=schedule,
      training=config or config_lib.TrainingConfig(), resume=resume,
      summaries=summaries), optimizer_spec, problems_and_data, out)
