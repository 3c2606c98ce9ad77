"""What changes a step, written once for every caller: the TF1 update rules
the original relies on (:mod:`l2o_scale.steps.tf1_optimizers`) and the step
transforms composed by :func:`l2o_scale.steps.transform.chain` (the step
schedule, the decoupled weight decay; :mod:`l2o_scale.steps.settings`
builds them from flags). Meta-training, meta-testing and the Keras
optimizer import from here; this package imports nothing of theirs."""
