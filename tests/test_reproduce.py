"""Tests of the reproduction harness (reproduce/all.sh, reproduce/plot.py)
and of the benchmark's report writing (l2o_scale/speed/bench.py).

Why: the harness is how a reader checks the paper's claim; it must run end to
end from a clean clone (a reduced REPRO_TINY run here, ~1 minute), resume
without redoing finished stages, and its aggregation over seeds (what the
figure and table show) must be right. The benchmark itself is too slow for CI;
its JSON writing is tested with a stubbed timer, and its lower-bound step
against the original's GRU cell.
"""

import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "reproduce"))

import horizon_results  # pylint: disable=g-import-not-at-top,wrong-import-position
import plot  # pylint: disable=g-import-not-at-top,wrong-import-position
import ship_pretrained  # pylint: disable=g-import-not-at-top,wrong-import-position

from l2o_scale.speed import bench_core  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.speed import bench_report  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.speed import bench_steps  # pylint: disable=g-import-not-at-top,wrong-import-position


def _write_pickle(folder, seed, name, values):
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "seed{}_eval_loss_record.pickle-{}".format(
      seed, name)), "wb") as f:
    pickle.dump([np.float32(v) for v in values], f)


def _write_heldout(folder, seed, name, accuracies, train_losses=None):
  record = {"iteration": list(range(len(accuracies))),
            "heldout_accuracy": accuracies,
            "heldout_loss": [1.0] * len(accuracies)}
  if train_losses is not None:
    record["train_loss"] = train_losses
  with open(os.path.join(folder, "seed{}_heldout_record-{}.json".format(
      seed, name)), "w") as f:
    json.dump(record, f)


@pytest.fixture
def synthetic(tmp_path):
  """Two problems; Adam with 2 seeds (one run shorter), l2o-scale with 3."""
  results = tmp_path / "test"
  mlp = str(results / "mnist-mlp-sigmoid")
  conv = str(results / "mnist-conv")
  _write_pickle(mlp, 6, "Adam", [4., 3., 2., 1.])
  _write_pickle(mlp, 12, "Adam", [2., 1., 1.])          # shorter run
  _write_pickle(mlp, 6, "l2o-scale", [3., 2., 1., .5])
  _write_pickle(mlp, 12, "l2o-scale", [3., 2., 1., .5])
  _write_pickle(mlp, 18, "l2o-scale", [3., 2., 1., 2.])
  _write_heldout(mlp, 6, "Adam", [0.1, 0.5], [2., 0.25])
  _write_heldout(mlp, 12, "Adam", [0.1, 0.7], [2., 0.75])
  _write_pickle(conv, 6, "SGD", [2., 2.])
  (results / "not-a-problem.txt").write_text("ignored")
  return str(results)


def test_load_results(synthetic):
  losses, heldout = plot.load_results(synthetic)
  assert sorted(losses) == ["mnist-conv", "mnist-mlp-sigmoid"]
  assert sorted(losses["mnist-mlp-sigmoid"]) == ["Adam", "l2o-scale"]
  assert sorted(losses["mnist-mlp-sigmoid"]["l2o-scale"]) == [6, 12, 18]
  np.testing.assert_allclose(losses["mnist-mlp-sigmoid"]["Adam"][12],
                             [2., 1., 1.])
  assert heldout["mnist-mlp-sigmoid"]["Adam"][12]["heldout_accuracy"][-1] == 0.7


def test_aggregate_mean_std_minmax(synthetic):
  losses, _ = plot.load_results(synthetic)
  agg = plot.aggregate_curves(losses["mnist-mlp-sigmoid"]["l2o-scale"])
  assert agg["num_seeds"] == 3
  np.testing.assert_array_equal(agg["steps"], [1, 2, 3, 4])
  np.testing.assert_allclose(agg["mean"], [3., 2., 1., 1.])
  np.testing.assert_allclose(agg["std"], [0., 0., 0., np.std([.5, .5, 2.])])
  np.testing.assert_allclose(agg["min"], [3., 2., 1., .5])
  np.testing.assert_allclose(agg["max"], [3., 2., 1., 2.])
  # Runs of different lengths are cut to the shortest.
  agg = plot.aggregate_curves(losses["mnist-mlp-sigmoid"]["Adam"])
  np.testing.assert_allclose(agg["mean"], [3., 2., 1.5])
  np.testing.assert_allclose(agg["min"], [2., 1., 1.])
  with pytest.raises(ValueError):
    plot.aggregate_curves({})


def test_final_losses_and_heldout(synthetic):
  losses, heldout = plot.load_results(synthetic)
  np.testing.assert_allclose(
      plot.final_losses(losses["mnist-mlp-sigmoid"]["l2o-scale"], window=2),
      [.75, .75, 1.5])
  np.testing.assert_allclose(
      plot.final_losses(losses["mnist-conv"]["SGD"], window=10), [2.])
  np.testing.assert_allclose(
      plot.final_heldout(heldout["mnist-mlp-sigmoid"]["Adam"]), [.5, .7])
  assert plot.final_heldout({}).size == 0


def test_smooth():
  np.testing.assert_allclose(plot.smooth([1., 3., 5., 7.], 1), [1, 3, 5, 7])
  np.testing.assert_allclose(plot.smooth([1., 3., 5., 7.], 2), [1, 2, 4, 6])
  np.testing.assert_allclose(plot.smooth([2., 4.], 10), [2., 3.])


def test_format_mean_std():
  assert plot.format_mean_std([1., 3.]) == "2 ± 1"
  assert plot.format_mean_std([0.5, 0.7], "{:.4f}", "{:.4f}") == (
      "0.6000 ± 0.1000")
  assert plot.format_mean_std([]) == "—"
  assert plot.format_mean_std([float("nan")]) == "nan"


def test_results_table(synthetic):
  losses, heldout = plot.load_results(synthetic)
  table = plot.results_table(losses, heldout, window=1)
  rows = [l for l in table.splitlines() if l.startswith("| MNIST")]
  # Problems and optimizers in the fixed order: MLPs first, learned first.
  assert len(rows) == 3
  assert rows[0].startswith("| MNIST MLP 784-20-10, sigmoid | L2O-Scale (no reg.) | 3 | 4 |")
  assert "| 1 ± 0.71 |" in rows[0]        # last losses .5, .5, 2
  assert rows[1].startswith("| MNIST MLP 784-20-10, sigmoid | Adam (lr 1e-4) | 2 | 3 |")
  # The whole split's loss after the last step (0.25, 0.75), then accuracy.
  assert rows[1].endswith("| 0.5 ± 0.25 | 0.6000 ± 0.1000 |")
  assert rows[0].endswith("| — | — |")  # no whole-split record either
  assert rows[2].startswith("| MNIST ConvNet | SGD (lr 1e-3) | 1 | 2 |")
  assert table.splitlines()[1] == "|---|---|---|---|---|---|---|"


