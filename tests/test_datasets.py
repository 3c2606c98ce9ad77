"""Dataset loaders (offline MNIST / CIFAR-10) and the random generators."""

import os
import pickle
import re
import sys
import types

import numpy as np
import pytest

from problems import datasets


class _FakeTfds(types.ModuleType):
  """tensorflow_datasets stand-in: records loads and never downloads."""

  def __init__(self):
    super().__init__("tensorflow_datasets")
    self.loads = []

  def load(self, name, **kwargs):
    self.loads.append((name, kwargs))
    raise RuntimeError("no network in tests")

  def as_numpy(self, x):
    return x


@pytest.fixture(autouse=True)
def fake_tfds(monkeypatch):
  fake = _FakeTfds()
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
  return fake


def test_mnist_offline_row_counts_from_idx_header(data_dir):
  test = datasets.mnist(train=False, data_dir=data_dir)
  train = datasets.mnist(train=True, data_dir=data_dir, verbose=False)
  assert test.data.shape == (10000, 28, 28, 1) and test.size == 10000
  assert train.data.shape == (5000, 28, 28, 1) and train.size == 5000
  assert test.labels.dtype == np.int32 and set(np.unique(test.labels)) == set(
      range(10))
  assert 0. <= test.data.min() and test.data.max() <= 1.
  one_hot = datasets.mnist(train=False, data_dir=data_dir, one_hot=True)
  np.testing.assert_array_equal(one_hot.labels.argmax(1), test.labels)


def test_mnist_missing_names_folder(tmp_path, fake_tfds):
  with pytest.raises(datasets.DataNotFoundError) as err:
    datasets.mnist(train=False, data_dir=str(tmp_path))
  assert str(tmp_path) in str(err.value)
  assert fake_tfds.loads and fake_tfds.loads[0][1]["download"] is False


def _write_cifar_pickles(folder, rows):
  os.makedirs(folder)
  rng = np.random.RandomState(0)
  for name in ["data_batch_{}".format(i) for i in range(1, 6)] + [
      "test_batch"]:
    batch = {b"data": rng.randint(0, 256, (rows, 3072)).astype(np.uint8),
             b"labels": list(rng.randint(0, 10, rows))}
    with open(os.path.join(folder, name), "wb") as f:
      pickle.dump(batch, f)


def test_cifar10_from_python_pickles(tmp_path):
  folder = tmp_path / "cifar-10-batches-py"
  _write_cifar_pickles(str(folder), rows=4)
  train = datasets.cifar10(train=True, data_dir=str(tmp_path))
  test = datasets.cifar10(train=False, data_dir=str(tmp_path))
  assert train.data.shape == (20, 32, 32, 3) and train.size == 20
  assert test.data.shape == (4, 32, 32, 3)
  with open(str(folder / "test_batch"), "rb") as f:
    raw = pickle.load(f, encoding="bytes")
  # Channel-major rows become NHWC: pixel (0, 0) of image 0 is R, G, B.
  expected = raw[b"data"][0].reshape(3, 32, 32)[:, 0, 0] / 255.
  np.testing.assert_allclose(test.data[0, 0, 0], expected, rtol=1e-6)
  np.testing.assert_array_equal(test.labels, raw[b"labels"])


def test_cifar10_from_binary_files(tmp_path):
  folder = tmp_path / "cifar-10-batches-bin"
  folder.mkdir()
  records = np.zeros((3, 3073), np.uint8)
  records[:, 0] = [7, 1, 4]
  records[1, 1:] = 255
  records.tofile(str(folder / "test_batch.bin"))
  test = datasets.cifar10(train=False, data_dir=str(tmp_path))
  np.testing.assert_array_equal(test.labels, [7, 1, 4])
  assert test.data[1].min() == 1. and test.data[0].max() == 0.


def test_cifar10_missing_names_folder(tmp_path):
  with pytest.raises(datasets.DataNotFoundError) as err:
    datasets.cifar10(train=True, data_dir=str(tmp_path))
  assert str(tmp_path) in str(err.value)
  assert "cifar-10-batches-py" in str(err.value)


