"""Every problem set builds its problems (data from the offline folder), and
every training set meta-trains, alone and mixed, as metarun.py feeds it."""

import importlib
import json
import os
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

import metarun
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import task as task_lib
from l2o_scale.steps import tf1_optimizers
from optimizer import hierarchical_rnn
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
  """The original asks noisy_parity_class for 5 samples, batch size 23; its
  slice past the end made every batch the 5 samples, reshuffled."""
  (spec, dataset, batch), = ps.sparse_softmax_2_class_sparse_problems()
  assert dataset.size == 5 and batch == 23
  assert spec.callable is pg.SparseSoftmaxRegression
  task = _task(spec.build(), dataset, batch, _hrnn())
  batches, _ = task.planner.batches([4])
  assert batches[0].shape == (4, 5)
  for row in batches[0]:
    assert sorted(row) == list(range(5))


def test_unknown_set():
  with pytest.raises(ValueError, match="quadratic_problems"):
    ps.get("nope")


# --- meta-training on every training set ------------------------------------

# Short unrolls, eager (tracing a graph per problem would dominate), the
# sequential unroll and a small mini dataset: the feed, objective and
# meta-gradient are those of metarun.py, at a fraction of the cost.
_STEPS = 2
_CONFIG = config_lib.TrainingConfig(mini_batch_size=256, time_parallel=False)


@pytest.fixture(scope="module")
def eager():
  tf.config.run_functions_eagerly(True)
  yield
  tf.config.run_functions_eagerly(False)


def _hrnn():
  return hierarchical_rnn.HierarchicalRNN(
      [4, 5, 5], init_lr_range=(1e-3, 1e-3), random_seed=1)


@pytest.fixture(scope="module")
def shared_hrnn():
  return _hrnn()


def _task(problem, dataset, batch_size, optimizer):
  return task_lib.MetaTrainingTask(problem, "p", dataset, batch_size,
                                   optimizer, _CONFIG, lambda _: None)


def _meta_gradient(entry, optimizer):
  """One first unroll of ``_STEPS`` steps and its meta-gradient on the
  problem of ``entry`` (Spec, dataset, batch_size), drawn and fed as a
  meta-iteration of metarun.py draws and feeds it."""
  spec, dataset, batch_size = entry[:3]
  np.random.seed(0)
  task = _task(spec.build(), dataset, batch_size, optimizer)
  batches, _ = task.planner.batches([_STEPS])
  rows = task.planner.mini_rows(1)
  draws = plan_lib.SeriesDraws(task.planner.init_tensors(), batches, rows,
                               None)
  plan = plan_lib.MetaIterationPlan(0, [_STEPS], False, (draws,), [False],
                                    True)
  inputs = task.unroll_inputs(task.series_tensors(plan), 0,
                              task.mini_dataset(rows[0]), False, True, True)
  return task.meta_step(inputs, None, False)


def _signature(spec):
  """The classes a Spec builds, wrapped ones included."""
  inner = [a for a in spec.args if isinstance(a, type(spec))]
  inner += [a for arg in spec.args if isinstance(arg, list)
            for a in arg if isinstance(a, type(spec))]
  return (spec.callable.__name__,) + tuple(_signature(a) for a in inner)


def _distinct(entries):
  """One entry per kind of problem (classes, data or not, batch above the
  data size or not): the members of a set that differ only in sizes run the
  same code."""
  kinds = {}
  for entry in entries:
    spec, dataset, batch = entry[:3]
    has_data = dataset is not None and dataset.size > 0
    key = (_signature(spec), has_data,
           has_data and batch is not None and batch > dataset.size)
    kinds.setdefault(key, entry)
  return list(kinds.values())


def _check_meta_gradient(entry, optimizer):
  out, grads = _meta_gradient(entry, optimizer)
  objectives = out.problem_objectives.numpy()
  assert objectives.shape == (_STEPS + 1,), entry[0]
  assert np.all(np.isfinite(objectives)), (entry[0], objectives)
  assert np.isfinite(float(out.metaobj)), entry[0]
  assert len(grads) == len(optimizer.meta_variables)
  flat = np.concatenate([np.ravel(g.numpy()) for g in grads])
  assert np.all(np.isfinite(flat)), entry[0]
  # The meta-gradient reaches the meta-parameters through the unroll.
  assert np.any(flat != 0), entry[0]
  return grads


