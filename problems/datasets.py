"""Datasets for the optimizees (port of ``problems/datasets.py``).

MNIST and CIFAR-10 come from ``tensorflow-datasets``; without internet they
load from a local folder of the standard files, given by ``data_dir`` or the
environment variable ``L2O_SCALE_DATA_DIR``. Missing data raises
:class:`DataNotFoundError` with one message that says where it looked and how
to provide the files.

Why long: the original's datasets module (its generators under their names) with
the readers of the standard MNIST and CIFAR-10 files that stand in for
tensorflow-datasets offline.
"""

import collections
import gzip
import os
import pickle
import zlib

import numpy as np

DATA_DIR_ENV = "L2O_SCALE_DATA_DIR"
MAX_SEED = 4294967295

Dataset = collections.namedtuple("Dataset", ["data", "labels", "size"])

_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
MNIST_FULL_TRAIN_SIZE = 60000

_announced = set()


class DataNotFoundError(RuntimeError):
  """The requested dataset is neither in a local folder nor in tfds."""


def one_hot_rows(labels, depth=None):
  """float32 one-hot rows of integer ``labels`` (``np.eye(depth)[labels]``).

  ``depth`` None: ``max(labels) + 1``, as the original training code fed its
  labels (``np.eye(max + 1)``); 1 for no labels.
  """
  labels = np.asarray(labels, np.int64)
  if depth is None:
    depth = int(np.max(labels)) + 1 if labels.size else 1
  return np.eye(depth, dtype=np.float32)[labels]


DATA_DIR_HELP = ("folder with the MNIST IDX files (default: "
                 "$L2O_SCALE_DATA_DIR, else tensorflow-datasets)")


def resolve_data_dir(data_dir=None):
  """``data_dir`` if given, else ``$L2O_SCALE_DATA_DIR``, else None."""
  return data_dir or os.environ.get(DATA_DIR_ENV) or None


def add_data_dir_argument(parser):
  """Declares ``--data_dir`` on an argparse parser, with one meaning for
  every command line: None when not given, which
  :func:`resolve_data_dir` (and every loader here) reads as
  ``$L2O_SCALE_DATA_DIR``, else tensorflow-datasets."""
  parser.add_argument("--data_dir", default=None, help=DATA_DIR_HELP)


def _find_file(folder, stem):
  for name in (stem, stem + ".gz"):
    path = os.path.join(folder, name)
    if os.path.exists(path):
      return path
  return None


def _read_idx(path, shape=None):
  """Reads an IDX file (optionally gzipped); the shape comes from its header.

  The header is checked against the file (magic number, unsigned bytes,
  the data's length) and, given ``shape`` (None for any size along an
  axis), against the shape expected of it: a file whose header does not
  describe its data, or describes other data, raises
  :class:`DataNotFoundError` naming it, in one line.

  Why long: each check of the header against the data is a line of its own
  naming the file.
  """
  opener = gzip.open if path.endswith(".gz") else open
  try:
    with opener(path, "rb") as f:
      raw = f.read()
  except (EOFError, zlib.error, gzip.BadGzipFile) as e:
    raise DataNotFoundError("{} is truncated or corrupt ({}); download it "
                            "again.".format(path, e or type(e).__name__))
  if len(raw) < 4:
    raise DataNotFoundError("{} is truncated ({} bytes, no IDX header); "
                            "download it again.".format(path, len(raw)))
  magic = int.from_bytes(raw[0:4], "big")
  ndim = magic & 0xFF
  dtype_code = (magic >> 8) & 0xFF
  if magic >> 16 or not ndim:
    raise DataNotFoundError("{} is not an IDX file (magic number 0x{:08x}); "
                            "download it again.".format(path, magic))
  if dtype_code != 0x08:
    raise ValueError("{}: only unsigned-byte IDX files are supported".format(
        path))
  offset = 4 + 4 * ndim
  if len(raw) < offset:
    raise DataNotFoundError("{} is truncated ({} bytes, a header of {}); "
                            "download it again.".format(path, len(raw),
                                                        offset))
  dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
  described = "x".join(str(d) for d in dims)
  if shape is not None and (len(dims) != len(shape) or any(
      e is not None and d != e for d, e in zip(dims, shape))):
    raise DataNotFoundError(
        "{}: its IDX header describes {} values, not {}; the file is "
        "corrupt or of another dataset; download it again.".format(
            path, described,
            "x".join("N" if e is None else str(e) for e in shape)))
  count = int(np.prod(dims))
  if len(raw) != offset + count:
    raise DataNotFoundError(
        "{} is {} ({} bytes, its IDX header describes {} values in {}); "
        "download it again.".format(
            path, "truncated" if len(raw) < offset + count else
            "longer than its header says", len(raw), described,
            offset + count))
  arr = np.frombuffer(raw, dtype=np.uint8, count=count, offset=offset)
  return arr.reshape(dims)