def test_plot_writes_png_and_pdf(synthetic, tmp_path):
  losses, _ = plot.load_results(synthetic)
  for band in ("std", "minmax"):
    paths = plot.plot_curves(losses, str(tmp_path / "fig" / band), band=band,
                             title="synthetic")
    for path in paths:
      assert os.path.getsize(path) > 1000


def test_plot_cli(synthetic, tmp_path):
  out = tmp_path / "figures"
  assert plot.main(["--results_dir", synthetic, "--out_dir", str(out)]) == 0
  assert (out / "loss_curves.png").exists()
  assert (out / "loss_curves.pdf").exists()
  assert "| MNIST ConvNet |" in (out / "results.md").read_text()
  with pytest.raises(SystemExit):
    plot.main(["--results_dir", str(tmp_path / "empty"), "--out_dir",
               str(out)])


# ------------------------------------------------- medium size (medium.py)
import figures  # pylint: disable=g-import-not-at-top,wrong-import-position
import medium  # pylint: disable=g-import-not-at-top,wrong-import-position
import styles  # pylint: disable=g-import-not-at-top,wrong-import-position


def _write_final(folder, seed, name, final):
  """A curve whose last plot.FINAL_WINDOW losses equal ``final``."""
  _write_pickle(folder, seed, name, [5.] + [final] * plot.FINAL_WINDOW)


def _write_flat(folder, seed, name, acc, trace=None, eig=None):
  os.makedirs(folder, exist_ok=True)
  record = {"iteration": [0, 10], "heldout_accuracy": [0.1, acc],
            "heldout_loss": [1., .5], "train_loss": [1., .5],
            "train_accuracy": [.1, .9]}
  if trace is not None:
    record.update(hessian_trace=trace, hessian_top_eigenvalue=eig)
  with open(os.path.join(folder, "seed{}_heldout_record-{}.json".format(
      seed, name)), "w") as f:
    json.dump(record, f)


@pytest.fixture
def medium_results(tmp_path):
  """mnist-mlp-sigmoid: l2o-scale and hess-1e-3 with 3 training seeds x 2
  test seeds, jacob-1e-2 (same as l2o-scale), two Adam and SGD LRs, the
  original baselines; logs of two training runs."""
  mlp = str(tmp_path / "test" / "mnist-mlp-sigmoid")
  # final loss of (train seed t, test seed s): l2o-scale t + s/10
  for t in (1, 2, 3):
    for s in (6, 12):
      _write_final(mlp, s, "l2o-scale.t%d" % t, t + s / 10.)
      _write_flat(mlp, s, "l2o-scale.t%d" % t, 0.80 + 0.001 * t + 0.0001 * s,
                  trace=100. + t, eig=10. + t)
      # hess-1e-3: clearly higher accuracy, flatter
      _write_final(mlp, s, "hess-1e-3.t%d" % t, t)
      _write_flat(mlp, s, "hess-1e-3.t%d" % t, 0.90 + 0.001 * t,
                  trace=50. + t, eig=5. + t)
      # jacob-1e-2: the same as l2o-scale up to tiny noise
      _write_final(mlp, s, "jacob-1e-2.t%d" % t, t + s / 10.)
      _write_flat(mlp, s, "jacob-1e-2.t%d" % t,
                  0.80 + 0.001 * (4 - t) + 0.0001 * s, trace=100. + t,
                  eig=10. + t)
  for s in (6, 12):
    for name, final in (("Adam", 3.), ("Adam-lr1e-3", 1.), ("Adam-lr3e-4", 2.),
                        ("SGD", 4.), ("SGD-lr0.1", 3.5), ("SGD-lr0.3", 0.5)):
      _write_final(mlp, s, name, final)
      _write_flat(mlp, s, name, 0.7)
  train = str(tmp_path / "train")
  inf = float("inf")
  _write_events(train, "hess-1e-3.t1", [
      ("evaluation", 1, dict(number=1, cost=2.5)),
      ("selection", 1, dict(number=1, score=0.75)),
      ("rollback", 2, dict(to="model.ckpt-1")),
      ("evaluation", 2, dict(number=2, cost=inf)),
      ("selection", 2, dict(number=2, score=inf)),
      ("evaluation", 3, dict(number=3, cost=1.5e-1)),
      ("selection", 3, dict(number=3, score=0.5)),
      ("best", 3, dict(index=3))], seed=1)
  _write_events(train, "l2o-entropy-reg-cl-mt.t2", [
      ("evaluation", 1, dict(number=1, num_steps=100, cost=3.0)),
      ("evaluation", 2, dict(number=2, num_steps=200, cost=2.0))], seed=2)
  return str(tmp_path / "test"), train


def _write_events(train_root, name, events, seed=None):
  """A train dir's events file (as metarun.py writes it) and its run
  record's training seed."""
  folder = os.path.join(train_root, name, "HierarchicalRNN_GRUCell_20_2")
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, medium.EVENTS), "a") as f:
    for kind, k, fields in events:
      f.write(json.dumps(dict(event=kind, meta_iteration=k, **fields)) + "\n")
  if seed is not None:
    with open(os.path.join(folder, "run_record.json"), "w") as f:
      json.dump({"training_flags": {"seed": seed}}, f)
  return folder


def test_split_and_tuned_names():
  assert styles.split_name("hess-1e-3.t2") == ("hess-1e-3", 2)
  assert styles.split_name("l2o-scale") == ("l2o-scale", None)
  assert styles.tuned_lr("Adam-lr3e-4") == ("Adam", 3e-4)
  assert styles.tuned_lr("SGD-lr0.1") == ("SGD", 0.1)
  assert styles.tuned_lr("Adam") is None
  assert styles.label("hess-1e-3") == "Hessian-ESD reg. α=1e-3"
  assert styles.label("hess-1e-3.t2") == "Hessian-ESD reg. α=1e-3"
  assert styles.label("jacob-1e-2") == "Jacobian reg. α=1e-2"
  assert styles.label("Adam-lr1e-3") == "Adam (tuned, lr 1e-3)"
  assert styles.label("l2o-entropy-reg") != "l2o-entropy-reg"


# Every name reproduce/all.sh can produce in one figure.
ALL_NAMES = (["l2o-scale", "l2o-entropy-paper-cmd",
              "l2o-entropy-reg", "l2o-entropy-reg-cl-mt", "SGD", "Adam",
              "Adagrad"] +
             ["{}-{}".format(k, a) for k in ("hess", "jacob")
              for a in ("1e-4", "1e-3", "1e-2")] +
             ["Adam-lr" + lr for lr in ("3e-4", "1e-3", "3e-3", "1e-2")] +
             ["SGD-lr" + lr for lr in ("0.1", "0.3", "1")])


