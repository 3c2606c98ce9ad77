"""The task-suite benchmark (``python -m l2o_scale.benchmark``).

Why: its numbers decide whether a learned optimizer beats tuned baselines,
so its arithmetic and its tuning protocol must be right: the speedup over
tuned Adam against closed forms, the learning rate chosen on the validation
split only (a case where the test split would choose otherwise), every task
of the registry building and training, and the small size end to end (JSON,
tables, figures, resume).
"""

import json
import math
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.benchmark import __main__ as cli
from l2o_scale.benchmark import config as bench_config
from l2o_scale.benchmark import optimizers
from l2o_scale.benchmark import readme_claims
from l2o_scale.benchmark import report
from l2o_scale.benchmark import reuse
from l2o_scale.benchmark import scoring
from l2o_scale.benchmark import suite
from l2o_scale.benchmark import tasks
from l2o_scale.benchmark import training
from l2o_scale.benchmark import verdicts


# ------------------------------------------------------------ arithmetic
def _exp_curve(rate, budget=1000, every=40):
  steps = list(range(0, budget + 1, every))
  return steps, [math.exp(-rate * s) for s in steps]


def test_speedup_closed_form_on_exponential_curves():
  # Adam's loss exp(-a t) reaches exp(-a t*) at t* exactly: log-linear
  # interpolation between recorded steps is exact for it.
  steps, adam = _exp_curve(0.01)
  for t_star in (0., 13., 333., 999.):
    s = scoring.speedup(steps, adam, math.exp(-0.01 * t_star), 1000)
    assert s["adam_steps"] == pytest.approx(t_star, abs=1e-6)
    assert s["value"] == pytest.approx(t_star / 1000, abs=1e-9)
    assert not s["lower_bound"]
  # A loss above Adam's start: Adam is there at step 0.
  assert scoring.speedup(steps, adam, 2., 1000)["value"] == 0.
  # Never reached within the budget: only a lower bound of 1.
  never = scoring.speedup(steps, adam, math.exp(-0.01 * 1500), 1000)
  assert never == {"value": 1.0, "lower_bound": True, "adam_steps": None}
  # A diverged optimizer has no speedup.
  assert scoring.speedup(steps, adam, None, 1000)["value"] is None
  assert scoring.speedup(steps, adam, float("nan"), 1000)["value"] is None


def test_task_speedup_uses_geometric_means_over_seeds():
  steps, a1 = _exp_curve(0.01)
  _, a2 = _exp_curve(0.02)
  adam = [dict(steps=steps, train_loss=a1), dict(steps=steps, train_loss=a2)]
  # Geometric mean of the two curves: exp(-0.015 t); of the finals:
  # exp(-0.015 * 400) when the finals are exp(-0.01*400), exp(-0.02*400).
  learned = [dict(final_train_loss=math.exp(-4.)),
             dict(final_train_loss=math.exp(-8.))]
  s = scoring.task_speedup(learned, adam, 1000)
  assert s["value"] == pytest.approx(0.4, abs=1e-9)
  assert [p["value"] for p in s["per_seed"]] == pytest.approx([0.4, 0.4])


# -------------------------------------------------------------- tuning
def _record(val_metric, val_loss, test_metric, diverged=False):
  return dict(validation_metric=val_metric, validation_loss=val_loss,
              test_metric=test_metric, test_loss=1., final_train_loss=val_loss,
              diverged=diverged, steps=[0, 1], train_loss=[2., val_loss],
              wall_s=0.)


def test_a_run_that_trains_then_falls_back_is_collapsed_not_diverged():
  def run(losses, diverged=False):
    return dict(steps=list(range(len(losses))), train_loss=losses,
                diverged=diverged)
  back_to_chance = run([2.3, 0.5, 0.1, 1.2, 2.29])   # gives back 99%
  assert scoring.collapsed(back_to_chance)
  assert not scoring.collapsed(run([2.3, 0.5, 0.1, 1.1]))  # 45% back
  assert scoring.collapsed(run([2.3, 0.5, 0.1, 1.3]))  # 55% back
  assert not scoring.collapsed(run([2.3, 0.1, 0.2]))  # noise at the end
  assert not scoring.collapsed(run([2.3, 2.4, 2.5]))  # never gained
  assert not scoring.collapsed(run([2.3, 0.1, float("nan")], True))
  # Counted per task on the page's verdict, apart from divergence.
  entry = dict(task="cnn_mnist", budget=10, optimizer=dict(
      runs=[run([2.3, 0.2, 0.21]), back_to_chance],
      summary=dict(diverged=0)), baselines={}, speedup=None)
  c = verdicts.counts(dict(entries=[entry]), 10)
  assert c["collapsed"] == ["cnn_mnist"] and c["diverged"] == []


