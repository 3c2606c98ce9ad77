"""Meta-training and meta-testing core of the L2O-Scale TF2 port.

Importing the package imports no TensorFlow (the cluster launcher and the
list of pretrained optimizers stay light, and
:mod:`l2o_scale.runs.quiet_cuda` can filter TensorFlow's start-up noise).
Keras finds :class:`l2o_scale.keras_optimizer.LearnedOptimizer` and
:class:`l2o_scale.learned_adamw.LearnedAdamW` in a ``.keras`` file once
their modules are imported (each registers itself with
``keras.saving.register_keras_serializable``); when Keras is already
imported, importing the package imports them.

Importing the package selects TensorFlow's BFC CPU allocator unless the
environment says otherwise (:mod:`l2o_scale.runs.cpu_allocator`: about
twice as fast a learned step from about 150,000 parameters on).
"""

import sys as _sys

from l2o_scale.runs import cpu_allocator as _cpu_allocator

_cpu_allocator.choose_default()

if "keras" in _sys.modules:
  from l2o_scale import keras_optimizer as _keras_optimizer  # pylint: disable=g-import-not-at-top,unused-import
  from l2o_scale import learned_adamw as _learned_adamw  # pylint: disable=g-import-not-at-top,unused-import
