"""The task suite: one registry entry per Keras task.

Each :class:`Task` names its model family, builds its Keras model, loads its
data as train / validation / test splits, and declares its training loss and
its held-out metric. A new task is one :func:`register` call.

The MNIST tasks read the offline MNIST files through
:func:`problems.datasets.load_mnist_arrays` (``--data_dir`` or
``$L2O_SCALE_DATA_DIR``). The validation split is carved from MNIST's
training split (a fixed permutation, the same for every seed and optimizer);
the test split is MNIST's own test split, used for the held-out metric only.
The generated tasks draw their data from a fixed NumPy seed, so every run
sees the same examples.

Two regimes (:attr:`Task.regime`): ``small-data`` tasks train on a few
thousand examples, so 2,000 steps of batch 128 are about 64 epochs and the
test metric mostly rewards annealing without overfitting; ``data-rich`` tasks
train on :data:`RICH_TRAIN_SIZE` generated examples, so the same run sees
each example about twice and the test metric follows the optimization. The
report counts each regime on its own.

``tiny=True`` gives a few-hundred-example, few-unit version of each task for
quick checks (``--size=small``, the tests); the suite's numbers come from the
full versions.

Keras is imported by the model builders only, so that listing the tasks
(``--list_tasks``) needs no TensorFlow.

Why long: a task is read and added in one place: its registration, its model
builder and its data set stand together.
"""

import dataclasses
import functools
from typing import Callable

import numpy as np

from problems import datasets

VALIDATION_SIZE = 1000  # carved from the 5,000-image offline MNIST train split
TINY_SIZES = (512, 256, 512)  # train, validation, test with tiny=True
# The data-rich tasks' splits: 2,000 steps of batch 128 (256,000 examples)
# pass over the training split about twice.
RICH_TRAIN_SIZE = 131072
RICH_SIZES = (RICH_TRAIN_SIZE, 4096, 16384)  # train, validation, test
# The training loss of a data-rich task is measured on the first examples of
# its training split: the whole split 50 times would cost more than the run.
RICH_TRAIN_EVAL_SIZE = 8192
REGIMES = ("small-data", "data-rich")
# The held-out sets, each looked at once as a whole: the first by the
# heads meta-trained on the full splits, the second by the heads
# meta-trained on the suite's own models, the third by the heads whose
# decay follows their step (docs/schedule-head-results.md, "The search").
HELD_OUT_SETS = ("held-out", "held-out-2", "held-out-3")


@dataclasses.dataclass(frozen=True)
class Splits:
  """Arrays of one task: (x, y) for train, validation and test."""
  train: tuple
  validation: tuple
  test: tuple


@dataclasses.dataclass(frozen=True)
class Task:
  """One benchmark task.

  build(tiny) -> an unbuilt-weights Keras model (inputs declared).
  data(tiny, data_dir) -> :class:`Splits`.
  loss: ``"sparse_ce"`` (integer labels, logits) or ``"mse"``.
  metric: ``"accuracy"`` (higher is better) or ``"mse"`` (lower is better),
      measured on the test split (held out) and on the validation split (for
    tuning the baselines).
  jit_compile: compile the training steps with XLA. Off for the CNN: XLA's
    CPU convolutions are far slower than TensorFlow's own kernels (40 steps
    took 25 s with XLA, 0.45 s without, on a loaded 2-core machine).
  regime: ``"small-data"`` or ``"data-rich"`` (module doc).
  train_eval_size: the recorded training loss is measured on the first this
    many training examples (None: the whole training split).
  held_out: the held-out set the task belongs to (:data:`HELD_OUT_SETS`;
    empty for the suite's tasks): not in the suite's default tasks
    (:func:`suite_names`), kept apart as final test tasks for learned
    optimizers and their heads, run by naming them (``--tasks``).
  source: the data generator or data set the task's splits come from
    (:attr:`data_source`; empty: the one :data:`DATA_SOURCES` names for its
    ``data`` function), so that protocols can check which tasks share data.
  """
  name: str
  family: str
  description: str
  build: Callable
  data: Callable
  loss: str
  metric: str
  jit_compile: bool = True
  regime: str = "small-data"
  train_eval_size: int = None
  held_out: str = ""
  source: str = ""

  def __post_init__(self):
    if self.held_out and self.held_out not in HELD_OUT_SETS:
      raise ValueError("task {!r}: held_out must be one of {}, not "
                       "{!r}".format(self.name, HELD_OUT_SETS, self.held_out))
    if self.regime not in REGIMES:
      raise ValueError("task {!r}: regime must be one of {}, not {!r}".format(
          self.name, ", ".join(REGIMES), self.regime))

  @property
  def higher_is_better(self):
    return self.metric == "accuracy"

  @property
  def data_source(self):
    """Where the task's data comes from (``source``, else
    :data:`DATA_SOURCES`' entry for its data function)."""
    return self.source or DATA_SOURCES[self.data]


