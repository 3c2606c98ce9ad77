"""Where the tests find what lies outside the repository: the offline MNIST
and the TF1 reference fixtures in ``../shared`` beside the clone."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
FIXTURES = os.path.join(SHARED, "fixtures", "tf1_reference")


def mnist_dir():
  """The MNIST folder named by L2O_SCALE_DATA_DIR (as .ci/run sets it)."""
  path = os.environ.get("L2O_SCALE_DATA_DIR",
                        os.path.join(SHARED, "data", "mnist"))
  return path
