"""Registers :class:`l2o_scale.keras_optimizer.LearnedOptimizer` with Keras
as soon as Keras is imported, so that ``keras.models.load_model`` reads a
``.keras`` file holding one after only ``import l2o_scale``.

Why not import the class in ``l2o_scale/__init__.py``: that would import
TensorFlow on every ``import l2o_scale.*`` (the cluster launcher, the list of
pretrained optimizers) and before ``l2o_scale.runs.quiet_cuda`` can filter
its start-up noise. Instead the package registers a stand-in under the
class's Keras name -- right away when Keras is already imported, else from an
import hook that fires once Keras has been imported -- whose ``from_config``
imports the real class (whose own registration then replaces the stand-in).
"""

import importlib
import importlib.abc
import importlib.util
import sys

REGISTERED_NAME = "l2o_scale>LearnedOptimizer"


class _LearnedOptimizerStandIn(object):
  """What Keras finds under REGISTERED_NAME until the real class is loaded."""

  @classmethod
  def from_config(cls, config, custom_objects=None):
    from l2o_scale import keras_optimizer  # pylint: disable=g-import-not-at-top
    return keras_optimizer.LearnedOptimizer.from_config(config,
                                                        custom_objects)


def _register_stand_in():
  from keras.src.saving import object_registration  # pylint: disable=g-import-not-at-top
  object_registration.GLOBAL_CUSTOM_OBJECTS.setdefault(
      REGISTERED_NAME, _LearnedOptimizerStandIn)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
  """Finds ``keras`` as the other finders do, and registers the stand-in once
  its module has run (one shot: removes itself)."""

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name != "keras":
      return None
    if self in sys.meta_path:
      sys.meta_path.remove(self)
    spec = importlib.util.find_spec(name)
    loader = getattr(spec, "loader", None)
    if loader is None or not hasattr(loader, "exec_module"):
      return spec
    exec_module = loader.exec_module

    def exec_then_register(module):
      exec_module(module)
      _register_stand_in()

    loader.exec_module = exec_then_register
    return spec


def install():
  """Registers now if Keras is imported, else when it is."""
  if "keras" in sys.modules:
    _register_stand_in()
  elif not any(isinstance(f, _AfterKerasImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterKerasImport())
