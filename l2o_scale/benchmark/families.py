"""Task families: distributions of tasks that a learned optimizer is
meta-trained on, each task a :class:`~l2o_scale.benchmark.tasks.Task` of
the benchmark's registry (so that any trainer, evaluator or the benchmark
itself runs it).

A :class:`TaskFamily` (learned_optimization's ``TaskFamily``: ``sample``,
then a task) holds a finite grid of model configurations and draws a task as
a configuration and a data seed: the configuration sets the model (so that
a traced run serves every task of it), the seed the data set, drawn afresh
from the family's generator. Every family here generates its own data from
a generator used nowhere else in the registry, and names it
(:attr:`TaskFamily.data_source`), so that a protocol can check that its
meta-training, validation and test tasks share no data and no model family
(:func:`check_disjoint`).

A new family is one :func:`register_family` call.
"""

import dataclasses
import functools
import itertools
from typing import Callable

import numpy as np

from l2o_scale.benchmark import tasks as registry

# Split sizes of a family's tasks: a 5,000-step run of batch 128 passes
# over the training split about 20 times (small) or about 5 (rich).
SPLITS = {"small": (4096, 1024, 1024), "rich": (32768, 1024, 1024)}

FAMILIES = {}


@dataclasses.dataclass(frozen=True)
class TaskFamily:
  """A distribution of tasks.

  configs: the grid of model configurations (dicts), each drawn equally
    often; ``build(config)`` gives its Keras model, ``data(config, seed,
    sizes)`` its (x, y) arrays for the three splits, drawn from ``seed``.
  family, data_source: the model family and the data generator, as the
    registry's tasks name theirs.
  """
  name: str
  family: str
  data_source: str
  description: str
  configs: tuple
  build: Callable
  data: Callable
  loss: str
  metric: str

  def task(self, config_index, seed, splits="small"):
    """The task of configuration ``config_index`` on the data of
    ``seed`` (not registered: a family's tasks are drawn, not listed)."""
    config = self.configs[config_index]
    sizes = SPLITS[splits]

    def data(tiny=False, data_dir=None):
      del data_dir
      return _data(self.name, config_index, seed, splits, tiny)
    return registry.Task(
        name="{}/{}/{}/{}".format(self.name, config_index, splits, seed),
        family=self.family, description="{}: {}".format(
            self.description, _describe(config)),
        build=lambda tiny: self.build(config), data=data, loss=self.loss,
        metric=self.metric, source=self.data_source,
        regime="small-data" if sizes[0] < 10000 else "data-rich")

  def sample(self, rng, splits=None):
    """A task drawn with ``rng`` (a NumPy Generator): a configuration, the
    splits' sizes (``splits``: fixed, or drawn from :data:`SPLITS`) and a
    data seed."""
    index = int(rng.integers(len(self.configs)))
    kind = splits or sorted(SPLITS)[int(rng.integers(len(SPLITS)))]
    return self.task(index, int(rng.integers(1 << 30)), kind)


def _describe(config):
  return ", ".join("{} {}".format(k, v) for k, v in sorted(config.items()))


@functools.lru_cache(maxsize=16)
def _data(name, config_index, seed, splits, tiny):
  family = FAMILIES[name]
  sizes = registry.TINY_SIZES if tiny else SPLITS[splits]
  x, y = family.data(family.configs[config_index],
                     np.random.default_rng([seed, 77]), sum(sizes))
  a, b = sizes[0], sizes[0] + sizes[1]
  return registry.Splits((x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:], y[b:]))


def register_family(family):
  if family.name in FAMILIES:
    raise ValueError("family {!r} is registered twice".format(family.name))
  FAMILIES[family.name] = family
  return family


def get_task(name):
  """The task named ``name``: a registered task, or a family's task by the
  name :meth:`TaskFamily.task` gives it (``FAMILY/CONFIG/SPLITS/SEED``, e.g.
  ``mlp_blobs/3/small/7``); ValueError naming what is wrong."""
  if name in registry.REGISTRY or "/" not in name:
    return registry.get(name)
  parts = name.split("/")
  if len(parts) != 4 or not (parts[1].isdigit() and parts[3].isdigit()):
    raise ValueError("{!r} is not a task: a family's task is FAMILY/CONFIG/"
                     "SPLITS/SEED (e.g. mlp_blobs/3/small/7)".format(name))
  family = get_family(parts[0])
  index, splits, seed = int(parts[1]), parts[2], int(parts[3])
  if index >= len(family.configs) or splits not in SPLITS:
    raise ValueError("{!r}: {} has configurations 0 to {} and splits {}"
                     .format(name, family.name, len(family.configs) - 1,
                             ", ".join(sorted(SPLITS))))
  return family.task(index, seed, splits)


def get_family(name):
  if name not in FAMILIES:
    raise ValueError("unknown task family {!r}; the families: {}".format(
        name, ", ".join(FAMILIES)))
  return FAMILIES[name]


def grid(**axes):
  """Every combination of the axes' values, as config dicts."""
  keys = sorted(axes)
  return tuple(dict(zip(keys, values))
               for values in itertools.product(*(axes[k] for k in keys)))


# ------------------------------------------------------------- generators
def blobs(config, rng, count):
  """Gaussian clusters warped by a random tanh map: ``classes`` clusters in
  ``inputs`` dimensions, labels the cluster."""
  d, c = config["inputs"], config["classes"]
  centres = rng.standard_normal((c, d)) * 1.5
  labels = rng.integers(0, c, count)
  x = centres[labels] + rng.standard_normal((count, d))
  warp = rng.standard_normal((d, d)) / np.sqrt(d)
  x = np.tanh(x @ warp) * 2.
  return x.astype(np.float32), labels.astype(np.int32)


