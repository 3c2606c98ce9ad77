"""The TF1 reference fixtures replay within their spec.json tolerances.

This is the port's definition of "faithful": every fixture in
shared/fixtures/tf1_reference, produced by the original TF1 code, must PASS.
Also checks that the replayer itself can fail (a perturbed expected array, a
folder without fixtures).
"""

import json
import os
import shutil

import numpy as np
import pytest

from l2o_scale.fidelity import tf1_reference


@pytest.mark.parametrize("name", ["quadratic20", "mnist_mlp_sigmoid",
                                  "train_plain", "train_mt",
                                  "train_hessian_esd_on"])
def test_fixture_replays_within_tolerance(name, fixtures_dir, data_dir):
  status, _, message = tf1_reference.replay_fixture(
      os.path.join(fixtures_dir, name), data_dir)
  assert status == "PASS", message


def test_replayer_reports_a_perturbed_fixture(fixtures_dir, tmp_path, capsys):
  src = os.path.join(fixtures_dir, "quadratic20")
  dst = tmp_path / "quadratic20_perturbed"
  shutil.copytree(src, dst)
  arrays = dict(np.load(dst / "arrays.npz"))
  arrays["final0"] = arrays["final0"] * 1.01  # 1% off: far over 1e-4.
  np.savez(dst / "arrays.npz", **arrays)
  code = tf1_reference.main([str(dst)])
  out = capsys.readouterr().out
  assert code == 1
  assert out.startswith("FAIL quadratic20_perturbed") and "final0" in out


def test_replayer_uses_the_spec_tolerance(fixtures_dir, tmp_path):
  """Tightening a tolerance below the measured error turns PASS into FAIL."""
  dst = tmp_path / "quadratic20_strict"
  shutil.copytree(os.path.join(fixtures_dir, "quadratic20"), dst)
  spec = json.loads((dst / "spec.json").read_text())
  spec["tolerances"]["objectives"]["max_rel"] = 1e-12
  (dst / "spec.json").write_text(json.dumps(spec))
  status, _, message = tf1_reference.replay_fixture(str(dst))
  assert status == "FAIL" and "objectives max_rel" in message


def test_replayer_without_fixtures_exits_nonzero(tmp_path, capsys):
  assert tf1_reference.main([str(tmp_path)]) == 2
  assert "No fixture found" in capsys.readouterr().out


def _write_meta_test_fixture(folder, problem_spec, level_sizes, kwargs,
                             num_steps=6, data=None, data_dir=None,
                             batch_size=16):
  """A fixture in the shared format, whose expected arrays come from the
  black-box path (``apply_gradients`` on tf.Variables, eagerly) rather than
  the replayer's compiled pure step: an independent route to the numbers.
  ``data``: the spec's data source (batches of ``batch_size`` rows)."""
  from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
  from l2o_scale.fidelity import fixture_spec  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = {"kind": "meta_test", "problem": problem_spec,
          "optimizer": {"cls": "HierarchicalRNN", "level_sizes": level_sizes,
                        "kwargs": kwargs},
          "data": data, "num_steps": num_steps, "early_steps": 2,
          "tolerances": {g: {"rel_l2": 1e-4} for g in
                         ("early", "final", "slot")}}
  spec["tolerances"]["objectives"] = {"max_rel": 1e-4}
  os.makedirs(os.path.join(folder, "ckpt"))
  with open(os.path.join(folder, "spec.json"), "w") as f:
    json.dump(spec, f)
  problem = fixture_spec.build_problem(problem_spec, "meta_test")
  opt = fixture_spec.build_optimizer(spec["optimizer"])
  checkpoints.save_optimizer(os.path.join(folder, "ckpt", "model.ckpt-0"), opt)
  rng = np.random.RandomState(0)
  init = [rng.uniform(-1, 1, s).astype(np.float32) for s in
          problem.param_shapes]
  variables = [tf.Variable(v) for v in init]
  arrays = {"init{}".format(i): v for i, v in enumerate(init)}
  images, labels = fixture_spec.load_data(data, data_dir)
  if data is not None:
    arrays["batches"] = rng.randint(0, len(images), (num_steps, batch_size))
  objectives = []
  opt.build(variables)
  for t in range(num_steps):
    batch = ((images[arrays["batches"][t]], labels[arrays["batches"][t]])
             if data is not None else ())
    with tf.GradientTape() as tape:
      obj = problem.objective(list(variables), *batch)
    # As the original's test_optimizer: the objective at the real parameters
    # (differs from the variables' values with attention).
    real = [opt.get_slot(v, "true_param") for v in variables]
    objectives.append(float(problem.objective(real, *batch)))
    opt.apply_gradients(zip(tape.gradient(obj, variables), variables))
    if t + 1 == 2 or t + 1 == num_steps:
      prefix = "early/" if t + 1 == 2 else ""
      for i, v in enumerate(variables):
        arrays["{}final{}".format(prefix, i)] = v.numpy()
        for key in opt.get_slot_names():
          if key in opt._slots[v.ref()]:  # pylint: disable=protected-access
            arrays["{}slot/param{}/{}".format(prefix, i, key)] = (
                opt.get_slot(v, key).numpy())
  arrays["objectives"] = np.array(objectives, np.float32)
  np.savez(os.path.join(folder, "arrays.npz"), **arrays)


