"""Tests of the speed benchmark's report (``python -m l2o_scale.speed``,
l2o_scale/speed/timing.py, speed_report.py, step_timing.py).

Why: the benchmark itself is too slow for CI; its measuring and JSON
writing are tested with a stubbed timer, and its lower-bound step against
the original's GRU cell.
"""

import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.speed import timing
from l2o_scale.speed import speed_report
from l2o_scale.speed import step_timing


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
  stats = timing.measure(lambda: calls.append(1), warmup=2, repeats=3,
                        inner=2, timer=timer)
  assert len(calls) == 1 + 1 + 3 * 2
  assert stats["first_call_seconds"] == 5.
  assert stats["samples"] == [1., 2., 1.5]
  assert stats["median"] == 1.5 and stats["min"] == 1. and stats["max"] == 2.
  assert stats["repeats"] == 3


def test_bench_json_report(tmp_path):
  step = lambda m: timing.summarize([m], first_call_seconds=1.)
  steps = {"batch_size": 128, "problem": "mlp", "l2o": step(0.004),
           "l2o_xla": step(0.003), "adam": step(0.0015),
           "adam_xla": step(0.001), "gru_core_xla": step(0.0019)}
  unrolls = {"unroll_length": 20, "mini_dataset_rows": 10000,
             "batch_size": 128, "noreg": step(0.5),
             "hessian_esd": step(1.5)}
  info = {"cpu": "test cpu", "cpu_count": 2, "tensorflow": "2.x",
          "python": "3.11", "load_average_1min_at_start": 0.1}
  report = speed_report.make_report(steps, unrolls, info, quick=True)
  path = tmp_path / "sub" / "bench.json"
  speed_report.write_json(str(path), report)
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
  text = speed_report.format_table(report)
  assert "3.00x" in text and "4.00 ms" in text and "(XLA)" in text
  assert "GRU alone, XLA) / fastest Adam step: 1.90x" in text
  # In the compiled meta-test loop, the XLA learned step against Adam
  # without and with XLA.
  loop = {"steps": 1500, "l2o": 0.0033, "l2o_xla": 0.0012, "adam": 0.0006,
          "adam_xla": 0.0004}
  report = speed_report.make_report(steps, unrolls, info, quick=True, loop=loop)
  assert report["loop_l2o_xla_over_adam_ratio"] == pytest.approx(2.)
  assert report["loop_l2o_xla_over_adam_xla_ratio"] == pytest.approx(3.)
  assert ("learned / Adam 5.50x, learned XLA / Adam 2.00x, both XLA 3.00x"
          in speed_report.format_table(report))


def test_bench_speedup_over_the_original_in_its_json_format():
  """Ratios original / port from time_original.py's JSON fields."""
  step = lambda m, first=1.: timing.summarize([m], first_call_seconds=first)
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
  report = speed_report.make_report(steps, unrolls, info, True, None, meta_iteration,
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
  text = speed_report.format_table(report)
  assert "unroll_noreg 2.00x" in text and "--jit_compile" in text
  report = speed_report.make_report(steps, unrolls, info, True, None, None,
                             {"error": "OSError: no venv"})
  assert "original TF1 code failed: OSError: no venv" in speed_report.format_table(
      report)


def test_bench_lower_bound_runs_the_optimizers_gru():
  """The lower-bound step's new state is the per-parameter GRU of the
  optimizer applied to (features, state), per coordinate: checked against
  the coordinate-major port of the original cell (``BiasGRUCell.__call__``),
  each coordinate with its tensor's injected bias. Its loss is the
  problem's objective, and the parameters take an SGD step of 1e-3."""
  from problems import problem_generator  # pylint: disable=g-import-not-at-top
  problem = problem_generator.FullyConnected(3, 2, hidden_sizes=(4,))
  optimizer = timing.hrnn()  # pylint: disable=protected-access
  step = step_timing.make_gru_core_step(problem, optimizer, jit_compile=False)
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
  step = lambda m: timing.summarize([m], first_call_seconds=1.)
  steps = {"batch_size": 128, "problem": "mlp", "l2o": step(0.004),
           "l2o_xla": {"error": "XLA: nope"}, "adam": step(0.002),
           "gru_core_xla": {"error": "XLA: no"}}
  unrolls = {"unroll_length": 20, "mini_dataset_rows": 10000,
             "batch_size": 128, "noreg": step(0.5),
             "hessian_esd": step(1.5)}
  report = speed_report.make_report(steps, unrolls, {"cpu": "c", "cpu_count": 2,
                                              "tensorflow": "2.x",
                                              "python": "3.11",
                                              "load_average_1min_at_start":
                                              None})
  assert report["l2o_step_uses_xla"] is False
  assert report["l2o_over_adam_ratio"] == pytest.approx(2.)
  assert report["l2o_xla_error"] == "XLA: nope"
  assert report["gru_core_xla_error"] == "XLA: no"
  assert "gru_core_over_adam_ratio" not in report
  text = speed_report.format_table(report)
  assert "l2o_xla failed: XLA: nope" in text
  assert "gru_core_xla failed: XLA: no" in text and "lower bound" not in text


def test_run_original_passes_the_data_dir_it_is_given(tmp_path, monkeypatch):
  script = tmp_path / "time_original.py"
  script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
  # The folder comes as an argument, never from the environment.
  monkeypatch.setenv("L2O_SCALE_DATA_DIR", "/from/env")
  assert speed_report.run_original(str(script), sys.executable,
                                   "/given") == ["--data_dir", "/given"]
  assert speed_report.run_original(str(script), sys.executable) == []
  assert "error" in speed_report.run_original(str(tmp_path / "missing.py"),
                                              sys.executable)
