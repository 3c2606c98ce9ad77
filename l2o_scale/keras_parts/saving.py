"""What a ``.keras`` file holds of a
:class:`l2o_scale.keras_optimizer.LearnedOptimizer`: its options in the
model's config (with its schedule head's parameters and bounds), its
meta-parameters beside the optimizer's variables (Keras'
``save_own_variables`` store, keys ``meta_<i>`` in the sorted order of their
TF1 names), and the run's state that is not a Keras variable (the schedule
head's, the count of skipped steps) under their own keys, so that the file
loads in a fresh process without the checkpoint it came from and the run
continues exactly."""

import numpy as np

META_PREFIX = "meta_"
META_KEY = META_PREFIX + "{}"
# The schedule head's per-run state (its tf.Variable ``state``).
HEAD_STATE_KEY = "schedule_head_state"
# How many steps were skipped for a gradient that is not finite.
SKIPPED_STEPS_KEY = "skipped_steps"
_OWN_KEYS = (HEAD_STATE_KEY, SKIPPED_STEPS_KEY)


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


def save_run_state(variables, store):
  """Writes ``variables`` ({key: tf.Variable}, keys among
  :data:`HEAD_STATE_KEY` and :data:`SKIPPED_STEPS_KEY`) into ``store``."""
  for key, var in variables.items():
    store[key] = var.numpy()


def load_run_state(variables, store):
  """Assigns the values ``store`` holds for ``variables`` (as
  :func:`save_run_state` wrote them); a key it lacks (a file saved without
  that state) leaves its variable as it is. ValueError, naming the key,
  where a saved value has another shape."""
  for key, var in variables.items():
    if key not in store.keys():
      continue
    value = np.asarray(store[key])
    if tuple(value.shape) != tuple(var.shape):
      raise ValueError("saved LearnedOptimizer {} has shape {}, this "
                       "optimizer's {}".format(key, tuple(value.shape),
                                               tuple(var.shape)))
    var.assign(value.astype(var.dtype.as_numpy_dtype))


def optimizer_store(store):
  """The entries of ``store`` that Keras' own ``save_own_variables`` wrote
  (``"0"``, ``"1"``...: the optimizer's variables), without the
  meta-parameters and the run's other state."""
  return {k: store[k] for k in store.keys()
          if not k.startswith(META_PREFIX) and k not in _OWN_KEYS}


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
