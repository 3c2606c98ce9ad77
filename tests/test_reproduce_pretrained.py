"""Tests of the shipped optimizers' pages and cards:
reproduce/pretrained_metatest.py (their meta-test table),
reproduce/horizon_results.py (the long-horizon table and verdicts) and
reproduce/ship_pretrained.py (the card a shipped optimizer carries).

Why: these pages and cards are what a user reads about a shipped optimizer;
their numbers must be the runs' own, pooled over the right seeds.
"""

import json
import os

import pytest

from reproduce import horizon_results
from reproduce import ship_pretrained
from reproduce import styles
from tests.repro_files import write_events
from tests.repro_files import write_final
from tests.repro_files import write_flat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pretrained_metatest_table(tmp_path):
  """reproduce/pretrained_metatest.py's table: per seed the final train loss
  and held-out accuracy of each optimizer, and their means."""
  from reproduce import pretrained_metatest  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path / pretrained_metatest.PROBLEM)
  for seed, (loss, acc) in zip((6, 12, 18), ((.1, .8), (.2, .9), (.3, .7))):
    write_final(folder, seed, "l2o-scale", loss)
    write_flat(folder, seed, "l2o-scale", acc)
  text = pretrained_metatest.table(str(tmp_path), [("l2o-scale", "l2o-scale")],
                                   3000)
  assert ("| l2o-scale | 0.1000 / 0.8000 | 0.2000 / 0.9000 | 0.3000 / 0.7000 "
          "| 0.2000 / 0.8000 |") in text
  assert text.startswith("3000 steps")


def test_pretrained_metatest_runs_every_shipped_optimizer():
  from reproduce import pretrained_metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  names = pretrained_metatest.shipped_names()
  assert sorted(names) == pretrained.names() and len(names) >= 3
  assert names[0] == "l2o-scale"  # the plots' order


def test_horizon_summary_means_and_seeds_holding(tmp_path):
  adam = {"finite": True, "final": .01, "best": .01, "accuracy": .90,
          "split_loss": .008}
  rows = [{"problem": "p", "horizon": 10000, "seed": s, "adam": adam,
           "learned": dict(adam, final=f, accuracy=a, split_loss=f / 2),
           "failures": fail}
          for s, f, a, fail in ((6, .002, .88, ["held-out"]),
                                (12, .004, .92, []))]
  with open(tmp_path / "horizon_check.json", "w") as f:
    json.dump(rows, f)
  (line,) = horizon_results.summary("x", horizon_results.rows_of(
      str(tmp_path)))
  assert line == ("| x | p | 10,000 | 0.003 ± 0.001 | 0.01 ± 0 | "
                  "0.0015 ± 0.0005 | 0.008 ± 0 | "
                  "0.9000 ± 0.0200 | 0.9000 ± 0.0000 | 1 of 2 |")
  # Two training seeds' reports pooled: four runs, mean and std over all.
  other = tmp_path / "t2"
  other.mkdir()
  for r in rows:
    r["learned"]["final"] *= 3
  with open(other / "horizon_check.json", "w") as f:
    json.dump(rows, f)
  (line,) = horizon_results.summary("x", horizon_results.rows_of(
      [str(tmp_path), str(other)]))
  assert line.startswith("| x | p | 10,000 | 0.006 ± 0.0037 | 0.01 ± 0 |")
  assert line.endswith("| 2 of 4 |")


def test_shipping_records_the_flags_a_recipe_trained_with(tmp_path):
  """ship_pretrained.py reads the stage's command from the pipeline's
  record and parses it as metarun.py does: the recipe expands first, the
  command line wins over it; the run's facts come from its events file."""
  marks = tmp_path / ".stages"
  marks.mkdir()
  (marks / "train-v.t2.done").write_text(json.dumps(
      {"argv": ["python", "metarun.py", "--recipe=long", "--train_dir=x",
                "--seed=2"], "seconds": 12.5}))
  folder = write_events(str(tmp_path / "train"), "v.t2", [
      ("selection", 1, dict(number=1, score=0.5)),
      ("rollback", 2, dict(to="x")), ("best", 3, dict(index=1))])
  (marks / "train-old.done").write_text("")
  record = ship_pretrained.stage_record(str(tmp_path), "v.t2")
  config = ship_pretrained.training_config(
      ship_pretrained.training_command(record))
  parsed = [str(v) for v in (config.optimizer.max_log_lr,
                             config.training.selection_steps,
                             config.program.seed, record["seconds"])]
  assert parsed == ["-6.9", "10000", "2", "12.5"]
  assert config.program.recipe == "long"
  assert ship_pretrained.run_facts(folder) == {
      "best_meta_iteration": 1, "robust_scores": [0.5], "rollbacks": 1}
  with pytest.raises(ValueError, match="is empty \\(a stage finished by an "
                     "older"):
    ship_pretrained.stage_record(str(tmp_path), "old")