REGISTRY = {}


def register(task):
  if task.name in REGISTRY:
    raise ValueError("task {!r} is registered twice".format(task.name))
  REGISTRY[task.name] = task
  return task


def suite_names():
  """The suite's default tasks: every registered task not held out."""
  return tuple(name for name, task in REGISTRY.items() if not task.held_out)


def get(name):
  if name not in REGISTRY:
    raise ValueError("unknown task {!r}; the tasks: {}".format(
        name, ", ".join(REGISTRY)))
  return REGISTRY[name]


# ------------------------------------------------------------------ data
@functools.lru_cache(maxsize=4)
def _mnist(data_dir):
  """MNIST as float32 images in [0, 1]: (train, validation, test) splits."""
  x, y = datasets.load_mnist_arrays("train", data_dir)
  x_test, y_test = datasets.load_mnist_arrays("test", data_dir)
  order = np.random.default_rng(0).permutation(len(x))
  x = x[order].astype(np.float32) / 255.
  y = y[order].astype(np.int32)
  n = len(x) - VALIDATION_SIZE
  if n < VALIDATION_SIZE:
    raise ValueError(
        "the MNIST train split in {} has {} images; the benchmark carves {} "
        "for validation and needs at least as many left to train on".format(
            data_dir, len(x), VALIDATION_SIZE))
  return Splits((x[:n], y[:n]), (x[n:], y[n:]),
                (x_test.astype(np.float32) / 255., y_test.astype(np.int32)))


def _shrink(splits, tiny):
  if not tiny:
    return splits
  return Splits(*[(x[:n], y[:n]) for (x, y), n in zip(
      (splits.train, splits.validation, splits.test), TINY_SIZES)])


def mnist_data(tiny=False, data_dir=None):
  return _shrink(_mnist(data_dir), tiny)


def mnist_autoencoder_data(tiny=False, data_dir=None):
  """Targets are the inputs, flattened to 784 values."""
  s = mnist_data(tiny, data_dir)
  return Splits(*[(x, x.reshape(len(x), -1))
                  for x, _ in (s.train, s.validation, s.test)])


def _split(x, y, sizes=(4000, 1000, 5000)):
  a, b = sizes[0], sizes[0] + sizes[1]
  return Splits((x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:], y[b:]))


@functools.lru_cache(maxsize=2)
def _teacher_regression():
  """y = a fixed random tanh network of x (16 Gaussian inputs) + noise."""
  rng = np.random.default_rng(1234)
  x = rng.standard_normal((10000, 16)).astype(np.float32)
  w1 = rng.standard_normal((16, 32)) / 4.
  w2 = rng.standard_normal((32, 1)) / np.sqrt(32.)
  y = np.tanh(x @ w1) @ w2 + 0.1 * rng.standard_normal((10000, 1))
  y = (y - y.mean()) / y.std()
  return _split(x, y.astype(np.float32))


def regression_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_teacher_regression(), tiny)