def test_select_lr_reads_the_validation_split_only():
  # The test split would choose 1e-2 in every sense; validation says 1e-3.
  grid = {1e-4: _record(0.90, 0.40, 0.91), 1e-3: _record(0.95, 0.20, 0.80),
          1e-2: _record(0.93, 0.30, 0.99),
          1e-1: _record(None, None, None, diverged=True)}
  assert scoring.select_lr(grid, higher_is_better=True) == 1e-3
  assert scoring.select_lr(grid, True, select_on="loss") == 1e-3
  # Lower is better (a squared error): the smallest validation metric.
  assert scoring.select_lr(grid, higher_is_better=False) == 1e-4
  # Ties on the metric are broken by the validation loss.
  tie = {1e-3: _record(0.95, 0.30, 0.99), 1e-2: _record(0.95, 0.20, 0.50)}
  assert scoring.select_lr(tie, True) == 1e-2
  assert scoring.select_lr({1.: _record(None, None, None, True)}, True) \
      is None
  with pytest.raises(ValueError, match="select_on"):
    scoring.select_lr(grid, True, select_on="test")


class _CannedStore:
  """Returns a constructed record per learning rate instead of training."""

  def __init__(self, by_lr):
    self.by_lr, self.keys = by_lr, []

  def get_or_run(self, key, run):
    del run
    self.keys.append(key)
    return dict(self.by_lr[key["lr"]], seed=key["seed"])


def test_tuned_baseline_chooses_on_validation_and_runs_every_seed(data_dir):
  grid = optimizers.baseline("adam").grid
  # Validation prefers grid[1]; the test split would prefer grid[3].
  by_lr = {lr: _record(0.5, 1., 0.5) for lr in grid}
  by_lr[grid[1]] = _record(0.9, 0.5, 0.1)
  by_lr[grid[3]] = _record(0.6, 0.9, 1.0)
  config = bench_config.Config.for_size("small", data_dir=data_dir, seeds=3,
                                 grid="full")
  store = _CannedStore(by_lr)
  runner = suite.TaskRunner(tasks.get("logreg_mnist"), 50, config, store,
                            log=lambda line: None)
  result = runner.tuned(optimizers.baseline("adam"))
  assert result["chosen_lr"] == grid[1]
  assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
  assert all(k["lr"] == grid[1] for k in store.keys[len(grid):])
  assert not result["at_grid_edge"]
  assert "test_metric" not in result["grid"][0]


class _RecordingStore:
  """Runs every run and keeps its record by (lr, seed)."""

  def __init__(self):
    self.records = {}

  def get_or_run(self, key, run):
    record = run()
    self.records[(key["lr"], key["seed"])] = record
    return record


def test_reused_baseline_trainer_starts_each_run_afresh(tmp_path, data_dir):
  # One compiled trainer serves the whole grid: each run must start from
  # fresh weights, a fresh optimizer state and step 0 of its schedule, as
  # a trainer built for that run alone does.
  task = tasks.get("regression_synthetic")
  config = bench_config.Config.for_size("small", data_dir=data_dir,
                                 out=str(tmp_path))
  store = _RecordingStore()
  runner = suite.TaskRunner(task, 20, config, store, log=lambda line: None)
  adam = optimizers.baseline("adam")
  runner.tuned(adam)
  for lr in adam.small_grid:
    model = task.build(True)
    model.set_weights(runner.initial[0])
    optimizer, schedule = adam.make(20)
    schedule.set_base(lr)
    alone = training.Trainer(task, runner.splits, model, optimizer,
                             jit_compile=False).run(runner.indices[0],
                                                    runner.eval_every)
    np.testing.assert_allclose(store.records[(lr, 0)]["train_loss"],
                               alone["train_loss"], rtol=1e-5)


def test_grid_grows_past_the_end_where_the_best_lr_lies(data_dir):
  # Validation accuracy peaks at lr 0.1, beyond Adam's grid (1e-4..1e-2):
  # the grid grows to 3e-2 and 1e-1 (two half-decades) and picks 1e-1,
  # still at an end, so marked.
  def accuracy(lr):
    return 0.9 - 0.01 * abs(math.log10(lr) + 1)
  store = _CannedStore({lr: _record(accuracy(lr), 1 - accuracy(lr), 0.5)
                        for lr in optimizers.HALF_DECADES})
  config = bench_config.Config.for_size("small", data_dir=data_dir, grid="full",
                                 grid_extension=2)
  runner = suite.TaskRunner(tasks.get("logreg_mnist"), 50, config, store,
                            log=lambda line: None)
  result = runner.tuned(optimizers.baseline("adam"))
  assert [k["lr"] for k in store.keys] == [1e-4, 3e-4, 1e-3, 3e-3, 1e-2,
                                           3e-2, 1e-1]
  assert result["chosen_lr"] == 1e-1 and result["at_grid_edge"]
  assert optimizers.next_half_decade(3e-4, up=False) == 1e-4