@pytest.mark.parametrize("problem,levels,kwargs", [
    ({"cls": "Rosenbrock", "args": [], "kwargs": {"random_seed": 1}}, [5],
     {"init_lr_range": [1e-3, 1e-3], "num_gradient_scales": 1,
      "use_relative_lr": False, "dynamic_output_scale": False}),
    ({"cls": "Bowl", "args": [5.0], "kwargs": {"angle": 0.5}}, [4, 6],
     {"init_lr_range": [1e-3, 1e-3], "num_gradient_scales": 2,
      "use_extreme_indicator": True, "use_lr_shortcut": True,
      "learnable_decay": False}),
    ({"cls": "Quadratic", "args": [6], "kwargs": {"random_seed": 2}},
     [4, 5, 3],
     {"init_lr_range": [1e-3, 1e-3], "use_attention": True,
      "use_gradient_shortcut": True, "use_multiple_scale_decays": True,
      "use_problem_lr_mean": True}),
])
def test_replayer_rebuilds_other_problems_and_options(tmp_path, problem,
                                                      levels, kwargs):
  folder = str(tmp_path / problem["cls"])
  _write_meta_test_fixture(folder, problem, levels, kwargs)
  status, _, message = tf1_reference.replay_fixture(folder)
  assert status == "PASS", message


@pytest.mark.parametrize("kwargs", [{"mode": "test"}, {}])
def test_replayer_reads_convnet_as_the_evaluation_code_names_it(
    tmp_path, data_dir, kwargs):
  """``ConvNet`` in a spec from the original evaluation code (with its
  ``mode`` argument, or in a meta_test fixture) is that code's convnet
  (VALID convolutions, batch norm, pooling: the port's ConvNetEval); in a
  meta-training spec without ``mode`` it stays the training code's.
  (``mode="test"``: with batch statistics the conv biases get no gradient,
  and their optimizer states are float-rounding noise.)"""
  from l2o_scale.fidelity import fixture_spec  # pylint: disable=g-import-not-at-top
  from problems import problem_generator  # pylint: disable=g-import-not-at-top
  problem = {"cls": "ConvNet",
             "args": [[1, 28, 28], 10, [[3, 3, 4, 1], [5, 5, 8, 1]]],
             "kwargs": dict(kwargs, random_seed=1, affine_size=128)}
  assert type(fixture_spec.build_problem(problem, "meta_test")) is (
      problem_generator.ConvNetEval)
  assert type(fixture_spec.build_problem(problem, "meta_train")) is (
      problem_generator.ConvNetEval if kwargs else problem_generator.ConvNet)
  folder = str(tmp_path / "convnet_eval")
  _write_meta_test_fixture(folder, problem, [5, 6], {
      "init_lr_range": [1e-3, 1e-3], "num_gradient_scales": 2},
                           num_steps=4, data="mnist_t10k", data_dir=data_dir)
  status, _, message = tf1_reference.replay_fixture(folder, data_dir)
  assert status == "PASS", message
