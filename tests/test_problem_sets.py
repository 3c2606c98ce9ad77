"""Every problem set builds its problems (data from the offline folder)."""

import importlib
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from problems import datasets
from problems import problem_generator as pg
# Import the module, not its functions: some are called test_* as originally.
from problems import problem_sets as ps


@pytest.fixture(autouse=True)
def no_network_tfds(monkeypatch):
  fake = types.ModuleType("tensorflow_datasets")

  def load(*args, **kwargs):
    raise RuntimeError("no network in tests")
  fake.load = load
  fake.as_numpy = lambda x: x
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)


def _check_entry(spec, dataset, batch_size):
  problem = spec.build()
  params = problem.init_tensors(seed=0)
  data = labels = None
  if dataset is not None:
    assert batch_size is not None
    data = dataset.data[:batch_size]
    labels = dataset.labels[:batch_size]
  obj = problem.objective(params, data, labels)
  assert obj.shape.rank == 0 and np.isfinite(float(obj)), spec


_CIFAR = ("cifar10_conv_problems", "test_cifar10_conv_problems")
_ALL = sorted(set(ps.TRAINING_SETS + ps.EVALUATION_SETS) - set(_CIFAR))


@pytest.mark.parametrize("name", _ALL)
def test_problem_set_builds(name, data_dir):
  entries = ps.get(name, data_dir=data_dir)
  assert entries
  for entry in entries:
    assert len(entry) == (5 if name == "test_problems" else 3)
    if name == "quadratic_problems_large":
      entry[0].build()
      continue
    _check_entry(*entry[:3])


@pytest.mark.parametrize("name", _CIFAR)
def test_cifar_sets_raise_cleanly_without_data(name, tmp_path):
  with pytest.raises(datasets.DataNotFoundError, match=str(tmp_path)):
    ps.get(name, data_dir=str(tmp_path))


def test_importing_touches_no_data(monkeypatch, data_dir):
  """Importing problem_sets reads no data set file and calls no loader; the
  same recorder does see the reads of a problem set built afterwards."""
  touched = []
  real_open, real_gzip_open = open, datasets.gzip.open

  def recording(kind, fn):
    def wrapper(*args, **kwargs):
      touched.append((kind, args[0] if args else None))
      return fn(*args, **kwargs)
    return wrapper

  for name in ("mnist", "cifar10", "load_mnist_arrays", "noisy_parity_class",
               "random", "random_binary", "random_symmetric", "random_mlp"):
    monkeypatch.setattr(datasets, name, recording(name,
                                                  getattr(datasets, name)))
  monkeypatch.setattr(datasets.gzip, "open", recording("gzip", real_gzip_open))
  monkeypatch.setattr("builtins.open", recording("open", real_open))
  importlib.reload(ps)
  monkeypatch.undo()
  assert touched == []
  # The recorder works: building an MNIST set goes through it.
  monkeypatch.setattr(datasets.gzip, "open", recording("gzip", real_gzip_open))
  ps.mnist_mlp_problems(data_dir=data_dir)
  assert any(kind == "gzip" for kind, _ in touched), touched


def test_evaluation_sets_use_test_split_and_eval_convnet(data_dir):
  (spec, dataset, batch), = ps.test_mnist_conv_problems(data_dir=data_dir)
  assert spec.callable is pg.ConvNetEval and batch == 128
  assert dataset.size == 10000
  problem = spec.build()
  logits = problem.inference(problem.init_tensors(seed=0),
                             tf.constant(dataset.data[:128]))
  assert logits.shape == (128, 10)
  (spec, dataset, _), = ps.mnist_conv_problems(data_dir=data_dir)
  assert spec.callable is pg.ConvNet and dataset.size == 5000


def test_training_sets_keep_original_sizes():
  assert [s.args[0] for s, _, _ in ps.quadratic_problems()] == [20, 25, 50,
                                                               100]
  assert len(ps.matmul_problems()) == 4 + 6
  assert len(ps.fully_connected_random_2_class_problems()) == 12
  sums = ps.sum_problems()
  assert len(sums[3][0].build().problems) == 11


def test_parity_sets_keep_original_quirk():
  """The original asks noisy_parity_class for 5 samples, batch size 23."""
  (spec, dataset, batch), = ps.sparse_softmax_2_class_sparse_problems()
  assert dataset.size == 5 and batch == 23
  assert spec.callable is pg.SparseSoftmaxRegression


def test_unknown_set():
  with pytest.raises(ValueError, match="quadratic_problems"):
    ps.get("nope")