def _rich_split(x, y):
  return _split(x, y, RICH_SIZES)


def _rich_count():
  return sum(RICH_SIZES)


@functools.lru_cache(maxsize=1)
def _teacher_regression_rich():
  """The teacher of :func:`_teacher_regression` (the same weights), with
  :data:`RICH_SIZES` fresh examples."""
  rng = np.random.default_rng(1234)
  rng.standard_normal((10000, 16))  # the small task's inputs: same teacher
  w1 = rng.standard_normal((16, 32)) / 4.
  w2 = rng.standard_normal((32, 1)) / np.sqrt(32.)
  rng = np.random.default_rng(5678)
  x = rng.standard_normal((_rich_count(), 16)).astype(np.float32)
  y = np.tanh(x @ w1) @ w2 + 0.1 * rng.standard_normal((len(x), 1))
  y = (y - y.mean()) / y.std()
  return _rich_split(x, y.astype(np.float32))


def regression_rich_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_teacher_regression_rich(), tiny)


TEACHER_INPUTS, TEACHER_CLASSES = 32, 10


@functools.lru_cache(maxsize=1)
def _teacher_classes():
  """Labels of Gaussian inputs (32 values) given by a fixed random ReLU
  network (32-64-10, the argmax of its outputs, each output standardized
  over the inputs so that the classes are about equally common), 5% of them
  replaced by a uniformly drawn class (label noise)."""
  rng = np.random.default_rng(2468)
  w1 = rng.standard_normal((TEACHER_INPUTS, 64)) / np.sqrt(TEACHER_INPUTS)
  w2 = rng.standard_normal((64, TEACHER_CLASSES)) / np.sqrt(64.)
  x = rng.standard_normal((_rich_count(), TEACHER_INPUTS)).astype(np.float32)
  logits = np.maximum(x @ w1, 0.) @ w2
  y = np.argmax((logits - logits.mean(0)) / logits.std(0), axis=1)
  noisy = rng.random(len(y)) < 0.05
  y[noisy] = rng.integers(0, TEACHER_CLASSES, size=int(noisy.sum()))
  return _rich_split(x, y.astype(np.int32))


def teacher_classes_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_teacher_classes(), tiny)


@functools.lru_cache(maxsize=1)
def _spirals(arms=3, turns=1.5, noise=0.08):
  """Points of ``arms`` interleaved spirals in the plane (each arm a class,
  ``turns`` turns from the centre out, Gaussian noise of ``noise``), the
  split sizes of the small generated tasks."""
  rng = np.random.default_rng(1357)
  labels = rng.integers(0, arms, size=10000)
  radius = rng.random(10000)
  angle = 2. * np.pi * (labels / arms + turns * radius)
  x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
  x += noise * rng.standard_normal(x.shape)
  return _split(x.astype(np.float32), labels.astype(np.int32))


def spirals_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_spirals(), tiny)


# The generated documents of the text tasks and the models that read them.
TOPIC_VOCAB, TOPICS, TOPIC_LENGTH = 200, 5, 24


@functools.lru_cache(maxsize=2)
def _topic_documents(vocab=TOPIC_VOCAB, topics=TOPICS, length=TOPIC_LENGTH,
                     background=0.6):
  """Token sequences from a topic model: each document draws its words from
  its topic's word distribution (probability 1 - background) or from a
  shared background distribution; the label is the topic."""
  rng = np.random.default_rng(4321)
  topic_words = rng.dirichlet(np.full(vocab, 0.1), size=topics)
  shared = rng.dirichlet(np.full(vocab, 1.0))
  labels = rng.integers(0, topics, size=10000)
  probs = (1 - background) * topic_words[labels] + background * shared
  cdf = np.cumsum(probs, axis=1)
  u = rng.random((10000, length, 1))
  tokens = (u > cdf[:, None, :]).sum(axis=2).clip(0, vocab - 1)
  return _split(tokens.astype(np.int32), labels.astype(np.int32))


def text_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_topic_documents(), tiny)


