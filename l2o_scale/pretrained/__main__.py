"""``python -m l2o_scale.pretrained``: lists the shipped pretrained
optimizers with their cards."""

from l2o_scale import pretrained
from l2o_scale.runs import entry_point

if __name__ == "__main__":
  entry_point.run_main("python -m l2o_scale.pretrained", pretrained.main)