def test_shipping_writes_the_long_run_settings_from_a_horizon_check(tmp_path):
  """ship_pretrained.py --long_runs: the card gets the settings the learned
  runs of the check were made with (their held-out records) and, per
  problem and horizon, the means and the count of seeds holding every
  rule; a folder with runs of two settings is refused."""
  import shutil  # pylint: disable=g-import-not-at-top
  dest = tmp_path / "pretrained"
  shutil.copytree(os.path.join(ROOT, "l2o_scale", "pretrained", "l2o-scale"),
                  dest / "l2o-scale")
  report = tmp_path / "check"
  (report / "p").mkdir(parents=True)
  adam = {"final": .02, "accuracy": .90}
  rows = [{"problem": "p", "horizon": h, "seed": s,
           "learned": {"final": .01 * s, "accuracy": .9 + .001 * s},
           "adam": adam, "failures": [] if s == 1 else ["x"]}
          for h in (2000, 10000) for s in (1, 2)]
  (report / "horizon_check.json").write_text(json.dumps(rows))
  for name, wd in (("learned", 1e-3), ("Adam-lr1e-3", 0.)):
    (report / "p" / "seed1_heldout_record-{}.json".format(name)).write_text(
        json.dumps({"weight_decay": wd, "step_schedule": "cosine",
                    "step_decay_start": 0.8}))

  def card():
    """update_long_runs's card, as written to the run record (called in
    this process: it reads no flags, unlike the script's parse)."""
    path = ship_pretrained.update_long_runs("l2o-scale", str(report),
                                            "new text", str(dest))
    with open(os.path.join(path, "run_record.json")) as f:
      return json.load(f)["card"]

  written = card()
  assert written["description"] == "new text"
  assert written["name"] == "l2o-scale"
  long_runs = written["long_runs"]
  assert long_runs["settings"] == {"weight_decay": 1e-3,
                                   "step_schedule": "cosine",
                                   "step_decay_start": 0.8}
  assert long_runs["summary"].startswith("2 of 4 checks")
  entry = long_runs["horizon_check"]["p"]["10000"]
  assert entry["test_seeds"] == [1, 2] and entry["seeds_holding"] == 1
  assert entry["final_mean"] == pytest.approx(.015)
  assert entry["accuracy_mean"] == pytest.approx(.9015)
  assert entry["adam_final_mean"] == pytest.approx(.02)
  (report / "p" / "seed2_heldout_record-learned.json").write_text(
      json.dumps({"weight_decay": 3e-4, "step_schedule": "cosine",
                  "step_decay_start": 0.8}))
  with pytest.raises(ValueError, match="2 sets of settings"):
    card()
  for seed in (1, 2):
    (report / "p" / "seed{}_heldout_record-learned.json".format(
        seed)).write_text(json.dumps({
            "weight_decay": 1e-3, "step_schedule": "cosine",
            "step_decay_start": 0.8, "hold_zero_gradients": True}))
  settings = card()["long_runs"]["settings"]
  assert settings["hold_zero_gradients"] is True


def test_horizon_verdicts_compare_training_seed_means(tmp_path):
  """The regularizer verdict at a horizon: per training seed the mean over
  test seeds, then the medium run's rule (beyond twice the pooled std)."""
  def report(name, accuracies):
    folder = tmp_path / name
    folder.mkdir()
    rows = [{"problem": "p", "horizon": h, "seed": s,
             "learned": {"accuracy": a if h == 10000 else 0.},
             "adam": {}, "failures": []}
            for h in (2000, 10000) for s, a in zip((6, 12), accuracies)]
    (folder / "horizon_check.json").write_text(json.dumps(rows))
    return str(folder)
  base = [report("b1", (.90, .92)), report("b2", (.90, .90))]  # 0.91, 0.90
  reg = [report("r1", (.95, .95)), report("r2", (.96, .96))]  # 0.95, 0.96
  close = [report("c1", (.91, .91)), report("c2", (.90, .90))]  # 0.91, 0.90
  accuracy = horizon_results.verdicts(
      [("l2o-scale", base), ("l2o-entropy-reg", reg),
       ("l2o-entropy-reg-cl-mt", close)], 10000)
  assert "| {} | +0.0500 (beyond the spread) |".format(
      styles.label("l2o-entropy-reg")) in accuracy
  assert "| {} | +0.0000 (within) |".format(
      styles.label("l2o-entropy-reg-cl-mt")) in accuracy


def test_shipping_takes_one_subcommand_per_mode_and_refuses_the_earlier_form(
    tmp_path, capsys):
  """Each way of shipping is a subcommand with its own required flags; a
  mode flag without a subcommand (the earlier form) is refused in one line
  naming the same command with its subcommand."""
  parsed = ship_pretrained.parser().parse_args(
      ["long_runs", "--long_runs=d", "--name=n"])
  assert (parsed.command, parsed.long_runs, parsed.name) == (
      "long_runs", "d", "n")
  with pytest.raises(SystemExit) as e:
    ship_pretrained.parser().parse_args(["schedule_head", "--name=n",
                                         "--schedule_head=h.npz"])
  assert e.value.code == 2
  assert capsys.readouterr().err.startswith(
      "python -m reproduce.ship_pretrained schedule_head: error: the "
      "following arguments are required: --base, --selection")
  assert set(ship_pretrained.SUBCOMMANDS) == set(ship_pretrained.MODE_FLAGS)
  for command, flag in ship_pretrained.MODE_FLAGS.items():
    with pytest.raises(ValueError) as refused:
      ship_pretrained.main([flag + "=x", "--name=n"])
    assert str(refused.value) == (
        "the mode is a subcommand now: python -m reproduce.ship_pretrained "
        "{} {}=x --name=n".format(command, flag))