# ------------------------------------------------------------- registry
def test_registry_has_the_families_the_suite_promises():
  assert len(tasks.REGISTRY) >= 8
  families = " ".join(t.family for t in tasks.REGISTRY.values())
  for family in ("convex", "MLP", "normalization", "convolutional",
                 "recurrent", "attention", "autoencoder", "regression",
                 "generated"):
    assert family in families


def test_held_out_tasks_run_only_when_named():
  held_out = [n for n, t in tasks.REGISTRY.items() if t.held_out]
  assert held_out == ["lstm_topics", "conv1d_topics", "resnet_mnist",
                      "mlp_spirals", "conv_autoencoder_mnist", "bigru_topics",
                      "deep_swish_mnist", "separable_cnn_mnist",
                      "mixer_mnist", "simple_rnn_mnist_rows", "glu_mlp_mnist",
                      "residual_ln_regression"]
  # Three sets of four, each looked at once as a whole.
  sets = [tasks.REGISTRY[n].held_out for n in held_out]
  assert sets == (["held-out"] * 4 + ["held-out-2"] * 4 +
                  ["held-out-3"] * 4)
  with pytest.raises(ValueError, match="held_out must be one of"):
    tasks.Task("x", "f", "d", None, None, "mse", "mse", held_out="held")
  # Outside every default and every task a head is meta-trained or chosen
  # on, and apart from every test task a head has been scored on.
  assert not set(held_out) & set(tasks.suite_names())
  assert tasks.suite_names() + tuple(held_out) == tuple(tasks.REGISTRY)
  assert bench_config.Config().tasks == tasks.suite_names()
  from l2o_scale.head_training import selection  # pylint: disable=g-import-not-at-top
  from l2o_scale.head_training import tasks as head_tasks  # pylint: disable=g-import-not-at-top
  assert not set(held_out) & (set(head_tasks.DEFAULT_TASKS) |
                              set(selection.VALIDATION_TASKS) |
                              set(selection.TEST_TASKS))
  listed = [l for l in cli.task_lines(width=200) if "held out" in l]
  assert [l.split()[0] for l in listed] == held_out
  unwrapped = [l for l in cli.task_lines(width=1000) if "held out" in l]
  assert [l.endswith("(held out, set {}: runs only when named)".format(s))
          for l, s in zip(unwrapped, sets)] == [True] * 12
  # The spirals' classes are about equally common, and no two splits share
  # a point.
  splits = tasks.spirals_data()
  share = np.bincount(splits.train[1]) / len(splits.train[1])
  assert len(share) == 3 and share.min() > 0.3
  points = [{p.tobytes() for p in s[0]} for s in
            (splits.train, splits.validation, splits.test)]
  assert not (points[0] & points[1] or points[0] & points[2])


def _images(x):
  return {np.round(image * 255).astype(np.uint8).tobytes() for image in x}


def test_validation_is_carved_from_the_training_split(data_dir):
  from problems import datasets  # pylint: disable=g-import-not-at-top
  splits = tasks.mnist_data(False, data_dir)
  x_train, _ = datasets.load_mnist_arrays("train", data_dir)
  x_test, _ = datasets.load_mnist_arrays("test", data_dir)
  train, validation = _images(splits.train[0]), _images(splits.validation[0])
  assert len(validation) == tasks.VALIDATION_SIZE
  assert not train & validation
  assert train | validation == {image.tobytes() for image in x_train}
  assert np.array_equal(splits.test[0], x_test / np.float32(255.))


@pytest.mark.parametrize("name", sorted(tasks.REGISTRY))
def test_every_task_builds_and_trains_two_steps(name, data_dir):
  task = tasks.get(name)
  splits = task.data(True, data_dir)
  model = task.build(True)
  model.set_weights(training.initial_weights(task, 0, True))
  trainer = training.Trainer(task, splits, model, keras.optimizers.Adam(1e-2),
                             jit_compile=False)
  record = trainer.run(training.batch_indices(0, 2, 16,
                                              len(splits.train[0])), 1)
  assert record["steps"] == [0, 1, 2] and not record["diverged"]
  assert all(np.isfinite(record["train_loss"]))
  assert record["train_loss"][2] < record["train_loss"][0]
  for split in ("validation", "test"):
    assert np.isfinite(record[split + "_metric"])


