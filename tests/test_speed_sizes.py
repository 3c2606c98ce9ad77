"""The benchmark's size sweep (``python -m l2o_scale.speed --sizes``) runs
and reports its fields; timings themselves are not asserted."""

import json
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from l2o_scale import keras_optimizer
from l2o_scale.runs import cpu_allocator

from l2o_scale.speed import command
from l2o_scale.speed import size_sweep


def test_parameter_count_is_the_keras_model_s():
  for width in (4, 512):
    model = keras.Sequential([
        keras.Input((784,)), keras.layers.Dense(width),
        keras.layers.Dense(width), keras.layers.Dense(10)])
    assert size_sweep.mlp_parameters(width) == model.count_params()


def test_sweep_runs_and_reports_every_field(tmp_path):
  out, page = tmp_path / "sizes.json", tmp_path / "sizes.md"
  assert command.main(["--sizes", "4", "--quick", "--native_step", "--json",
                     str(out), "--markdown", str(page)]) == 0
  report = json.loads(out.read_text())
  [row] = report["rows"]
  assert row["params"] == size_sweep.mlp_parameters(4) == 3_210
  for key in ("adam_ms", "learned_ms", "ratio", "learned_ns_per_param"):
    assert np.isfinite(row[key]) and row[key] > 0, key
  assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
  assert np.isclose(row["learned_ns_per_param"],
                    row["learned_ms"] * 1e6 / row["params"])
  assert np.isclose(row["extra_ns_per_param"],
                    (row["learned_ms"] - row["adam_ms"]) * 1e6 / row["params"])
  assert report["machine"]["cpu_count"] >= 1 and len(report["load_before"]) == 3
  text = page.read_text()
  assert "| 3,210 |" in text and report["date"] in text
  assert report["cpu_allocator"] in ("default", "BFC")
  assert "TensorFlow's {} CPU allocator".format(report["cpu_allocator"]) in text
  assert report["native_step"] and "--sizes --native_step`" in text
  assert "with native_step=True" in report["learned"]


def test_the_loop_sweep_times_steps_of_the_compiled_meta_test_loop():
  """Each call runs LOOP_CHUNK steps that carry the parameters on, and the
  report is per step: with a timer that advances one unit per reading,
  every repeat lasts one unit, so a step lasts 1 / (steps per repeat)."""
  step = size_sweep.make_loop_step(4, size_sweep.loop_adam())
  assert step.steps_per_call == size_sweep.LOOP_CHUNK
  first, second = step(), step()
  assert np.isfinite(first) and second != first
  ticks = iter(range(10**6))
  report = size_sweep.bench_sizes([4], repeats=2, warmup=1, sweep="loop",
                                   timer=lambda: float(next(ticks)),
                                   budget=2e4)
  [row] = report["rows"]
  assert row["steps_per_repeat"] % size_sweep.LOOP_CHUNK == 0
  for key in ("learned_ms", "adam_ms"):
    assert np.isclose(row[key] * 1e-3 * row["steps_per_repeat"], 1.0), key
  assert report["sweep"] == "loop" and "meta-test loop" in report["model"]
  assert "--sizes_in=loop" in size_sweep.format_markdown(
      dict(report, machine={}))


def test_importing_the_package_selects_the_bfc_allocator(monkeypatch):
  """conftest imports l2o_scale before TensorFlow's first operation, as a
  script's imports do: TensorFlow then runs with the BFC allocator unless
  the environment said otherwise, and a user's value wins."""
  said = os.environ[cpu_allocator.ENV].lower() in ("1", "true")
  assert cpu_allocator.in_use() == ("BFC" if said else "default")
  monkeypatch.setenv(cpu_allocator.ENV, "false")
  cpu_allocator.choose_default()
  assert os.environ[cpu_allocator.ENV] == "false"
  monkeypatch.delenv(cpu_allocator.ENV)
  cpu_allocator.choose_default()
  assert os.environ[cpu_allocator.ENV] == "true"


def test_a_large_model_on_the_default_allocator_warns_once(monkeypatch):
  monkeypatch.setattr(cpu_allocator, "in_use", lambda: "default")
  for params, warnings_expected in ((120_000, 0), (160_000, 1)):
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      optimizer = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale")
      optimizer.build([keras.Variable(tf.zeros([params // 2])),
                       keras.Variable(tf.zeros([params // 2]))])
    assert sum("default CPU allocator" in str(w.message)
               for w in caught) == warnings_expected


def test_bad_widths_are_refused(capsys):
  assert command.main(["--sizes", "4,x"]) == 2
  assert "--sizes" in capsys.readouterr().err
