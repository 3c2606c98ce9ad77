"""Groups of problems for meta-training and meta-testing (``problem_sets.py``).

Every function returns a list of ``(Spec, dataset_or_None, batch_size)``,
except :func:`test_problems` whose tuples add a name and an init (as the
original). Functions build their datasets when called, never at import.
Data-backed sets take ``data_dir`` (new; passed to :mod:`problems.datasets`).

Sources in VITA-Group/Open-L2O, Model_Free_L2O/L2O-Entropy/L2O-ScalewHessian/:

* TRAINING sets (``L2O-Scale-Training/problems/problem_sets.py``, used by
  ``metarun.py`` through its problem-set flag): every function from
  :func:`quadratic_problems` to :func:`rastrigin_problems` below, including
  the training ``mnist_conv_problems``/``cifar10_conv_problems`` (training
  :class:`~problems.problem_generator.ConvNet`, train splits, batch 64) and
  ``mnist_mlp_problems``.
* EVALUATION sets (``L2O-Scale-Evaluation/problems/problem_sets.py``, used by
  ``metatest.py``): the ``test_mnist_*``/``test_cifar10_*`` functions, on the
  test splits. Their ``pg.ConvNet`` is the evaluation convnet, here
  :class:`~problems.problem_generator.ConvNetEval`. The evaluation file also
  repeats the training sets verbatim (same names, same content, including
  ``mnist_mlp_problems``), so one module serves both; there is no name whose
  content differs between the two files.

The original names start with ``test_``; import this module (not its
functions) into pytest files so pytest does not collect them.

Why long: the port keeps every problem set of both originals in the original's
module, under the original's names.
"""

import numpy as np
import tensorflow as tf

from problems import datasets
from problems import model_adapter
from problems import problem_generator as pg
from problems import problem_spec

_Spec = problem_spec.Spec


def _mnist(train, data_dir):
  return datasets.mnist(train=train, data_dir=data_dir)


# --- training problem sets (L2O-ScalewHessian Training problem_sets.py) ----

def quadratic_problems():
  return [(_Spec(pg.Quadratic, (n,), {}), None, None)
          for n in (20, 25, 50, 100)]


def mnist_conv_problems(data_dir=None):
  """Training convnet (3x3x8, 5x5x8, relu) on MNIST train, batch 64."""
  return [(_Spec(pg.ConvNet, ((1, 28, 28), 10, [(3, 3, 8), (5, 5, 8)]),
                 {"activation": tf.nn.relu}), _mnist(True, data_dir), 64)]


def cifar10_conv_problems(data_dir=None):
  """Training convnet (3x3x16, 5x5x16, relu) on CIFAR-10 train, batch 64."""
  return [(_Spec(pg.ConvNet, ((3, 32, 32), 10, [(3, 3, 16), (5, 5, 16)]),
                 {"activation": tf.nn.relu}),
           datasets.cifar10(train=True, data_dir=data_dir), 64)]


def mnist_mlp_problems(data_dir=None):
  """MLP 784-20-10 sigmoid on MNIST train, batch 128 (both files)."""
  return [(_Spec(pg.FullyConnected, (784, 10),
                 {"hidden_sizes": (20,), "activation": tf.nn.sigmoid}),
           _mnist(True, data_dir), 128)]


# MNIST MLPs of several widths, depths, activations and batch sizes
# (hidden sizes, activation, batch), Glorot-initialised as Keras Dense layers
# are. New in the port: the MNIST part of the generalist's training
# distribution (recipe ``generalist``). Three of them have the models of
# task-suite benchmark tasks (logistic regression, 784-20-10 sigmoid,
# 784-64-64-10 tanh: logreg_mnist, mlp_sigmoid_mnist, mlp_tanh_mnist), which
# is why the benchmark's verdict for l2o-generalist is also given without
# those tasks.
MNIST_MLP_FAMILY = (
    ((20,), "sigmoid", 128), ((64,), "tanh", 64), ((128,), "relu", 128),
    ((32, 32), "relu", 32), ((64, 64), "tanh", 128), ((32,), "elu", 256),
    ((100,), "sigmoid", 64), ((48, 48), "elu", 64), ((), None, 128),
    ((16, 16, 16), "relu", 128), ((256,), "relu", 64), ((40, 40), "sigmoid",
                                                          256),
    ((80,), "tanh", 32), ((24, 24), "tanh", 64), ((128, 64), "relu", 256),
    ((50,), "softplus", 128))

