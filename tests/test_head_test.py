"""reproduce.head_test: the schedule head's single look at the test tasks,
scored from stored benchmark results (synthetic ones here)."""

import json
import os

import pytest

from l2o_scale.head_training import selection as head_selection
from reproduce import head_test


def _entry(task, metric, loss, adam_metric, adam_loss, speedup,
           higher_is_better=True):
  def summary(m, l):
    return dict(test_metric=dict(mean=m), final_train_loss=dict(mean=l),
                diverged=0)
  return dict(task=task, budget=head_test.BUDGET, metric="accuracy" if
              higher_is_better else "mse", higher_is_better=higher_is_better,
              optimizer=dict(summary=summary(metric, loss)),
              baselines=dict(adam=dict(summary=summary(adam_metric,
                                                       adam_loss))),
              speedup=dict(value=speedup, lower_bound=False))


def _write(folder, part, entries):
  os.makedirs(os.path.join(folder, part), exist_ok=True)
  with open(os.path.join(folder, part, "results.json"), "w") as f:
    json.dump(dict(config=dict(optimizer="x"), entries=entries), f)


def _write_seed(folder, accuracies, squared_error):
  """A seed's four test tasks: the test metrics of the three accuracy
  tasks and of the squared-error one, the Adam side fixed."""
  relu, cnn, attention = accuracies
  _write(folder, "small-data", [
      _entry("mlp_relu_bn_mnist", relu, 0.05, 0.9, 0.06, 1.5),
      _entry("cnn_mnist", cnn, 0.05, 0.95, 0.04, 0.5)])
  _write(folder, "data-rich", [
      _entry("teacher_mlp_rich", squared_error, 0.1, 0.2, 0.2, 2.,
             higher_is_better=False),
      _entry("attention_topics_rich", attention, 0.1, 0.8, 0.2, 1.)])


def _card():
  return {"mlp_relu_bn_mnist": _entry("mlp_relu_bn_mnist", 0.90, 0.1, 0, 0,
                                      1),
          "cnn_mnist": _entry("cnn_mnist", 0.95, 0.1, 0, 0, 1),
          "teacher_mlp_rich": _entry("teacher_mlp_rich", 0.20, 0.2, 0, 0, 1,
                                     higher_is_better=False),
          "attention_topics_rich": _entry("attention_topics_rich", 0.80, 0.3,
                                          0, 0, 1)}


def test_matches_the_card_within_the_benchmarks_tolerance_for_every_seed(
    tmp_path):
  selection = dict(tasks=["logreg_mnist"], chosen_by_run={
      "r/s1": "r/s1/head-40.npz", "r/s2": head_selection.ZERO},
                   scores={"r/s1/head-40.npz": -0.2, head_selection.ZERO: 0.})
  folders = {run: str(tmp_path / os.path.basename(run))
             for run in selection["chosen_by_run"]}
  # s1: 0.004 below the card's accuracy matches (tolerance 0.005), a
  # squared error 0.4% above matches; 0.006 below does not. 3 of 4.
  _write_seed(folders["r/s1"], (0.896, 0.944, 0.81), 0.2008)
  seeds = head_test.compare(selection, folders, _card())
  assert [r["matches_card"] for r in seeds[0]["tasks"]] == [
      True, False, True, True]
  assert seeds[0]["matches_card"] == 3 and seeds[0]["complete"]
  assert seeds[0]["adam_both"] == 3  # cnn: loss above Adam's
  assert seeds[0]["rich_median_speedup"] == 1.5
  assert seeds[1]["spec"] == "l2o-scale+bare" and not seeds[1]["complete"]
  assert head_test.verdicts(seeds) == dict(complete=False, beats_card=False,
                                           beats_adam=False)
  # The second seed: only 2 of 4 match, so not every seed reaches 3.
  _write_seed(folders["r/s2"], (0.80, 0.80, 0.9), 0.1)
  seeds = head_test.compare(selection, folders, _card())
  assert [s["matches_card"] for s in seeds] == [3, 2]
  assert head_test.verdicts(seeds) == dict(complete=True, beats_card=False,
                                           beats_adam=False)
  page = "\n".join(head_test.page(selection, seeds))
  assert "for every seed: **no**" in page and "## s2: zero head" in page
  selection["chosen_by_run"].pop("r/s2")
  assert head_test.verdicts(head_test.compare(
      selection, folders, _card()))["beats_card"]


def test_test_tasks_are_grouped_by_regime_and_never_validation_tasks():
  six = ("mlp_sigmoid_mnist", "mlp_tanh_mnist", "autoencoder_mnist",
         "regression_synthetic", "text_topics", "attention_topics")
  (part,) = head_test.parts(six)
  assert part[:3] == ("small-data", six, head_test.SMALL_REFERENCE)
  registered = head_test.default_parts()
  assert [(p[0], p[1], p[2]) for p in registered] == [
      ("small-data", ("mlp_relu_bn_mnist", "cnn_mnist"),
       head_test.SMALL_REFERENCE),
      ("data-rich", ("teacher_mlp_rich", "attention_topics_rich"),
       head_test.RICH_REFERENCE)]
  with pytest.raises(ValueError, match="validation tasks"):
    head_test.parts(("cnn_mnist",) + head_selection.VALIDATION_TASKS[:1])
  # Each held-out set takes its own stored runs and baselines, at the
  # small-data settings.
  for held_out, tasks in (
      ("held-out", ("lstm_topics", "conv1d_topics", "resnet_mnist",
                    "mlp_spirals")),
      ("held-out-2", ("conv_autoencoder_mnist", "bigru_topics",
                      "deep_swish_mnist", "separable_cnn_mnist")),
      ("held-out-3", ("mixer_mnist", "simple_rnn_mnist_rows",
                      "glu_mlp_mnist", "residual_ln_regression"))):
    (part,) = head_test.parts(tasks)
    assert part == (held_out, tasks, "reproduce/results/benchmark/{}/"
                    "l2o-scale/results.json".format(held_out),
                    head_test.SMALL_FLAGS)
  assert head_test.SMALL_REFERENCE == (
      "reproduce/results/benchmark/l2o-scale/results.json")


def test_without_data_rich_tasks_the_speedup_rule_does_not_apply(tmp_path):
  selection = dict(tasks=["logreg_mnist"], chosen_by_run={
      "r/s1": "r/s1/head-20.npz"}, scores={"r/s1/head-20.npz": -0.1})
  folders = {"r/s1": str(tmp_path / "s1")}
  # Both criteria against Adam on both tasks (loss below, metric above).
  _write(folders["r/s1"], "small-data", [
      _entry("mlp_relu_bn_mnist", 0.95, 0.01, 0.9, 0.06, 0.5),
      _entry("cnn_mnist", 0.96, 0.01, 0.95, 0.04, 0.5)])
  small = head_test.parts(("mlp_relu_bn_mnist", "cnn_mnist"))
  seeds = head_test.compare(selection, folders, _card(), small)
  assert seeds[0]["rich_median_speedup"] is None and seeds[0]["complete"]
  assert head_test.verdicts(seeds, needed=2) == dict(
      complete=True, beats_card=True, beats_adam=True)
  assert not head_test.verdicts(seeds, needed=3)["beats_card"]
  # The same seed judged on the registered four is incomplete.
  assert not head_test.compare(selection, folders, _card())[0]["complete"]