def test_random_binary_same_np_random_calls_as_original():
  ds = datasets.random_binary(6, 10, random_seed=5)
  np.random.seed(5)
  np.testing.assert_array_equal(ds.data, np.random.randint(2, size=(10, 6)))
  assert ds.labels.shape == (10, 1) and not ds.labels.any()


def test_random_symmetric_and_mlp():
  sym = datasets.random_symmetric(4, 10, random_seed=1)
  np.testing.assert_array_equal(sym.data[:5], -sym.data[5:])
  mlp = datasets.random_mlp(8, 200, random_seed=1)
  assert mlp.data.shape == (200, 8) and set(np.unique(mlp.labels)) <= {0, 1}
  again = datasets.random_mlp(8, 200, random_seed=1)
  np.testing.assert_array_equal(mlp.labels, again.labels)


def test_noisy_parity_class():
  ds = datasets.noisy_parity_class(2000, random_seed=123)
  assert ds.data.shape == (2000, 5) and ds.data.dtype == np.float32
  parity = ds.data.sum(1).astype(int) % 2
  flipped = np.mean(parity != ds.labels)
  assert 0.2 < flipped < 0.3


def test_random_classification():
  a = datasets.random(10, 1000, random_seed=123, sep=2.0)
  b = datasets.random(10, 1000, random_seed=123, sep=2.0)
  assert a.data.shape == (1000, 10) and a.labels.dtype == np.int32
  np.testing.assert_array_equal(a.data, b.data)
  assert 0.4 < a.labels.mean() < 0.6
  ten = datasets.random(20, 500, n_classes=10, random_seed=1)
  assert set(np.unique(ten.labels)) == set(range(10))


def test_batch_indices_cover_epochs():
  batches = datasets.batch_indices(10, 7, 3, np.random.RandomState(0))
  assert batches.shape == (7, 3)
  # An epoch holds 3 batches (one sample left over), then reshuffles.
  for start in (0, 3):
    epoch = batches[start:start + 3].ravel()
    assert len(set(epoch)) == 9


def test_batch_larger_than_data_is_the_whole_data_reshuffled():
  """The original's slice past the end: every batch of 23 from 5 samples is
  the 5 samples, after one shuffle up front and one before each batch."""
  rng = np.random.RandomState(0)
  batches = datasets.batch_indices(5, 4, 23, rng)
  assert batches.shape == (4, 5)
  for row in batches:
    assert sorted(row) == list(range(5))
  expected = np.random.RandomState(0)
  indices = np.arange(5)
  for _ in range(5):
    expected.shuffle(indices)
  assert list(batches[-1]) == list(indices)
  assert rng.randint(1 << 30) == expected.randint(1 << 30)




