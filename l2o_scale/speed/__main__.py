"""``python -m l2o_scale.speed``: the speed benchmark (time per learned step,
per meta-training unroll, to a trained optimizer). Not the task-suite
benchmark of training quality, ``python -m l2o_scale.benchmark``."""

from l2o_scale.runs import entry_point
from l2o_scale.speed import command

if __name__ == "__main__":
  entry_point.run_main("python -m l2o_scale.speed", command.main)