# Two MNIST MLPs outside that family: the generalist's --selection_set.
MNIST_MLP_SELECTION = (((48, 24), "relu", 64), ((96,), "tanh", 128))


def _mnist_mlps(family, data_dir):
  train = _mnist(True, data_dir)
  return [(_Spec(pg.FullyConnected, (784, 10),
                 {"hidden_sizes": hidden,
                  "activation": getattr(tf.nn, activation or "relu"),
                  "glorot_init": True}), train, batch)
          for hidden, activation, batch in family]


def mnist_mlp_family_problems(data_dir=None):
  """MNIST MLPs varied in width, depth, activation and batch size
  (:data:`MNIST_MLP_FAMILY`), Glorot-initialised (new in the port)."""
  return _mnist_mlps(MNIST_MLP_FAMILY, data_dir)


def mnist_mlp_selection_problems(data_dir=None):
  """Two MNIST MLPs outside :data:`MNIST_MLP_FAMILY`
  (:data:`MNIST_MLP_SELECTION`), for ``--selection_set`` (new in the
  port)."""
  return _mnist_mlps(MNIST_MLP_SELECTION, data_dir)


def quadratic_problems_noisy():
  """One noise-free member, for historical reasons (as the original)."""
  return [(_Spec(pg.Quadratic, (n,), {"noise_stdev": s}), None, None)
          for n, s in ((20, 0.5), (25, 0.0), (50, 1.0), (100, 2.0))]


def quadratic_problems_large():
  return [(_Spec(pg.Quadratic, (n,), {}), None, None)
          for n in (784, 1024, 2048)]


def _bowls(noise):
  return [
      (_Spec(pg.Bowl, (0.1,), {"noise_stdev": noise}), None, None),
      (_Spec(pg.Bowl, (1.0,), {"noise_stdev": noise}), None, None),
      (_Spec(pg.Bowl, (5.0,), {"noise_stdev": noise}), None, None),
      (_Spec(pg.Bowl, (5.0,), {"noise_stdev": noise, "angle": np.pi / 4.}),
       None, None),
  ]


def bowl_problems():
  return _bowls(0.0)


def bowl_problems_noisy():
  return _bowls(0.1)


def sparse_softmax_2_class_sparse_problems():
  """Quirk kept: the dataset has 5 samples (n_samples=5) for batches of 23;
  as the original's slice past the end made them, every batch is the 5
  samples, reshuffled (:func:`problems.datasets.batch_indices`)."""
  return [(_Spec(pg.SparseSoftmaxRegression, (5, 2), {"noise_stdev": 0.0}),
           datasets.noisy_parity_class(5, random_seed=123), 23)]


def one_hot_sparse_softmax_2_class_sparse_problems():
  return [(_Spec(pg.OneHotSparseSoftmaxRegression, (5, 2),
                 {"noise_stdev": 0.0}),
           datasets.noisy_parity_class(5, random_seed=123), 23)]


def _softmax_2_class(noises):
  configs = ((10, 2.0, 100), (100, 1.0, 50), (200, 1.5, 20), (256, 1.5, 100))
  sets = []
  for (n, sep, batch), noise in zip(configs, noises):
    kwargs = {} if noise is None else {"noise_stdev": noise}
    sets.append((_Spec(pg.SoftmaxRegression, (n, 2), kwargs),
                 datasets.random(n, 1000, random_seed=123, sep=sep), batch))
  return sets