# ----------------------------------------------------------- optimizers
def test_optimizer_specs():
  adam = optimizers.factory("adam:3e-4")[0](100)
  assert isinstance(adam, keras.optimizers.Adam)
  assert float(adam.learning_rate) == pytest.approx(3e-4)
  learned = optimizers.factory("l2o-scale")[0](100)
  assert type(learned).__name__ == "LearnedOptimizer"
  assert not learned.hold_zero_gradients
  held = optimizers.factory("l2o-scale+hold_zero_gradients")[0](100)
  assert held.hold_zero_gradients
  assert held.weight_decay == learned.weight_decay  # the card's settings too
  assert optimizers.identity("l2o-scale+hold_zero_gradients") == (
      optimizers.identity("l2o-scale") + "+hold_zero_gradients")
  # Bare: the same meta-parameters without the card's hand-set settings.
  assert learned.weight_decay == pytest.approx(
      optimizers.shipped.long_run_settings("l2o-scale")["weight_decay"])
  bare = optimizers.factory("l2o-scale+bare")[0](100)
  assert not bare.weight_decay
  assert float(bare.learning_rate) == 1.  # no step decay
  assert isinstance(learned._learning_rate,  # the card's step decay
                    keras.optimizers.schedules.LearningRateSchedule)
  assert [v.numpy().tolist() for v in bare.learned_optimizer.variables] == [
      v.numpy().tolist() for v in learned.learned_optimizer.variables]
  assert optimizers.bare_variant("l2o-scale") == "l2o-scale+bare"
  assert optimizers.bare_variant("l2o-scale+hold_zero_gradients") == (
      "l2o-scale+bare+hold_zero_gradients")
  for no_card in ("l2o-generalist", "l2o-scale+bare", "adam:1e-3"):
    assert optimizers.bare_variant(no_card) is None
  assert optimizers.parse("l2o-scale+hold_zero_gradients+bare") == (
      optimizers.parse("l2o-scale+bare+hold_zero_gradients").__class__(
          "l2o-scale+hold_zero_gradients+bare", "shipped", "l2o-scale",
          hold=True, bare=True))
  identities = {optimizers.identity(s) for s in (
      "l2o-scale", "l2o-scale+bare", "l2o-scale+hold_zero_gradients",
      "l2o-scale+bare+hold_zero_gradients")}
  assert len(identities) == 4
  with pytest.raises(ValueError, match="goes with a shipped optimizer"):
    optimizers.parse("checkpoint:/x+bare")
  with pytest.raises(ValueError, match="names no optimizer"):
    optimizers.factory("no-such-optimizer")
  with pytest.raises(ValueError, match="goes with a learned optimizer"):
    optimizers.factory("adam:1e-3+hold_zero_gradients")
  schedule = training.CosineToZero(100, base=0.1)
  assert float(schedule(0)) == pytest.approx(0.1)
  assert float(schedule(50)) == pytest.approx(0.05)
  assert float(schedule(100)) == pytest.approx(0.)


def _steps_of(optimizer, steps=4):
  """A small dense model's weights after ``steps`` steps of ``optimizer``
  from fixed weights on a fixed least-squares batch (and the learned
  optimizer's random initial learning rates from a fixed seed)."""
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  x = rng.standard_normal((32, 6)).astype("float32")
  y = x @ rng.standard_normal((6, 1)).astype("float32")
  model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, "tanh"),
                            keras.layers.Dense(1)])
  model.set_weights([rng.standard_normal(w.shape).astype("float32") * 0.3
                     for w in model.get_weights()])
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
  return model.get_weights()


