"""The baselines without tuning of the benchmark (l2o_scale/benchmark/
untuned.py): schedule-free is measured at its averaged point and the model
keeps y; an earlier page's runs are taken whole with --reuse_optimizer, so
only the baselines it lacks run."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from l2o_scale.benchmark import config as config_module
from l2o_scale.benchmark import readme_claims
from l2o_scale.benchmark import report
from l2o_scale.benchmark import suite
from l2o_scale.benchmark import training
from l2o_scale.benchmark import untuned
from l2o_scale.benchmark import verdicts


def test_the_averaged_point_is_read_from_y_and_z_and_y_is_kept():
  """AveragedPoint sets the model's weights to x = (y - (1 - beta_1) z) /
  beta_1 from Keras's ScheduleFreeAdamW's y (the weights) and z (its
  momentum slot), and gives y back after the measurement."""
  rng = np.random.default_rng(0)
  var = keras.Variable(rng.standard_normal((3, 4)).astype(np.float32))
  optimizer = keras.optimizers.ScheduleFreeAdamW(learning_rate=0.05,
                                                 beta_1=0.8)
  optimizer.build([var])
  point = training.AveragedPoint(optimizer, [var])
  z = optimizer._momentums[0]  # pylint: disable=protected-access
  for _ in range(6):
    optimizer.apply([tf.constant(rng.standard_normal((3, 4)), tf.float32)],
                    [var])
  y = var.numpy().copy()
  with point:
    x = var.numpy().copy()
  np.testing.assert_array_equal(var.numpy(), y)
  np.testing.assert_allclose(x, (y - 0.2 * z.numpy()) / 0.8, rtol=1e-6,
                             atol=1e-7)
  assert not np.allclose(x, y, atol=1e-3)


def test_every_untuned_baseline_is_a_fresh_keras_optimizer_at_its_defaults():
  names = [u.name for u in untuned.UNTUNED]
  assert names == ["schedule_free_adamw", "adam_default",
                   "adam_default_cosine", "adamw_default",
                   "adamw_default_cosine"]
  def config(optimizer):
    return {k: v for k, v in optimizer.get_config().items() if k != "name"}
  sf = untuned.get("schedule_free_adamw").make(100)
  assert type(sf) is keras.optimizers.ScheduleFreeAdamW and config(sf) == (
      config(keras.optimizers.ScheduleFreeAdamW()))
  constant = untuned.get("adamw_default").make(100)
  assert config(constant) == config(keras.optimizers.AdamW())
  cosine = untuned.get("adam_default_cosine").make(100)
  assert float(cosine.learning_rate) == np.float32(1e-3)
  assert abs(float(cosine._learning_rate(50)) - 5e-4) < 1e-9  # pylint: disable=protected-access


def test_reuse_optimizer_runs_only_what_the_earlier_page_lacks(tmp_path,
                                                               data_dir):
  first = config_module.Config.for_size(
      "small", optimizer="adam:3e-3", data_dir=data_dir,
      out=str(tmp_path / "first"), tasks=("logreg_mnist",),
      baselines=("adam",), untuned=())
  earlier = suite.run(first, log=lambda line: None)
  assert "untuned" not in json.dumps(earlier["config"]["untuned"])
  lines = []
  second = config_module.Config.for_size(
      "small", optimizer="adam:3e-3", data_dir=data_dir,
      out=str(tmp_path / "second"), tasks=("logreg_mnist",),
      baselines=("adam",), untuned=("adam_default",),
      reuse_baselines=os.path.join(first.out, "results.json"),
      reuse_optimizer=True)
  results = suite.run(second, log=lines.append)
  entry, = results["entries"]
  old, = earlier["entries"]
  assert entry["optimizer"]["runs"] == old["optimizer"]["runs"]
  assert entry["baselines"]["adam"] == old["baselines"]["adam"]
  assert list(entry["untuned"]) == ["adam_default"]
  # Only the baseline the earlier file lacks ran here.
  assert [l for l in lines if " seed 0: train loss" in l] == [
      l for l in lines if l.startswith("  adam_default seed 0:")]
  source = results["baselines_from"]
  assert (source["blocks"], source["untuned_blocks"],
          source["optimizer_blocks"]) == (1, 0, 1)
  assert source["date"] == source["optimizer_date"] == earlier["date"][:10]
  page = report.page(results, "")
  assert "1 block of the optimizers under test (runs measured on" in page and (
      "Adam (Keras defaults" in page)
  every = verdicts.beats_every_untuned(entry)
  assert every == verdicts.against_untuned(entry)["adam_default"]
  assert "Against every one of them: `adam:3e-3` meets both criteria on " \
      "{} of 1.".format(int(every)) in page


def test_a_page_whose_optimizer_runs_were_taken_is_dated_by_those_runs():
  """The README's dates are those of the optimizer runs behind a cell: a
  page redrawn with baselines without tuning added keeps the date of the
  runs it took."""
  page = dict(date="2026-12-02T10:00:00")
  assert readme_claims.measured_on(page) == "2026-12-02"
  page["baselines_from"] = dict(optimizer_blocks=0, optimizer_date="x")
  assert readme_claims.measured_on(page) == "2026-12-02"
  page["baselines_from"] = dict(
      optimizer_blocks=8,
      optimizer_date="2026-11-28 and 2026-11-27T18:04:49+00:00")
  assert readme_claims.measured_on(page) == "2026-11-27"
  # The baselines without tuning are dated by their own runs.
  assert readme_claims.measured_on(page, "untuned") == "2026-12-02"
  page["baselines_from"].update(untuned_blocks=5,
                                untuned_date="2026-12-01 and 2026-11-30")
  assert readme_claims.measured_on(page, "untuned") == "2026-11-30"
  assert readme_claims.measured_on(page) == "2026-11-27"


def test_reuse_optimizer_reads_pages_whose_blocks_carry_no_spec(tmp_path):
  """A page written before the optimizer's block recorded its spec (the
  committed l2o-generalist suite page, with the spec taken out again)
  gives its runs to --reuse_optimizer for the optimizer it ran, and to no
  other."""
  import types
  from l2o_scale.benchmark import reuse
  path = os.path.join(os.path.dirname(__file__), "..", "reproduce",
                      "results", "benchmark", "l2o-generalist",
                      "results.json")
  with open(path, encoding="utf-8") as f:
    results = json.load(f)
  for e in results["entries"]:
    e["optimizer"].pop("spec")
  (tmp_path / "old.json").write_text(json.dumps(results))
  stored = reuse.StoredBaselines(str(tmp_path / "old.json"))
  entry = stored.results["entries"][0]
  config = types.SimpleNamespace(**{
      k: stored.results["config"][k] for k in reuse.CONFIG_FIELDS})
  key = {k: entry[k] for k in reuse.ENTRY_FIELDS}
  args = (key, config, entry["sizes"], entry.get("data"))
  assert stored.under_test_runs("l2o-scale", *args) is None
  assert stored.under_test_runs("l2o-generalist", *args) == (
      entry["optimizer"]["runs"])
  assert stored.optimizer_taken == 1