def test_every_optimizer_has_its_own_look_and_label():
  """Lines are told apart by (colour, line style, marker): no two names
  share all three, nor a label; learned optimizers are solid with filled
  markers, the original baselines dashed, tuned ones dash-dotted, both with
  open markers; a training-seed suffix changes nothing."""
  looks = {n: tuple(sorted(styles.style(n).items())) for n in ALL_NAMES}
  assert len(set(looks.values())) == len(ALL_NAMES)
  assert len({styles.label(n) for n in ALL_NAMES}) == len(ALL_NAMES)
  for n in ALL_NAMES:
    s = styles.style(n)
    assert s == styles.style(n + ".t3")
    if styles.tuned_lr(n):
      assert s["linestyle"] == "-." and not s["filled"]
    elif styles.is_baseline(n):
      assert s["linestyle"] == "--" and not s["filled"]
    else:
      assert s["linestyle"] == "-" and s["filled"]
  # Tuned learning rates of one optimizer: one marker each.
  for opt in ("Adam", "SGD"):
    markers = [styles.style(n)["marker"] for n in ALL_NAMES
               if n.startswith(opt + "-lr")]
    assert len(set(markers)) == len(markers)
  # No learned optimizer in a baseline's colour.
  learned = {styles.style(n)["color"] for n in ALL_NAMES
             if not styles.is_baseline(n)}
  base = {styles.style(n)["color"] for n in ALL_NAMES if styles.is_baseline(n)}
  assert not learned & base


def test_order_learned_then_baselines():
  names = ["SGD-lr1", "Adam", "l2o-entropy-reg-cl-mt", "jacob-1e-2",
           "hess-1e-2", "hess-1e-4", "l2o-scale", "SGD", "Adam-lr1e-3"]
  assert styles.ordered(names) == [
      "l2o-scale", "hess-1e-4", "hess-1e-2", "jacob-1e-2",
      "l2o-entropy-reg-cl-mt", "SGD", "Adam", "SGD-lr1", "Adam-lr1e-3"]


def test_run_counts_text():
  learned = figures.run_counts([(t, s) for t in (1, 2, 3) for s in (6, 12)])
  assert learned == (3, 2)
  assert figures.run_counts([6, 12, 18]) == (1, 3)
  assert figures.runs_text({"l2o-scale": learned, "Adam": (1, 3)}) == (
      "per line, learned: 3 training × 2 test seeds; baselines: 3 test seeds")
  assert figures.runs_text({"l2o-scale": (1, 3), "SGD": (1, 3)}) == (
      "each line: 3 test seeds")


def test_variant_pooling_over_training_seeds(medium_results):
  losses, heldout = plot.load_results(medium_results[0])
  stats = medium.variant_stats(losses, heldout, plot.final_losses)
  st = stats["mnist-mlp-sigmoid"]["l2o-scale"]
  # per-training-seed means of the final losses t + s/10 over s in (6, 12)
  per_seed = [t + 0.9 for t in (1, 2, 3)]
  assert st["loss"]["n_train"] == 3 and st["loss"]["n_test"] == 2
  np.testing.assert_allclose(st["loss"]["per_seed"], per_seed, rtol=1e-6)
  assert st["loss"]["mean"] == pytest.approx(2.9, rel=1e-6)
  assert st["loss"]["std"] == pytest.approx(np.std(per_seed), rel=1e-5)
  acc = [0.80 + 0.001 * t + 0.0009 for t in (1, 2, 3)]
  assert st["accuracy"]["mean"] == pytest.approx(np.mean(acc))
  assert st["accuracy"]["std"] == pytest.approx(np.std(acc))
  assert st["trace"]["mean"] == pytest.approx(102.)
  # A baseline (one run): mean and std over test seeds.
  adam = stats["mnist-mlp-sigmoid"]["Adam-lr1e-3"]["loss"]
  assert adam["n_train"] == 1 and adam["n_test"] == 2
  assert adam["mean"] == pytest.approx(1.) and adam["std"] == 0.
  assert stats["mnist-mlp-sigmoid"]["Adam"]["trace"]["n_train"] == 0


def test_best_tuned_learning_rate(medium_results):
  losses, _ = plot.load_results(medium_results[0])
  finals = {n: plot.final_losses(c)
            for n, c in losses["mnist-mlp-sigmoid"].items()}
  assert medium.best_tuned(finals) == {"Adam": "Adam-lr1e-3",
                                       "SGD": "SGD-lr0.3"}
  finals["Adam-lr1e-3"] = np.array([np.nan])  # diverged: not chosen
  assert medium.best_tuned(finals)["Adam"] == "Adam-lr3e-4"


def test_compare_verdict():
  clear = medium.compare([0.90, 0.91, 0.92], [0.80, 0.81, 0.82])
  assert clear["delta"] == pytest.approx(0.1)
  assert clear["pooled_std"] == pytest.approx(0.01)
  assert clear["welch_t"] == pytest.approx(0.1 / math.sqrt(2 * 1e-4 / 3))
  assert clear["significant"] and clear["verdict"] == "differs"
  none = medium.compare([0.80, 0.82, 0.81], [0.81, 0.80, 0.82])
  assert none["delta"] == pytest.approx(0.)
  assert not none["significant"]
  assert none["verdict"] == "within seed spread"
  assert medium.compare([1.], [2., 3.])["verdict"] == "too few seeds"
  assert medium.compare([], [2.])["verdict"] == "no data"


def test_regularizer_verdict_counts_training_seeds_not_test_seeds():
  """One training seed tested on 3 test seeds is one meta-training run: its
  verdict is "too few seeds", however far its test-seed values lie."""
  def stats(per_train_seed):  # {training seed: accuracies over test seeds}
    return {m: medium.pooled_stats({t: np.asarray(v)
                                    for t, v in per_train_seed.items()})
            for m in ("loss", "accuracy", "trace", "top_eig")}
  table = medium.medium_tables({"mnist-mlp-sigmoid": {
      "l2o-scale": stats({1: [.80, .80, .80], 2: [.81, .81, .81],
                          3: [.79, .79, .79]}),
      "hess-1e-4": stats({1: [.95, .96, .97], 2: [.95, .96, .97],
                          3: [.95, .96, .97]}),
      "l2o-entropy-reg-cl-mt": stats({1: [.95, .96, .97]}),
  }}, lambda p: p)
  rows = {line.split(" | ")[0]: line for line in table.splitlines()
          if line.startswith("| ") and "(" in line}
  hess = [r for k, r in rows.items() if "α=1e-4" in k]
  clmt = [r for k, r in rows.items() if "CL" in k]
  assert "differs" in hess[0] and "too few seeds" in clmt[0]
  assert "differs" not in clmt[0]


def test_read_train_events(medium_results):
  logs = medium.load_train_records(medium_results[1])
  hess = logs["hess-1e-3"][1]
  assert hess["evaluations"] == [(1, None, 2.5), (2, None, math.inf),
                                 (3, None, 0.15)]
  assert hess["selections"] == [(1, 0.75), (2, math.inf), (3, 0.5)]
  assert hess["rollbacks"] == [2]
  assert hess["best"] == 3 and hess["seed"] == 1
  cl = logs["l2o-entropy-reg-cl-mt"][2]
  assert cl["evaluations"] == [(1, 100, 3.0), (2, 200, 2.0)]
  assert cl["selections"] == [] and cl["best"] is None