def test_head_spec_runs_the_optimizer_with_the_saved_head(tmp_path):
  """``NAME+head=PATH``: a zero head leaves the bare optimizer's steps as
  they are (the head's defining property), a trained one changes them, the
  budget feeds the head's progress input, and the head's file is part of
  the identity."""
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  zero = str(tmp_path / "zero.npz")
  learned_schedule.ScheduleHead().save(zero)
  moved = str(tmp_path / "moved.npz")
  theta = np.random.default_rng(1).standard_normal(
      learned_schedule.NUM_PARAMETERS).astype("float32")
  learned_schedule.ScheduleHead(theta).save(moved)
  with_zero = optimizers.factory("l2o-scale+head=" + zero)[0](100)
  assert with_zero.total_steps == 100
  assert not with_zero.weight_decay  # no card setting beside the head
  assert float(with_zero.learning_rate) == 1.
  bare = _steps_of(optimizers.factory("l2o-scale+bare")[0](100))
  for got, want in zip(_steps_of(with_zero), bare):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  headed = _steps_of(optimizers.factory("l2o-scale+head=" + moved)[0](100))
  assert max(float(np.max(np.abs(a - b))) for a, b in zip(headed, bare)) > 1e-4
  assert optimizers.bare_variant("l2o-scale+head=" + zero) is None
  assert optimizers.parse("l2o-scale+hold_zero_gradients+head=" + zero) == (
      optimizers.Spec("l2o-scale+hold_zero_gradients+head=" + zero,
                      "shipped", "l2o-scale", hold=True, head=zero))
  assert len({optimizers.identity("l2o-scale+head=" + p)
              for p in (zero, moved)} | {optimizers.identity("l2o-scale")}
             ) == 3
  with pytest.raises(ValueError, match="leave out"):
    optimizers.parse("l2o-scale+bare+head=" + zero)
  with pytest.raises(ValueError, match="goes with a learned optimizer"):
    optimizers.parse("adam:1e-3+head=" + zero)
  with pytest.raises(ValueError, match="give the schedule head"):
    optimizers.parse("l2o-scale+head=")
  with pytest.raises(FileNotFoundError, match="no schedule head file"):
    optimizers.factory("l2o-scale+head=" + str(tmp_path / "none.npz"))
  (tmp_path / "text.npz").write_text("not a head")
  with pytest.raises(ValueError, match="is not a saved schedule head"):
    optimizers.factory("l2o-scale+head=" + str(tmp_path / "text.npz"))


def test_help_names_it_apart_from_the_speed_benchmark(capsys):
  with pytest.raises(SystemExit):
    cli.parse_args(["--help"])
  text = capsys.readouterr().out
  assert "Task-suite benchmark: training quality" in text
  assert "l2o_scale.speed`" in text


def _config_from_command_line(argv):
  return cli.config_from_flags(cli.parse_args(argv))


def test_flags_given_override_the_size_preset_and_the_rest_keep_it():
  config = _config_from_command_line(["--size=full", "--seeds=2",
                                      "--budgets=300,600"])
  assert config.seeds == 2 and config.budgets == (300, 600)
  assert config.tasks == tasks.suite_names() and config.grid == "full"
  small = _config_from_command_line(["--size=small", "--batch_size=16"])
  assert small.batch_size == 16 and small.tiny and small.budgets == (50,)
  assert small.tasks == bench_config.SIZES["small"]["tasks"]
  # No --size: medium, the Config defaults; --data_dir from the environment.
  assert _config_from_command_line([]) == bench_config.Config(
      data_dir=os.environ.get("L2O_SCALE_DATA_DIR"))


def test_every_config_field_with_a_flag_is_in_help_with_its_text(capsys):
  from l2o_scale.config import config_flags  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit):
    cli.parse_args(["--help"])
  text = " ".join(capsys.readouterr().out.split())
  fields = config_flags.flag_fields(bench_config.Config)
  assert len(fields) >= 12
  for field in fields:
    assert re.search(r"--(\[no\])?{}:".format(
        config_flags.flag_name(field)), text)
    assert " ".join(field.metadata["help"].split()[:4]) in text


@pytest.mark.parametrize("argv, message", [
    (["--seeds=0"], "--seeds must be >= 1"),
    (["--budgets=ten"], "--budgets takes a comma-separated list of int"),
    (["--size=huge"], "--size"),
    (["--no_such_flag=1"], "no_such_flag"),
    (["--tasks=nope"], "unknown task 'nope'"),
])
def test_bad_command_line_is_one_line_error(argv, message, capsys):
  try:
    code = cli.main(argv + ["--out=/nonexistent/never-written"])
  except SystemExit as e:
    code = e.code
  assert code == 2
  err = capsys.readouterr().err.strip()
  assert message in err and len(err.splitlines()) == 1
  assert not os.path.exists("/nonexistent/never-written")