_TRAINING_SETS = [name for _, name, _ in ps.TRAINING_SET_FLAGS]


def test_the_flags_name_28_distinct_training_sets():
  # The original's 28, and the port's MNIST MLP family.
  assert len(set(_TRAINING_SETS) - {"mnist_mlp_family_problems"}) == 28
  assert len(set(_TRAINING_SETS)) == 29
  assert set(_TRAINING_SETS) <= set(ps.TRAINING_SETS)


@pytest.mark.parametrize("name", _TRAINING_SETS)
def test_each_training_set_meta_trains(name, data_dir, eager, shared_hrnn):
  del eager
  if name in _CIFAR:
    try:
      entries = ps.get(name, data_dir=data_dir)
    except datasets.DataNotFoundError as e:
      assert str(e).count("\n") == 0 and "CIFAR-10" in str(e)
      return
  else:
    entries = ps.get(name, data_dir=data_dir)
  for entry in _distinct(entries):
    _check_meta_gradient(entry, shared_hrnn)


def _sigmoid_cross_entropy(logits, labels):
  """float64 mean of -[y log s(z) + (1 - y) log(1 - s(z))], z = logits."""
  z = np.asarray(logits, np.float64)
  y = np.asarray(labels, np.float64)
  return float(np.mean(np.logaddexp(0., -z) + (1. - y) * z))


@pytest.mark.parametrize("make", [
    lambda: (pg.SoftmaxRegression(10, 2, random_seed=1),
             datasets.random(10, 50, random_seed=123, sep=2.0)),
    lambda: (pg.FullyConnected(8, 2, hidden_sizes=(8, 5), random_seed=1),
             datasets.random_mlp(8, 50, random_seed=1)),
    # All labels 0 (the random MLP gives one class for some seeds): the
    # training feed's np.eye(1) rows are a single column.
    lambda: (pg.FullyConnected(8, 2, hidden_sizes=(8, 5), random_seed=1),
             datasets.random_mlp(8, 50, random_seed=0)),
    lambda: (pg.SparseSoftmaxRegression(5, 2, random_seed=1),
             datasets.noisy_parity_class(5, random_seed=123)),
    lambda: (pg.OneHotSparseSoftmaxRegression(5, 2, random_seed=1),
             datasets.noisy_parity_class(5, random_seed=123)),
])
def test_two_class_loss_is_the_sigmoid_of_the_first_logit(make):
  """With the training feed's one-hot rows, the integer labels of the
  evaluation feed, or a column of them, a 2-class problem's loss is the
  sigmoid cross-entropy of the 0/1 label on the first logit."""
  problem, dataset = make()
  labels = np.asarray(dataset.labels)
  assert set(np.unique(labels)) <= {0, 1}
  params = [tf.constant(np.random.RandomState(2).normal(size=s), tf.float32)
            for s in problem.param_shapes]
  data = tf.constant(dataset.data)
  first_logit = problem.inference(params, data).numpy()[:, 0]
  expected = _sigmoid_cross_entropy(first_logit, labels)
  for fed in (labels, datasets.one_hot_rows(labels), labels[:, None]):
    loss = float(problem.objective(params, data, fed))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_one_hot_depth_is_that_of_the_whole_data():
  """A mini dataset without the top class keeps one column per class (the
  original's np.eye(max(labels) + 1) over the whole labels)."""
  dataset = datasets.random_mlp(8, 50, random_seed=1)
  task = _task(pg.FullyConnected(8, 2, hidden_sizes=(4,), random_seed=1),
               dataset, 10, _hrnn())
  zeros = np.flatnonzero(np.asarray(dataset.labels) == 0)[:7]
  labels = task.mini_dataset(zeros)[1].numpy()
  assert labels.shape == (7, 2) and np.all(labels[:, 0] == 1)


_MIXTURE = ("include_quadratic_problems", "include_softmax_2_class_problems",
            "include_mnist_mlp_problems", "include_sparse_softmax_problems",
            "include_fully_connected_random_2_class_problems",
            "include_sparse_gradient_problems")


