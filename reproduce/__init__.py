"""The reproduction of the paper's experiments (``bash reproduce/all.sh``).

Its scripts run from the repository root as modules, e.g.
``python -m reproduce.plot``; ``reproduce/all.sh`` runs
``python -m reproduce.pipeline``. One module per job:

* :mod:`reproduce.pipeline`: the sizes, variants and test problems, and the
  stages that meta-train, meta-test and draw them;
* :mod:`reproduce.plot`: the loss curves and ``results.md`` of a run
  (:mod:`reproduce.medium` and :mod:`reproduce.figures` for the medium
  size's pooling, verdicts and figures; :mod:`reproduce.run_log` the
  meta-training logs and the facts of the run; :mod:`reproduce.styles` the
  names and looks);
* :mod:`reproduce.study_report`: the flatness study's results page, with
  :mod:`reproduce.study_analysis` (its data, comparisons and words),
  :mod:`reproduce.study_figures` and :mod:`reproduce.seed_stats`
  (statistics over meta-training seeds);
* tools run by hand (docs/reproduction.md, "Tools run by hand"):
  :mod:`reproduce.ship_pretrained` (a subcommand per way of shipping an
  optimizer or updating its card), :mod:`reproduce.pretrained_metatest`
  and :mod:`reproduce.horizon_results` (the shipped optimizers' pages),
  :mod:`reproduce.study_benchmark` (the study on the task-suite benchmark),
  :mod:`reproduce.head_objective` and :mod:`reproduce.head_test` (the
  schedule head's objective and its look at the test tasks),
  :mod:`reproduce.machine` (the machine line of a results page).

Every one ends through :func:`l2o_scale.runs.entry_point.run_main`.
"""
