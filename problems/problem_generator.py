"""Optimization problems of L2O-Scale (port of ``problems/problem_generator.py``).

A problem is a pure function of a list of parameter tensors (and optionally a
batch of data), so that a learned optimizer can be unrolled over it and
differentiated through. Random problem data is drawn with ``np.random`` right
after ``np.random.seed(random_seed)``, in the same order as the original, so
the same seed gives the same problem as the TF1 code.

Sources: "training" = Model_Free_L2O/L2O-Scale /L2O-Scale-Training/problems/
problem_generator.py (L2O-Entropy, with the Hessian methods), "evaluation" =
Model_Free_L2O/L2O-Scale/L2O-Scale-Evaluation/problems/problem_generator.py in
VITA-Group/Open-L2O. Classes cite the original definition they port by name.
Where the two versions share a class name but differ (``ConvNet``), the
training one keeps the name and the evaluation one is :class:`ConvNetEval`.

Differences from TF1, all forced by eager TensorFlow: ``gradients`` takes the
parameters and data (not an objective tensor) and differentiates with a
``GradientTape``; ``init_tensors`` draws from ``tf.random`` with the same
distributions (TF1 and TF2 random streams differ, so initial values from a
seed differ; pass explicit initial arrays to reproduce a run).

Why long: the port keeps every problem of both originals in the original's
module, under the original's names.
"""


import math

import numpy as np
import tensorflow as tf

from problems import curvature
from problems import problem_spec as prob_spec

EPSILON = 1e-6
MAX_SEED = 4294967295
PARAMETER_SCOPE = "parameters"

_Spec = prob_spec.Spec


class Problem(object):
  """Base class (original l.44-330): parameter shapes, init and objective."""

  def __init__(self, param_shapes, random_seed, noise_stdev, init_fn=None):
    if random_seed is not None and not isinstance(random_seed,
                                                  (int, np.integer)):
      raise ValueError("random_seed must be an integer or None")
    self.random_seed = (np.random.randint(MAX_SEED) if random_seed is None
                        else int(random_seed))
    self.noise_stdev = noise_stdev
    # Seeding here makes any random data drawn by the subclass reproducible.
    np.random.seed(self.random_seed)
    self.param_shapes = [tuple(int(d) for d in s) for s in param_shapes]
    self.num_params = int(sum(int(np.prod(s)) for s in self.param_shapes))
    self.init_fn = init_fn if init_fn is not None else (lambda _: None)

  def init_tensors(self, seed=None):
    """Initial parameters: standard normal (original l.98-100)."""
    return [tf.random.normal(shape, seed=seed) for shape in self.param_shapes]

  def init_variables(self, seed=None):
    """Initial parameters as ``tf.Variable``s."""
    return [tf.Variable(t) for t in self.init_tensors(seed)]

  def objective(self, parameters, data=None, labels=None):
    """Scalar objective of a list of parameter tensors (and a batch)."""
    raise NotImplementedError

  def objective_and_clean_gradients(self, parameters, data=None,
                                    labels=None):
    """Objective and its noise-free gradients (the TF1 ``tf.gradients``).

    Differentiable with respect to anything ``parameters`` depend on (nested
    tapes); a parameter the objective ignores gets a zero gradient.
    """
    parameters = list(parameters)
    with tf.GradientTape() as tape:
      tape.watch(parameters)
      obj = self.objective(parameters, data, labels)
    grads = tape.gradient(obj, parameters)
    return obj, [tf.zeros_like(p) if g is None else tf.convert_to_tensor(g)
                 for g, p in zip(grads, parameters)]

  def add_gradient_noise(self, grads):
    """``grad + noise_stdev * N(0, 1)``, as the original ``gradients`` did."""
    if not self.noise_stdev:
      return list(grads)
    return [g + self.noise_stdev * tf.random.normal(tf.shape(g))
            for g in grads]

  def objective_and_gradients(self, parameters, data=None, labels=None):
    """Objective and its gradients, with the problem's gradient noise.

    Replaces the original ``gradients(objective, parameters)`` (l.300-330).
    """
    obj, grads = self.objective_and_clean_gradients(parameters, data, labels)
    return obj, self.add_gradient_noise(grads)

  # --- L2O-Entropy curvature regularizers (training problem_generator.py) ---
  # The TF1 code computed these inside ``gradients`` from FLAGS.reg_option;
  # here they are separate methods that delegate to ``problems.curvature``.

  def _loss_fn(self, data=None, labels=None):
    """The batch objective as a function of the parameters only."""
    return lambda params: self.objective(list(params), data, labels)

  def clean_gradients(self, params, data=None, labels=None):
    """Noise-free gradients of the batch objective (the TF1 ``grads``)."""
    return self.objective_and_clean_gradients(params, data, labels)[1]

  def jacob_trace(self, grads):
    """Mean squared gradient entry (training ``Problem.jacob_trace``)."""
    return curvature.jacobian_trace(grads)

  def hessian_trace(self, params, data=None, labels=None, num_samples=10,
                    seed=None, probes=None):
    """Hutchinson Hessian-trace estimate (original ``hessain_trace``)."""
    return curvature.hutchinson_trace(
        self._loss_fn(data, labels), list(params), num_samples=num_samples,
        seed=seed, probes=probes)

  def hessian_eigenvalues(self, params, data=None, labels=None, num_iters=10,
                          top_n=1, seed=None):
    """Sum of the top-n Hessian eigenvalues by power iteration."""
    return curvature.power_iteration_eigenvalues(
        self._loss_fn(data, labels), list(params), num_iters=num_iters,
        top_n=top_n, seed=seed)

  def density(self, params, data=None, labels=None, num_iters=10, num_runs=1,
              seed=None, probes=None):
    """Sum of Lanczos Ritz values, SLQ spectral density."""
    return curvature.lanczos_density(
        self._loss_fn(data, labels), list(params), num_iters=num_iters,
        num_runs=num_runs, seed=seed, probes=probes)

  def regularizer(self, params, data=None, labels=None, reg_option="hessian",
                  hessian_itrs=10, seed=None, grads=None, probes=None):
    """The L2O-Entropy regularizer named by ``reg_option`` (a scalar).

    Port of the FLAGS.reg_option dispatch at the end of the training
    ``Problem.gradients``: 'hessian' -> Hutchinson trace with ``hessian_itrs``
    Rademacher probes, 'hessian-ev' -> top eigenvalue after ``hessian_itrs``
    power iterations, 'hessian-esd' -> one SLQ run of ``hessian_itrs``
    Lanczos steps, 'jacob' -> mean squared clean gradient of the batch.
    ``grads`` are the batch's clean gradients if already computed;
    ``probes`` the Rademacher start vectors to use (drawn with numpy once per
    run, as the original did) instead of drawing them from ``seed``.
    """
    if reg_option not in REG_OPTIONS:
      raise ValueError("Unknown reg_option {!r}; valid options: {}".format(
          reg_option, ", ".join(REG_OPTIONS)))
    params = list(params)
    if reg_option == "jacob":
      if grads is None:
        grads = self.clean_gradients(params, data, labels)
      return self.jacob_trace(grads)
    if reg_option == "hessian":
      return self.hessian_trace(params, data, labels, hessian_itrs, seed,
                                probes=probes)
    if reg_option == "hessian-ev":
      return self.hessian_eigenvalues(params, data, labels, hessian_itrs, 1,
                                      seed)
    return self.density(params, data, labels, hessian_itrs, 1, seed,
                        probes=probes)


