"""Helpers for training and testing learned optimizers (façade).

The original ``metaopt.py`` (L2O-Scale-Evaluation / -Training) held both
meta-training and meta-testing. In this port they live in
:mod:`l2o_scale.meta_testing.testing` (``test_optimizer``, ``run_wall_clock_test``) and
:mod:`l2o_scale.meta_training.training`; this module re-exports them under the original
names so ``from l2o_scale import metaopt; metaopt.test_optimizer(...)``
reads as in the TF1 code.
"""

from l2o_scale.meta_testing.testing import run_wall_clock_test  # noqa: F401
from l2o_scale.meta_testing.testing import test_optimizer  # noqa: F401

# Meta-training exports (train_optimizer, ...) from l2o_scale.meta_training.training are
# appended below.
from l2o_scale.meta_training.training import regularizer_switch  # noqa: F401,E402
from l2o_scale.meta_training.training import sample_numiter  # noqa: F401,E402
from l2o_scale.meta_training.training import sigmoid_weights  # noqa: F401,E402
from l2o_scale.meta_training.training import train_optimizer  # noqa: F401,E402
from l2o_scale.meta_training.training import TrainingConfig  # noqa: F401,E402
from l2o_scale.meta_training.unroll import REG_OPTIONS  # noqa: F401,E402