def test_events_of_a_resumed_run_count_once(tmp_path):
  """A run killed after meta-iteration 5 and resumed from its checkpoint
  at 3 repeats meta-iterations 4 and 5: each event counts once, as the
  resumed run wrote it."""
  folder = _write_events(str(tmp_path), "x.t2", [
      ("evaluation", 2, dict(number=1, cost=3.)),
      ("selection", 2, dict(number=1, score=1.5)),
      ("evaluation", 4, dict(number=2, cost=9.)),
      ("rollback", 5, dict(to="x"))])
  _write_events(str(tmp_path), "x.t2", [
      ("evaluation", 4, dict(number=2, cost=2.)),
      ("selection", 4, dict(number=2, score=0.04)),
      ("rollback", 5, dict(to="x"))], seed=2)
  parsed = medium.read_events(os.path.join(folder, medium.EVENTS))
  assert parsed["evaluations"] == [(2, None, 3.0), (4, None, 2.0)]
  assert parsed["selections"] == [(2, 1.5), (4, 0.04)]
  assert parsed["rollbacks"] == [5]
  parsed = medium.load_train_records(str(tmp_path))["x"][2]
  assert parsed["seed"] == 2
  table = medium.training_table({"x": {2: parsed}}, {"train-x.t2": 95.})
  assert "| x | 2 | robust selection | 0.04 (4) | 4 | 1 | 95 s |" in table


def test_medium_cli_writes_everything(medium_results, tmp_path):
  out = tmp_path / "fig"
  assert plot.main(["--results_dir", medium_results[0], "--out_dir", str(out),
                    "--train_dir", medium_results[1], "--title", "medium"]) == 0
  for name in ("loss_curves", "heldout_accuracy", "meta_training",
               "accuracy_flatness"):
    for ext in ("png", "pdf"):
      assert (out / (name + "." + ext)).stat().st_size > 1000, name
  text = (out / "results.md").read_text()
  # One row per meta-training run, from its events.
  assert ("| Hessian-ESD reg. α=1e-3 | 1 | robust selection | 0.5 (3) | "
          "not reached | 1 | — |") in text
  assert ("| L2O-Entropy (reg. + CL + MT) | 2 | evaluation cost | 2 (2) | — "
          "| 0 | — |") in text
  rows = {}
  per_problem = text[text.index("## Per problem"):]
  for l in per_problem.splitlines():  # the first row of each label
    if l.startswith("| "):
      rows.setdefault(l.split("|")[1].strip(), l)
  assert "| 3 × 2 | 2.9 ± 0.82 |" in rows["L2O-Scale (no reg.)"]
  assert "Adam (tuned, lr 1e-3)" in rows
  assert "Adam (tuned, lr 3e-4)" not in rows    # only in the sweep
  assert "| Adam | 3e-4 | 2 ± 0 |" in text
  assert "| Adam * | 1e-3 | 1 ± 0 |" in text
  hess = rows["Hessian-ESD reg. α=1e-3"]
  assert "Regularizer effect" in text and "2 × pooled std" in text
  effect = [l for l in text.splitlines()
            if l.startswith("| Hessian-ESD reg. α=1e-3 | +") and "(differs)" in l]
  assert len(effect) == 1 and effect[0].count("(differs)") == 3, effect
  # The verdicts: every learned optimizer's accuracy, loss and flatness with
  # 95% t-intervals over its 3 training seeds (accuracies 0.9010, 0.9020,
  # 0.9030: 0.9020 ± t(0.975, 2) 4.303 × 0.001 / √3; traces 51, 52, 53),
  # and Δ accuracy with Welch's interval (equal spreads 0.001, df 4:
  # ± 2.776 × 0.001 × √(2/3)).
  assert ("| Hessian-ESD reg. α=1e-3 | 3 | 0.9020 [0.8995, 0.9045] | "
          "2 [-0.4841, 4.484] | 52 [49.52, 54.48] | 7 [4.516, 9.484] | "
          "+0.0991 [+0.0968, +0.1014] (beyond the spread) |") in text
  assert ("| L2O-Scale (no reg.) | 3 | 0.8029 [0.8004, 0.8054] | "
          "2.9 [0.4159, 5.384] | 102 [99.52, 104.5] | 12 [9.516, 14.48] | "
          "(the control) |") in text
  assert "| +0.0000 [-0.0023, +0.0023] (within) |" in text
  jac = [l for l in text.splitlines() if l.startswith("| Jacobian reg. α=1e-2 | ")
         and "seed spread" in l]
  assert len(jac) == 1 and jac[0].count("(within seed spread)") == 4, jac
  assert jac[0].count("+0 [-2.267, +2.267] (within seed spread)") == 3, jac
  assert "| 52 ± 0.82 |" in hess


# ------------------------------------------------------------------ bench
class FakeTimer(object):
  """Each call advances by the next increment: deterministic 'timings'."""

  def __init__(self, increments):
    self.now, self.increments = 0., list(increments)

  def __call__(self):
    self.now += self.increments.pop(0) if self.increments else 0.
    return self.now


def test_bench_measure_with_stubbed_timer():
  calls = []
  # first call: start 0 -> 5 (5 s compile); then 3 repeats of 2 calls each.
  timer = FakeTimer([0., 5., 0., 2., 0., 4., 0., 3.])
  stats = bench_core.measure(lambda: calls.append(1), warmup=2, repeats=3,
                        inner=2, timer=timer)
  assert len(calls) == 1 + 1 + 3 * 2
  assert stats["first_call_seconds"] == 5.
  assert stats["samples"] == [1., 2., 1.5]
  assert stats["median"] == 1.5 and stats["min"] == 1. and stats["max"] == 2.
  assert stats["repeats"] == 3


