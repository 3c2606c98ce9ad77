"""The shipped pretrained optimizers (l2o_scale/pretrained/, package data):
they load by name with their cards (no extra flags), end 300 steps on the
MNIST MLP below half of Adam's (lr 1e-3) training loss from the same start
and batches, each on one of three test seeds
(at 2,000 and 10,000 steps: l2o_scale.tools.horizon_check, whose results
their cards hold), and their cards' settings for long runs reach Keras."""

import json
import os
import pickle

import numpy as np
import pytest

from l2o_scale.meta_testing import baselines
from l2o_scale import keras_optimizer
from l2o_scale import pretrained
from l2o_scale.meta_testing import testing
from problems import problem_sets

# Name: (its cap on the learned learning rate, steps it beats Adam in).
VARIANTS = {"l2o-scale": (-4.6, 300), "l2o-entropy-reg": (-4.6, 300),
            "l2o-entropy-reg-cl-mt": (-4.6, 300)}
SUBDIR = "HierarchicalRNN_GRUCell_20_2"
# Meta-trained on a distribution of problems (recipe generalist).
GENERALIST = "l2o-generalist"
# l2o-scale with a learned schedule head (tests/test_pretrained_head.py).
HEADED = "l2o-scale-head"


def _final(optimizer, problem, dataset, batch_size, steps=300, seed=6):
  objectives, _, _ = testing.test_optimizer(
      optimizer, problem, steps, dataset=dataset, batch_size=batch_size,
      seed=seed, progress=False)
  objectives = np.asarray(objectives, np.float64)
  assert np.all(np.isfinite(objectives))
  return objectives[-10:].mean()


@pytest.mark.parametrize("variant", VARIANTS)
def test_card_describes_the_checkpoint(variant):
  folder = pretrained.folder(variant)
  assert folder == os.path.join(pretrained.ROOT, variant, SUBDIR)
  assert os.path.exists(os.path.join(folder, "model.ckpt-0.index"))
  with open(os.path.join(folder, "run_record.json")) as f:
    record = json.load(f)
  assert record["optimizer_flags"]["max_log_lr"] == VARIANTS[variant][0]
  card = record["card"]
  assert card["name"] == variant and card["meta_iterations"] == 30
  assert card["training_seed"] == 1 and card["wall_time_seconds"] > 0
  assert "/work/" not in json.dumps(record)  # no local paths shipped


# Each shipped optimizer's final training loss (mean of the last 10 of 300
# steps) on the MNIST MLP is below this fraction of Adam's (lr 1e-3) from
# the same start and batches, on every test seed. Measured on test seeds
# 6, 12, 18, 24, 30 (2026-11-25, a 2-core AMD EPYC VM): Adam 1.12-1.18, the
# learned ones 0.24-0.32, ratios 0.20-0.28; 0.5 leaves a margin of 1.8x
# over the worst.
BEATS_ADAM_BY = 0.5
SEEDS = (6, 12, 18)


def test_pretrained_beat_adam_on_the_mlp(data_dir):
  """Each variant on one of the test seeds (each seed used once): 6 runs of
  300 steps instead of 12, where every variant on every seed said no more
  about the shipped checkpoints (measured ratios 0.20-0.28 on all five
  seeds, against the bound of 0.5)."""
  spec, dataset, batch_size = problem_sets.get("test_mnist_mlp_problems",
                                               data_dir=data_dir)[0]
  problem = spec.build()
  for (variant, (max_log_lr, steps)), seed in zip(VARIANTS.items(), SEEDS):
    adam = _final(baselines.build("Adam", 1e-3), problem, dataset,
                  batch_size, steps, seed)
    learned = keras_optimizer.LearnedOptimizer.pretrained(variant)
    assert learned.learned_optimizer.max_log_lr == max_log_lr  # the card's
    final = _final(learned.learned_optimizer, problem, dataset, batch_size,
                   steps, seed)
    assert final < BEATS_ADAM_BY * adam, (variant, seed, final, adam)


