"""Meta-training of a learned schedule-and-decay head
(:mod:`l2o_scale.steps.learned_schedule`) over a frozen learned optimizer:
antithetic evolution strategies over whole runs (:mod:`.estimator`) on small
tasks of the families users train (:mod:`.tasks`), by the recipe of
:mod:`.training`; ``python -m l2o_scale.head_training --train_dir=...``
runs it (docs/schedule-head.md)."""
