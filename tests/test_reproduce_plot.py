"""Tests of the reproduction's results from metatest's outputs:
reproduce/plot.py (the aggregation over seeds, the figure and the table)
and the medium size's pooling over training seeds, verdicts, figures and
looks (reproduce/medium.py, figures.py, styles.py).

Why: what the figure and table show is how a reader judges the paper's
claim; the aggregation over seeds must be right. Checked on synthetic
outputs in metatest's file format.
"""

import json
import math
import os

import numpy as np
import pytest

from reproduce import figures
from reproduce import medium
from reproduce import plot
from reproduce import run_log
from reproduce import styles
from tests.repro_files import write_events
from tests.repro_files import write_final
from tests.repro_files import write_flat
from tests.repro_files import write_pickle


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
  write_pickle(mlp, 6, "Adam", [4., 3., 2., 1.])
  write_pickle(mlp, 12, "Adam", [2., 1., 1.])          # shorter run
  write_pickle(mlp, 6, "l2o-scale", [3., 2., 1., .5])
  write_pickle(mlp, 12, "l2o-scale", [3., 2., 1., .5])
  write_pickle(mlp, 18, "l2o-scale", [3., 2., 1., 2.])
  _write_heldout(mlp, 6, "Adam", [0.1, 0.5], [2., 0.25])
  _write_heldout(mlp, 12, "Adam", [0.1, 0.7], [2., 0.75])
  write_pickle(conv, 6, "SGD", [2., 2.])
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
  with pytest.raises(ValueError, match="no seed\\*_eval_loss_record"):
    plot.main(["--results_dir", str(tmp_path / "empty"), "--out_dir",
               str(out)])


# ------------------------------------------------- medium size (medium.py)
@pytest.fixture
def medium_results(tmp_path):
  """mnist-mlp-sigmoid: l2o-scale and hess-1e-3 with 3 training seeds x 2
  test seeds, jacob-1e-2 (same as l2o-scale), two Adam and SGD LRs, the
  original baselines; logs of two training runs."""
  mlp = str(tmp_path / "test" / "mnist-mlp-sigmoid")
  # final loss of (train seed t, test seed s): l2o-scale t + s/10
  for t in (1, 2, 3):
    for s in (6, 12):
      write_final(mlp, s, "l2o-scale.t%d" % t, t + s / 10.)
      write_flat(mlp, s, "l2o-scale.t%d" % t, 0.80 + 0.001 * t + 0.0001 * s,
                  trace=100. + t, eig=10. + t)
      # hess-1e-3: clearly higher accuracy, flatter
      write_final(mlp, s, "hess-1e-3.t%d" % t, t)
      write_flat(mlp, s, "hess-1e-3.t%d" % t, 0.90 + 0.001 * t,
                  trace=50. + t, eig=5. + t)
      # jacob-1e-2: the same as l2o-scale up to tiny noise
      write_final(mlp, s, "jacob-1e-2.t%d" % t, t + s / 10.)
      write_flat(mlp, s, "jacob-1e-2.t%d" % t,
                  0.80 + 0.001 * (4 - t) + 0.0001 * s, trace=100. + t,
                  eig=10. + t)
  for s in (6, 12):
    for name, final in (("Adam", 3.), ("Adam-lr1e-3", 1.), ("Adam-lr3e-4", 2.),
                        ("SGD", 4.), ("SGD-lr0.1", 3.5), ("SGD-lr0.3", 0.5)):
      write_final(mlp, s, name, final)
      write_flat(mlp, s, name, 0.7)
  train = str(tmp_path / "train")
  inf = float("inf")
  write_events(train, "hess-1e-3.t1", [
      ("evaluation", 1, dict(number=1, cost=2.5)),
      ("selection", 1, dict(number=1, score=0.75)),
      ("rollback", 2, dict(to="model.ckpt-1")),
      ("evaluation", 2, dict(number=2, cost=inf)),
      ("selection", 2, dict(number=2, score=inf)),
      ("evaluation", 3, dict(number=3, cost=1.5e-1)),
      ("selection", 3, dict(number=3, score=0.5)),
      ("best", 3, dict(index=3))], seed=1)
  write_events(train, "l2o-entropy-reg-cl-mt.t2", [
      ("evaluation", 1, dict(number=1, num_steps=100, cost=3.0)),
      ("evaluation", 2, dict(number=2, num_steps=200, cost=2.0))], seed=2)
  return str(tmp_path / "test"), train


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
  logs = run_log.load_train_records(medium_results[1])
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
  folder = write_events(str(tmp_path), "x.t2", [
      ("evaluation", 2, dict(number=1, cost=3.)),
      ("selection", 2, dict(number=1, score=1.5)),
      ("evaluation", 4, dict(number=2, cost=9.)),
      ("rollback", 5, dict(to="x"))])
  write_events(str(tmp_path), "x.t2", [
      ("evaluation", 4, dict(number=2, cost=2.)),
      ("selection", 4, dict(number=2, score=0.04)),
      ("rollback", 5, dict(to="x"))], seed=2)
  parsed = run_log.read_events(os.path.join(folder, run_log.EVENTS))
  assert parsed["evaluations"] == [(2, None, 3.0), (4, None, 2.0)]
  assert parsed["selections"] == [(2, 1.5), (4, 0.04)]
  assert parsed["rollbacks"] == [5]
  parsed = run_log.load_train_records(str(tmp_path))["x"][2]
  assert parsed["seed"] == 2
  table = run_log.training_table({"x": {2: parsed}}, {"train-x.t2": 95.})
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
