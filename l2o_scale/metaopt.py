"""Helpers for training and testing learned optimizers, under the original's
names (façade).

The original ``metaopt.py`` (L2O-Scale-Evaluation / -Training) held both
meta-training and meta-testing. In this port they live in
:mod:`l2o_scale.meta_testing` and :mod:`l2o_scale.meta_training`; this
module re-exports them so ``from l2o_scale import metaopt;
metaopt.test_optimizer(...)`` reads as in the TF1 code.
"""

# pylint: disable=unused-import
from l2o_scale.meta_testing.testing import run_wall_clock_test  # noqa: F401
from l2o_scale.meta_testing.testing import test_optimizer  # noqa: F401
from l2o_scale.meta_training.config import TrainingConfig  # noqa: F401
from l2o_scale.meta_training.plan import regularizer_switch  # noqa: F401
from l2o_scale.meta_training.plan import sample_numiter  # noqa: F401
from l2o_scale.meta_training.plan import sigmoid_weights  # noqa: F401
from l2o_scale.meta_training.training import train_optimizer  # noqa: F401
from l2o_scale.meta_training.regularizer import REG_OPTIONS  # noqa: F401