def test_names_and_cards_are_listed():
  assert pretrained.names() == sorted(list(VARIANTS) + [GENERALIST, HEADED])
  lines = pretrained.describe("l2o-scale")
  assert lines[0].startswith("l2o-scale: L2O-Scale")
  assert any(l.startswith("  command: metarun.py ") and
             "--max_log_lr=-4.6" in l for l in lines)
  assert any(l.startswith("  long runs: --step_decay_start=0.8 "
                          "--step_schedule=cosine --weight_decay=0.001 (")
             for l in lines)
  with pytest.raises(ValueError, match="no pretrained optimizer 'nope'; the "
                     "shipped ones are: l2o-entropy-reg, "):
    pretrained.checkpoint("nope")


@pytest.mark.parametrize("variant", VARIANTS)
def test_cards_hold_the_long_run_settings_and_what_they_give(variant):
  """Each card says how to run it for thousands of steps and what that gave
  at 2,000 and 10,000 steps on the three MNIST MLPs, test seeds 6, 12, 18:
  what docs/keras.md says of every shipped optimizer with them (every run
  holds every rule of l2o_scale.tools.horizon_check, ends below Adam's
  training loss with held-out accuracy at or above Adam's), and a summary
  that counts what the entries hold."""
  assert pretrained.long_run_settings(variant) == {
      "weight_decay": 1e-3, "step_schedule": "cosine",
      "step_decay_start": 0.8}
  with open(os.path.join(pretrained.folder(variant), "run_record.json")) as f:
    long_runs = json.load(f)["card"]["long_runs"]
  checks = long_runs["horizon_check"]
  assert sorted(checks) == ["mnist-mlp-deeper", "mnist-mlp-relu",
                            "mnist-mlp-sigmoid"]
  held = runs = 0
  for problem, by_horizon in checks.items():
    assert sorted(by_horizon) == ["10000", "2000"]
    for horizon, entry in by_horizon.items():
      where = (variant, problem, horizon)
      assert entry["test_seeds"] == [6, 12, 18], where
      assert entry["seeds_holding"] == len(entry["test_seeds"]), where
      assert 0. < entry["final_mean"] < entry["adam_final_mean"], where
      assert entry["accuracy_mean"] >= entry["adam_accuracy_mean"], where
      held += entry["seeds_holding"]
      runs += len(entry["test_seeds"])
  assert long_runs["summary"] == (
      "{} of {} checks of the MNIST MLPs at 2,000 and 10,000 steps hold "
      "every rule of l2o_scale.tools.horizon_check".format(held, runs))


def test_total_steps_applies_the_cards_long_run_settings():
  """pretrained(name, total_steps=N): Keras' weight_decay and the
  hold-then-cosine learning rate of the card; explicit arguments win."""
  import keras  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import step_schedule  # pylint: disable=g-import-not-at-top
  opt = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale",
                                                    total_steps=1000)
  assert opt.weight_decay == pytest.approx(1e-3)
  schedule = opt._learning_rate  # pylint: disable=protected-access
  assert isinstance(schedule, keras.optimizers.schedules.CosineDecay)
  np.testing.assert_allclose(
      [float(schedule(t)) for t in range(1000)],
      step_schedule.step_scales("cosine", 1000, 0.8), atol=1e-6)
  mine = keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale", total_steps=1000, weight_decay=2e-3, learning_rate=0.5)
  assert mine.weight_decay == pytest.approx(2e-3)
  assert float(mine.learning_rate) == 0.5
  plain = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale")
  assert plain.weight_decay is None and float(plain.learning_rate) == 1.