NUM_CLASSES = 10  # MNIST and CIFAR-10


def check_labels(labels, path, num_classes=NUM_CLASSES):
  """Raises DataNotFoundError naming ``path`` when a label is not a class
  (0..num_classes-1): the losses would fail on it mid-run (sparse labels)
  or silently train on a wider one-hot (metarun's ``max(labels) + 1``)."""
  labels = np.asarray(labels)
  bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
  if bad.size:
    raise DataNotFoundError(
        "{} holds label {} at row {} ({} label(s) outside the classes "
        "0..{}): the file is corrupt or not of this dataset; download it "
        "again.".format(path, labels[bad[0]], bad[0], bad.size,
                        num_classes - 1))


def _mnist_from_folder(folder, split):
  image_stem, label_stem = _MNIST_FILES[split]
  image_path = _find_file(folder, image_stem)
  label_path = _find_file(folder, label_stem)
  if image_path is None or label_path is None:
    return None
  images = _read_idx(image_path, (None, 28, 28))
  labels = _read_idx(label_path, (None,))
  check_labels(labels, label_path)
  if images.shape[0] != labels.shape[0]:
    raise DataNotFoundError(
        "{} holds {} images but {} holds {} labels: one of them is of "
        "another set or damaged; download them again.".format(
            image_path, images.shape[0], label_path, labels.shape[0]))
  if not images.shape[0]:
    raise DataNotFoundError("{} holds no images; download it again.".format(
        image_path))
  return images, labels


def _mnist_from_tfds(split, data_dir):
  """Loads MNIST with tfds; returns None if tfds cannot provide it."""
  try:  # An optional package, imported where it may stand in.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  try:
    arrays = tfds.as_numpy(tfds.load(
        "mnist", split=split, batch_size=-1, as_supervised=True,
        data_dir=data_dir, download=data_dir is None))
  except Exception:  # pylint: disable=broad-except
    return None
  images, labels = arrays
  return images.reshape(-1, 28, 28), labels


def load_mnist_arrays(split="train", data_dir=None):
  """MNIST ``split`` ('train' or 'test') as (uint8 [N,28,28], int labels).

  Looks in ``data_dir`` / ``$L2O_SCALE_DATA_DIR`` for the IDX files first,
  then asks tensorflow-datasets.
  """
  if split not in _MNIST_FILES:
    raise ValueError("MNIST split must be 'train' or 'test', not {!r}".format(
        split))
  folder = resolve_data_dir(data_dir)
  looked = []
  if folder is not None:
    looked.append("the folder {} (IDX files {}[.gz], {}[.gz])".format(
        os.path.abspath(folder), *_MNIST_FILES[split]))
    found = _mnist_from_folder(folder, split)
    if found is not None:
      return found
  found = _mnist_from_tfds(split, folder)
  looked.append("tensorflow-datasets 'mnist' ({})".format(
      "data_dir=" + folder if folder else "default data dir, download allowed"))
  if found is not None:
    return found
  raise DataNotFoundError(
      "MNIST {} split not found. Looked in: {}. Provide it with --data_dir=DIR "
      "or {}=DIR, where DIR holds the standard MNIST IDX files (e.g. "
      "{}.gz), or let tensorflow-datasets download it on a machine with "
      "internet access.".format(split, "; ".join(looked), DATA_DIR_ENV,
                                _MNIST_FILES[split][0]))


