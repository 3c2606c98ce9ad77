"""``python -m reproduce.pipeline``: the reproduction, as
``bash reproduce/all.sh`` runs it (see :mod:`reproduce.pipeline.cli`)."""

from l2o_scale.runs import entry_point
from reproduce.pipeline import cli

if __name__ == "__main__":
  # The pipeline's own lines start with all.sh (the command users type).
  entry_point.run_main("all.sh", cli.main)