def test_a_mixture_of_six_sets_meta_trains(data_dir, eager):
  """metarun.py's pool for six --include_* flags (2-class sets among them,
  and the MLP sparse-gradient problems the last two add together): one
  meta-update per kind of problem, in turn, on one optimizer."""
  del eager
  pool = metarun.selected_problems(metarun.parse_config(
      ["metarun.py", "--data_dir=" + data_dir] +
      ["--" + flag for flag in _MIXTURE]))
  sizes = [len(ps.get(name, data_dir=data_dir))
           for flag, name, _ in ps.TRAINING_SET_FLAGS if flag in _MIXTURE]
  assert len(pool) == sum(sizes) + len(ps.sparse_gradient_problems_mlp())
  optimizer = _hrnn()
  learner = meta_learner.MetaLearner(
      tf1_optimizers.RMSProp(optimizer.meta_variables, 1e-3, decay=0.9,
                             epsilon=1e-10), gradient_clip=5.)
  before = [v.numpy().copy() for v in optimizer.meta_variables]
  kinds = _distinct(pool)
  assert {k[0].callable for k in kinds} >= {
      pg.Quadratic, pg.SoftmaxRegression, pg.FullyConnected,
      pg.SparseSoftmaxRegression, pg.SparseProblem}
  for entry in kinds:
    update = learner.apply(_check_meta_gradient(entry, optimizer))
    assert update.nonfinite == 0
  assert any(not np.array_equal(b, v.numpy())
             for b, v in zip(before, optimizer.meta_variables))


# --- the 2-class objectives against the original code ----------------------

_TWO_CLASS_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "fixtures", "two_class_objectives")


def _two_class_fixture():
  with open(os.path.join(_TWO_CLASS_FIXTURE, "spec.json")) as f:
    spec = json.load(f)
  arrays = np.load(os.path.join(_TWO_CLASS_FIXTURE, "arrays.npz"))
  return spec, {k: arrays[k] for k in arrays.files}


def test_sparse_datasets_are_the_originals():
  """random_mlp and noisy_parity_class draw the original's arrays."""
  _, arrays = _two_class_fixture()
  for name, dataset in (
      ("random_mlp", datasets.random_mlp(8, 50, random_seed=1)),
      ("parity", datasets.noisy_parity_class(5, random_seed=123))):
    np.testing.assert_array_equal(dataset.data, arrays["data/%s/x" % name])
    np.testing.assert_array_equal(dataset.labels, arrays["data/%s/y" % name])


def _rel_l2(a, b):
  return np.linalg.norm(np.ravel(a) - np.ravel(b)) / max(
      np.linalg.norm(np.ravel(b)), 1e-12)


@pytest.mark.parametrize("case", [c["name"] for c in
                                  _two_class_fixture()[0]["cases"]])
def test_two_class_objective_and_gradients_match_the_original(case):
  """The original (evaluation code, integer labels) objective and gradients
  of the 2-class problems; the port's training feed (one-hot rows) and its
  evaluation feed (integer labels) both give them."""
  spec, arrays = _two_class_fixture()
  cfg, = [c for c in spec["cases"] if c["name"] == case]
  kwargs = dict(cfg["problem"]["kwargs"])
  if "activation" in kwargs:
    kwargs["activation"] = getattr(tf.nn, kwargs["activation"])
  problem = getattr(pg, cfg["problem"]["cls"])(*cfg["problem"]["args"],
                                                 **kwargs)
  params = [tf.constant(arrays["%s/param%d" % (case, i)])
            for i in range(len(problem.param_shapes))]
  data = tf.constant(arrays["data/%s/x" % cfg["data"]])
  labels = arrays["data/%s/y" % cfg["data"]]
  tol = spec["tolerances"]
  for fed in (labels, datasets.one_hot_rows(labels)):
    obj, grads = problem.objective_and_clean_gradients(params, data, fed)
    np.testing.assert_allclose(float(obj), arrays[case + "/objective"],
                               rtol=tol["objective"]["max_rel"])
    for i, grad in enumerate(grads):
      assert _rel_l2(grad.numpy(), arrays["%s/grad%d" % (case, i)]) <= (
          tol["grads"]["rel_l2"]), (case, i)
