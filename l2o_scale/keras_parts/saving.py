"""What a ``.keras`` file holds of a
:class:`l2o_scale.keras_optimizer.LearnedOptimizer`: its options in the
model's config, its meta-parameters beside the optimizer's variables (Keras'
``save_own_variables`` store, keys ``meta_<i>`` in the sorted order of their
TF1 names), so that the file loads in a fresh process without the checkpoint
it came from."""

import numpy as np

META_PREFIX = "meta_"
META_KEY = META_PREFIX + "{}"


def save_meta_parameters(learned_optimizer, store):
  """Writes the meta-parameters of ``learned_optimizer`` into ``store``."""
  for i, var in enumerate(learned_optimizer.tf1_variables().values()):
    store[META_KEY.format(i)] = var.numpy()


def load_meta_parameters(learned_optimizer, store):
  """Assigns the meta-parameters in ``store`` to ``learned_optimizer``;
  returns whether it held any. ValueError, naming the parameter, where they
  are not those its options build."""
  meta = sorted((k for k in store.keys() if k.startswith(META_PREFIX)),
                key=lambda k: int(k[len(META_PREFIX):]))
  if not meta:
    return False
  variables = list(learned_optimizer.tf1_variables().items())
  if len(meta) != len(variables):
    raise ValueError(
        "the saved LearnedOptimizer has {} meta-parameters, its options "
        "build {}".format(len(meta), len(variables)))
  for key, (name, var) in zip(meta, variables):
    value = store[key]
    if tuple(value.shape) != tuple(var.shape):
      raise ValueError(
          "saved meta-parameter {} has shape {}, its options build "
          "{}".format(name, tuple(value.shape), tuple(var.shape)))
    var.assign(value)
  return True


def optimizer_store(store):
  """The entries of ``store`` that Keras' own ``save_own_variables`` wrote
  (``"0"``, ``"1"``...: the optimizer's variables), without the
  meta-parameters."""
  return {k: store[k] for k in store.keys() if not k.startswith(META_PREFIX)}


def fits(store, variables):
  """Whether the arrays of an :func:`optimizer_store` have the shapes of
  ``variables``, in order."""
  saved = [np.asarray(store[str(i)]) for i in range(len(store))]
  return _shapes(saved) == _shapes(variables)


def _shapes(arrays):
  return [tuple(a.shape) for a in arrays]


def json_ready(kwargs):
  """Options as JSON keeps them (tuples as lists)."""
  return {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