# ---------------------------------------------------------- end to end
def test_small_size_end_to_end_and_resume(tmp_path, data_dir):
  out = str(tmp_path / "bench")
  config = bench_config.Config.for_size("small", out=out, data_dir=data_dir)
  results = suite.run(config, log=lambda line: None)
  with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
    assert json.load(f) == results
  for key in ("date", "machine", "config", "wall_time_s", "peak_memory_mib"):
    assert results[key]
  assert results["machine"]["tensorflow"] and results["config"]["seeds"] == 1
  assert len(results["entries"]) == 2
  for entry in results["entries"]:
    runs = entry["optimizer"]["runs"]
    # The shipped optimizer also ran bare, from the same weights.
    assert entry["bare"]["spec"] == "l2o-scale+bare"
    assert entry["bare"]["runs"][0]["train_loss"][0] == runs[0][
        "train_loss"][0]
    assert entry["bare"]["runs"][0]["steps"] == runs[0]["steps"]
    assert runs[0]["steps"][-1] == 50 and len(runs[0]["steps"]) == 6
    for name, baseline in entry["baselines"].items():
      assert baseline["chosen_lr"] in optimizers.baseline(name).small_grid
      run = baseline["runs"][0]
      # Every optimizer starts from the same weights at a seed.
      assert run["train_loss"][0] == runs[0]["train_loss"][0]
      assert run["final_train_loss"] < run["train_loss"][0]
    assert entry["speedup"]["value"] is not None
  written = report.write(results, out)
  for name in ("table.md", "results.md", "speedups.png",
               "curves_logreg_mnist_50.png"):
    assert os.path.join(out, name) in written
    assert os.path.getsize(os.path.join(out, name)) > 100
  events = [n for _, _, names in os.walk(os.path.join(out, "tensorboard"))
            for n in names if n.startswith("events.out.tfevents")]
  assert len(events) >= 2 * 2 * (1 + 3 * 2)  # a START marker and a writer
  # Schedule-free without tuning, scored at x and, from the same runs, at y.
  for entry in results["entries"]:
    at_x = entry["untuned"]["schedule_free_adamw"]
    at_y = entry["untuned"]["schedule_free_adamw_at_y"]
    assert at_x["runs"][0]["steps"] == at_y["runs"][0]["steps"]
    assert at_x["runs"][0]["final_train_loss"] != at_y["runs"][0][
        "final_train_loss"]
    assert at_x["speedup"] is not None and at_x["summary"]["diverged"] == 0
  page = open(os.path.join(out, "results.md"), encoding="utf-8").read()
  assert "speedup over tuned Adam" in page and "regression_synthetic" in page
  assert "| speedup, bare |" in page and "`l2o-scale+bare`" in page
  # What a shipped optimizer's card and the README say come from these
  # numbers: the counts agree with the verdicts of the page.
  card = readme_claims.card_section(results, ["logreg_mnist"])
  counts = card["budget"]["50"]["counts"]
  per_task = [verdicts.verdict(e) for e in results["entries"]]
  assert counts["tasks"] == 2 and counts["loss_ok"] == sum(
      v["loss_ok"] for v in per_task)
  assert card["budget"]["50"]["counts_outside_training"]["tasks"] == 1
  assert verdicts.counts_sentence(counts, 50) in page
  claim, = readme_claims.claim_lines({"x": {"benchmark": card}})
  assert claim.startswith("- `x`, 50 steps, 1 seeds, 2 tasks") and (
      "both on {}".format(counts["both"]) in claim)
  # A run of another budget joins the card: each budget keeps its own
  # run's seeds and date, the card's other fields stay the first run's.
  longer = dict(card, seeds=3, date="2030-01-01", tasks=["logreg_mnist"],
                budgets=[500], budget={"500": dict(
                    card["budget"]["50"], seeds=3, date="2030-01-01")})
  older = dict(card, budget={"50": {k: v for k, v in card["budget"][
      "50"].items() if k not in ("seeds", "date", "baselines")}})
  merged = readme_claims.merge_card_sections(older, longer)
  assert merged["budgets"] == [50, 500] and merged["tasks"] == card["tasks"]
  short, long_ = readme_claims.claim_lines({"x": {"benchmark": merged}})
  assert short.startswith("- `x`, 50 steps, 1 seeds") and (
      "(measured {})".format(card["date"]) in short)
  assert long_.startswith("- `x`, 500 steps, 3 seeds") and (
      "(measured 2030-01-01)" in long_)
  # Against itself: a tie on every task counts as at or below.
  assert verdicts.comparison_lines(results, results)[0] == (
      "small reaches a lower final training loss than small on 2 of 2 task "
      "budgets.".replace("small", results["config"]["optimizer"]))
  # Interrupted or not, a second run resumes from the stored runs: nothing
  # retrains and the numbers are the same.
  again = suite.run(config, log=lambda line: None)
  # Per task: the optimizer and its bare variant, 3 baselines at 2 learning
  # rates, schedule-free without tuning.
  assert again["runs_reused"] == 2 * (2 + 3 * 2 + 1)
  assert again["entries"] == results["entries"]
  # Counted per data regime: a task marked data-rich leaves the small-data
  # counts and forms its own, for the optimizer and its bare variant.
  mixed = json.loads(json.dumps(results))
  mixed["entries"][1]["regime"] = "data-rich"
  assert verdicts.regimes(mixed) == ["small-data", "data-rich"]
  for which in ("optimizer", "bare"):
    small, rich = (verdicts.counts(mixed, 50, which=which, in_regime=r)
                   for r in ("small-data", "data-rich"))
    whole = verdicts.counts(mixed, 50, which=which)
    assert small["tasks"] == rich["tasks"] == 1
    assert small["both"] + rich["both"] == whole["both"]
    assert small["loss_ok"] == verdicts.verdict(mixed["entries"][0],
                                              which)["loss_ok"]
  lines = verdicts.regime_lines(mixed, 50)
  assert len(lines) == 4 and "data-rich tasks" in lines[1]
  claims = readme_claims.regime_claims([mixed])  # one line per regime, bare beside
  assert len(claims) == 2 and "data-rich tasks (50 steps" in claims[1]
  assert all(line.count("both on") == 2 and "; bare (without" in line
             for line in claims)
  section = readme_claims.card_section(mixed)["budget"]["50"]
  assert set(section["counts_by_regime"]) == {"small-data", "data-rich"}
  assert section["bare"]["counts"] == verdicts.counts(mixed, 50, which="bare")
  claim, = readme_claims.claim_lines({"x": {"benchmark": readme_claims.card_section(
      mixed)}})
  assert "data-rich tasks: both on" in claim and "bare (without" in claim