def softmax_2_class_problems():
  return _softmax_2_class((None, None, None, None))


def softmax_2_class_problems_noisy():
  return _softmax_2_class((0.5, 0.1, 0.1, 0.5))


_TEST_FUNCTIONS = (pg.Ackley, pg.Beale, pg.Booth, pg.Branin, pg.LogSumExp,
                   pg.Matyas, pg.Michalewicz, pg.Rosenbrock, pg.StyblinskiTang)


def optimization_test_problems():
  return [(_Spec(cls, (), {}), None, None) for cls in _TEST_FUNCTIONS]


def optimization_test_problems_noisy():
  return [(_Spec(cls, (), {"noise_stdev": 1.}), None, None)
          for cls in _TEST_FUNCTIONS]


_MLP_2_CLASS = [  # (n_features, hidden_sizes, batch_size)
    (8, (8, 5), 10), (12, (8, 5, 3), 200), (5, (4, 4, 4, 4), 100),
    (11, (4, 5, 6), 64), (9, (8,), 128), (7, (8, 5), 16),
    (8, (32, 64), 10), (12, (16, 8, 3), 200), (5, (8, 8, 8, 8), 100),
    (11, (10, 12, 12), 64), (9, (32,), 128), (7, (32, 64), 16),
]


def _mlp_spec(n_features, hidden_sizes):
  return _Spec(pg.FullyConnected, (n_features, 2),
               {"hidden_sizes": hidden_sizes, "activation": tf.nn.sigmoid})


def fully_connected_random_2_class_problems():
  return [(_mlp_spec(n, hidden), datasets.random_mlp(n, 1000), batch)
          for n, hidden, batch in _MLP_2_CLASS]


def matmul_problems():
  return sum([pg.matmul_problem_sequence(2, 5, 8),
              pg.matmul_problem_sequence(3, 19, 24)], [])


def _wrapped_quadratics_and_bowls(wrapper):
  inner = ([_Spec(pg.Quadratic, (n,), {}) for n in (20, 50, 100)] +
           [_Spec(pg.Bowl, (c,), {}) for c in (0.1, 1.0, 5.0)])
  return [(_Spec(wrapper, [spec], {}), None, None) for spec in inner]


def log_objective_problems():
  return _wrapped_quadratics_and_bowls(pg.LogObjective)


def sparse_gradient_problems():
  return _wrapped_quadratics_and_bowls(pg.SparseProblem)


def sparse_gradient_problems_mlp():
  return [(_Spec(pg.SparseProblem, [_mlp_spec(n, hidden)], {}),
           datasets.random_mlp(n, 1000), batch)
          for n, hidden, batch in _MLP_2_CLASS[:3]]


def rescale_problems():
  norms = [(2.5, 0.123), (1.5, 8), (2., 50), (3., 200), (1., 1000)]
  quads = [(20, 0.1), (25, 10.), (50, 350.), (100, 132)]
  return ([(_Spec(pg.Rescale, [_Spec(pg.Norm, (18,), {"norm_power": p})],
                  {"scale": s}), None, None) for p, s in norms] +
          [(_Spec(pg.Rescale, [_Spec(pg.Quadratic, (n,), {})], {"scale": s}),
            None, None) for n, s in quads])


def norm_problems():
  """Norms < 1 give NaN gradients early in training (original comment)."""
  return [(_Spec(pg.Norm, (n,), {"norm_power": p}), None, None)
          for n, p in ((27, 1.), (25, 2.), (22, 3.))]


def norm_problems_noisy():
  return [(_Spec(pg.Norm, (n,), {"noise_stdev": .1, "norm_power": p}),
           None, None) for n, p in ((19, 1.), (26, 2.), (23, 3.))]


def _two_d_specs():
  """The nine 2-D functions in the order of the original SumTask lists."""
  return [_Spec(cls, (), {}) for cls in (
      pg.Rosenbrock, pg.LogSumExp, pg.Ackley, pg.Beale, pg.Booth,
      pg.StyblinskiTang, pg.Matyas, pg.Branin, pg.Michalewicz)]