def fourier(config, rng, count):
  """A sum of 16 random sinusoids of uniform inputs in ``inputs``
  dimensions plus noise, standardised."""
  d = config["inputs"]
  x = rng.uniform(-1., 1., (count, d))
  w = rng.standard_normal((d, 16)) * (3. / np.sqrt(d))
  phase = rng.uniform(0., 2. * np.pi, 16)
  y = np.sin(x @ w + phase) @ rng.standard_normal((16, 1))
  y = y + 0.1 * y.std() * rng.standard_normal(y.shape)
  y = (y - y.mean()) / y.std()
  return x.astype(np.float32), y.astype(np.float32)


def low_rank(config, rng, count):
  """Inputs on a noisy random ``rank``-dimensional tanh manifold in
  ``inputs`` dimensions; the target is the input."""
  d, r = config["inputs"], config["rank"]
  z = rng.standard_normal((count, r))
  x = np.tanh(z @ (rng.standard_normal((r, d)) / np.sqrt(r)))
  x = x + 0.05 * rng.standard_normal(x.shape)
  return x.astype(np.float32), x.astype(np.float32)


SEQUENCE_VOCAB, SEQUENCE_LENGTH, SEQUENCE_CLASSES = 16, 12, 4


def majority_tokens(config, rng, count):
  """Token sequences (vocabulary 16, length 12) whose label is the most
  frequent of the first four tokens (ties: the lowest), each sequence
  drawn with its own random token frequencies."""
  del config
  weights = rng.dirichlet(np.full(SEQUENCE_VOCAB, 0.7), size=count)
  cdf = np.cumsum(weights, axis=1)
  u = rng.random((count, SEQUENCE_LENGTH, 1))
  tokens = (u > cdf[:, None, :]).sum(axis=2).clip(0, SEQUENCE_VOCAB - 1)
  counts = np.stack([(tokens == k).sum(1) for k in range(SEQUENCE_CLASSES)],
                    1)
  return tokens.astype(np.int32), np.argmax(counts, 1).astype(np.int32)


# ----------------------------------------------------------------- models
def _keras():
  import keras  # pylint: disable=g-import-not-at-top
  return keras


def mlp(config, outputs):
  keras = _keras()
  layers = [keras.Input((config["inputs"],))]
  for _ in range(config["depth"]):
    layers.append(keras.layers.Dense(config["width"],
                                     activation=config["activation"]))
  layers.append(keras.layers.Dense(outputs))
  return keras.Sequential(layers)


def autoencoder(config):
  keras = _keras()
  w, d = config["width"], config["inputs"]
  return keras.Sequential([
      keras.Input((d,)), keras.layers.Dense(w, activation=config[
          "activation"]),
      keras.layers.Dense(config["rank"]),
      keras.layers.Dense(w, activation=config["activation"]),
      keras.layers.Dense(d)])


def embedding_bag(config):
  keras = _keras()
  return keras.Sequential([
      keras.Input((SEQUENCE_LENGTH,), dtype="int32"),
      keras.layers.Embedding(SEQUENCE_VOCAB, config["embedding"]),
      keras.layers.GlobalAveragePooling1D(),
      keras.layers.Dense(config["width"], activation="relu"),
      keras.layers.Dense(SEQUENCE_CLASSES)])


ACTIVATIONS = ("relu", "tanh", "gelu", "sigmoid")

register_family(TaskFamily(
    "mlp_blobs", "MLP", "warped Gaussian clusters",
    "MLP classifier of warped Gaussian clusters",
    grid(inputs=(16,), classes=(8,), width=(64,), depth=(1, 2),
         activation=ACTIVATIONS),
    lambda c: mlp(c, c["classes"]), blobs, "sparse_ce", "accuracy"))
register_family(TaskFamily(
    "mlp_fourier", "regression", "random sinusoids",
    "MLP regression of a sum of random sinusoids",
    grid(inputs=(8,), width=(64,), depth=(2,), activation=ACTIVATIONS),
    lambda c: mlp(c, 1), fourier, "mse", "mse"))
register_family(TaskFamily(
    "mlp_autoencoder", "autoencoder", "noisy low-rank manifold",
    "MLP autoencoder of points on a noisy low-rank manifold",
    grid(inputs=(32,), rank=(4,), width=(64,), activation=("relu", "tanh")),
    autoencoder, low_rank, "mse", "mse"))
register_family(TaskFamily(
    "bag_majority", "embedding", "majority-token sequences",
    "token embedding, mean pooling and a ReLU layer over token sequences, "
    "most frequent of four tokens",
    grid(embedding=(8, 16), width=(32,)),
    embedding_bag, majority_tokens, "sparse_ce", "accuracy"))


def check_disjoint(families, validation, test):
  """ValueError naming the first overlap of a protocol's sets:
  ``families`` (meta-training: family names), ``validation`` and ``test``
  (registered task names). Validation shares no data source and no model
  (task) with meta-training; test shares no model family and no data source
  with either."""
  train = [get_family(name) for name in families]
  val = [registry.get(name) for name in validation]
  tst = [registry.get(name) for name in test]
  train_sources = {f.data_source for f in train}
  for task in val:
    if task.data_source in train_sources:
      raise ValueError("validation task {} uses the data of meta-training "
                       "({})".format(task.name, task.data_source))
  seen_families = {f.family for f in train} | {t.family for t in val}
  seen_sources = train_sources | {t.data_source for t in val}
  for task in tst:
    if task.family in seen_families:
      raise ValueError("test task {}'s model family ({}) is in "
                       "meta-training or validation".format(task.name,
                                                            task.family))
    if task.data_source in seen_sources:
      raise ValueError("test task {} uses data of meta-training or "
                       "validation ({})".format(task.name, task.data_source))