def test_data_rich_tasks_pass_over_their_data_a_few_times_at_most():
  """A data-rich task's 2,000 steps of batch 128 see each training example
  at most four times; its data are the same at every call (a fixed seed),
  its training loss is measured on a fixed subset, and its stored runs are
  keyed by that subset."""
  rich = [t for t in tasks.REGISTRY.values() if t.regime == "data-rich"]
  assert {t.family.split(" (")[0] for t in rich} >= {
      "regression", "MLP", "embedding / text", "attention"}
  for task in rich:
    splits = task.data(False, None)
    n = len(splits.train[0])
    assert 2000 * 128 / n <= 4
    assert task.train_eval_size < n
    again = task.data(False, None)
    assert np.array_equal(splits.train[0], again.train[0])
    assert np.array_equal(splits.test[1], again.test[1])
  labels = tasks.get("teacher_mlp_rich").data(False, None).train[1]
  share = np.bincount(labels) / len(labels)
  assert share.min() > 0.05 and share.max() < 0.2  # classes about balanced
  small = [t for t in tasks.REGISTRY.values() if t.regime == "small-data"]
  assert all(t.train_eval_size is None for t in small)
  with pytest.raises(ValueError, match="regime must be one of"):
    tasks.Task("x", "f", "d", None, None, "mse", "mse", regime="huge")


def test_report_command_refuses_a_missing_file(tmp_path, capsys):
  assert report.main([str(tmp_path / "none.json"), "--out",
                      str(tmp_path)]) == 2
  assert "cannot read" in capsys.readouterr().err