def mnist(train=True, data_dir=None, one_hot=False, verbose=True):
  """MNIST as a :data:`Dataset`: float32 images [N,28,28,1] in [0,1].

  ``train`` selects the train or test split; labels are int32, or one-hot
  float32 with ``one_hot`` (as the training code feeds them). Reports once
  when the train split is smaller than the official one (offline subset).
  """
  split = "train" if train else "test"
  images, labels = load_mnist_arrays(split, data_dir)
  data = (images.astype(np.float32) / 255.).reshape(-1, 28, 28, 1)
  labels = labels.astype(np.int32)
  n = data.shape[0]
  if train and n < MNIST_FULL_TRAIN_SIZE and split not in _announced and verbose:
    _announced.add(split)
    print("Note: MNIST train split has {} images (offline subset, not the "
          "official {}).".format(n, MNIST_FULL_TRAIN_SIZE))
  if one_hot:
    labels = one_hot_rows(labels, 10)
  return Dataset(data, labels, n)


def batch_indices(data_size, num_batches, batch_size, rng=None):
  """``num_batches`` shuffled minibatches covering the data epoch by epoch.

  Port of the original module-level ``batch_indices(data_size, num_batches,
  batch_size)`` (training datasets.py; the same walk as the evaluation
  ``Dataset.batch_indices``): one shuffle of the indices, consecutive slices,
  and a reshuffle whenever a batch would run past the end of the data. With
  the default ``rng`` (the global ``np.random``) it makes the same calls as
  the original, so the same global seed gives the same batches. Returns an
  int32 array [num_batches, min(batch_size, data_size)]: a batch larger than
  the data is, as the original's slice past the end made it, the whole data
  reshuffled before every batch (the sparse softmax sets ask for 23 of 5).
  """
  rng = np.random if rng is None else rng
  check_batch_indices(num_batches, batch_size, data_size)
  try:
    out = np.empty((num_batches, min(batch_size, data_size)), dtype=np.int32)
  except MemoryError:
    raise ValueError(_too_many_batches(num_batches, batch_size, data_size,
                                       None)) from None
  index_in_epoch = 0
  indices = np.arange(data_size)
  rng.shuffle(indices)
  for i in range(num_batches):
    start = index_in_epoch
    index_in_epoch += batch_size
    if index_in_epoch > data_size:
      rng.shuffle(indices)
      start = 0
      index_in_epoch = batch_size
    out[i] = indices[start:index_in_epoch]
  return out


def physical_memory_bytes():
  """This machine's memory in bytes, or None where the system does not
  say."""
  try:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (AttributeError, OSError, ValueError):
    return None


def check_batch_indices(num_batches, batch_size, data_size):
  """ValueError (one line) when the indices of :func:`batch_indices` would
  not fit in this machine's memory: a run of that many steps cannot be
  held, and numpy would fail with a bare allocation error (or the system
  kill the process once the pages are touched)."""
  memory = physical_memory_bytes()
  needed = 4 * int(num_batches) * min(int(batch_size), int(data_size))
  if memory is not None and needed > memory:
    raise ValueError(_too_many_batches(num_batches, batch_size, data_size,
                                       memory))


def _too_many_batches(num_batches, batch_size, data_size, memory):
  return ("{} minibatches of {} rows need {} of memory for their row "
          "indices, more than this machine{}: run fewer steps".format(
              num_batches, min(batch_size, data_size), format_bytes(
                  4 * num_batches * min(batch_size, data_size)),
              " has ({})".format(format_bytes(memory)) if memory else
              " could give"))


