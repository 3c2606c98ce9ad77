"""Checks of the reproduction: ``horizon_check`` (a learned optimizer
against Adam at long horizons, ``python -m l2o_scale.tools.horizon_check``).
Nothing in the product imports them. The speed benchmark lives in
:mod:`l2o_scale.speed`, the fidelity replayer in
:mod:`l2o_scale.fidelity`, the cluster launcher in :mod:`l2o_scale.cluster`."""