def test_the_generalist_runs_by_name_with_its_benchmark_on_its_card(
    data_dir, tmp_path):
  """l2o-generalist: its card holds the task-suite benchmark's results
  (every task, spread over seeds) and no long-run settings, so
  ``total_steps`` changes nothing; it meta-tests by name."""
  with open(os.path.join(pretrained.folder(GENERALIST),
                         "run_record.json")) as f:
    record = json.load(f)
  card = record["card"]
  assert "--recipe=generalist" in record["command"]
  assert "/work/" not in json.dumps(record)
  bench = card["benchmark"]
  assert bench["seeds"] == 3 and sorted(bench["budget"]) == ["10000", "2000"]
  for budget, tasks in (("2000", 10), ("10000", 10)):
    entry = bench["budget"][budget]
    assert entry["counts"]["tasks"] == len(entry["tasks"]) == tasks
    assert entry["seeds"] == 3
    for task in entry["tasks"].values():
      assert task["final_train_loss"]["n"] == 3
  assert pretrained.long_run_settings(GENERALIST) is None
  plain = keras_optimizer.LearnedOptimizer.pretrained(GENERALIST)
  long = keras_optimizer.LearnedOptimizer.pretrained(GENERALIST,
                                                     total_steps=10000)
  assert long.weight_decay == plain.weight_decay
  assert float(long.learning_rate) == float(plain.learning_rate)
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import metatest_run  # pylint: disable=g-import-not-at-top
  metatest.FLAGS.unparse_flags()
  metatest.FLAGS(["metatest.py", "--pretrained=" + GENERALIST,
                  "--include_mnist_mlp_problems", "--num_testing_itrs=100",
                  "--seeds=6", "--data_dir=" + data_dir,
                  "--save_dir=" + str(tmp_path), "--model_name=g"])
  try:
    written = metatest_run.run(metatest.build_config(metatest.FLAGS))
  finally:
    metatest.FLAGS.unparse_flags()
    metatest.FLAGS(["metatest.py"])
  assert len(written) == 1
  with open(written[0], "rb") as f:
    losses = np.array(pickle.load(f), np.float64)
  assert np.all(np.isfinite(losses)) and losses[-10:].mean() < losses[:10].mean()


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
  """A copy of the shipped folder, listed in place of the real one (which
  is never touched)."""
  import shutil  # pylint: disable=g-import-not-at-top
  root = tmp_path / "pretrained"
  shutil.copytree(pretrained.ROOT, root,
                  ignore=shutil.ignore_patterns("*.py", "__pycache__"))
  monkeypatch.setattr(pretrained, "ROOT", str(root))
  return root


def test_listing_marks_a_damaged_record_and_lists_the_others(
    shipped_copy, monkeypatch, capsys):
  """One truncated run_record.json: the others are listed with their cards,
  the damaged one is named with what restores it (never advice to delete a
  shipped file); every line fits the terminal (80 columns here), paths
  unbroken."""
  monkeypatch.setenv("COLUMNS", "80")
  record = shipped_copy / "l2o-scale" / SUBDIR / "run_record.json"
  record.write_text(record.read_text()[:40])
  assert pretrained.main([]) == 1
  out = capsys.readouterr().out
  lines = out.splitlines()
  # Only a word longer than a line (here the tmp path) goes past it.
  assert all(len(l) <= 80 or len(l.split()) == 1 for l in lines), lines
  joined = " ".join(out.split())
  for name in sorted(VARIANTS) + [GENERALIST, HEADED]:
    if name != "l2o-scale":
      assert "\n{}: ".format(name) in out and "cannot be used" not in (
          out.split("\n{}: ".format(name))[1].split("\n")[0])
  damaged = joined.split("l2o-scale: cannot be used: ")[1]
  assert damaged.startswith("the shipped file {} is damaged (".format(
      record))
  assert "reinstalling the package restores it" in damaged
  assert "delete" not in joined
  for load in (pretrained.long_run_settings, pretrained.checkpoint,
               keras_optimizer.LearnedOptimizer.pretrained):
    with pytest.raises(pretrained.DamagedError, match="reinstalling"):
      load("l2o-scale")