def test_bench_json_report(tmp_path):
  step = lambda m: bench_core.summarize([m], first_call_seconds=1.)
  steps = {"batch_size": 128, "problem": "mlp", "l2o": step(0.004),
           "l2o_xla": step(0.003), "adam": step(0.0015),
           "adam_xla": step(0.001), "gru_core_xla": step(0.0019)}
  unrolls = {"unroll_length": 20, "mini_dataset_rows": 10000,
             "batch_size": 128, "noreg": step(0.5),
             "hessian_esd": step(1.5)}
  info = {"cpu": "test cpu", "cpu_count": 2, "tensorflow": "2.x",
          "python": "3.11", "load_average_1min_at_start": 0.1}
  report = bench_report.make_report(steps, unrolls, info, quick=True)
  path = tmp_path / "sub" / "bench.json"
  bench_report.write_json(str(path), report)
  loaded = json.loads(path.read_text())
  for key in ("l2o_step_seconds", "adam_step_seconds",
              "unroll_seconds_noreg", "unroll_seconds_hessian_esd"):
    assert isinstance(loaded[key], float)
  # Headline: the XLA learned step against the faster Adam step.
  assert loaded["l2o_step_seconds"] == pytest.approx(0.003)
  assert loaded["adam_step_seconds"] == pytest.approx(0.001)
  assert loaded["l2o_over_adam_ratio"] == pytest.approx(3.)
  assert loaded["l2o_no_xla_over_adam_ratio"] == pytest.approx(4.)
  assert loaded["hessian_esd_over_noreg_ratio"] == pytest.approx(3.)
  assert loaded["gru_core_over_adam_ratio"] == pytest.approx(1.9)
  assert loaded["machine"]["cpu"] == "test cpu"
  text = bench_report.format_table(report)
  assert "3.00x" in text and "4.00 ms" in text and "(XLA)" in text
  assert "GRU alone, XLA) / fastest Adam step: 1.90x" in text
  # In the compiled meta-test loop, the XLA learned step against Adam
  # without and with XLA.
  loop = {"steps": 1500, "l2o": 0.0033, "l2o_xla": 0.0012, "adam": 0.0006,
          "adam_xla": 0.0004}
  report = bench_report.make_report(steps, unrolls, info, quick=True, loop=loop)
  assert report["loop_l2o_xla_over_adam_ratio"] == pytest.approx(2.)
  assert report["loop_l2o_xla_over_adam_xla_ratio"] == pytest.approx(3.)
  assert ("learned / Adam 5.50x, learned XLA / Adam 2.00x, both XLA 3.00x"
          in bench_report.format_table(report))


def test_bench_speedup_over_the_original_in_its_json_format():
  """Ratios original / port from time_original.py's JSON fields."""
  step = lambda m, first=1.: bench_core.summarize([m], first_call_seconds=first)
  steps = {"batch_size": 128, "problem": "mlp", "l2o": step(0.004),
           "adam": step(0.002)}
  unrolls = {"unroll_length": 20, "mini_dataset_rows": 10000,
             "batch_size": 128, "noreg": step(0.5, 4.),
             "noreg_xla": step(0.4, 5.), "hessian_esd": step(0.6, 10.)}
  original = {
      "meta_test_step": {"median_s": 0.010},
      "meta_train_unroll_plain": {"median_s": 1.0,
                                  "build_and_first_unroll_s": 12.},
      "meta_train_unroll_hessian_esd": {"median_s": 1.5,
                                        "build_and_first_unroll_s": 30.}}
  info = {"cpu": "c", "cpu_count": 2, "tensorflow": "2.x", "python": "3.11",
          "load_average_1min_at_start": 0.1}
  meta_iteration = step(3.)
  report = bench_report.make_report(steps, unrolls, info, True, None, meta_iteration,
                             original)
  speedups = report["speedup_over_original"]
  assert speedups["unroll_noreg"] == pytest.approx(2.)
  assert speedups["unroll_noreg_xla"] == pytest.approx(2.5)
  assert speedups["unroll_hessian_esd"] == pytest.approx(2.5)
  assert speedups["first_call_noreg"] == pytest.approx(3.)
  assert speedups["first_call_hessian_esd"] == pytest.approx(3.)
  assert speedups["meta_test_step"] == pytest.approx(2.5)
  assert "unroll_hessian_esd_xla" not in speedups
  assert report["meta_iteration_seconds"] == pytest.approx(3.)
  text = bench_report.format_table(report)
  assert "unroll_noreg 2.00x" in text and "--jit_compile" in text
  report = bench_report.make_report(steps, unrolls, info, True, None, None,
                             {"error": "OSError: no venv"})
  assert "original TF1 code failed: OSError: no venv" in bench_report.format_table(
      report)


def test_bench_lower_bound_runs_the_optimizers_gru():
  """The lower-bound step's new state is the per-parameter GRU of the
  optimizer applied to (features, state), per coordinate: checked against
  the coordinate-major port of the original cell (``BiasGRUCell.__call__``),
  each coordinate with its tensor's injected bias. Its loss is the
  problem's objective, and the parameters take an SGD step of 1e-3."""
  from problems import problem_generator  # pylint: disable=g-import-not-at-top
  problem = problem_generator.FullyConnected(3, 2, hidden_sizes=(4,))
  optimizer = bench_core.hrnn()  # pylint: disable=protected-access
  step = bench_steps.make_gru_core_step(problem, optimizer, jit_compile=False)
  x = tf.constant(np.random.RandomState(1).randn(5, 3).astype(np.float32))
  y = tf.constant([0, 1, 1, 0, 1])
  # Tracing does not run the step: the variables still hold their initial
  # values here.
  shapes = [tf.TensorShape(s) for s in problem.param_shapes]
  n = sum(s.num_elements() for s in shapes)
  captured = step.get_concrete_function(x, y).variables
  state = [v for v in captured
           if v.shape == (optimizer.level_sizes[0], n)]
  features = [v for v in captured if v.shape == (optimizer.num_rnn_inputs, n)]
  units = optimizer.cells[0].state_size
  bias = [v for v in captured if v.shape == (len(shapes), 3 * units)]
  assert len(state) == 1 and len(features) == 1 and len(bias) == 1
  meta = {id(v) for v in optimizer.trainable_variables}
  # The captures come in no particular order; this problem's parameter
  # shapes are all different.
  by_shape = {tuple(v.shape): v for v in captured
              if id(v) not in meta | {id(state[0]), id(features[0]),
                                      id(bias[0])}}
  assert len(by_shape) == len(shapes)
  params = [by_shape[tuple(s)] for s in shapes]
  values = [tf.constant(p.numpy()) for p in params]
  old_state = tf.constant(state[0].numpy())
  expected_obj, grads = problem.objective_and_gradients(values, x, y)
  # Each coordinate gets its tensor's injected bias row.
  per_coordinate_bias = np.repeat(bias[0].numpy(),
                                  [s.num_elements() for s in shapes], axis=0)
  expected_state, _ = optimizer.cells[0](tf.transpose(features[0]),
                                         tf.transpose(old_state),
                                         bias=per_coordinate_bias)

  obj = step(x, y)
  np.testing.assert_allclose(obj.numpy(), expected_obj.numpy(), rtol=1e-6)
  for param, value, grad in zip(params, values, grads):
    np.testing.assert_allclose(param.numpy(), (value - 1e-3 * grad).numpy(),
                               rtol=1e-5, atol=1e-7)
  assert not np.allclose(state[0].numpy(), old_state.numpy(), atol=1e-3)
  np.testing.assert_allclose(state[0].numpy(),
                             tf.transpose(expected_state).numpy(),
                             rtol=1e-5, atol=1e-6)


