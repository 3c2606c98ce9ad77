"""``python -m l2o_scale.tf1_reference``: the documented command of the
fidelity replayer, whose code is :mod:`l2o_scale.fidelity.tf1_reference`."""

import os
import sys

if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
  quiet_cuda.import_tensorflow()
  from l2o_scale.fidelity import tf1_reference  # pylint: disable=g-import-not-at-top
  sys.exit(tf1_reference.main())
