"""``python -m l2o_scale.pretrained``: lists the shipped pretrained
optimizers with their cards."""

import sys

from l2o_scale import pretrained

if __name__ == "__main__":
  sys.exit(pretrained.main())
