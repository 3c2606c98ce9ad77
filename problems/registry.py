"""The test problems: one entry each, read by every program that names one.

An entry gives the problem's short name (the reproduction's folder and
plot key), the ``metatest.py`` flag that selects it, the ``problem_sets``
function that builds it (the original evaluation's ``test_*`` sets, which
train on the test split as the original did), the dataset whose train and
held-out splits ``--heldout_every`` uses, its label in tables and figures,
whether XLA compiles it fast on a CPU, whether the long-horizon check
(``l2o_scale.tools.horizon_check``) takes it by default, and whether the
reproduction (``reproduce/all.sh``) meta-tests on it. ``metatest.py`` (its flags and
the held-out split), ``l2o_scale.tools.horizon_check`` and the plots read
this list; adding a test problem is adding one entry.
"""

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class ProblemEntry:
  """One test problem of ``metatest.py`` (see the module docstring)."""
  name: str
  flag: str
  problem_set: str
  dataset: str
  label: str
  xla_fast: bool = True
  long_horizon: bool = False
  reproduction: bool = False

  def build(self, data_dir=None):
    """``[(Spec, dataset, batch_size)]`` of the problem set."""
    problem_sets = importlib.import_module("problems.problem_sets")
    return problem_sets.get(self.problem_set, data_dir=data_dir)

  def splits(self, data_dir=None):
    """(train split, held-out split) of the problem's dataset."""
    return dataset_splits(self.dataset, data_dir)


# In the order the original's metatest.py main() extended its list
# (l.300-395).
PROBLEMS = (
    ProblemEntry("mnist-mlp-sigmoid", "include_mnist_mlp_problems",
                "test_mnist_mlp_problems", "mnist",
                "MNIST MLP 784-20-10, sigmoid", long_horizon=True,
                reproduction=True),
    ProblemEntry("mnist-mlp-relu", "include_mnist_mlp_relu_problems",
                "test_mnist_mlp_relu_problems", "mnist",
                "MNIST MLP 784-20-10, ReLU", long_horizon=True,
                reproduction=True),
    ProblemEntry("mnist-mlp-deeper", "include_mnist_mlp_deeper_problems",
                "test_mnist_mlp_deeper_problems", "mnist",
                "MNIST MLP 784-20-20-10, sigmoid", long_horizon=True,
                reproduction=True),
    ProblemEntry("mnist-conv", "include_mnist_conv_problems",
                "test_mnist_conv_problems", "mnist", "MNIST ConvNet",
                xla_fast=False, reproduction=True),
    ProblemEntry("mnist-conv-orig", "include_mnist_conv_orig_problems",
                "test_mnist_conv_orig_problems", "mnist",
                "MNIST ConvNet (original's)", xla_fast=False),
    ProblemEntry("cifar10-conv", "include_cifar10_conv_problems",
                "test_cifar10_conv_problems", "cifar10", "CIFAR-10 ConvNet",
                xla_fast=False),
)

# Dataset name -> loader(train: bool, data_dir) in problems.datasets
# (imported when used: the labels need no TensorFlow).
DATASETS = {"mnist": "mnist", "cifar10": "cifar10"}


def dataset_splits(name, data_dir=None):
  """(train split, held-out test split) of dataset ``name``."""
  load = getattr(importlib.import_module("problems.datasets"), DATASETS[name])
  return load(train=True, data_dir=data_dir), load(train=False,
                                                   data_dir=data_dir)


def names():
  """The short names, in registry order."""
  return [p.name for p in PROBLEMS]


def get(name):
  """The entry called ``name`` (its short name or its flag); ValueError
  listing the known names otherwise."""
  for problem in PROBLEMS:
    if name in (problem.name, problem.flag):
      return problem
  raise ValueError("Unknown test problem {!r}; known: {}".format(
      name, ", ".join(names())))


def by_flag():
  """``{metatest flag: entry}``."""
  return {p.flag: p for p in PROBLEMS}


def label(name):
  """The label of test problem ``name`` in tables and figures (the name
  itself when it is not registered)."""
  for problem in PROBLEMS:
    if problem.name == name:
      return problem.label
  return name