def test_bench_report_when_xla_fails():
  step = lambda m: bench_core.summarize([m], first_call_seconds=1.)
  steps = {"batch_size": 128, "problem": "mlp", "l2o": step(0.004),
           "l2o_xla": {"error": "XLA: nope"}, "adam": step(0.002),
           "gru_core_xla": {"error": "XLA: no"}}
  unrolls = {"unroll_length": 20, "mini_dataset_rows": 10000,
             "batch_size": 128, "noreg": step(0.5),
             "hessian_esd": step(1.5)}
  report = bench_report.make_report(steps, unrolls, {"cpu": "c", "cpu_count": 2,
                                              "tensorflow": "2.x",
                                              "python": "3.11",
                                              "load_average_1min_at_start":
                                              None})
  assert report["l2o_step_uses_xla"] is False
  assert report["l2o_over_adam_ratio"] == pytest.approx(2.)
  assert report["l2o_xla_error"] == "XLA: nope"
  assert report["gru_core_xla_error"] == "XLA: no"
  assert "gru_core_over_adam_ratio" not in report
  text = bench_report.format_table(report)
  assert "l2o_xla failed: XLA: nope" in text
  assert "gru_core_xla failed: XLA: no" in text and "lower bound" not in text


# ------------------------------------------------------- all.sh end to end
def _table_rows(path):
  rows = {}
  for line in open(path).read().splitlines():
    if line.startswith("| MNIST"):
      cells = [c.strip() for c in line.strip("|").split("|")]
      rows[cells[1]] = cells
  return rows


def _number(cell):
  return float(cell.split("±")[0])


def _progress(stdout):
  """(stage k, total, rest) of each "[done] NAME in S s (stage k/N; rest)"
  line."""
  return [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in
          re.finditer(r"^\[done\] \S+ in [0-9.]+ s \(stage (\d+)/(\d+); "
                      r"(.*)\)$", stdout, re.M)]


def test_all_sh_tiny_end_to_end_and_resume(tmp_path, data_dir):
  """REPRO_TINY: 1 meta-iteration, 1 seed, 20 test steps, one problem."""
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", L2O_SCALE_DATA_DIR=data_dir,
             PYTHON=sys.executable, REPRO_HEARTBEAT="1")
  env.pop("REPRO_QUICK", None)
  cmd = ["bash", os.path.join(ROOT, "reproduce", "all.sh"),
         "--out={}".format(out)]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "plan:" in proc.stdout and "offline MNIST" in proc.stdout
  # Progress: every finished stage counted once, in order, with an estimate
  # of the time left until the last; a line while meta-training runs (it
  # imports TensorFlow and compiles the unroll: seconds on any machine).
  progress = _progress(proc.stdout)
  assert [k for k, _, _ in progress] == list(range(1, 6)), proc.stdout
  assert all(n == 5 for _, n, _ in progress)
  assert all(re.fullmatch(r"about \d+ (s|min) left", rest)
             for _, _, rest in progress[:-1]), progress
  assert progress[-1][2] == "all done"
  assert re.search(r"^\[\.\.\. \] train-l2o-scale running for \d+ s: ",
                   proc.stdout, re.M), proc.stdout
  # results.md states the run: its settings and this invocation.
  results = (out / "figures" / "results.md").read_text()
  assert "| meta-test steps | 20 |" in results
  assert "| wall time, end to end |" in results and ": 5 stages in " in results
  invocations = (out / "invocations.tsv").read_text().splitlines()
  assert len(invocations) == 1 and invocations[0].split("\t")[2] == "5"
  # The last line names every figure and table; no table on the terminal.
  figures = out / "figures"
  written = sorted(p.name for p in figures.iterdir()
                   if p.name != "outputs.json")
  last = proc.stdout.rstrip("\n").splitlines()[-1]
  assert last.startswith("outputs in {}: ".format(figures)), last
  assert sorted(last.split(": ", 1)[1].split(", ")) == written
  assert len(written) == 9 and "| MNIST" not in proc.stdout
  # The meta-training table, from the run's own events file.
  assert "| L2O-Scale (no reg.) | 1 | evaluation cost |" in results
  assert (figures / "loss_curves.png").stat().st_size > 1000
  assert (figures / "loss_curves.pdf").stat().st_size > 1000
  rows = _table_rows(figures / "results.md")
  for label in ("L2O-Scale (no reg.)", "SGD (lr 1e-3)", "Adam (lr 1e-4)",
                "Adagrad (lr 1e-5)"):
    assert label in rows, rows
    loss, split, acc = (_number(rows[label][4]), _number(rows[label][5]),
                        _number(rows[label][6]))
    assert math.isfinite(loss) and loss > 0
    assert math.isfinite(split) and split > 0
    assert math.isfinite(acc) and 0 <= acc <= 1
  # Resumable: a second run redoes nothing.
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "[run ]" not in proc.stdout
  assert proc.stdout.count("[skip]") == 6  # the plot too
  assert "stages: 5 (5 done earlier)" in proc.stdout
  assert len((out / "invocations.tsv").read_text().splitlines()) == 1
  # Other settings into the same folder are refused.
  env["REPRO_QUICK"], env["REPRO_TINY"] = "1", "0"
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode != 0
  assert "holds results of other settings" in proc.stderr


def test_all_sh_interrupted_stops_its_stages(tmp_path, data_dir):
  """A kill (as Ctrl-C) of all.sh stops the stages it runs in the
  background, says how to continue, and leaves no stage marked done that
  did not finish."""
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", L2O_SCALE_DATA_DIR=data_dir,
             PYTHON=sys.executable)
  env.pop("REPRO_QUICK", None)
  proc = subprocess.Popen(
      ["bash", os.path.join(ROOT, "reproduce", "all.sh"),
       "--out={}".format(out)], env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    for line in proc.stdout:
      if line.startswith("[run ] train-"):
        break
    pids = []
    for _ in range(100):  # the pid files of both stages that started
      pids = [int(p.read_text()) for p in (out / ".running").glob("*.pid")
              if p.read_text().strip()]
      if len(pids) == 2:
        break
      time.sleep(0.1)
    assert pids
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 130, err
  assert "interrupted" in err and "run the same command again" in err
  for pid in pids:
    for _ in range(100):
      if not _alive(pid):
        break
      time.sleep(0.1)
    assert not _alive(pid), "stage process {} still runs".format(pid)
  assert not (out / ".stages" / "train-l2o-scale.done").exists()


def _alive(pid):
  try:
    with open("/proc/{}/stat".format(pid)) as f:
      return f.read().split(")")[-1].split()[0] != "Z"
  except OSError:
    return False


def test_pretrained_metatest_table(tmp_path):
  """reproduce/pretrained_metatest.py's table: per seed the final train loss
  and held-out accuracy of each optimizer, and their means."""
  import pretrained_metatest  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path / pretrained_metatest.PROBLEM)
  for seed, (loss, acc) in zip((6, 12, 18), ((.1, .8), (.2, .9), (.3, .7))):
    _write_final(folder, seed, "l2o-scale", loss)
    _write_flat(folder, seed, "l2o-scale", acc)
  text = pretrained_metatest.table(str(tmp_path), [("l2o-scale", "l2o-scale")],
                                   3000)
  assert ("| l2o-scale | 0.1000 / 0.8000 | 0.2000 / 0.9000 | 0.3000 / 0.7000 "
          "| 0.2000 / 0.8000 |") in text
  assert text.startswith("3000 steps")


