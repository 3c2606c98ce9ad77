"""The end of a meta-training run's output (``metarun.py``): the best model,
the latest checkpoint and, last, whether the run learned; a run that
evaluated but kept no best model ends with exit status 3 and what to try.
"""

import sys

from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import training_config as training_lib


def report_end(config, result, logdir):
  """The end-of-run lines of the run of ``config`` (its RunConfig): the
  best model (``result["best_checkpoint"]``, the ``model.ckpt-0`` it
  wrote, or None), the latest checkpoint and, last, whether it learned. A
  run
  that evaluated but kept no best model (every evaluation cost, or every
  robust selection score, was non-finite) exits 3 saying why and what to
  try; a "Best model" line only names a checkpoint that was written."""
  del logdir  # The result names the run's checkpoints.
  schedule = config.schedule
  best = result.get("best_checkpoint")
  if best is None and result.get("evaluations") and not schedule.if_cl:
    sys.stderr.write("metarun.py: {}\n".format(no_best_model(config,
                                                              result)))
    return 3
  latest = "Latest checkpoint: {}".format(result["last_checkpoint"])
  if best is None:
    print("{}\n{}".format(latest, reporting.paragraph(
        "Done. No best model (model.ckpt-0) yet: no evaluation ran (one "
        "every --evaluation_period={} meta-iterations).".format(
            schedule.evaluation_period))))
    return 0
  if result.get("best_model_idx") is not None and not schedule.if_cl:
    best_line = "Best model: {} ({} {:.6g}, from meta-iteration {})".format(
        best, "robust score" if config.training.selection == "robust"
        else "evaluation cost", result["best_evaluation"],
        result["best_model_idx"])
  elif result.get("best_model_idx") is not None:  # curriculum: no cost, as
    # its best cost is re-measured at each stage's horizon.
    best_line = "Best model: {} (from meta-iteration {})".format(
        best, result["best_model_idx"])
  else:
    best_line = "Best model: {}".format(best)
  # The verdict last: the line a user reads first.
  print("{}\n{}\n{}".format(best_line, latest, reporting.paragraph(
      learning_verdict(config, result))))
  return 0


def no_best_model(config, result):
  """The line of a run whose every evaluation left no best model: its
  evaluation costs were non-finite (it diverged) or, with
  ``--selection=robust``, its robust scores were (a selection run diverged
  on a seed, though training may have lowered the objective)."""
  schedule, training = config.schedule, config.training
  if training.selection == "robust":
    return (
        "no model was selected: each of the {} robust selection score(s) "
        "was infinite (a {}-step --selection_steps run diverged on at least "
        "one of its seeds), so no best model (model.ckpt-0) was written; "
        "the latest checkpoint {} holds the meta-parameters trained. More "
        "--num_meta_iterations (the same command with a larger value "
        "resumes) may reach a finite score; a new run with "
        "--selection=original (and --resume=False --overwrite) keeps the "
        "lowest evaluation cost instead.".format(
            result["evaluations"], training.selection_steps,
            result["last_checkpoint"]))
  return (
      "meta-training diverged: all {} evaluation(s) gave a non-finite cost, "
      "so no best model (model.ckpt-0) was written; the latest checkpoint "
      "{} holds diverged meta-parameters. Try a smaller "
      "--meta_learning_rate (now {}) or --gradient_clip_level (now {}), and "
      "--resume=False --overwrite.".format(
          result["evaluations"], result["last_checkpoint"],
          schedule.learning_rate, schedule.gradient_clip))


def learning_verdict(config, result):
  """The start of the end-of-run line: whether the run of ``config``
  learned, i.e. whether a later evaluation improved on the first one.
  Without a curriculum the
  best selection value is compared with the first evaluation's
  (``result["first_evaluation"]``); a curriculum's best cost changes horizon
  with its stage, so there the best model must come from a later
  meta-iteration than the first evaluation."""
  schedule = config.schedule
  period = schedule.evaluation_period
  if result.get("meta_iterations", 0) // period < 2:
    return ("Done. One evaluation only, so whether it learned is not "
            "measured (one every --evaluation_period={} meta-iterations; "
            "more --num_meta_iterations tell).".format(period))
  first = result.get("first_evaluation")
  best_idx = result.get("best_model_idx")
  if not schedule.if_cl and first is not None:
    learned = result["best_evaluation"] < first
  elif best_idx is not None:
    learned = best_idx > period
  else:
    return "Done (whether it learned is not known for this run)."
  # The evaluation lines print the cost; with --selection=robust the best
  # model is chosen, and compared here, by the robust score instead.
  measure = ("robust selection score" if config.training.selection == "robust"
             else "evaluation cost")
  if learned:
    if not schedule.if_cl and first is not None:
      return ("Done. It learned: the best {} ({:.6g}) improved on the "
              "first ({:.6g}).".format(measure, result["best_evaluation"],
                                       first))
    return "Done. It learned: a later evaluation improved on the first."
  hint = "try another"
  if schedule.learning_rate == training_lib.Schedule.learning_rate:
    hint = ("the original's default, which learns nothing visible in hours "
            "on this problem; --recipe=fast trains a useful optimizer")
  return ("Done, but it learned nothing: no evaluation improved on the first "
          "one{} in {} meta-iterations (--meta_learning_rate={:g}: {})."
          .format("" if first is None else " ({} {:.6g})".format(measure,
                                                                first),
                  result["meta_iterations"], schedule.learning_rate, hint))