def test_listing_marks_a_missing_record_or_checkpoint(shipped_copy, capsys):
  os.remove(shipped_copy / "l2o-scale" / SUBDIR / "run_record.json")
  os.remove(shipped_copy / "l2o-entropy-reg" / SUBDIR /
            "model.ckpt-0.data-00000-of-00001")
  assert pretrained.main([]) == 1
  joined = " ".join(capsys.readouterr().out.split())
  assert ("l2o-scale: cannot be used: the folder {} holds no single "
          "sub-folder with a run_record.json: reinstalling".format(
              shipped_copy / "l2o-scale")) in joined
  assert ("l2o-entropy-reg: cannot be used: the shipped file {} is missing: "
          "reinstalling".format(shipped_copy / "l2o-entropy-reg" / SUBDIR /
                                "model.ckpt-0.data-00000-of-00001")) in joined


def test_listing_has_help_and_fits_a_narrow_terminal(monkeypatch, capsys):
  with pytest.raises(SystemExit) as e:
    pretrained.main(["--help"])
  assert e.value.code == 0
  assert "usage: python -m l2o_scale.pretrained" in capsys.readouterr().out
  lines = pretrained.listing(width=60)
  assert max(len(l) for l in lines) <= 60
  assert [l.split(":")[0] for l in lines if not l.startswith(" ")][1:] == (
      pretrained.names())


def _count_opens(monkeypatch):
  """Counts, per file under the shipped folder, Python's opens (the record,
  a head) and the checkpoint readers made (TensorFlow opens the index in
  C++, once per reader)."""
  import builtins  # pylint: disable=g-import-not-at-top
  import collections  # pylint: disable=g-import-not-at-top
  from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
  opened, real_open, real_reader = (collections.Counter(), builtins.open,
                                    checkpoints._Reader)  # pylint: disable=protected-access

  def counted(path):
    path = os.path.abspath(os.fspath(path))
    if path.startswith(pretrained.ROOT + os.sep):
      opened[os.path.relpath(path, pretrained.ROOT)] += 1

  def counting_open(file, *args, **kwargs):
    if isinstance(file, (str, os.PathLike)):
      counted(file)
    return real_open(file, *args, **kwargs)

  def counting_reader(path):
    counted(path + ".index")
    return real_reader(path)

  monkeypatch.setattr(builtins, "open", counting_open)
  monkeypatch.setattr(checkpoints, "_Reader", counting_reader)
  return opened


def test_reading_a_shipped_optimizer_opens_each_of_its_files_once(
    shipped_copy, monkeypatch):
  """LearnedOptimizer.pretrained(name) with a head and a run length (the
  card read for its kind, checkpoint, head and settings, the optimizer
  restored with the record's flags): each file opened once; the listing
  and another read later in the process open the record no more, until
  it changes."""
  opened = _count_opens(monkeypatch)
  keras_optimizer.LearnedOptimizer.pretrained(HEADED, total_steps=100)
  folder = os.path.join(HEADED, SUBDIR)
  assert dict(opened) == {
      os.path.join(folder, "run_record.json"): 1,
      os.path.join(folder, "model.ckpt-0.index"): 1,
      os.path.join(folder, pretrained.HEAD_FILE): 1}
  opened.clear()
  pretrained.listing()
  keras_optimizer.LearnedOptimizer.pretrained(HEADED, total_steps=100)
  assert not [f for f in opened if f.endswith("run_record.json") and
              f.startswith(HEADED + os.sep)]
  # The record read once is renewed when its file changes (a reinstall),
  # and a reader changing its copy changes no other's.
  record = shipped_copy / "l2o-scale" / SUBDIR / "run_record.json"
  first = pretrained.record("l2o-scale")
  first["card"]["description"] = "changed by a reader"
  assert pretrained.record("l2o-scale")["card"]["description"] != (
      "changed by a reader")
  written = json.loads(record.read_text())
  written["card"]["description"] = "reinstalled"
  replaced = str(record) + ".new"
  with open(replaced, "w") as f:
    json.dump(written, f)
  os.replace(replaced, record)
  assert pretrained.record("l2o-scale")["card"]["description"] == (
      "reinstalled")
