"""The tasks a schedule head is meta-trained on: the task suite's models
(:mod:`l2o_scale.benchmark.tasks`) or a task family's
(:mod:`l2o_scale.benchmark.families`, by the name of one of its tasks),
their small versions (``tiny=True``) or their own, on their small data or
the full splits, as pure functions of their parameters, with
parameter-scale augmentation.

A task's loss is its Keras model called statelessly
(``model.stateless_call``) on parameters given as tensors, so one traced
run can train several copies of the model side by side. Parameter-scale
augmentation (learned_optimization's ``tasks/task_augmentation.py``,
``ReparametrizeWithScale``): each tensor ``p`` is trained as ``p / s`` with
its own scale ``s`` (log-uniform), so the optimizer sees parameters and
gradients of other sizes than the model's, while the loss is the model's.
"""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.benchmark import families

# The suite's tasks that run here: every family users train (MLP,
# convolutional, recurrent, attention, autoencoder, embedding, regression).
# Not the batch-normalised MLP: its moving statistics are state outside the
# parameters.
DEFAULT_TASKS = ("mlp_tanh_mnist", "mlp_sigmoid_mnist", "cnn_mnist",
                 "gru_mnist_rows", "attention_topics", "autoencoder_mnist",
                 "text_topics", "regression_synthetic")


# The data a task trains on: its small version's few hundred examples, or
# the suite's full splits (the small-data regime's thousands) under the same
# small model, so that a long run passes over them tens of times, not
# hundreds.
TASK_DATA = ("small", "full")

# The models a task trains: the suite's small versions (fast; a run's
# steps cost little), or the suite's own models (those the benchmark and its
# users train; larger, so that they fit their training data as far as the
# suite's runs do).
TASK_MODELS = ("small", "full")


def check_names(names):
  """ValueError naming an unknown task or one that cannot run here."""
  if not names:
    raise ValueError("--tasks: name at least one task")
  for name in names:
    families.get_task(name)  # A ValueError lists the tasks.
    if name == "mlp_relu_bn_mnist":
      raise ValueError("--tasks: mlp_relu_bn_mnist keeps batch statistics "
                       "outside its parameters; choose another task")


def stateless_loss(model, fixed, loss_name, params, x, y, training=True):
  """The mean loss (``"mse"`` or ``"sparse_ce"`` of logits) of the Keras
  ``model`` called statelessly with trainable ``params`` and other
  variables ``fixed`` on ``(x, y)``."""
  outputs, _ = model.stateless_call(list(params), list(fixed), x,
                                    training=training)
  if loss_name == "mse":
    return tf.reduce_mean(tf.square(tf.cast(y, tf.float32) - outputs))
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(y, tf.int32), logits=outputs))


@dataclasses.dataclass
class HeadTask:
  """One small task: its model, initial parameters, data and loss."""
  name: str
  model: object
  initial: list          # float32 arrays, the model's trainable parameters
  fixed: list            # the model's other variables' values
  train: tuple           # (x, y) arrays
  validation: tuple
  loss_name: str

  def loss(self, params, x, y):
    """The mean training loss of the model with ``params`` on ``(x, y)``."""
    return stateless_loss(self.model, self.fixed, self.loss_name, params, x,
                          y)

  def initial_parameters(self, seed):
    """The initial parameters of run ``seed``: the model's initial values,
    those of i.i.d. initialisers (matrices, kernels) permuted within each
    tensor by ``seed`` (another draw from the same distribution);
    constant-initialised tensors (biases, normalisation scales) kept."""
    rng = np.random.default_rng([seed, 1])
    out = []
    for value in self.initial:
      if value.ndim >= 2:
        value = rng.permutation(value.reshape(-1)).reshape(value.shape)
      out.append(value.astype(np.float32))
    return out

  @property
  def sizes(self):
    return [int(v.size) for v in self.initial]


def build(name, data_dir=None, seed=0, data="small", models="small"):
  """The :class:`HeadTask` of suite task ``name``: its small model (or,
  ``models="full"``, the suite's own, :data:`TASK_MODELS`), built with
  Keras' random seed ``seed``, on its small version's data or
  (``data="full"``) the suite's full splits (:data:`TASK_DATA`)."""
  if data not in TASK_DATA:
    raise ValueError("task data must be one of {}, got {!r}".format(
        ", ".join(TASK_DATA), data))
  if models not in TASK_MODELS:
    raise ValueError("task models must be one of {}, got {!r}".format(
        ", ".join(TASK_MODELS), models))
  task = families.get_task(name)
  keras.utils.set_random_seed(seed)
  model = task.build(models == "small")
  splits = task.data(data == "small", data_dir)
  return HeadTask(
      name=name, model=model,
      initial=[np.asarray(v.numpy(), np.float32)
               for v in model.trainable_variables],
      fixed=[v.numpy() for v in model.non_trainable_variables],
      train=splits.train, validation=splits.validation,
      loss_name="mse" if task.loss == "mse" else "sparse_ce")


def augmentation_scales(count, seed, log10_range):
  """Per-tensor scales ``10 ** U(-log10_range, log10_range)`` of run
  ``seed`` (float32 [count]); all 1 for a range of 0."""
  if not log10_range:
    return np.ones(count, np.float32)
  rng = np.random.default_rng([seed, 2])
  return (10. ** rng.uniform(-log10_range, log10_range, count)).astype(
      np.float32)
