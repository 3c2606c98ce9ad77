"""``python -m l2o_scale.bench``: the documented command of the benchmark,
whose code is :mod:`l2o_scale.speed.bench`."""

import sys

if __name__ == "__main__":
  from l2o_scale.speed import bench  # pylint: disable=g-import-not-at-top
  sys.exit(bench.main())