@functools.lru_cache(maxsize=1)
def _topic_documents_rich(vocab=TOPIC_VOCAB, topics=TOPICS,
                          length=TOPIC_LENGTH, background=0.6):
  """:data:`RICH_SIZES` documents of the topic model of
  :func:`_topic_documents` (the same topics and background), drawn by
  inverting each document's word distribution (per topic, so memory stays
  at one topic's documents)."""
  rng = np.random.default_rng(4321)
  topic_words = rng.dirichlet(np.full(vocab, 0.1), size=topics)
  shared = rng.dirichlet(np.full(vocab, 1.0))
  cdfs = np.cumsum((1 - background) * topic_words + background * shared,
                   axis=1)
  rng = np.random.default_rng(8642)
  labels = rng.integers(0, topics, size=_rich_count())
  u = rng.random((len(labels), length))
  tokens = np.empty(u.shape, np.int32)
  for topic in range(topics):
    rows = labels == topic
    tokens[rows] = np.searchsorted(cdfs[topic], u[rows], side="right").clip(
        0, vocab - 1)
  return _rich_split(tokens, labels.astype(np.int32))


def text_rich_data(tiny=False, data_dir=None):
  del data_dir
  return _shrink(_topic_documents_rich(), tiny)


# The data source of each data function: tasks of one source share data
# (the same images, or draws of the same generator).
DATA_SOURCES = {
    mnist_data: "MNIST", mnist_autoencoder_data: "MNIST",
    regression_data: "teacher regression",
    regression_rich_data: "teacher regression",
    teacher_classes_data: "teacher classes", spirals_data: "spirals",
    text_data: "topic documents", text_rich_data: "topic documents"}


# ---------------------------------------------------------------- models
def _mlp(inputs, widths, activation, outputs, batch_norm=False):
  import keras  # pylint: disable=g-import-not-at-top
  layers = [keras.Input(inputs), keras.layers.Flatten()]
  for width in widths:
    layers.append(keras.layers.Dense(width, use_bias=not batch_norm))
    if batch_norm:
      layers.append(keras.layers.BatchNormalization())
    layers.append(keras.layers.Activation(activation))
  layers.append(keras.layers.Dense(outputs))
  return keras.Sequential(layers)