def format_bytes(count):
  """``count`` bytes in the largest binary unit of at least 1."""
  for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
    if count < 1024 or unit == "PiB":
      return ("{:.0f} {}" if unit == "B" else "{:.3g} {}").format(count, unit)
    count /= 1024.


def _dataset(x, y):
  """float32 features, int32 labels, as every original generator returns."""
  x = np.asarray(x).astype("float32")
  return Dataset(x, np.asarray(y).astype("int32"), len(x))


EMPTY_DATASET = Dataset(np.array([], dtype="float32"),
                        np.array([], dtype="int32"), 0)


def _seed_global_rng(random_seed):
  """Draws a seed if None, then seeds np.random (the originals' preamble)."""
  random_seed = (np.random.randint(MAX_SEED) if random_seed is None
                 else random_seed)
  np.random.seed(random_seed)


def noisy_parity_class(n_samples, n_classes=2, n_context_ids=5,
                       noise_prob=0.25, random_seed=None):
  """Sparse ids whose label is their sum mod n_classes, 25% flipped.

  Port of the original ``noisy_parity_class``; note it seeds np.random with
  ``random_seed`` directly (None reseeds from the OS), unlike the others.
  """
  np.random.seed(random_seed)
  x = np.random.randint(0, n_classes, [n_samples, n_context_ids])
  noise = np.random.binomial(1, noise_prob, [n_samples])
  y = (np.sum(x, 1) + noise) % n_classes
  return _dataset(x, y)


def random(n_features, n_samples, n_classes=2, sep=1.0, random_seed=None):
  """Gaussian-cluster classification data (original ``random``).

  The original calls ``sklearn.datasets.make_classification`` with every
  feature informative; sklearn is used when installed, otherwise
  :func:`_make_classification` reimplements the same algorithm (same
  distributions, not bit-identical draws).
  """
  try:  # An optional package, imported where it may stand in.
    from sklearn.datasets import make_classification  # pylint: disable=g-import-not-at-top
  except ImportError:
    make_classification = _make_classification
  x, y = make_classification(n_samples=n_samples, n_features=n_features,
                             n_informative=n_features, n_redundant=0,
                             n_classes=n_classes, class_sep=sep,
                             random_state=random_seed)
  return _dataset(x, y)


def _rng(random_state):
  if random_state is None:
    return np.random.mtrand._rand  # pylint: disable=protected-access
  return np.random.RandomState(random_state)


def _hypercube_vertices(n_vertices, dimensions, rng):
  """``n_vertices`` distinct {0,1}^dimensions vertices, drawn at random."""
  chosen = []
  seen = set()
  while len(chosen) < n_vertices:
    code = tuple(rng.randint(2, size=dimensions))
    if code not in seen:
      seen.add(code)
      chosen.append(code)
  return np.array(chosen, dtype=float)


