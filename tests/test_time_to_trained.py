"""The time-to-trained benchmark's rules and bookkeeping, on a stand-in
training process that writes a checkpoint state file as metarun does and a
scripted yardstick (no TensorFlow, a few seconds): which snapshot counts,
which time is reported, early stop, pauses left out, the summary."""

import os
import sys
import textwrap

import pytest

from l2o_scale.speed import time_to_trained as ttt

FAKE_TRAINING = textwrap.dedent("""
    import os, sys, time
    logdir = os.path.join(sys.argv[1], "HierarchicalRNN_GRUCell_20_2")
    os.makedirs(logdir)
    listed = []
    for k in range(1, 6):
      time.sleep(0.15)
      print("[meta-iteration {}/5] training: 1 unrolls of 20 steps"
            .format(k), flush=True)
      print("[meta-iteration {}/5] unroll 1/1 (20 steps) meta-objective 1"
            .format(k), flush=True)
      print("selection {}, robust score={} (...)".format(k, 10. * k),
            flush=True)
      open(os.path.join(logdir, "model.ckpt-{}.index".format(k)), "w").close()
      listed.append(k)
      if k == 2:  # a best model, as --selection writes it: not a snapshot
        open(os.path.join(logdir, "model.ckpt-0.index"), "w").close()
        listed.append(0)
      with open(os.path.join(logdir, "checkpoint.tmp"), "w") as f:
        f.write("".join('all_model_checkpoint_paths: "model.ckpt-{}"\\n'
                        .format(n) for n in listed))
      os.replace(os.path.join(logdir, "checkpoint.tmp"),
                 os.path.join(logdir, "checkpoint"))
""")

# Meta-iteration -> yardstick score: 3 is the first <= 0.05; 2 is lower than
# the threshold only after rounding, 5 is the lowest.
SCORES = {1: 1.5, 2: 0.0500001, 3: 0.04, 4: 0.06, 5: 0.01}


def _job(tmp_path, stop_at_threshold):
  script = tmp_path / "fake_training.py"
  script.write_text(FAKE_TRAINING)
  scored = []

  def score(path):
    scored.append(os.path.basename(path))
    return SCORES[int(path.rsplit("-", 1)[1])]

  train_dir = str(tmp_path / "run")
  job = ttt.run_job([sys.executable, str(script), train_dir], train_dir,
                    score, threshold=0.05,
                    stop_at_threshold=stop_at_threshold,
                    log_path=str(tmp_path / "run.log"))
  return job, scored


def test_time_to_trained_is_the_first_snapshot_at_or_below_threshold(tmp_path):
  job, scored = _job(tmp_path, stop_at_threshold=True)
  # Snapshots are model.ckpt-K, K >= 1, scored in order; the training is
  # stopped at the first one <= 0.05 (3), so 4 and 5 are never written.
  assert scored == ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
  assert job["stopped_at_threshold"]
  assert [s["meta_iteration"] for s in job["snapshots"]] == [1, 2, 3]
  assert job["meta_iterations_to_trained"] == 3
  assert job["seconds_to_trained"] == job["snapshots"][2]["elapsed"]
  assert not os.path.exists(tmp_path / "run" / "HierarchicalRNN_GRUCell_20_2" /
                            "model.ckpt-5.index")
  assert job["own_selection_scores"] == {1: 10., 2: 20., 3: 30.}
  elapsed = [s["elapsed"] for s in job["snapshots"]]
  assert elapsed == sorted(elapsed)
  assert job["seconds_per_meta_iteration"] == pytest.approx(
      (elapsed[2] - elapsed[0]) / 2)
  assert job["first_unroll_elapsed"] > 0
  # Its line is the end of the first unroll, not the one announcing it.
  assert ttt.FIRST_UNROLL_LINE.match(
      "[meta-iteration 1/4] unroll 1/5 (20 steps) meta-objective -0.004")
  assert not ttt.FIRST_UNROLL_LINE.match(
      "[meta-iteration 1/4] training on FullyConnected: 5 unrolls of 20 steps")
  assert (tmp_path / "run.log").read_text().count("] unroll 1/1") == 3


def test_run_to_end_scores_every_snapshot_and_keeps_the_first_hit(tmp_path):
  job, scored = _job(tmp_path, stop_at_threshold=False)
  assert len(scored) == 5 and job["returncode"] == 0
  assert not job["stopped_at_threshold"]
  # The lowest score (5) does not count: the first one <= threshold does.
  assert job["meta_iterations_to_trained"] == 3
  assert job["seconds_to_trained"] == job["snapshots"][2]["elapsed"]
  # Each pause (while a snapshot was scored) is left out of what follows.
  assert job["paused_seconds"] > 0


def test_rules_on_given_numbers():
  snaps = [dict(meta_iteration=4, elapsed=40., score=0.01),
           dict(meta_iteration=2, elapsed=20., score=0.05),
           dict(meta_iteration=1, elapsed=12., score=None)]
  assert ttt.time_to_threshold(snaps, 0.05) == (20., 2)
  assert ttt.time_to_threshold(snaps, 0.001) is None
  # Pauses that ended before the moment are subtracted, later ones not.
  assert ttt.active_elapsed(100., 10., [(20., 25.), (50., 53.), (101., 140.)]
                            ) == 82.
  assert ttt.seconds_per_meta_iteration(snaps) == pytest.approx(28. / 3)
  assert ttt.seconds_per_meta_iteration(snaps[:1]) is None


def test_summary_medians_count_never_reached_as_infinite():
  def job(recipe, seed, seconds, its):
    return dict(recipe=recipe, seed=seed, seconds_to_trained=seconds,
                meta_iterations_to_trained=its, seconds_per_meta_iteration=2.,
                snapshots=[dict(meta_iteration=1, elapsed=9., score=1.)])
  jobs = [job("stable", 1, 300., 24), job("fast", 1, 30., 2),
          job("fast", 2, None, None), job("stable", 2, 500., 26),
          job("stable", 3, None, None), job("fast", 3, 20., 2)]
  summary = ttt.summarize(jobs, ["stable", "fast"])
  assert summary["fast"]["seconds_to_trained"] == [30., None, 20.]
  assert summary["fast"]["median_seconds_to_trained"] == 30.
  assert summary["stable"]["median_seconds_to_trained"] == 500.
  assert summary["fast"]["speedup_vs_stable"] == pytest.approx(500. / 30.)
  assert summary["stable"]["speedup_vs_stable"] == 1.
  assert summary["fast"]["median_seconds_per_meta_iteration"] == 2.
  # Two of three never reached: the median is not reached either.
  jobs.append(job("fast", 4, None, None))
  assert ttt.summarize(jobs, ["stable", "fast"])["fast"][
      "median_seconds_to_trained"] is None


def test_recipes_take_turns_and_bad_recipes_are_refused(tmp_path):
  assert ttt.schedule(["a", "b"], [1, 2, 3]) == [
      (1, "a"), (1, "b"), (2, "b"), (2, "a"), (3, "a"), (3, "b")]
  flagfile = tmp_path / "fast.flags"
  flagfile.write_text("--meta_optimizer=adam\n")
  assert ttt.recipe_flags("fast={}".format(flagfile)) == (
      "fast", ["--flagfile={}".format(flagfile)])
  assert ttt.recipe_flags("stable") == ("stable", ["--recipe=stable"])
  assert ttt.main(["--recipe", "nosuch"]) == 2
  assert ttt.main(["--recipe", "x={}".format(tmp_path / "none")]) == 2
