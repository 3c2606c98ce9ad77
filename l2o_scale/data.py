"""MNIST for examples and Keras users: ``load_mnist(data_dir)`` -> (x, y).

A thin public face of :func:`problems.datasets.mnist` (the loader every
problem set uses): the same search order (``data_dir``, then
``$L2O_SCALE_DATA_DIR``, then tensorflow-datasets, which may download) and
the same clear error when MNIST is nowhere.
"""

from problems import datasets


def load_mnist(data_dir=None, split="train"):
  """MNIST ``split`` ('train' or 'test') as numpy arrays ``(x, y)``.

  ``x``: float32 images [N, 28, 28, 1] scaled to [0, 1]; ``y``: int32
  labels 0-9. ``data_dir``: a folder with the standard IDX files
  (``train-images-idx3-ubyte[.gz]``, ...), e.g. an offline copy; without it,
  ``$L2O_SCALE_DATA_DIR`` or tensorflow-datasets. Raises
  ``problems.datasets.DataNotFoundError`` naming where it looked, or, in
  one line, the file whose IDX header is not MNIST's (other sizes, a
  length other than the header's, images and labels of different
  counts).
  """
  if split not in ("train", "test"):
    raise ValueError("split must be 'train' or 'test', not {!r}".format(
        split))
  dataset = datasets.mnist(train=split == "train", data_dir=data_dir,
                           verbose=False)
  return dataset.data, dataset.labels
