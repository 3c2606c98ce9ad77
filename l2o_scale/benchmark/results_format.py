"""What names a task-suite benchmark's ``results.json``: its format line and
version, which the suite writes and ``--reuse_baselines`` /
``--reuse_optimizer`` check before taking runs from an earlier page."""

FORMAT = "l2o-scale task-suite benchmark"
VERSION = 1