def _cnn(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  c = 4 if tiny else 16
  return keras.Sequential([
      keras.Input((28, 28)), keras.layers.Reshape((28, 28, 1)),
      keras.layers.Conv2D(c, 3, strides=2, activation="relu"),
      keras.layers.Conv2D(2 * c, 3, strides=2, activation="relu"),
      keras.layers.GlobalAveragePooling2D() if tiny else
      keras.layers.Flatten(),
      keras.layers.Dense(10)])


def _rnn(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([keras.Input((28, 28)),
                           keras.layers.Reshape((14, 56)),
                           keras.layers.GRU(8 if tiny else 32),
                           keras.layers.Dense(10)])


def _autoencoder(tiny):
  code = [16, 4] if tiny else [64, 16]
  return _mlp((28, 28), code + code[:1], "relu", 784)


def _text(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([
      keras.Input((TOPIC_LENGTH,), dtype="int32"),
      keras.layers.Embedding(TOPIC_VOCAB, 4 if tiny else 16),
      keras.layers.GlobalAveragePooling1D(),
      keras.layers.Dense(8 if tiny else 32, activation="relu"),
      keras.layers.Dense(TOPICS)])


def _attention(tiny):
  """One transformer encoder block (post-norm, as in Vaswani et al.) over
  token and position embeddings, mean-pooled into a classifier."""
  import keras  # pylint: disable=g-import-not-at-top
  width, heads, hidden = (8, 2, 16) if tiny else (32, 4, 64)
  tokens = keras.Input((TOPIC_LENGTH,), dtype="int32")
  x = keras.layers.Embedding(TOPIC_VOCAB, width)(tokens)
  x = position_embedding()(TOPIC_LENGTH, width)(x)
  attended = keras.layers.MultiHeadAttention(heads, width // heads)(x, x)
  x = keras.layers.LayerNormalization()(x + attended)
  ffn = keras.layers.Dense(hidden, activation="relu")(x)
  x = keras.layers.LayerNormalization()(x + keras.layers.Dense(width)(ffn))
  x = keras.layers.GlobalAveragePooling1D()(x)
  return keras.Model(tokens, keras.layers.Dense(TOPICS)(x))


@functools.cache
def position_embedding():
  """The layer class ``PositionEmbedding(length, width)``: a learned
  embedding per position, added to the token embeddings (defined on first
  use: it subclasses a Keras layer)."""
  import keras  # pylint: disable=g-import-not-at-top

  class PositionEmbedding(keras.layers.Layer):

    def __init__(self, length, width, **kwargs):
      super().__init__(**kwargs)
      self.length, self.width = length, width

    def build(self, input_shape):
      self.positions = self.add_weight(
          shape=(self.length, self.width), name="positions",
          initializer=keras.initializers.RandomNormal(stddev=0.02))

    def call(self, x):
      return x + self.positions
  return PositionEmbedding


def _pick(tiny, small, full):
  return small if tiny else full


register(Task(
    "logreg_mnist", "convex", "logistic regression on MNIST pixels",
    lambda tiny: _mlp((28, 28), [], "linear", 10), mnist_data,
    "sparse_ce", "accuracy"))
register(Task(
    "mlp_sigmoid_mnist", "MLP", "784-20-10 sigmoid MLP (the L2O-Entropy "
    "training problem)",
    lambda tiny: _mlp((28, 28), [_pick(tiny, 8, 20)], "sigmoid", 10),
    mnist_data, "sparse_ce", "accuracy"))
register(Task(
    "mlp_tanh_mnist", "MLP", "784-64-64-10 tanh MLP",
    lambda tiny: _mlp((28, 28), [_pick(tiny, 8, 64)] * 2, "tanh", 10),
    mnist_data, "sparse_ce", "accuracy"))
register(Task(
    "mlp_relu_bn_mnist", "MLP + normalization",
    "784-128-128-128-10 ReLU MLP with batch normalization",
    lambda tiny: _mlp((28, 28), [_pick(tiny, 8, 128)] * 3, "relu", 10,
                      batch_norm=True),
    mnist_data, "sparse_ce", "accuracy"))
register(Task(
    "cnn_mnist", "convolutional",
    "two strided 3x3 convolutions (16, 32 channels, ReLU) and a dense layer",
    _cnn, mnist_data, "sparse_ce", "accuracy", jit_compile=False))
register(Task(
    "gru_mnist_rows", "recurrent",
    "GRU (32 units) reading the image as a sequence of 14 two-row strips",
    _rnn, mnist_data, "sparse_ce", "accuracy"))
register(Task(
    "autoencoder_mnist", "autoencoder",
    "784-64-16-64-784 ReLU autoencoder, squared reconstruction error",
    _autoencoder, mnist_autoencoder_data, "mse", "mse"))
register(Task(
    "regression_synthetic", "regression (generated data)",
    "16-64-64-1 ELU MLP fitting a fixed random tanh network plus noise",
    lambda tiny: _mlp((16,), [_pick(tiny, 8, 64)] * 2, "elu", 1),
    regression_data, "mse", "mse"))
register(Task(
    "text_topics", "embedding / text (generated data)",
    "token embedding (vocabulary 200), mean pooling, 32-unit ReLU layer; "
    "topic of generated 24-token documents",
    _text, text_data, "sparse_ce", "accuracy"))
register(Task(
    "attention_topics", "attention (generated data)",
    "one transformer encoder block (4 heads, width 32, layer "
    "normalization, residuals) over token and position embeddings; topic "
    "of the generated 24-token documents of text_topics",
    _attention, text_data, "sparse_ce", "accuracy"))


# The data-rich regime: generated tasks whose training split a 2,000-step run
# of batch 128 passes about twice (module doc).
def _rich(name, family, description, build, data, loss, metric):
  return register(Task(name, family, description, build, data, loss, metric,
                       regime="data-rich",
                       train_eval_size=RICH_TRAIN_EVAL_SIZE))


_rich("regression_synthetic_rich", "regression (generated data)",
      "the 16-64-64-1 ELU MLP of regression_synthetic on 131,072 fresh "
      "examples of its teacher",
      lambda tiny: _mlp((16,), [_pick(tiny, 8, 64)] * 2, "elu", 1),
      regression_rich_data, "mse", "mse")
_rich("teacher_mlp_rich", "MLP (generated data)",
      "32-128-128-10 ReLU MLP classifying Gaussian inputs labelled by a "
      "fixed random ReLU network (5% label noise), 131,072 training "
      "examples",
      lambda tiny: _mlp((TEACHER_INPUTS,), [_pick(tiny, 8, 128)] * 2, "relu",
                        TEACHER_CLASSES),
      teacher_classes_data, "sparse_ce", "accuracy")
_rich("text_topics_rich", "embedding / text (generated data)",
      "the embedding model of text_topics on 131,072 documents of its topic "
      "model", _text, text_rich_data, "sparse_ce", "accuracy")
_rich("attention_topics_rich", "attention (generated data)",
      "the transformer block of attention_topics on 131,072 documents of "
      "its topic model", _attention, text_rich_data, "sparse_ce", "accuracy")


# ------------------------------------------------------- held-out tasks
# Families and data that no learned optimizer or head is meta-trained,
# chosen or tuned on (docs/schedule-head-results.md, "Recipe 3: heads
# meta-trained on the full splits"): outside the suite's default tasks.
def _lstm(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([
      keras.Input((TOPIC_LENGTH,), dtype="int32"),
      keras.layers.Embedding(TOPIC_VOCAB, _pick(tiny, 4, 16)),
      keras.layers.LSTM(_pick(tiny, 8, 32)),
      keras.layers.Dense(TOPICS)])


def _conv1d(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([
      keras.Input((TOPIC_LENGTH,), dtype="int32"),
      keras.layers.Embedding(TOPIC_VOCAB, _pick(tiny, 4, 16)),
      keras.layers.Conv1D(_pick(tiny, 8, 32), 3, activation="relu"),
      keras.layers.GlobalMaxPooling1D(),
      keras.layers.Dense(TOPICS)])


def _resnet(tiny):
  """A strided convolution, two residual blocks (two 3x3 convolutions each,
  the block's input added to their output) and global average pooling."""
  import keras  # pylint: disable=g-import-not-at-top
  c = _pick(tiny, 4, 16)
  images = keras.Input((28, 28))
  x = keras.layers.Reshape((28, 28, 1))(images)
  x = keras.layers.Conv2D(c, 3, strides=2, padding="same",
                          activation="relu")(x)
  for _ in range(2):
    y = keras.layers.Conv2D(c, 3, padding="same", activation="relu")(x)
    y = keras.layers.Conv2D(c, 3, padding="same")(y)
    x = keras.layers.Activation("relu")(keras.layers.Add()([x, y]))
  x = keras.layers.GlobalAveragePooling2D()(x)
  return keras.Model(images, keras.layers.Dense(10)(x))


def _held_out(name, family, description, build, data, loss, metric,
              jit_compile=True, held_out_set="held-out"):
  return register(Task(name, family, description, build, data, loss, metric,
                       jit_compile=jit_compile, held_out=held_out_set))


_held_out("lstm_topics", "recurrent (generated data)",
          "token embedding (16) and an LSTM (32 units) reading the "
          "generated 24-token documents of text_topics",
          _lstm, text_data, "sparse_ce", "accuracy")
_held_out("conv1d_topics", "1-D convolutional (generated data)",
          "token embedding (16), a width-3 convolution (32 channels, ReLU) "
          "and max pooling over the documents of text_topics",
          _conv1d, text_data, "sparse_ce", "accuracy")
_held_out("resnet_mnist", "residual convolutional",
          "a strided 3x3 convolution (16 channels) and two residual blocks "
          "of two 3x3 convolutions, global average pooling, on MNIST",
          _resnet, mnist_data, "sparse_ce", "accuracy", jit_compile=False)
_held_out("mlp_spirals", "MLP (generated data)",
          "2-64-64-3 GELU MLP classifying points of three interleaved "
          "spirals in the plane",
          lambda tiny: _mlp((2,), [_pick(tiny, 8, 64)] * 2, "gelu", 3),
          spirals_data, "sparse_ce", "accuracy")


# The second held-out set (named before any head meta-trained on the suite's
# own models was selected).
def _conv_autoencoder(tiny):
  """Two strided 3x3 convolutions down to 7x7, two strided transposed
  convolutions back to 28x28, the reconstruction flattened to 784 values."""
  import keras  # pylint: disable=g-import-not-at-top
  c = _pick(tiny, 4, 16)
  return keras.Sequential([
      keras.Input((28, 28)), keras.layers.Reshape((28, 28, 1)),
      keras.layers.Conv2D(c, 3, strides=2, padding="same",
                          activation="relu"),
      keras.layers.Conv2D(2 * c, 3, strides=2, padding="same",
                          activation="relu"),
      keras.layers.Conv2DTranspose(c, 3, strides=2, padding="same",
                                   activation="relu"),
      keras.layers.Conv2DTranspose(1, 3, strides=2, padding="same"),
      keras.layers.Flatten()])


def _bigru(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([
      keras.Input((TOPIC_LENGTH,), dtype="int32"),
      keras.layers.Embedding(TOPIC_VOCAB, _pick(tiny, 4, 16)),
      keras.layers.Bidirectional(keras.layers.GRU(_pick(tiny, 4, 16))),
      keras.layers.Dense(TOPICS)])


def _separable_cnn(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  c = _pick(tiny, 4, 16)
  return keras.Sequential([
      keras.Input((28, 28)), keras.layers.Reshape((28, 28, 1)),
      keras.layers.SeparableConv2D(c, 3, strides=2, activation="relu"),
      keras.layers.SeparableConv2D(2 * c, 3, strides=2, activation="relu"),
      keras.layers.Flatten(),
      keras.layers.Dense(10)])


_held_out("conv_autoencoder_mnist", "convolutional autoencoder",
          "two strided convolutions (16, 32 channels) and two strided "
          "transposed convolutions, squared reconstruction error on MNIST",
          _conv_autoencoder, mnist_autoencoder_data, "mse", "mse",
          jit_compile=False, held_out_set="held-out-2")
_held_out("bigru_topics", "bidirectional recurrent (generated data)",
          "token embedding (16) and a bidirectional GRU (16 units each way) "
          "over the documents of text_topics",
          _bigru, text_data, "sparse_ce", "accuracy",
          held_out_set="held-out-2")
_held_out("deep_swish_mnist", "deep MLP",
          "784-64-64-64-64-10 swish MLP without normalization",
          lambda tiny: _mlp((28, 28), [_pick(tiny, 8, 64)] * 4, "swish", 10),
          mnist_data, "sparse_ce", "accuracy", held_out_set="held-out-2")
_held_out("separable_cnn_mnist", "depthwise-separable convolutional",
          "two strided depthwise-separable 3x3 convolutions (16, 32 "
          "channels, ReLU) and a dense layer on MNIST",
          _separable_cnn, mnist_data, "sparse_ce", "accuracy",
          jit_compile=False, held_out_set="held-out-2")


# The third held-out set (named before any optimizer ran on it, kept for the
# heads whose decay follows their step): model families in none of the
# tasks above.
def _mixer(tiny):
  """An MLP-Mixer block (Tolstikhin et al., 2021) over the 49 patches of
  4x4 pixels: a token-mixing MLP across patches, then a channel-mixing MLP
  across features, each after layer normalization and with a residual;
  mean pooling and a dense classifier."""
  import keras  # pylint: disable=g-import-not-at-top
  width, tokens_hidden, channels_hidden = ((8, 8, 16) if tiny else
                                           (32, 64, 64))
  images = keras.Input((28, 28))
  x = keras.layers.Reshape((7, 4, 7, 4))(images)
  x = keras.layers.Permute((1, 3, 2, 4))(x)
  x = keras.layers.Reshape((49, 16))(x)
  x = keras.layers.Dense(width)(x)
  y = keras.layers.Permute((2, 1))(keras.layers.LayerNormalization()(x))
  y = keras.layers.Dense(tokens_hidden, activation="gelu")(y)
  x = x + keras.layers.Permute((2, 1))(keras.layers.Dense(49)(y))
  y = keras.layers.LayerNormalization()(x)
  y = keras.layers.Dense(channels_hidden, activation="gelu")(y)
  x = x + keras.layers.Dense(width)(y)
  x = keras.layers.GlobalAveragePooling1D()(
      keras.layers.LayerNormalization()(x))
  return keras.Model(images, keras.layers.Dense(10)(x))


def _simple_rnn(tiny):
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([keras.Input((28, 28)),
                           keras.layers.SimpleRNN(_pick(tiny, 8, 32)),
                           keras.layers.Dense(10)])


def _glu_mlp(tiny):
  """Two gated linear units (Dauphin et al., 2017): each layer's output is
  one linear map of its input times the sigmoid of another."""
  import keras  # pylint: disable=g-import-not-at-top
  width = _pick(tiny, 8, 64)
  images = keras.Input((28, 28))
  x = keras.layers.Flatten()(images)
  for _ in range(2):
    x = keras.layers.Multiply()([
        keras.layers.Dense(width)(x),
        keras.layers.Dense(width, activation="sigmoid")(x)])
  return keras.Model(images, keras.layers.Dense(10)(x))


def _residual_ln_mlp(tiny):
  """A 64-wide residual MLP: two pre-norm blocks (layer normalization, a
  GELU layer, a linear layer, the block's input added)."""
  import keras  # pylint: disable=g-import-not-at-top
  width = _pick(tiny, 8, 64)
  inputs = keras.Input((16,))
  x = keras.layers.Dense(width)(inputs)
  for _ in range(2):
    y = keras.layers.LayerNormalization()(x)
    y = keras.layers.Dense(2 * width, activation="gelu")(y)
    x = keras.layers.Add()([x, keras.layers.Dense(width)(y)])
  return keras.Model(inputs, keras.layers.Dense(1)(x))


_held_out("mixer_mnist", "MLP-Mixer (patch tokens)",
          "one MLP-Mixer block (width 32, mixing MLPs of 64 GELU units) "
          "over 49 patches of 4x4 pixels of MNIST",
          _mixer, mnist_data, "sparse_ce", "accuracy",
          held_out_set="held-out-3")
_held_out("simple_rnn_mnist_rows", "vanilla recurrent",
          "a tanh recurrent layer (32 units, no gates) reading the image as "
          "28 rows",
          _simple_rnn, mnist_data, "sparse_ce", "accuracy",
          held_out_set="held-out-3")
_held_out("glu_mlp_mnist", "gated MLP",
          "784-64-64-10 MLP of gated linear units (a linear map times the "
          "sigmoid of another) on MNIST",
          _glu_mlp, mnist_data, "sparse_ce", "accuracy",
          held_out_set="held-out-3")
_held_out("residual_ln_regression", "residual MLP + normalization "
          "(generated data)",
          "16-64-1 residual MLP, two pre-norm blocks of 128 GELU units, "
          "on the data of regression_synthetic",
          _residual_ln_mlp, regression_data, "mse", "mse",
          held_out_set="held-out-3")