REG_OPTIONS = ("hessian", "hessian-ev", "hessian-esd", "jacob")


class Quadratic(Problem):
  """f(x) = 0.5 ||W x - y||^2 with Gaussian W, y."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.0):
    super().__init__([(ndim, 1)], random_seed, noise_stdev)
    self.w = np.random.randn(ndim, ndim).astype("float32")
    self.y = np.random.randn(ndim, 1).astype("float32")

  def objective(self, params, data=None, labels=None):
    return tf.nn.l2_loss(tf.matmul(self.w, params[0]) - self.y)


class SoftmaxClassifier(Problem):
  """Shared softmax cross-entropy classification objective.

  Labels may be class indices (the evaluation code: sparse softmax
  cross-entropy) or one-hot rows (the training code: dense softmax
  cross-entropy); both give the same loss. With two classes the original
  uses a sigmoid cross-entropy of the 0/1 class index on the first logit,
  kept here. The L2O-Entropy training code fed one-hot rows there too, and
  the sigmoid of logits (B,) against labels (B, 2) failed at run time in
  TF1 (incompatible shapes); one-hot rows are mapped to their class index,
  which is what the evaluation (original L2O-Scale) code fed and ran. Rows
  narrower than the logits (np.eye(max + 1) of labels without the top
  classes) are mapped to their index as well.
  """

  def init_tensors(self, seed=None):
    return [tf.random.normal(shape, seed=seed) * 1.2 / np.sqrt(shape[0])
            for shape in self.param_shapes]

  def inference(self, params, data):
    raise NotImplementedError

  def objective(self, params, data, labels):
    logits = self.inference(params, data)
    labels = tf.convert_to_tensor(labels)  # numpy batches too
    n_classes = int(logits.shape[1])
    # One-hot rows (the training feed, float): any row width, since a
    # depth-1 np.eye of an all-zero draw is rows too. An integer column is
    # class indices.
    rows = labels.shape.rank == 2 and (labels.shape[1] != 1 or
                                       labels.dtype.is_floating)
    if rows and n_classes > 2 and labels.shape[1] == n_classes:
      losses = tf.nn.softmax_cross_entropy_with_logits(
          labels=tf.cast(labels, logits.dtype), logits=logits)
      return tf.reduce_mean(losses)
    if rows:
      labels = tf.argmax(labels, 1)
    labels = tf.reshape(labels, [-1])
    if n_classes == 2:
      losses = tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(labels, logits.dtype), logits=logits[:, 0])
    else:
      losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.int32), logits=logits)
    return tf.reduce_mean(losses)

  def argmax(self, logits):
    return tf.cast(tf.argmax(tf.nn.softmax(logits), 1), tf.int32)

  def accuracy(self, params, data, labels):
    """Fraction of correct classifications on the batch."""
    predictions = self.argmax(self.inference(params, data))
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2:
      labels = tf.argmax(labels, 1)
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.reduce_mean(tf.cast(tf.equal(predictions, labels), tf.float32))


class FullyConnected(SoftmaxClassifier):
  """Multi-layer perceptron classifier.

  ``init_tensors`` is N(0, 0.01) as in the L2O-Entropy code ("MODIFY").
  ``glorot_init`` (new in the port, default off): Glorot-uniform weights and
  zero biases instead, the initialisation of a Keras ``Dense`` layer, so
  that meta-training sees the starting points its users' models have.
  """

  def __init__(self, n_features, n_classes, hidden_sizes=(32, 64),
               activation=tf.nn.sigmoid, random_seed=None, noise_stdev=0.0,
               glorot_init=False):
    self.n_features = n_features
    self.activation = activation
    self.glorot_init = glorot_init
    hidden_sizes = tuple(hidden_sizes)
    param_shapes = []
    for ix, sz in enumerate(hidden_sizes + (n_classes,)):
      prev_size = n_features if ix == 0 else hidden_sizes[ix - 1]
      param_shapes.append((prev_size, sz))
      param_shapes.append((sz,))
    super().__init__(param_shapes, random_seed, noise_stdev)

  def init_tensors(self, seed=None):
    if self.glorot_init:
      return [tf.random.uniform(shape, -1., 1., seed=seed) *
              math.sqrt(6. / (shape[0] + shape[1])) if len(shape) == 2
              else tf.zeros(shape) for shape in self.param_shapes]
    return [tf.random.normal(shape, mean=0., stddev=0.01, seed=seed)
            for shape in self.param_shapes]

  def inference(self, params, data):
    features = tf.reshape(data, (-1, self.n_features))
    preactivations = tf.matmul(features, params[0]) + params[1]
    for layer in range(2, len(self.param_shapes), 2):
      net = self.activation(preactivations)
      preactivations = tf.matmul(net, params[layer]) + params[layer + 1]
    return preactivations

  def accuracy(self, params, data, labels):
    """As the original: argmax of activation(logits) (monotone, same argmax)."""
    return super().accuracy(params, data, labels)


class SoftmaxRegression(SoftmaxClassifier):
  """Linear softmax classifier (``SoftmaxRegression``, same in both versions)."""

  def __init__(self, n_features, n_classes, activation=tf.identity,
               random_seed=None, noise_stdev=0.0):
    self.activation = activation
    self.n_features = n_features
    super().__init__([(n_features, n_classes), (n_classes,)], random_seed,
                     noise_stdev)

  def inference(self, params, data):
    features = tf.reshape(data, (-1, self.n_features))
    return tf.matmul(features, params[0]) + params[1]


class SparseSoftmaxRegression(SoftmaxClassifier):
  """Softmax regression on summed embeddings of sparse ids.

  ``data`` holds integer ids in [0, n_classes) (float-typed, as the
  noisy-parity dataset stores them); the embedding table has one row per id
  value, hence its quirky ``(n_classes, n_features)`` shape.
  """

  def __init__(self, n_features, n_classes, activation=tf.identity,
               random_seed=None, noise_stdev=0.0):
    self.activation = activation
    self.n_features = n_features
    param_shapes = [(n_classes, n_features), (n_features, n_classes),
                    (n_classes,)]
    super().__init__(param_shapes, random_seed, noise_stdev)

  def inference(self, params, data):
    all_embeddings, softmax_weights, softmax_bias = params
    embeddings = tf.gather(all_embeddings, tf.cast(data, tf.int32))
    embeddings = tf.reduce_sum(embeddings, 1)
    return tf.matmul(embeddings, softmax_weights) + softmax_bias


class OneHotSparseSoftmaxRegression(SoftmaxClassifier):
  """SparseSoftmaxRegression through one-hot matmuls.

  Same function as :class:`SparseSoftmaxRegression`, but its gradients are
  dense tensors instead of ``IndexedSlices``.
  """

  def __init__(self, n_features, n_classes, activation=tf.identity,
               random_seed=None, noise_stdev=0.0):
    self.activation = activation
    self.n_features = n_features
    self.n_classes = n_classes
    param_shapes = [(n_classes, n_features), (n_features, n_classes),
                    (n_classes,)]
    super().__init__(param_shapes, random_seed, noise_stdev)

  def inference(self, params, data):
    all_embeddings, softmax_weights, softmax_bias = params
    num_ids = tf.shape(data)[1]
    one_hot = tf.one_hot(tf.cast(data, tf.int32), self.n_classes)
    one_hot = tf.reshape(one_hot, [-1, self.n_classes])
    embeddings = tf.matmul(one_hot, all_embeddings)
    embeddings = tf.reshape(embeddings, [-1, num_ids, self.n_features])
    embeddings = tf.reduce_sum(embeddings, 1)
    return tf.matmul(embeddings, softmax_weights) + softmax_bias


def _conv_param_shapes(n_channels, filter_list, with_bias):
  """Conv kernel (and bias) shapes for ``filter_list`` of (h, w, out[, s])."""
  shapes = []
  input_size = n_channels
  for fltr in filter_list:
    shapes.append((fltr[0], fltr[1], input_size, fltr[2]))
    if with_bias:
      shapes.append((fltr[2],))
    input_size = fltr[2]
  return shapes, input_size


class _SmallInitConvNet(SoftmaxClassifier):
  """Conv nets are initialised N(0, 0.01) in every version of the code.

  Parameters: the conv kernels (and, with ``conv_bias``, their biases) of
  ``filter_list``, then the dense layer [affine_size, n_classes] and its
  bias. ``affine_size`` defaults to the flattened size of the last conv
  output at the input's resolution (stride-1 SAME convolutions).
  """

  conv_bias = True

  def __init__(self, image_shape, n_classes, filter_list,
               activation=tf.nn.relu, random_seed=None, noise_stdev=0.0,
               affine_size=None):
    n_channels, px, py = image_shape
    self.activation = activation
    param_shapes, input_size = _conv_param_shapes(n_channels, filter_list,
                                                  with_bias=self.conv_bias)
    self.affine_size = (input_size * px * py if affine_size is None
                        else affine_size)
    param_shapes += [(self.affine_size, n_classes), (n_classes,)]
    super().__init__(param_shapes, random_seed, noise_stdev)

  def init_tensors(self, seed=None):
    return [tf.random.normal(shape, mean=0., stddev=0.01, seed=seed)
            for shape in self.param_shapes]


class ConvNet(_SmallInitConvNet):
  """The TRAINING code's convnet (training problem_generator.py).

  Each layer is a stride-1 SAME convolution + bias + activation, then a dense
  layer on the flattened maps. Quirk kept: the activation is also applied to
  the logits (``activation(x W + b)``), as the L2O-Entropy training code does.
  Used by the training sets ``mnist_conv_problems``/``cifar10_conv_problems``
  and by ``test_problems``. The evaluation code's ``ConvNet`` is
  :class:`ConvNetEval`.
  """

  def inference(self, params, data):
    conv_params, (output_w, output_b) = params[:-2], params[-2:]
    net = data
    for i in range(0, len(conv_params), 2):
      net = tf.nn.conv2d(net, conv_params[i], strides=[1] * 4, padding="SAME")
      net = self.activation(tf.nn.bias_add(net, conv_params[i + 1]))
    flattened = tf.reshape(net, (-1, self.affine_size))
    return self.activation(tf.matmul(flattened, output_w) + output_b)


class ConvNetOrig(_SmallInitConvNet):
  """The evaluation code's ``ConvNetOrig``.

  The Google original's convnet: bias-free stride-1 SAME convolutions with
  activation, then a linear dense layer (no activation on the logits).
  Used by ``test_mnist_conv_orig_problems``.
  """

  conv_bias = False

  def inference(self, params, data):
    net = data
    for w_conv in params[:-2]:
      net = self.activation(
          tf.nn.conv2d(net, w_conv, strides=[1] * 4, padding="SAME"))
    flattened = tf.reshape(net, (-1, self.affine_size))
    return tf.matmul(flattened, params[-2]) + params[-1]


BATCH_NORM_EPSILON = 1e-3  # tf.layers.batch_normalization's default


def _batch_norm(x, training):
  """Parameter-free ``tf.layers.batch_normalization`` at its initial state.

  gamma=1 and beta=0 are never trained in the original (they are not among
  the optimizee's parameters), so only the statistics matter. ``training``:
  normalise with the batch mean/variance over N, H, W. Otherwise: with the
  initial moving statistics (mean 0, variance 1), which the original never
  updates, i.e. ``x / sqrt(1 + eps)``.
  """
  if training:
    mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
  else:
    mean, variance = 0., 1.
  return (x - mean) * tf.math.rsqrt(variance + BATCH_NORM_EPSILON)


class ConvNetEval(_SmallInitConvNet):
  """The EVALUATION code's ``ConvNet``, renamed.

  Name mapping: evaluation ``pg.ConvNet`` == this class; training
  ``pg.ConvNet`` == :class:`ConvNet`. Each layer: VALID convolution with the
  stride ``filter_list[0][3]`` (1 if absent; the first filter's stride is
  used for every layer, as in the original), bias, batch norm, activation,
  2x2 max-pool; then activation(dense). ``affine_size`` must equal the
  flattened size of the last pooled map (512 for the MNIST set, 32 for
  CIFAR-10).

  Batch norm is a pure function (see :func:`_batch_norm`): ``mode="train"``
  uses batch statistics, the default ``mode="test"`` the initial moving
  statistics, as ``tf.layers.batch_normalization(training=mode == "train")``
  computes at its initial state. The original reshapes to a hard-coded batch
  of 128 before the dense layer; here the batch dimension is inferred (-1),
  identical for the batch size of 128 that its problem sets use.
  """

  def __init__(self, image_shape, n_classes, filter_list,
               activation=tf.nn.relu, random_seed=None, noise_stdev=0.0,
               affine_size=512, mode="test"):
    self.mode = mode
    self.stride = filter_list[0][3] if len(filter_list[0]) > 3 else 1
    super().__init__(image_shape, n_classes, filter_list, activation,
                     random_seed, noise_stdev, affine_size=affine_size)

  def inference(self, params, data):
    training = self.mode == "train"
    strides = [1, self.stride, self.stride, 1]
    conv_params, (output_w, output_b) = params[:-2], params[-2:]
    net = data
    for i in range(0, len(conv_params), 2):
      net = tf.nn.conv2d(net, conv_params[i], strides=strides,
                         padding="VALID")
      net = tf.nn.bias_add(net, conv_params[i + 1])
      net = self.activation(_batch_norm(net, training))
      net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding="VALID")
    flattened = tf.reshape(net, (-1, self.affine_size))
    return self.activation(tf.matmul(flattened, output_w) + output_b)


class Bowl(Problem):
  """2-D quadratic bowl 0.5||A x||^2, A = sqrt(diag(c, 1)) R(angle).

  The Hessian is A^T A with eigenvalues ``condition_number`` and 1.
  """

  def __init__(self, condition_number, angle=0.0, random_seed=None,
               noise_stdev=0.0):
    assert condition_number > 0, "Condition number must be positive."
    super().__init__([(2, 1)], random_seed, noise_stdev)
    self.condition_number = condition_number
    self.angle = angle
    self._build_matrix(condition_number, angle)

  def _build_matrix(self, condition_number, angle):
    hessian = np.array([[condition_number, 0.], [0., 1.]], dtype="float32")
    rotation = np.array([[np.cos(angle), -np.sin(angle)],
                         [np.sin(angle), np.cos(angle)]])
    self.matrix = np.sqrt(hessian).dot(rotation)

  def objective(self, params, data=None, labels=None):
    mtx = tf.constant(self.matrix, dtype=tf.float32)
    return tf.nn.l2_loss(tf.matmul(mtx, params[0]))

  def surface(self, xlim=5, ylim=5, n=50):
    """Objective on an n x n mesh (numpy, as the original)."""
    xm, ym = _mesh(xlim, ylim, n)
    pts = np.vstack([xm.ravel(), ym.ravel()])
    zm = 0.5 * np.linalg.norm(self.matrix.dot(pts), axis=0) ** 2
    return xm, ym, zm.reshape(n, n)


class Problem2D(Problem):
  """Base of the 2-D test functions: one parameter of shape (2,)."""

  def __init__(self, random_seed=None, noise_stdev=0.0):
    super().__init__([(2,)], random_seed, noise_stdev)

  def surface(self, n=50, xlim=5, ylim=5):
    """Objective over a 2-D mesh (the TF1 placeholder trick, run eagerly)."""
    xm, ym = _mesh(xlim, ylim, n)
    points = tf.constant(np.stack([xm, ym]), dtype=tf.float32)
    zm = self.objective([points]).numpy()
    return xm, ym, zm

  @staticmethod
  def _xy(params):
    return tf.split(params[0], 2, axis=0)


def _uniform_init(minval, maxval):
  """init_tensors drawing every parameter from U(minval, maxval)."""
  def init_tensors(self, seed=None):
    return [tf.random.uniform(shape, minval=minval, maxval=maxval, seed=seed)
            for shape in self.param_shapes]
  init_tensors.__doc__ = "Uniform U({}, {}) initial point.".format(minval,
                                                                   maxval)
  return init_tensors


class Rosenbrock(Problem2D):
  """(1-x)^2 + 100 (y-x^2)^2, minimum 0 at (1, 1)."""

  init_tensors = _uniform_init(-5., 10.)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    return tf.squeeze((1 - x)**2 + 100 * (y - x**2)**2)


class Saddle(Problem2D):
  """x^2 - y^2; standard-normal init."""

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    return tf.squeeze(x**2 - y**2)


class LogSumExp(Problem2D):
  """log(e^(x+3y-.1) + e^(x-3y-.1) + e^(-x-.1) + 1)."""

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    return tf.squeeze(tf.math.log(tf.exp(x + 3. * y - 0.1) +
                                  tf.exp(x - 3. * y - 0.1) +
                                  tf.exp(-x - 0.1) + 1.0))


class Ackley(Problem2D):
  """Ackley's function, minimum 0 at the origin."""

  init_tensors = _uniform_init(-32.768, 32.768)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    obj = (-20 * tf.exp(-0.2 * tf.sqrt(0.5 * (x**2 + y**2))) -
           tf.exp(0.5 * (tf.cos(2 * np.pi * x) + tf.cos(2 * np.pi * y))) +
           tf.exp(1.0) + 20.)
    return tf.squeeze(obj)


class Beale(Problem2D):
  """Beale's function, minimum 0 at (3, 0.5)."""

  init_tensors = _uniform_init(-4.5, 4.5)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    obj = ((1.5 - x + x * y)**2 + (2.25 - x + x * y**2)**2 +
           (2.625 - x + x * y**3)**2)
    return tf.squeeze(obj)


class Booth(Problem2D):
  """Booth's function, minimum 0 at (1, 3)."""

  init_tensors = _uniform_init(-10., 10.)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    return tf.squeeze((x + 2 * y - 7)**2 + (2 * x + y - 5)**2)


class StyblinskiTang(Problem2D):
  """0.5 sum(x^4 - 16x^2 + 5x) + 80."""

  init_tensors = _uniform_init(-5., 5.)

  def objective(self, params, data=None, labels=None):
    coords = tf.split(params[0], 2, axis=0)
    obj = 0.5 * tf.reduce_sum([x**4 - 16 * x**2 + 5 * x for x in coords],
                              0) + 80.
    return tf.squeeze(obj)


class Matyas(Problem2D):
  """0.26 (x^2 + y^2) - 0.48 x y, minimum 0 at the origin."""

  init_tensors = _uniform_init(-10., 10.)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    return tf.squeeze(0.26 * (x**2 + y**2) - 0.48 * x * y)


class Branin(Problem2D):
  """Branin's function: three global minima of 0.397887."""

  def init_tensors(self, seed=None):
    """x1 ~ U(-5, 10), x2 ~ U(0, 15), as the original."""
    x1 = tf.random.uniform((1,), minval=-5., maxval=10., seed=seed)
    x2 = tf.random.uniform((1,), minval=0., maxval=15., seed=seed)
    return [tf.concat([x1, x2], 0)]

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    a, r, s = 1., 6., 10.
    b = 5.1 / (4. * np.pi**2)
    c = 5 / np.pi
    t = 1 / (8. * np.pi)
    obj = a * (y - b * x**2 + c * x - r)**2 + s * (1 - t) * tf.cos(x) + s
    return tf.squeeze(obj)


class Michalewicz(Problem2D):
  """Michalewicz's function with m=5 (steep ridges), shifted by +2."""

  init_tensors = _uniform_init(0., np.pi)

  def objective(self, params, data=None, labels=None):
    x, y = self._xy(params)
    m = 5
    obj = 2. - (tf.sin(x) * tf.sin(x**2 / np.pi)**(2 * m) +
                tf.sin(y) * tf.sin(2 * y**2 / np.pi)**(2 * m))
    return tf.squeeze(obj)


def make_rosenbrock_loss_and_init(device=None):
  """Rosenbrock as a (make_loss, make_init_fn) pair.

  The original builds tf.Variables ``x``, ``y`` and a constant ``c``=100 for
  :class:`problems.model_adapter.ModelAdapter`. Here ``make_loss()`` returns
  ``(param_shapes, loss_fn)`` with ``loss_fn(params)`` pure, and
  ``make_init_fn(param_shapes)`` returns ``init_tensors(seed)`` drawing from
  glorot-uniform, ``tf.get_variable``'s default initializer. ``device`` is
  kept for signature compatibility (CPU-only port).
  """
  del device

  def make_rosenbrock_loss():
    c = tf.constant([100.0])

    def loss_fn(params):
      x, y = [tf.convert_to_tensor(p, tf.float32) for p in params]
      return tf.squeeze((1 - x)**2 + c * (y - x**2)**2)
    return [(1,), (1,)], loss_fn

  def make_init_fn(param_shapes):
    def init_tensors(seed=None):
      init = tf.keras.initializers.GlorotUniform(seed=seed)
      return [init(shape) for shape in param_shapes]
    return init_tensors

  return make_rosenbrock_loss, make_init_fn


class Rescale(Problem):
  """Wraps a problem so the optimizer sees parameters x * scale.

  Init is the inner problem's init times ``scale``; the objective divides
  by ``scale`` and forwards data and labels.
  """

  def __init__(self, problem_spec, scale=10., noise_stdev=0.0):
    self.problem = problem_spec.build()
    self.param_shapes = self.problem.param_shapes
    self.scale = scale
    super().__init__(self.param_shapes, random_seed=None,
                     noise_stdev=noise_stdev)

  def init_tensors(self, seed=None):
    return [t * self.scale for t in self.problem.init_tensors(seed=seed)]

  def objective(self, params, data=None, labels=None):
    return self.problem.objective([t / self.scale for t in params], data,
                                  labels)


class SumTask(Problem):
  """Sum of several problems over the concatenated parameter lists.

  As the original, sub-objectives get no data: only data-free problems make
  sense here.
  """

  def __init__(self, problem_specs, noise_stdev=0.0):
    self.problems = [ps.build() for ps in problem_specs]
    self.param_shapes = []
    for prob in self.problems:
      self.param_shapes += list(prob.param_shapes)
    super().__init__(self.param_shapes, random_seed=None,
                     noise_stdev=noise_stdev)

  def init_tensors(self, seed=None):
    tensors = []
    for prob in self.problems:
      tensors += prob.init_tensors(seed=seed)
    return tensors

  def objective(self, params, data=None, labels=None):
    obj = 0.
    index = 0
    for prob in self.problems:
      num_params = len(prob.param_shapes)
      obj += prob.objective(params[index:index + num_params])
      index += num_params
    return obj


class IsotropicQuadratic(Problem):
  """Sum of squares of all parameters; no own constructor."""

  def objective(self, params, data=None, labels=None):
    return sum([tf.reduce_sum(param**2) for param in params])


class Norm(Problem):
  """(sum |W x - y|^p)^(1/p) with Gaussian W, y."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.0, norm_power=2.):
    super().__init__([(ndim, 1)], random_seed, noise_stdev)
    self.w = np.random.randn(ndim, ndim).astype("float32")
    self.y = np.random.randn(ndim, 1).astype("float32")
    self.norm_power = norm_power

  def objective(self, params, data=None, labels=None):
    diff = tf.matmul(self.w, params[0]) - self.y
    exp = 1. / self.norm_power
    return tf.reduce_sum((tf.abs(diff) + EPSILON)**self.norm_power)**exp


class LogObjective(Problem):
  """log(f + eps) - log(eps) of a wrapped problem.

  As the original, no ``init_tensors`` override: parameters start standard
  normal whatever the inner problem's init.
  """

  def __init__(self, problem_spec):
    self.problem = problem_spec.build()
    self.param_shapes = self.problem.param_shapes
    super().__init__(self.param_shapes, random_seed=None, noise_stdev=0.0)

  def objective(self, params, data=None, labels=None):
    problem_obj = self.problem.objective(params, data, labels)
    return tf.math.log(problem_obj + EPSILON) - tf.math.log(EPSILON)


class SparseProblem(Problem):
  """Wrapped problem whose gradient entries are zeroed w.p. zero_probability.

  Port of the original class: the TF1 ``gradients`` override becomes
  ``add_gradient_noise``. Non-zeroed entries get the usual gradient noise.
  Init is the base standard normal (no override, as the original).
  """

  def __init__(self, problem_spec, zero_probability=0.99, random_seed=None,
               noise_stdev=0.0):
    self.problem = problem_spec.build()
    self.param_shapes = self.problem.param_shapes
    self.zero_prob = zero_probability
    super().__init__(self.param_shapes, random_seed=random_seed,
                     noise_stdev=noise_stdev)

  def objective(self, parameters, data=None, labels=None):
    return self.problem.objective(parameters, data, labels)

  def add_gradient_noise(self, grads):
    """Zeroes each entry with probability ``zero_probability``, adds the
    usual noise to the others (the original's ``gradients`` override), so
    meta-testing and meta-training unrolls both see sparse gradients."""
    new_grads = []
    for grad in grads:
      mask = tf.greater(self.zero_prob, tf.random.uniform(tf.shape(grad)))
      noisy = grad + self.noise_stdev * tf.random.normal(tf.shape(grad))
      new_grads.append(tf.where(mask, tf.zeros_like(grad), noisy))
    return new_grads


class DependencyChain(Problem):
  """x0^2 + sum x_{i+1}^2 / (x_i^2 + eps): zero the params in order.

  Port of the original class (the dataset it is paired with is unused).
  """

  def __init__(self, ndim, random_seed=None, noise_stdev=0.):
    self.ndim = ndim
    super().__init__([(ndim + 1,)], random_seed, noise_stdev)

  def objective(self, params, data=None, labels=None):
    x = params[0]
    terms = x[0]**2 + x[1:]**2 / (x[:-1]**2 + EPSILON)
    return tf.reduce_sum(terms)


class MinMaxWell(Problem):
  """max(x^2) + 1/min(x^2) - 2: only two coordinates get gradient."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.):
    self.ndim = ndim
    super().__init__([(ndim,)], random_seed, noise_stdev)

  def objective(self, params, data=None, labels=None):
    params_sqr = params[0]**2
    epsilon = 1e-12
    return (tf.reduce_max(params_sqr) + 1. / tf.reduce_min(params_sqr) - 2. +
            epsilon)


class OutwardSnake(Problem):
  """A winding path out to infinity, probed by binary data."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.):
    self.ndim = ndim
    super().__init__([(ndim,)], random_seed, noise_stdev)

  def objective(self, params, data, labels=None):
    x = params[0]
    data = tf.cast(data, tf.float32)
    radius = tf.sqrt(tf.reduce_sum(x**2))
    rad_loss = tf.reduce_sum(1. / (radius + 1e-6) * data[:, 0])
    sin_dist = x[1:] - tf.cos(x[:-1]) * np.pi
    sin_loss = tf.reduce_sum((sin_dist * data[:, 1:])**2)
    return rad_loss + sin_loss


class ProjectionQuadratic(Problem):
  """sum (x * d)^2 over data directions d; minimum at 0."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.):
    super().__init__([(1, ndim)], random_seed, noise_stdev)

  def objective(self, params, data, labels=None):
    return tf.reduce_sum((params[0] * tf.cast(data, tf.float32))**2)


class SumOfQuadratics(Problem):
  """sum ||x - d||^2 - sum ||d||^2 + eps over symmetric data."""

  def __init__(self, ndim, random_seed=None, noise_stdev=0.):
    super().__init__([(1, ndim)], random_seed, noise_stdev)

  def objective(self, params, data, labels=None):
    epsilon = 1e-12
    data = tf.cast(data, tf.float32)
    return (tf.reduce_sum((params[0] - data)**2) - tf.reduce_sum(data**2) +
            epsilon)


class MatMulAlgorithm(Problem):
  """Find a rank-k bilinear algorithm for n x n matrix products.

  Parameters theta_a, theta_b of shape (n^2, k); theta_c is solved by least
  squares, and the objective is the squared error over all n^4 pairs of
  one-hot matrices. Zero iff the parameters define a valid algorithm.
  """

  def __init__(self, n, k):
    assert isinstance(n, int), "n must be an integer"
    assert isinstance(k, int), "k must be an integer"
    assert n >= 2, "Must have n >= 2"
    assert n**2 <= k <= n**3, "Must have n**2 <= k <= n**3"
    super().__init__([(n**2, k), (n**2, k)], random_seed=None,
                     noise_stdev=0.0)
    self.n = n
    self.k = k
    onehots = np.identity(n**2).reshape(n**2, n, n)
    a_3d = np.repeat(onehots, n**2, axis=0)
    b_3d = np.tile(onehots, [n**2, 1, 1])
    c_3d = np.matmul(a_3d, b_3d)
    self.a = a_3d.reshape(n**4, n**2).astype("float32")
    self.b = b_3d.reshape(n**4, n**2).astype("float32")
    self.c = c_3d.reshape(n**4, n**2).astype("float32")

  def init_tensors(self, seed=None):
    """Gaussian columns normalised to unit L2 norm."""
    def _param_initializer(shape):
      x = tf.random.normal(shape, dtype=tf.float32, seed=seed)
      return tf.transpose(tf.nn.l2_normalize(tf.transpose(x), 1))
    return [_param_initializer(shape) for shape in self.param_shapes]

  def objective(self, parameters, data=None, labels=None):
    theta_a, theta_b = parameters[0], parameters[1]
    p = tf.matmul(self.a, theta_a) * tf.matmul(self.b, theta_b)
    p_trans = tf.transpose(p)
    p_inv = tf.matmul(tf.linalg.inv(tf.matmul(p_trans, p)), p_trans)
    theta_c = tf.matmul(p_inv, self.c)
    c_hat = tf.matmul(p, theta_c)
    return tf.reduce_sum((c_hat - self.c)**2)


class Lasso(Problem):
  """0.5 ||W x - y||^2 + lambda_ ||x||_1, Gaussian W, y.

  Fix: the original calls ``tf.nn.l1_loss``, which TensorFlow never had; the
  docstring's ``lamada * ||x||_1`` (sum of absolute values) is used.
  """

  def __init__(self, ndim, lambda_=1, random_seed=None, noise_stdev=0.0):
    super().__init__([(ndim, 1)], random_seed, noise_stdev)
    self.lambda_ = lambda_
    self.w = np.random.randn(ndim, ndim).astype("float32")
    self.y = np.random.randn(ndim, 1).astype("float32")

  def objective(self, params, data=None, labels=None):
    return (tf.nn.l2_loss(tf.matmul(self.w, params[0]) - self.y) +
            self.lambda_ * tf.reduce_sum(tf.abs(params[0])))


class Rastrigin(Problem):
  """Generalised Rastrigin 0.5||A x - b||^2 - alpha c^T cos(2 pi x) + const.

  Port of the original class. The original cannot run: it reads the
  undefined ``self.C`` with a batched transpose ``perm=[0, 2, 1]`` and takes
  ``cos`` of the parameter *list*. It was evidently copied from the batched
  L2O-DM Rastrigin; the fix uses the drawn ``self.c`` (ndim, 1), a plain
  transpose and ``x[0]``. The constant ``alpha * ndim * ndim`` is kept as
  written (it only shifts the value). A, b, c are drawn in the original order.
  """

  def __init__(self, ndim, alpha=10, random_seed=None, noise_stdev=0.0):
    super().__init__([(ndim, 1)], random_seed, noise_stdev)
    self.a = np.random.randn(ndim, ndim).astype("float32")
    self.b = np.random.randn(ndim, 1).astype("float32")
    self.c = np.random.randn(ndim, 1).astype("float32")
    self.alpha = alpha
    self.ndim = ndim

  def objective(self, x, data=None, labels=None):
    residual = tf.matmul(self.a, x[0]) - self.b
    sq_norm = tf.reduce_sum(residual**2)
    c_cos = tf.squeeze(tf.matmul(self.c, tf.cos(2 * np.pi * x[0]),
                                 transpose_a=True))
    return tf.reduce_mean(0.5 * sq_norm - self.alpha * c_cos +
                          self.alpha * self.ndim * self.ndim)


def matmul_problem_sequence(n, k_min, k_max):
  """MatMulAlgorithm specs for k in [k_min, k_max]."""
  return [(_Spec(MatMulAlgorithm, (n, k), {}), None, None)
          for k in range(k_min, k_max + 1)]


def init_fixed_variables(arrays):
  """Parameters as tf.Variables from fixed arrays."""
  return [tf.Variable(np.asarray(arr).astype("float32")) for arr in arrays]


def _mesh(xlim, ylim, n):
  """n x n meshgrid over (-xlim, xlim) x (-ylim, ylim)."""
  return np.meshgrid(np.linspace(-xlim, xlim, n), np.linspace(-ylim, ylim, n))