def _sum(specs):
  return (_Spec(pg.SumTask, [specs], {}), None, None)


def sum_problems():
  quad = lambda n: _Spec(pg.Quadratic, (n,), {})
  return [
      _sum([quad(n) for n in (11, 3, 9, 7, 5, 13, 12)]),
      _sum([_Spec(pg.Norm, (18,), {"norm_power": 3}), quad(25),
            _Spec(pg.Rosenbrock, (), {})]),
      _sum(_two_d_specs()),
      _sum(_two_d_specs() + [quad(5), quad(13)]),
      _sum([quad(11), quad(3)]),
      _sum(_two_d_specs()[:3]),
  ]


def sum_problems_noisy():
  return [
      _sum([_Spec(pg.Quadratic, (n,), {"noise_stdev": 0.1})
            for n in (11, 3, 9, 7, 5, 13, 12)]),
      _sum(_two_d_specs() + [_Spec(pg.Quadratic, (5,), {}),
                             _Spec(pg.Quadratic, (13,), {"noise_stdev": 0.5})]),
  ]


_CHAIN_CONFIGS = [  # (ndim, n_samples, batch_size)
    (20, 1000, 100), (12, 200, 10), (56, 5000, 100), (64, 1000, 50),
    (13, 10000, 50), (20, 1000, 128), (12, 300, 16), (56, 5000, 128),
    (64, 1000, 64), (13, 10000, 32),
]

_SYMMETRIC_CONFIGS = [  # (ndim, n_samples, batch_size)
    (20, 1000, 100), (12, 100, 10), (56, 5000, 100), (64, 1000, 50),
    (13, 10000, 50), (20, 1000, 128), (12, 100, 16), (56, 5000, 128),
    (64, 1000, 64), (13, 10000, 32),
]


def dependency_chain_problems():
  return [(_Spec(pg.DependencyChain, (n,), {}),
           datasets.random_binary(n, samples), batch)
          for n, samples, batch in _CHAIN_CONFIGS]


def outward_snake_problems():
  return [(_Spec(pg.OutwardSnake, (n,), {}),
           datasets.random_binary(n, samples), batch)
          for n, samples, batch in _CHAIN_CONFIGS]


def min_max_well_problems():
  return [(_Spec(pg.MinMaxWell, (n,), {}), None, None)
          for n in (20, 12, 56, 64, 13)]


def sum_of_quadratics_problems():
  return [(_Spec(pg.SumOfQuadratics, (n,), {}),
           datasets.random_symmetric(n, samples), batch)
          for n, samples, batch in _SYMMETRIC_CONFIGS]


def projection_quadratic_problems():
  return [(_Spec(pg.ProjectionQuadratic, (n,), {}),
           datasets.random_symmetric(n, samples), batch)
          for n, samples, batch in _SYMMETRIC_CONFIGS]


def adapter_rosenbrock_local():
  return [(_Spec(model_adapter.ModelAdapter,
                 (pg.make_rosenbrock_loss_and_init,), {}), None, None)]


def adapter_rosenbrock_worker():
  """Device is forwarded (a TypeError in TF1; see problems.model_adapter)."""
  return [(_Spec(model_adapter.ModelAdapter,
                 (pg.make_rosenbrock_loss_and_init,),
                 {"device": "/job:worker"}), None, None)]


def _test_problem_mlp_scaled_init(layer_sizes):
  """He-scaled weights and N(0, 0.1) biases drawn with np.random.

  Ports ``_test_problem_mlp_scaled_init_small`` / ``_large`` / ``_mnist`` of
  the original problem_sets.py: for each layer (n_in, n_out) in turn, the
  weights randn(n_in, n_out) * sqrt(2 / n_in), then the biases
  randn(n_out) * 0.1, the same np.random call order as those functions.
  """
  init = []
  for n_in, n_out in zip(layer_sizes[:-1], layer_sizes[1:]):
    init.append(np.random.randn(n_in, n_out) * np.sqrt(2. / n_in))
    init.append(np.random.randn(n_out,) * 0.1)
  return init