def test_truncated_or_corrupt_idx_names_the_file(tmp_path):
  """Truncated .gz, corrupt .gz and truncated raw IDX: one error naming the
  file and saying to download it again."""
  import gzip as gzip_lib
  from problems import datasets as ds
  header = (0x0803).to_bytes(4, "big") + b"".join(
      n.to_bytes(4, "big") for n in (2, 28, 28))
  raw = tmp_path / "short-idx3-ubyte"
  raw.write_bytes(header + b"\0" * 100)
  packed = gzip_lib.compress(header + b"\0" * (2 * 28 * 28))
  cut = tmp_path / "cut-idx3-ubyte.gz"
  cut.write_bytes(packed[:len(packed) // 2])
  bad = tmp_path / "bad-idx3-ubyte.gz"
  bad.write_bytes(packed[:10] + b"\xff" * 40 + packed[50:])
  for path in (raw, cut, bad):
    with pytest.raises(ds.DataNotFoundError) as error:
      ds._read_idx(str(path))  # pylint: disable=protected-access
    assert str(path) in str(error.value)
    assert "download it again" in str(error.value)


def _idx(path, dims, extra=0, magic=None):
  """An IDX file of unsigned bytes with header ``dims`` and the data it
  describes (plus ``extra`` bytes)."""
  ndim = len(dims)
  header = (magic if magic is not None else 0x0800 | ndim).to_bytes(4, "big")
  header += b"".join(int(n).to_bytes(4, "big") for n in dims)
  path.write_bytes(header + b"\1" * (int(np.prod(dims)) + extra))


@pytest.mark.parametrize("images,labels,named,says", [
    # A header whose sizes are of other images: 20000 of 14x14.
    ((20000, 14, 14), (20000,), "t10k-images", "20000x14x14 values, not "
     "Nx28x28"),
    # One axis of 5000 values: not images at all.
    ((5000,), (5000,), "t10k-images", "5000 values, not Nx28x28"),
    # Labels of two axes.
    ((2, 28, 28), (2, 1), "t10k-labels", "2x1 values, not N"),
    # As many images as labels, or the rows would pair wrongly.
    ((2, 28, 28), (3,), "t10k-images", "2 images but"),
    # Nothing to train on.
    ((0, 28, 28), (0,), "t10k-images", "holds no images"),
])
def test_idx_headers_that_do_not_describe_mnist(tmp_path, images, labels,
                                                named, says):
  """IDX files whose headers are not MNIST's (or do not agree with each
  other) are refused in one line naming the file, before any use."""
  from l2o_scale import data  # pylint: disable=g-import-not-at-top
  _idx(tmp_path / "t10k-images-idx3-ubyte", images)
  _idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
  with pytest.raises(datasets.DataNotFoundError) as error:
    data.load_mnist(str(tmp_path), split="test")
  message = str(error.value)
  assert str(tmp_path / named) in message and says in message, message
  assert "\n" not in message


def test_idx_files_whose_length_is_not_their_headers(tmp_path):
  """A file longer than its header says, and one whose magic number is not
  IDX's: refused naming the file."""
  long = tmp_path / "long-idx3-ubyte"
  _idx(long, (2, 28, 28), extra=5)
  magic = tmp_path / "magic-idx3-ubyte"
  _idx(magic, (2, 28, 28), magic=0x1f8b0803)
  for path, says in ((long, "longer than its header says"),
                     (magic, "not an IDX file")):
    with pytest.raises(datasets.DataNotFoundError) as error:
      datasets._read_idx(str(path))  # pylint: disable=protected-access
    assert str(path) in str(error.value) and says in str(error.value)


def test_cifar_pickle_with_fewer_labels_than_images(tmp_path):
  rows = np.zeros((3, 3072), np.uint8)
  path = tmp_path / "test_batch"
  with open(path, "wb") as f:
    pickle.dump({b"data": rows, b"labels": [0, 1]}, f)
  with pytest.raises(datasets.DataNotFoundError, match="3 images but 2 "
                     "labels") as error:
    datasets.cifar10(train=False, data_dir=str(tmp_path))
  assert str(path) in str(error.value)


def test_data_dir_argument_is_none_until_given_and_env_resolves_it(
    monkeypatch):
  import argparse  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  datasets.add_data_dir_argument(parser)
  monkeypatch.setenv(datasets.DATA_DIR_ENV, "/from/env")
  # The environment is read when data is resolved, not when flags parse:
  # a command that forwards --data_dir forwards only what was given.
  assert parser.parse_args([]).data_dir is None
  assert datasets.resolve_data_dir(parser.parse_args([]).data_dir) == (
      "/from/env")
  given = parser.parse_args(["--data_dir=/given"]).data_dir
  assert datasets.resolve_data_dir(given) == "/given"
  monkeypatch.delenv(datasets.DATA_DIR_ENV)
  assert datasets.resolve_data_dir(None) is None


def test_every_command_line_declares_data_dir_through_one_function():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  by_hand, through_it = [], []
  for package in ("l2o_scale", "problems", "reproduce", "optimizer"):
    for folder, _, names in os.walk(os.path.join(root, package)):
      for name in names:
        if not name.endswith(".py"):
          continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
          text = f.read()
        relative = os.path.relpath(path, root)
        if re.search(r"add_argument\(\s*[\"']--data_dir[\"']", text):
          by_hand.append(relative)
        if re.search(r"datasets\.add_data_dir_argument\(", text):
          through_it.append(relative)
  assert by_hand == [os.path.join("problems", "datasets.py")]
  # Nine argparse command lines; metarun, metatest, the benchmark and head
  # training declare --data_dir in their config dataclasses instead.
  assert len(through_it) >= 9
