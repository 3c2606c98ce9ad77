"""The speed benchmark (``python -m l2o_scale.speed``): the step, unroll
and meta-iteration timings (``bench``), the time to a trained optimizer
(``time_to_trained``) and the curvature estimators' timings
(``curvature_timing``). Nothing in the product imports them; what they
measured is on docs/performance-results.md."""