def test_problems(data_dir=None):  # pylint: disable=invalid-name
  """Visualisation problems: (Spec, data, batch, name, seed_or_init) tuples.

  Datasets and the fixed MLP inits are drawn in the original's order (the
  np.random state runs through them). Its convnets are the TRAINING ConvNet:
  with the evaluation ConvNet's default affine_size they could not build.
  """
  return [
      (_Spec(pg.Quadratic, (20,), {"random_seed": 1234}), None, None,
       "quad_problem", 5678),
      (_Spec(pg.Quadratic, (20,), {"noise_stdev": 1.0, "random_seed": 1234}),
       None, None, "quad_problem_noise", 5678),
      (_Spec(pg.Rosenbrock, (), {"random_seed": 1234}), None, None,
       "rosenbrock", 5678),
      (_Spec(pg.Rosenbrock, (), {"random_seed": 1234, "noise_stdev": 1.0}),
       None, None, "rosenbrock_noise", 5678),
      (_Spec(pg.SoftmaxRegression, (10, 2), {}),
       datasets.random(10, 10000, random_seed=1234), 100, "softmax", 5678),
      (_Spec(pg.SoftmaxRegression, (10, 2), {"noise_stdev": 1.0}),
       datasets.random(10, 10000, random_seed=1234), 100, "softmax_noise",
       5678),
      (_Spec(pg.FullyConnected, (10, 2), {}),
       datasets.random(10, 10000, random_seed=1234), 100, "mlp_small",
       _test_problem_mlp_scaled_init([10, 32, 64, 2])),
      (_Spec(pg.FullyConnected, (20, 10), {}),
       datasets.random(20, 10000, n_classes=10, random_seed=1234), 100,
       "mlp_large", _test_problem_mlp_scaled_init([20, 32, 64, 10])),
      (_Spec(pg.FullyConnected, (784, 10),
             {"hidden_sizes": (64,), "activation": tf.nn.sigmoid}),
       _mnist(True, data_dir), 64, "mlp_mnist_sigmoid",
       _test_problem_mlp_scaled_init([784, 64, 10])),
      (_Spec(pg.FullyConnected, (784, 10),
             {"hidden_sizes": (64,), "activation": tf.nn.relu}),
       _mnist(True, data_dir), 64, "mlp_mnist_relu",
       _test_problem_mlp_scaled_init([784, 64, 10])),
      (_Spec(pg.ConvNet, ((1, 28, 28), 10, [(3, 3, 8), (5, 5, 8)]),
             {"activation": tf.nn.sigmoid}), _mnist(True, data_dir), 64,
       "convnet_mnist_sigmoid", None),
      (_Spec(pg.ConvNet, ((1, 28, 28), 10, [(3, 3, 8), (5, 5, 8)]),
             {"activation": tf.nn.relu}), _mnist(True, data_dir), 64,
       "convnet_mnist_relu", None),
  ]


def lasso_problems():
  return [(_Spec(pg.Lasso, (20,), {}), None, None)]


def rastrigin_problems():
  return [(_Spec(pg.Rastrigin, (2,), {}), None, None)]


# --- evaluation problem sets (L2O-ScalewHessian Evaluation problem_sets.py) -

def _mnist_test_mlp(hidden_sizes, activation, data_dir):
  return [(_Spec(pg.FullyConnected, (784, 10),
                 {"hidden_sizes": hidden_sizes, "activation": activation}),
           _mnist(False, data_dir), 128)]


def test_mnist_mlp_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation: MLP 784-20-10 sigmoid on MNIST test, batch 128."""
  return _mnist_test_mlp((20,), tf.nn.sigmoid, data_dir)


def test_mnist_mlp_relu_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation: MLP 784-20-10 relu on MNIST test, batch 128."""
  return _mnist_test_mlp((20,), tf.nn.relu, data_dir)