def test_the_readme_results_table_is_generated_from_the_committed_results(
    capsys):
  """README's results table is exactly what ``report --readme_table``
  makes of the committed results.json files: one row per shipped optimizer,
  '—' where an optimizer has no such run."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
  start = text.index("<!-- results table:")
  start = text.index("\n", start) + 1
  end = text.index("<!-- end of results table -->")
  table = readme_claims.shipped_readme_table()
  assert text[start:end].splitlines() == table
  rows = [line for line in table if line.startswith("| `")]
  assert [r.split("`")[1] for r in rows] == pretrained.names() + [
      shown for _, shown in readme_claims.README_UNTUNED]
  assert all(r.count(" | ") == len(readme_claims.README_COLUMNS) for r in rows)
  # A baseline's cell counts its own runs against tuned Adam, as the page.
  suite = json.load(open(os.path.join(
      root, "reproduce/results/benchmark/l2o-entropy-reg/results.json"),
                         encoding="utf-8"))
  c = verdicts.counts(suite, 2000, which="adam_default")
  adam_row = rows[len(pretrained.names()) + 1]
  assert adam_row.startswith("| `Adam()`, no tuning | {} of {} (".format(
      c["both"], c["tasks"]))
  assert report.main(["--readme_table"]) == 0
  assert capsys.readouterr().out.splitlines() == table
  # A name without committed runs has a row of dashes; a cell counts the
  # file's verdicts.
  mine, none = readme_claims.readme_table(
      ["l2o-scale", "no-such-optimizer"])[4:6]
  assert none == "| `no-such-optimizer` | " + " | ".join(
      ["—"] * len(readme_claims.README_COLUMNS)) + " |"
  held_out = json.load(open(os.path.join(
      root, "reproduce/results/benchmark/held-out/l2o-scale/results.json"),
                            encoding="utf-8"))
  c = verdicts.counts(held_out, 2000)
  assert "| {} of {} (".format(c["both"], c["tasks"]) in mine


def test_a_changed_shipped_optimizer_never_reuses_stored_runs(monkeypatch):
  """The stored runs of a shipped optimizer are keyed by its checkpoint and
  card settings, not its name alone."""
  before = optimizers.identity("l2o-scale")
  assert before.startswith("l2o-scale@")
  assert optimizers.identity("adam:1e-3") == "adam:1e-3"
  monkeypatch.setattr(optimizers.shipped, "long_run_settings",
                      lambda name: {"weight_decay": 0.})
  assert optimizers.identity("l2o-scale") != before


def test_tuned_baselines_are_taken_from_an_earlier_run_with_the_same_settings(
    tmp_path, data_dir, capsys):
  """``--reuse_baselines``: a second optimizer compared with the tuned
  baselines of an earlier run gets exactly those baselines without running
  them (its folder stores only its own runs), the page says where they come
  from; an earlier run with other settings gives none; a file that is not
  a benchmark's results is one line naming the flag."""
  first = bench_config.Config.for_size(
      "small", out=str(tmp_path / "first"), data_dir=data_dir,
      tasks=("regression_synthetic",), baselines=("adam",), bare=False,
      optimizer="sgd:0.05")
  earlier = suite.run(first, log=lambda line: None)
  path = os.path.join(first.out, "results.json")
  second = bench_config.Config.for_size(
      "small", out=str(tmp_path / "second"), data_dir=data_dir,
      tasks=("regression_synthetic",), baselines=("adam",),
      optimizer="adam:1e-3", reuse_baselines=path)
  results = suite.run(second, log=lambda line: None)
  entry, = results["entries"]
  assert entry["baselines"] == earlier["entries"][0]["baselines"]
  # The tuned Adam block and the untuned ones of the small size.
  assert results["baselines_from"]["blocks"] == 1
  assert results["baselines_from"]["untuned_blocks"] == len(second.untuned)
  assert results["baselines_from"]["optimizer_blocks"] == 0
  # One stored run: the optimizer under test's (seed 0); no baseline ran.
  assert len(os.listdir(os.path.join(second.out, "runs"))) == 1
  assert entry["speedup"] is not None
  assert "taken from an earlier results.json" in report.page(results, "")
  assert results["baselines_from"]["date"] == earlier["date"][:10]
  # Another minibatch size: the earlier baselines do not apply.
  stored = reuse.load(path)
  key = dict(task="regression_synthetic", budget=50,
             eval_every=entry["eval_every"], loss=entry["loss"],
             metric=entry["metric"])
  sizes = {k: entry["sizes"][k] for k in ("train", "validation", "test")}
  assert stored.block("adam", key, second, sizes, entry["data"])
  other = bench_config.Config.for_size("small", batch_size=16)
  assert stored.block("adam", key, other, sizes, entry["data"]) is None
  assert stored.block("adam", key, second, sizes, "another digest") is None
  assert stored.block("sgd", key, second, sizes, entry["data"]) is None
  # Taken again from the second run, they still name where they were
  # measured: the first run's date and machine; the optimizer that ran
  # there is dated by the second run.
  chained = dict(results, date="2099-01-01", machine=dict(
      results["machine"], cpu="another CPU"))
  (tmp_path / "chained.json").write_text(json.dumps(chained))
  again = reuse.load(str(tmp_path / "chained.json"))
  assert again.block("adam", key, second, sizes, entry["data"])
  origin = again.source()
  assert (origin["date"], origin["cpu"], origin["blocks"]) == (
      earlier["date"][:10], earlier["machine"]["cpu"], 1)
  assert origin["optimizer_date"] == "2099-01-01"
  # Several files are asked in order; the source names those that gave.
  (tmp_path / "none.json").write_text(json.dumps(dict(earlier, entries=[])))
  both = reuse.load(str(tmp_path / "none.json") + "," + path)
  assert both.block("adam", key, other, sizes, entry["data"]) is None
  assert both.block("adam", key, second, sizes, entry["data"]) == (
      entry["baselines"]["adam"])
  source = both.source()
  assert source["blocks"] == 1
  assert [s["path"] for s in source["sources"]] == [path]
  # Not a benchmark's results: one line, nothing run.
  bad = tmp_path / "bad.json"
  bad.write_text("{}")
  assert cli.main(["--size=small", "--reuse_baselines=" + str(bad),
                   "--out=" + str(tmp_path / "third"),
                   "--data_dir=" + data_dir]) == 2
  err = capsys.readouterr().err.strip()
  assert "--reuse_baselines=" in err and len(err.splitlines()) == 1
  assert not os.path.exists(tmp_path / "third")