def _make_classification(n_samples, n_features, n_informative, n_redundant,
                         n_classes, class_sep, random_state,
                         n_clusters_per_class=2, flip_y=0.01):
  """numpy version of sklearn's ``make_classification`` (Guyon's Madelon).

  Two Gaussian clusters per class on distinct hypercube vertices of side
  ``2 * class_sep``, random linear covariance per cluster, 1% label flips,
  samples and features shuffled. Only the options ``random`` uses.
  """
  rng = _rng(random_state)
  n_clusters = n_classes * n_clusters_per_class
  if n_informative < np.log2(n_clusters):
    raise ValueError("n_classes * n_clusters_per_class must be <= "
                     "2**n_informative")
  per_cluster = [n_samples // n_clusters] * n_clusters
  for i in range(n_samples - sum(per_cluster)):
    per_cluster[i % n_clusters] += 1
  x = np.zeros((n_samples, n_features))
  y = np.zeros(n_samples, dtype=int)
  centroids = _hypercube_vertices(n_clusters, n_informative, rng)
  centroids = centroids * 2 * class_sep - class_sep
  x[:, :n_informative] = rng.standard_normal(size=(n_samples, n_informative))
  stop = 0
  for k, centroid in enumerate(centroids):
    start, stop = stop, stop + per_cluster[k]
    y[start:stop] = k % n_classes
    cov = 2 * rng.uniform(size=(n_informative, n_informative)) - 1
    x[start:stop, :n_informative] = (
        np.dot(x[start:stop, :n_informative], cov) + centroid)
  if n_redundant > 0:
    mix = 2 * rng.uniform(size=(n_informative, n_redundant)) - 1
    x[:, n_informative:n_informative + n_redundant] = np.dot(
        x[:, :n_informative], mix)
  n_useless = n_features - n_informative - n_redundant
  if n_useless > 0:
    x[:, -n_useless:] = rng.standard_normal(size=(n_samples, n_useless))
  flip = rng.uniform(size=n_samples) < flip_y
  y[flip] = rng.randint(n_classes, size=flip.sum())
  order = rng.permutation(n_samples)
  x, y = x[order], y[order]
  features = np.arange(n_features)
  rng.shuffle(features)
  return x[:, features], y


def random_binary(n_features, n_samples, random_seed=None):
  """Uniform {0,1} features, all-zero labels (original ``random_binary``)."""
  _seed_global_rng(random_seed)
  x = np.random.randint(2, size=(n_samples, n_features))
  return _dataset(x, np.zeros((n_samples, 1)))


def random_symmetric(n_features, n_samples, random_seed=None):
  """Gaussian rows and their negatives, zero labels (``random_symmetric``).

  As the original, an odd ``n_samples`` gives ``n_samples - 1`` rows but
  ``n_samples`` labels.
  """
  _seed_global_rng(random_seed)
  x1 = np.random.normal(size=(int(n_samples / 2), n_features))
  x = np.concatenate((x1, -x1), axis=0)
  y = np.zeros((n_samples, 1))
  return Dataset(x.astype("float32"), y.astype("int32"), len(x))


def random_mlp(n_features, n_samples, random_seed=None, n_layers=6, width=20):
  """Labels = (first output of a random ReLU MLP > 0) (``random_mlp``).

  Quirk kept: every layer's weights are scaled by sqrt(2 / n_features), not
  by the layer's own fan-in.
  """
  _seed_global_rng(random_seed)
  x = np.random.normal(size=(n_samples, n_features))
  y = x
  n_in = n_features
  scale_factor = np.sqrt(2.) / np.sqrt(n_features)
  for _ in range(n_layers):
    weights = np.random.normal(size=(n_in, width)) * scale_factor
    y = np.dot(y, weights).clip(min=0)
    n_in = width
  y = y[:, 0]
  y[y > 0] = 1
  return _dataset(x, y)


# --- CIFAR-10 ---------------------------------------------------------------

_CIFAR_PY_DIR = "cifar-10-batches-py"
_CIFAR_BIN_DIR = "cifar-10-batches-bin"
_CIFAR_TRAIN_BATCHES = ["data_batch_{}".format(i) for i in range(1, 6)]
_CIFAR_TEST_BATCHES = ["test_batch"]


def _cifar_candidate_dirs(folder):
  """The folder itself and its standard CIFAR-10 sub-folders."""
  return [folder, os.path.join(folder, _CIFAR_PY_DIR),
          os.path.join(folder, _CIFAR_BIN_DIR)]


def _read_cifar_pickle(path):
  try:
    with open(path, "rb") as f:
      batch = pickle.load(f, encoding="bytes")
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    labels = np.asarray(batch[b"labels"]).reshape(-1)
    if len(labels) != len(data):
      raise ValueError("{} images but {} labels".format(len(data),
                                                        len(labels)))
    return data, labels
  except (pickle.UnpicklingError, EOFError, ValueError, KeyError, TypeError,
          IndexError, AttributeError) as e:
    raise DataNotFoundError("{} is not a CIFAR-10 python batch (truncated or "
                            "corrupt: {}); download it again.".format(
                                path, str(e) or type(e).__name__)) from None


def _read_cifar_bin(path):
  raw = np.fromfile(path, dtype=np.uint8)
  if raw.size == 0 or raw.size % 3073:
    raise DataNotFoundError("{} is not a CIFAR-10 binary batch ({} bytes, "
                            "not a multiple of 3073 per image); download it "
                            "again.".format(path, raw.size))
  raw = raw.reshape(-1, 3073)
  return raw[:, 1:].reshape(-1, 3, 32, 32), raw[:, 0]


def _cifar_from_folder(folder, train):
  """(uint8 NCHW images, labels) from pickles or .bin files, or None."""
  names = _CIFAR_TRAIN_BATCHES if train else _CIFAR_TEST_BATCHES
  for directory in _cifar_candidate_dirs(folder):
    for suffix, reader in (("", _read_cifar_pickle), (".bin", _read_cifar_bin)):
      paths = [os.path.join(directory, n + suffix) for n in names]
      if all(os.path.isfile(p) for p in paths):
        parts = [reader(p) for p in paths]
        for p, (_, labels) in zip(paths, parts):
          check_labels(labels, p)
        return (np.concatenate([d for d, _ in parts]),
                np.concatenate([l for _, l in parts]))
  return None


def _cifar_from_tfds(train, data_dir):
  """CIFAR-10 via tfds as (uint8 NCHW, labels), or None if unavailable."""
  try:  # An optional package, imported where it may stand in.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  try:
    images, labels = tfds.as_numpy(tfds.load(
        "cifar10", split="train" if train else "test", batch_size=-1,
        as_supervised=True, data_dir=data_dir, download=data_dir is None))
  except Exception:  # pylint: disable=broad-except
    return None
  return np.asarray(images).transpose(0, 3, 1, 2), labels


def cifar10(train=True, data_path=None, data_dir=None):
  """CIFAR-10 as a :data:`Dataset`: float32 [N,32,32,3] in [0,1], int32 labels.

  Port of the original ``cifar10(train, data_path='cifar10')``, which read the
  python pickles ``data_batch_1..5``/``test_batch`` from ``data_path`` and
  transposed them to NHWC. ``data_path`` or ``data_dir`` (or
  ``$L2O_SCALE_DATA_DIR``) may be a folder holding the batches or holding
  ``cifar-10-batches-py``/``cifar-10-batches-bin``; otherwise tfds
  ``cifar10``. Labels are returned flat (N,); the original's (N, 1) column
  was squeezed by its loss anyway.
  """
  folder = data_path or resolve_data_dir(data_dir)
  split = "train" if train else "test"
  looked = []
  if folder is not None:
    looked.append("the folder {} (and its {}/ or {}/ sub-folders: python "
                  "pickles or .bin files {})".format(
                      os.path.abspath(folder), _CIFAR_PY_DIR, _CIFAR_BIN_DIR,
                      ", ".join(_CIFAR_TRAIN_BATCHES if train
                                else _CIFAR_TEST_BATCHES)))
    found = _cifar_from_folder(folder, train)
  else:
    found = None
  if found is None:
    found = _cifar_from_tfds(train, folder)
    looked.append("tensorflow-datasets 'cifar10' ({})".format(
        "data_dir=" + folder if folder else
        "default data dir, download allowed"))
  if found is None:
    raise DataNotFoundError(
        "CIFAR-10 {} split not found. Looked in: {}. Provide it with "
        "--data_dir=DIR or {}=DIR, where DIR holds the standard "
        "{} (or {}) folder, or let tensorflow-datasets download it on a "
        "machine with internet access.".format(
            split, "; ".join(looked), DATA_DIR_ENV, _CIFAR_PY_DIR,
            _CIFAR_BIN_DIR))
  images, labels = found
  data = images.transpose(0, 2, 3, 1).astype(np.float32) / 255.
  return Dataset(data, np.asarray(labels).astype(np.int32), len(data))
