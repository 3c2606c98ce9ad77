"""The protocol's selection of a learned AdamW controller
(l2o_scale/controller_training/selection.py): a candidate is chosen over
the zero controller only by more than the score's noise, the shipped one is
the best seed's choice, and a rerun reuses every stored run."""

import os

import numpy as np

from l2o_scale import learned_adamw
from l2o_scale.controller_training import chosen
from l2o_scale.controller_training import selection
from l2o_scale.controller_training import test_look
from l2o_scale.controller_training import training
from l2o_scale.steps import controlled_adamw as rule


def test_a_candidate_must_beat_zero_by_more_than_the_noise():
  scored = [dict(path="a", score=-0.04), dict(path="b", score=-0.02)]
  assert selection.choice(scored, 0.05) is None
  assert selection.choice(scored, 0.03)["path"] == "a"
  assert selection.choice([], 0.) is None
  runs = {"s1": dict(chosen="a", chosen_score=-0.04),
          "s2": dict(chosen="c", chosen_score=-0.09),
          "s3": dict(chosen=selection.ZERO, chosen_score=0.)}
  assert selection.shipped_choice(runs) == "c"
  assert selection.shipped_choice({"s3": runs["s3"]}) == selection.ZERO
  zero = {"t": [np.e, np.e], "u": [1., 1.]}
  assert np.isclose(selection.score({"t": [1., 1.], "u": [1., 1.]}, zero),
                    -0.5)
  assert selection.score({"t": [1., np.nan], "u": [1., 1.]}, zero) == np.inf


def test_a_worse_candidate_leaves_the_zero_controller_and_a_rerun_reuses_runs(
    tmp_path):
  train_dir = str(tmp_path / "s1")
  config = training.ControllerTrainingConfig(
      estimates=1, tasks_per_estimate=1, pairs=1, min_length=5,
      max_length=8, families=("mlp_autoencoder",), keep_every=1,
      batch_size=16)
  training.ControllerTrainer(config, train_dir, log=lambda line: None).run()
  # A controller whose learning-rate multiplier sits at its largest (100):
  # on the regression task it is worse than the zero controller.
  theta = np.zeros(rule.NUM_PARAMETERS, np.float32)
  theta[-2] = 1e3
  learned_adamw.save_controller(os.path.join(train_dir, "controller-2.npz"),
                                theta)
  out = str(tmp_path / "selection")
  small = dict(tasks=("regression_synthetic",), budget=20,
               log=lambda line: None)
  result = selection.run([train_dir], out, **small)
  run = result["runs"][train_dir]
  assert [c["estimates"] for c in run["candidates"]] == [1, 2]
  worse = run["candidates"][1]["score"]
  assert worse > 0 and not worse < -result["threshold"]
  assert result["threshold"] == max(result["noise"].values()) >= 0
  assert set(result["noise"]) == {"seeds", "process"}
  if run["chosen"] == selection.ZERO:
    assert run["chosen_score"] == 0.
  else:  # The first candidate beat zero by more than the noise.
    assert run["chosen_score"] < -result["threshold"]
    assert run["chosen"].endswith("controller-1.npz")
  assert result["shipped"] == run["chosen"]
  stored = sorted(os.listdir(os.path.join(out, "runs")))
  # Zero at the selection seeds and the later ones, two candidates.
  assert len(stored) == 4 * 2
  assert selection.run([train_dir], out, **small) == result
  assert sorted(os.listdir(os.path.join(out, "runs"))) == stored


def test_the_benchmark_measures_the_recorded_choice(tmp_path):
  """``chosen.optimizer``: the recorded selection's base setting and
  controller (none for the zero controller); a missing record is one line."""
  record = tmp_path / "selection.json"
  record.write_text('{"base": {"learning_rate": 0.02, "weight_decay": 0.1},'
                    ' "shipped": "zero"}')
  assert chosen.choice(str(record)) == (None, 0.02, 0.1)
  theta = np.full(rule.NUM_PARAMETERS, 0.5, np.float32)
  path = tmp_path / "controller.npz"
  learned_adamw.save_controller(str(path), theta)
  record.write_text('{"base": {"learning_rate": 0.02, "weight_decay": 0.1},'
                    ' "shipped": "%s"}' % path)
  chosen.choice.cache_clear()
  assert chosen.choice(str(record)) == (str(path), 0.02, 0.1)
  try:
    chosen.choice(str(tmp_path / "missing.json"))
  except ValueError as e:
    assert "select" in str(e) and len(str(e).splitlines()) == 1
  else:
    raise AssertionError("a missing record must be refused")
  # The committed record: the zero controller at the chosen base setting.
  opt = chosen.optimizer(100)
  assert not np.any(opt.controller) and opt.total_steps == 100
  assert opt.settings.learning_rate == 0.01
  assert opt.settings.weight_decay == 0.05


def _entry(task, loss, metric, adam, sf):
  def summary(l, m):
    return dict(final_train_loss=dict(mean=l), test_metric=dict(mean=m))
  return dict(task=task, budget=10, metric="accuracy", higher_is_better=True,
              optimizer=dict(summary=summary(loss, metric)),
              baselines=dict(adam=dict(summary=summary(*adam))),
              untuned=dict(schedule_free_adamw=dict(summary=summary(*sf))))


def test_the_test_look_counts_both_criteria_task_by_task():
  """Both criteria against tuned Adam: loss at or below, accuracy within
  0.005 of it; better than a baseline without tuning: both against it."""
  results = dict(entries=[
      _entry("a", 1., 0.90, adam=(1., 0.904), sf=(2., 0.8)),  # all met
      _entry("b", 1., 0.90, adam=(0.9, 0.9), sf=(2., 0.8)),  # loss above
      _entry("c", 1., 0.90, adam=(2., 0.91), sf=(0.5, 0.8)),  # metric off
      _entry("d", 1., 0.90, adam=(2., 0.9), sf=(3., 0.95))])  # sf: metric
  found = test_look.rows(results, 10)
  assert [(r["loss_ok"], r["metric_ok"], r["beats_every_untuned"])
          for r in found] == [(True, True, True), (False, True, True),
                              (True, False, False), (True, True, False)]
  c = test_look.criteria(found)
  assert (c["adam"], c["untuned"], c["adam_met"], c["untuned_met"]) == (
      2, 2, False, False)
  assert test_look.criteria(found, needed=2)["adam_met"]
  assert "on 2 of 4 tasks" in test_look.markdown(found)[-1]
