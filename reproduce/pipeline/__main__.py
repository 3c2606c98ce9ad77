"""``python -m reproduce.pipeline``: the reproduction, as
``bash reproduce/all.sh`` runs it (see :mod:`reproduce.pipeline.cli`)."""

import sys

from reproduce.pipeline import cli

if __name__ == "__main__":
  sys.exit(cli.main())