def test_mnist_mlp_deeper_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation: MLP 784-20-20-10 sigmoid on MNIST test, batch 128."""
  return _mnist_test_mlp((20, 20), tf.nn.sigmoid, data_dir)


def test_mnist_conv_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation ConvNet (ConvNetEval, 3x3x16, 5x5x32, stride 1, affine 512)."""
  return [(_Spec(pg.ConvNetEval,
                 ((1, 28, 28), 10, [(3, 3, 16, 1), (5, 5, 32, 1)]),
                 {"activation": tf.nn.relu, "affine_size": 512}),
           _mnist(False, data_dir), 128)]


def test_mnist_conv_orig_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation ConvNetOrig (3x3x8, 5x5x8, relu) on MNIST test, batch 64."""
  return [(_Spec(pg.ConvNetOrig, ((1, 28, 28), 10, [(3, 3, 8), (5, 5, 8)]),
                 {"activation": tf.nn.relu}), _mnist(False, data_dir), 64)]


def test_cifar10_conv_problems(data_dir=None):  # pylint: disable=invalid-name
  """Evaluation ConvNetEval (3x3x16, 5x5x32, stride 2, affine 32), CIFAR test."""
  return [(_Spec(pg.ConvNetEval,
                 ((3, 32, 32), 10, [(3, 3, 16, 2), (5, 5, 32, 2)]),
                 {"activation": tf.nn.relu, "affine_size": 32}),
           datasets.cifar10(train=False, data_dir=data_dir), 128)]


TRAINING_SETS = (
    "quadratic_problems", "mnist_conv_problems", "cifar10_conv_problems",
    "mnist_mlp_problems", "quadratic_problems_noisy",
    "quadratic_problems_large", "bowl_problems", "bowl_problems_noisy",
    "sparse_softmax_2_class_sparse_problems",
    "one_hot_sparse_softmax_2_class_sparse_problems",
    "softmax_2_class_problems", "softmax_2_class_problems_noisy",
    "optimization_test_problems", "optimization_test_problems_noisy",
    "fully_connected_random_2_class_problems", "matmul_problems",
    "log_objective_problems", "sparse_gradient_problems",
    "sparse_gradient_problems_mlp", "rescale_problems", "norm_problems",
    "norm_problems_noisy", "sum_problems", "sum_problems_noisy",
    "dependency_chain_problems", "outward_snake_problems",
    "min_max_well_problems", "sum_of_quadratics_problems",
    "projection_quadratic_problems", "adapter_rosenbrock_local",
    "adapter_rosenbrock_worker", "test_problems", "lasso_problems",
    "rastrigin_problems", "mnist_mlp_family_problems",
    "mnist_mlp_selection_problems")

EVALUATION_SETS = (
    "mnist_mlp_problems", "test_mnist_mlp_problems",
    "test_mnist_mlp_relu_problems", "test_mnist_mlp_deeper_problems",
    "test_mnist_conv_problems", "test_mnist_conv_orig_problems",
    "test_cifar10_conv_problems")

DATA_SETS = ("mnist_conv_problems", "cifar10_conv_problems",
             "mnist_mlp_problems", "test_problems",
             "mnist_mlp_family_problems", "mnist_mlp_selection_problems") + EVALUATION_SETS[1:]


def get(name, data_dir=None):
  """The problem set called ``name``; ``data_dir`` goes to data-backed sets."""
  if name not in TRAINING_SETS + EVALUATION_SETS:
    raise ValueError("Unknown problem set {!r}; known: {}".format(
        name, ", ".join(sorted(set(TRAINING_SETS + EVALUATION_SETS)))))
  fn = globals()[name]
  return fn(data_dir=data_dir) if name in DATA_SETS else fn()


def get_training_triples(name, data_dir=None):
  """``get(name)`` as (spec, data, batch size) triples, the entries that
  meta-training and the robust selection take. ``test_problems`` entries
  also carry a name and a fixed initialisation; those are dropped (a
  --selection=robust run draws its initial parameters from its seed)."""
  return [entry[:3] for entry in get(name, data_dir=data_dir)]


# metarun.py's --include_* flags: (flag, problem set, help), in the order of
# the original metarun.py main(); metatest.py takes the same flags for the
# training sets (its own table covers the evaluation sets).
TRAINING_SET_FLAGS = [
    ("include_sparse_softmax_problems", "sparse_softmax_2_class_sparse_problems",
     "Include sparse softmax problems."),
    ("include_mnist_conv_problems", "mnist_conv_problems",
     "Include Convnet problems."),
    ("include_cifar10_conv_problems", "cifar10_conv_problems",
     "Include Convnet problems."),
    ("include_mnist_mlp_problems", "mnist_mlp_problems",
     "Include MNIST MLP problems."),
    ("include_one_hot_sparse_softmax_problems",
     "one_hot_sparse_softmax_2_class_sparse_problems",
     "Include one-hot sparse softmax problems."),
    ("include_quadratic_problems", "quadratic_problems",
     "Include non-noisy quadratic problems."),
    ("include_noisy_quadratic_problems", "quadratic_problems_noisy",
     "Include noisy quadratic problems."),
    ("include_large_quadratic_problems", "quadratic_problems_large",
     "Include very large quadratic problems."),
    ("include_bowl_problems", "bowl_problems", "Include 2D bowl problems."),
    ("include_noisy_bowl_problems", "bowl_problems_noisy",
     "Include noisy bowl problems."),
    ("include_softmax_2_class_problems", "softmax_2_class_problems",
     "Include 2-class logistic regression problems."),
    ("include_noisy_softmax_2_class_problems", "softmax_2_class_problems_noisy",
     "Include noisy 2-class logistic regression problems."),
    ("include_optimization_test_problems", "optimization_test_problems",
     "Include classic optimization test problems, e.g. Rosenbrock."),
    ("include_noisy_optimization_test_problems",
     "optimization_test_problems_noisy",
     "Include gradient-noise versions of classic optimization test problems."),
    ("include_fully_connected_random_2_class_problems",
     "fully_connected_random_2_class_problems",
     "Include MLP problems for 2 classes."),
    ("include_matmul_problems", "matmul_problems",
     "Include matrix multiplication problems."),
    ("include_log_objective_problems", "log_objective_problems",
     "Include log-objective problems."),
    ("include_rescale_problems", "rescale_problems",
     "Include rescaled-parameter problems."),
    ("include_norm_problems", "norm_problems", "Include N-norm problems."),
    ("include_noisy_norm_problems", "norm_problems_noisy",
     "Include noisy norm problems."),
    ("include_sum_problems", "sum_problems", "Include sum problems."),
    ("include_noisy_sum_problems", "sum_problems_noisy",
     "Include noisy sum problems."),
    ("include_sparse_gradient_problems", "sparse_gradient_problems",
     "Include sparse-gradient problems."),
    ("include_min_max_well_problems", "min_max_well_problems",
     "Include min-max well problems."),
    ("include_sum_of_quadratics_problems", "sum_of_quadratics_problems",
     "Include sum of quadratics problems."),
    ("include_projection_quadratic_problems", "projection_quadratic_problems",
     "Include projection quadratic problems."),
    ("include_outward_snake_problems", "outward_snake_problems",
     "Include outward snake problems."),
    ("include_dependency_chain_problems", "dependency_chain_problems",
     "Include dependency chain problems."),
    # New in the port.
    ("include_mnist_mlp_family_problems", "mnist_mlp_family_problems",
     "Include MNIST MLPs of several widths, depths, activations and batch "
     "sizes, Glorot-initialised (new)."),
]