def test_pretrained_metatest_runs_every_shipped_optimizer():
  import pretrained_metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  names = pretrained_metatest.shipped_names()
  assert sorted(names) == pretrained.names() and len(names) >= 3
  assert names[0] == "l2o-scale"  # the plots' order


def test_all_sh_pretrained_size_knows_every_shipped_optimizer(tmp_path):
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, REPRO_PRETRAINED="1", PYTHON=sys.executable,
             REPRO_VARIANTS="l2o-entropy-reg hess-1e-4")
  env.pop("REPRO_TINY", None)
  proc = subprocess.run(["bash", os.path.join(ROOT, "reproduce", "all.sh"),
                         "--out={}".format(tmp_path / "repro")], env=env,
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip() == (
      "all.sh: REPRO_VARIANTS names hess-1e-4, which is not shipped "
      "(shipped: {})".format(" ".join(pretrained.names())))


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
  folder = _write_events(str(tmp_path / "train"), "v.t2", [
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


@pytest.mark.parametrize("setting,message", [
    ({"REPRO_PROBLEMS": "mnist-mlp-sigmoid mnist-conv"},
     "all.sh: REPRO_PROBLEMS names mnist-conv, which is not a problem of the "
     "tiny size (its problems: mnist-mlp-sigmoid)"),
    ({"REPRO_VARIANTS": "l2o-scale hess-x"},
     "all.sh: REPRO_VARIANTS names hess-x, which is no known variant")])
def test_all_sh_refuses_a_subset_outside_its_size(tmp_path, setting, message):
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", PYTHON=sys.executable, **setting)
  proc = subprocess.run(["bash", os.path.join(ROOT, "reproduce", "all.sh"),
                         "--out={}".format(out)], env=env,
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2 and proc.stderr.startswith(message), (
      proc.stderr)
  assert not (out / "config.txt").exists()  # nothing started


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


# ------------------------------------------------- the pipeline, in-process
from pipeline import cli as pipeline_cli  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import plan as pipeline_plan  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import problem_list as pipeline_problems  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import progress as pipeline_progress  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import runner as pipeline_runner  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import sizes as pipeline_sizes  # pylint: disable=g-import-not-at-top,wrong-import-position
from pipeline import variants as pipeline_variants  # pylint: disable=g-import-not-at-top,wrong-import-position

_SETTINGS = pipeline_plan.Settings(python="python", out="/o", root="/r",
                                   data_dir="/d")


def _flag(argv, name):
  values = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
  assert len(values) == 1, (name, argv)
  return values[0]


def test_quick_plan_is_sizes_times_variants_times_problems():
  """The quick size: 4 meta-trainings, 3 baselines and 4 learned optimizers
  on each of 4 problems, the plot last, after all; each learned test after
  the training that writes the train dir it reads, and after it in order."""
  size = pipeline_sizes.SIZES["quick"]
  stages = pipeline_plan.build(size, _SETTINGS, ["python", "plot.py"])
  names = [s.name for s in stages]
  assert len(names) == len(set(names)) == 4 + 4 * 3 + 4 * 4 + 1
  assert names[-1] == "plot" and set(stages[-1].after) == set(names[:-1])
  trains = {_flag(s.argv, "--train_dir"): s for s in stages
            if s.name.startswith("train-")}
  assert all(s.after == () for s in trains.values())
  learned = [s for s in stages if "--test_optimizer=L2o" in s.argv]
  assert len(learned) == 16
  for s in learned:
    train = trains[_flag(s.argv, "--train_dir")]
    assert s.after == (train.name,)
    assert names.index(train.name) < names.index(s.name)
  # The commands all.sh ran before the pipeline (from its logs).
  assert " ".join(next(s for s in stages if s.name ==
                       "train-l2o-entropy-reg-cl-mt").argv) == (
      "python metarun.py --train_dir=/o/train/l2o-entropy-reg-cl-mt "
      "--num_meta_iterations=3 --fix_unroll=True --fix_unroll_length=20 "
      "--fix_num_steps=40 --fix_num_steps_eval=40 --evaluation_epochs=1 "
      "--evaluation_period=1 --meta_learning_rate=1e-3 --seed=1 "
      "--reg_optimizer=True --reg_option=hessian-esd --alpha=1e-4 "
      "--regularize_time=always --if_cl=True --if_mt=True --mt_ratio=0.1 "
      "--mt_k=1 --data_dir=/d")
  assert " ".join(next(s for s in stages if s.name ==
                       "test-mnist-conv-Adam").argv) == (
      "python metatest.py --test_optimizer=Adam --model_name=Adam "
      "--include_mnist_conv_problems --num_testing_itrs=100 "
      "--save_dir=/o/test/mnist-conv --seeds=6,12,18 --heldout_every=50 "
      "--progress_every=1000000 --overwrite --jit_compile=False --data_dir=/d")
  assert size.config_line("/d") == (
      "size=quick meta_iters=3 meta_lr=1e-3 recipe= fix_num_steps=40 "
      "fix_num_steps_eval=40 evaluation_epochs=1 test_steps=300 "
      "test_steps_conv=100 seeds=6,12,18 heldout_every=50 train_seed=1 "
      "data_dir=/d")


def test_full_plan_conv_subset_paper_schedule_and_tuned_baselines():
  size = pipeline_sizes.select({"REPRO_RECIPE": "stable"})
  assert size.name == "full" and size.recipe == "stable"
  stages = {s.name: s for s in pipeline_plan.build(size, _SETTINGS, ["p"])}
  paper = stages["train-l2o-entropy-paper-cmd.t1"].argv
  assert "--meta_learning_rate=1e-6" in paper and "--recipe=stable" not in paper
  assert _flag(stages["train-hess-1e-2.t3"].argv, "--seed") == "3"
  assert _flag(stages["train-hess-1e-2.t3"].argv, "--alpha") == "1e-2"
  conv = [n for n in stages if n.startswith("test-mnist-conv-")]
  assert "test-mnist-conv-hess-1e-2.t1" in conv
  assert "test-mnist-conv-hess-1e-2.t2" not in conv
  tuned = stages["test-mnist-mlp-relu-SGD-lr0.3"].argv
  assert "--test_optimizer=SGD" in tuned
  assert "--baseline_learning_rate=0.3" in tuned
  assert _flag(tuned, "--flatness_probes") == "10"
  assert not any(a.startswith("--flatness_probes")
                 for a in stages["test-mnist-conv-SGD"].argv)


def test_a_new_variant_is_one_registry_entry(monkeypatch):
  """An entry in VARIANTS is trained with its flags, accepted by
  REPRO_VARIANTS, and drawn with its own label and look."""
  import styles  # pylint: disable=g-import-not-at-top
  new = pipeline_variants.Variant(
      "l2o-entropy-jacob", ("--reg_optimizer=True", "--reg_option=jacob"),
      "Jacobian test variant", "jacob", "#123456", "X", 3)
  monkeypatch.setitem(pipeline_variants.VARIANTS, new.name, new)
  size = pipeline_cli.choose(pipeline_sizes.SIZES["quick"],
                             {"REPRO_VARIANTS": "l2o-entropy-jacob.t2"})
  stages = {s.name: s for s in pipeline_plan.build(size, _SETTINGS, ["p"])}
  argv = stages["train-l2o-entropy-jacob.t2"].argv
  assert argv[-3:] == ("--reg_optimizer=True", "--reg_option=jacob",
                       "--data_dir=/d") and "--seed=2" in argv
  assert "test-mnist-conv-l2o-entropy-jacob.t2" in stages
  assert styles.label("l2o-entropy-jacob.t2") == "Jacobian test variant"
  assert styles.style("l2o-entropy-jacob")["color"] == "#123456"
  assert styles.ordered(["l2o-entropy-reg-cl-mt", "l2o-entropy-jacob", "SGD",
                         "l2o-scale"]) == [
                             "l2o-scale", "l2o-entropy-jacob",
                             "l2o-entropy-reg-cl-mt", "SGD"]


def test_variant_names_and_families():
  assert pipeline_variants.lookup("hess-1e-3.t2").flags == (
      "--reg_optimizer=True", "--reg_option=hessian-esd", "--alpha=1e-3",
      "--regularize_time=always")
  assert pipeline_variants.lookup("jacob-2.5e-4").flags[2] == "--alpha=2.5e-4"
  for bad in ("hess-x", "hess-1e-4.t", "l2o", "SGD", "jacob-"):
    assert pipeline_variants.lookup(bad) is None, bad
  with pytest.raises(pipeline_cli.Refused, match="no known variant"):
    pipeline_cli.choose(pipeline_sizes.SIZES["tiny"],
                        {"REPRO_VARIANTS": "l2o-scale hess-x"})
  looks = {(v.label, v.color, v.marker)
           for v in pipeline_variants.VARIANTS.values()}
  assert len(looks) == len(pipeline_variants.VARIANTS)


def test_problem_list_is_the_one_plot_and_plan_read():
  assert list(plot.PROBLEM_LABELS) == list(pipeline_problems.PROBLEMS)
  assert pipeline_sizes.SIZES["full"].problems == pipeline_problems.names()


def test_stage_kinds_for_the_estimate():
  kind = lambda n: pipeline_plan.kind_of(n, ["mnist-conv"], ["SGD"])
  assert kind("train-l2o-entropy-reg-cl-mt.t2") == "train-cl"
  assert kind("train-hess-1e-2.t1") == "train"
  assert kind("test-mnist-conv-SGD") == "test-mnist-conv-baseline"
  assert kind("test-mnist-conv-l2o-scale") == "test-mnist-conv-learned"
  assert kind("plot") == "plot"


def test_estimate_of_the_time_left():
  """Mean of the same kind, else of the family, else of all; divided by
  the stages run side by side (or by those left, when fewer)."""
  left = pipeline_progress.remaining_seconds
  finished = [("train", 100.), ("train", 200.), ("test-p-baseline", 10.)]
  # 150 (train) + 150 (train-cl: family train) + 10 + 10 (test family)
  assert left(["train", "train-cl", "test-p-baseline", "test-q-learned"],
              finished, jobs=2) == 160
  assert left(["plot"], finished, jobs=2) == round(310 / 3)
  assert left(["train"], finished, jobs=4) == 150  # fewer left than jobs
  assert left(["train"], [], jobs=2) is None
  text = pipeline_progress.progress_text
  assert text(3, 5, 160) == "stage 3/5; about 3 min left"
  assert text(5, 5, None) == "stage 5/5; all done"
  assert text(1, 5, None) == "stage 1/5"
  fmt = pipeline_progress.format_seconds
  assert [fmt(s) for s in (89, 90, 5399, 5400, 7290)] == [
      "89 s", "2 min", "90 min", "1 h 30 min", "2 h 02 min"]


def _fake_stages(tmp_path, spec):
  """Cheap stages: each appends its name to ran.txt, then exits with the
  given status."""
  ran = tmp_path / "ran.txt"
  return [pipeline_plan.Stage(name, ("sh", "-c", "echo {n} >> {f}; sleep "
                                     "0.2; exit {c}".format(n=name, f=ran,
                                                            c=code)),
                              kind) for name, kind, code in spec], ran


def _runner(tmp_path, stages, jobs=2):
  lines = []
  run = pipeline_runner.Runner(str(tmp_path / "out"), str(tmp_path), stages,
                               lambda n: n.split("-")[0], jobs=jobs,
                               heartbeat=1000, say=lines.append, poll=0.05)
  return run, lines


def test_runner_resumes_by_skipping_finished_stages(tmp_path):
  stages, ran = _fake_stages(tmp_path, [("train-a", "train", 0),
                                        ("test-b", "test", 0),
                                        ("test-c", "test", 0)])
  run, lines = _runner(tmp_path, stages)
  assert run.run(stages)
  assert sorted(ran.read_text().split()) == ["test-b", "test-c", "train-a"]
  record = json.loads((tmp_path / "out" / ".stages" /
                       "test-b.done").read_text())
  assert record["argv"] == list(stages[1].argv) and record["seconds"] > 0
  assert [l.split()[-1] for l in lines if l.startswith("[done]")][-1] == (
      "done)")
  assert len(open(run.times).read().splitlines()) == 3
  os.remove(run.marker("test-c"))  # a deleted marker redoes its stage
  run, lines = _runner(tmp_path, stages)
  assert run.run(stages)
  assert ran.read_text().split().count("test-c") == 2
  assert ran.read_text().split().count("train-a") == 1
  assert lines[:2] == ["[skip] train-a (done earlier)",
                       "[skip] test-b (done earlier)"]
  assert lines[-1].startswith("[done] test-c in ") and lines[-1].endswith(
      "(stage 3/3; all done)")


def test_runner_keeps_the_others_after_a_failure_and_limits_jobs(
    tmp_path, monkeypatch):
  stages, ran = _fake_stages(tmp_path, [(n, "test", 1 if n == "b" else 0)
                                        for n in "abcde"])
  run, _ = _runner(tmp_path, stages, jobs=2)
  most = []
  start = run._start  # pylint: disable=protected-access
  def counting_start(stage):
    start(stage)
    most.append(len(run.running))
  monkeypatch.setattr(run, "_start", counting_start)
  assert not run.run(stages)
  assert sorted(ran.read_text().split()) == list("abcde")
  assert max(most) == 2
  assert not run.done("b") and all(run.done(n) for n in "acde")
  assert not os.listdir(run.running_dir)


@pytest.mark.parametrize("value", ["0", "x", "-2", "1.5"])
def test_bad_job_counts_are_refused_in_one_line(value):
  with pytest.raises(pipeline_cli.Refused, match="REPRO_JOBS={} is no whole "
                     "number of at least 1".format(re.escape(value))):
    pipeline_cli.positive_int({"REPRO_JOBS": value}, "REPRO_JOBS", 2)
  assert pipeline_cli.positive_int({}, "REPRO_JOBS", 2) == 2
