"""Shared test fixtures: where the offline MNIST and the TF1 fixtures are."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Under pytest-xdist every worker (one per core) would otherwise start
# TensorFlow thread pools as wide as the machine, so the workers' threads
# contend for the same cores; one intra-op and one inter-op thread per
# worker (and per program a test starts, which inherits the variables) keep
# each core busy with one (measured: about 5% less CPU time than two
# inter-op threads each). A user's own setting wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
  os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

# Before any test runs a TensorFlow operation, as a user's script imports
# it: TensorFlow's CPU allocator is chosen then (l2o_scale.runs.cpu_allocator).
import l2o_scale  # pylint: disable=g-import-not-at-top,unused-import

import pytest  # pylint: disable=g-import-not-at-top

from tests.paths import FIXTURES  # pylint: disable=g-import-not-at-top
from tests.paths import mnist_dir  # pylint: disable=g-import-not-at-top


@pytest.fixture
def data_dir():
  path = mnist_dir()
  if not os.path.exists(os.path.join(path, "t10k-images-idx3-ubyte.gz")):
    pytest.fail("MNIST not found in {} (set L2O_SCALE_DATA_DIR)".format(path))
  return path


@pytest.fixture
def fixtures_dir():
  if not os.path.isdir(FIXTURES):
    pytest.fail("TF1 reference fixtures not found at {}".format(FIXTURES))
  return FIXTURES


@pytest.fixture(scope="module")
def metarun():
  """``metarun(*args, env=None)``: ``python metarun.py *args`` (``env``
  added to the environment) as a CompletedProcess. A module's commands share
  one process (tests/metarun_process.py), so TensorFlow is imported once a
  module, not once a command."""
  from tests import metarun_process  # pylint: disable=g-import-not-at-top
  with metarun_process.MetarunProcess() as run:
    yield run
