"""Task-suite benchmark: training quality across model families against
tuned baselines (``python -m l2o_scale.benchmark``).

Not the speed benchmark ``python -m l2o_scale.speed``, which times one
optimizer step. This one trains a suite of Keras tasks (:mod:`.tasks`) with
an optimizer and with Adam, AdamW and SGD with momentum, each tuned per task
on a validation split, and reports final training losses, held-out metrics
and the speedup over tuned Adam (see docs/benchmark.md).
"""
