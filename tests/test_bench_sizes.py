"""The benchmark's size sweep (``python -m l2o_scale.bench --sizes``) runs
and reports its fields; timings themselves are not asserted."""

import json

import keras
import numpy as np

from l2o_scale.speed import bench
from l2o_scale.speed import bench_sizes


def test_parameter_count_is_the_keras_model_s():
  for width in (4, 512):
    model = keras.Sequential([
        keras.Input((784,)), keras.layers.Dense(width),
        keras.layers.Dense(width), keras.layers.Dense(10)])
    assert bench_sizes.mlp_parameters(width) == model.count_params()


def test_sweep_runs_and_reports_every_field(tmp_path):
  out, page = tmp_path / "sizes.json", tmp_path / "sizes.md"
  assert bench.main(["--sizes", "4", "--quick", "--json", str(out),
                     "--markdown", str(page)]) == 0
  report = json.loads(out.read_text())
  [row] = report["rows"]
  assert row["params"] == bench_sizes.mlp_parameters(4) == 3_210
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


def test_the_allocator_in_use_is_named(monkeypatch):
  monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "true")
  assert bench_sizes.cpu_allocator() == "BFC"
  monkeypatch.delenv("TF_CPU_ALLOCATOR_USE_BFC")
  assert bench_sizes.cpu_allocator() == "default"


def test_bad_widths_are_refused(capsys):
  assert bench.main(["--sizes", "4,x"]) == 2
  assert "--sizes" in capsys.readouterr().err
