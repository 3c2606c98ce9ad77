"""``python -m l2o_scale.bench``: the speed benchmark, also
``python -m l2o_scale.speed`` (its code is :mod:`l2o_scale.speed.bench`).
The task-suite benchmark of training quality against tuned baselines is
``python -m l2o_scale.benchmark``."""

if __name__ == "__main__":
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  from l2o_scale.speed import bench  # pylint: disable=g-import-not-at-top
  entry_point.run_main("python -m l2o_scale.bench", bench.main)
