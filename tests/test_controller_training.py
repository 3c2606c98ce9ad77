"""The controller's meta-training (l2o_scale/controller_training): runs of
one task under several controllers are independent copies (equal
controllers give equal runs, whatever else runs beside them), a run killed
after any estimate resumes to the uninterrupted run's controller bit for
bit, and the protocol's sets are disjoint as it says."""

import dataclasses
import json

import keras
import numpy as np
import pytest

from l2o_scale.benchmark import families
from l2o_scale.benchmark import tasks as registry
from l2o_scale.controller_training import protocol
from l2o_scale.controller_training import runs as runs_lib
from l2o_scale.controller_training import training
from l2o_scale.steps import controlled_adamw as rule


def _config(**kw):
  values = dict(estimates=2, tasks_per_estimate=2, pairs=1, min_length=5,
                max_length=12, families=("mlp_autoencoder",), keep_every=1,
                batch_size=16)
  values.update(kw)
  return training.ControllerTrainingConfig(**values)


def test_controllers_side_by_side_are_independent_runs():
  task = families.get_family("mlp_autoencoder").task(0, 5)
  keras.utils.set_random_seed(0)
  model = task.build(False)
  splits = task.data(tiny=True)
  runs = runs_lib.TaskRuns(model, task.loss, rule.Settings(3e-3, 0.05), 3,
                           16)
  theta = rule.initial_theta(0)
  hidden = rule.NUM_INPUTS * rule.HIDDEN_UNITS + rule.HIDDEN_UNITS
  other = theta.copy()
  other[hidden:] = 0.5
  initial = [v.numpy() for v in model.trainable_variables]
  args = (initial, splits.train, splits.validation,
          np.ones(len(initial)), 3., 7, 20)
  val, _ = runs(np.stack([theta, other, theta]), *args)
  assert val[0] == val[2] and val[0] != val[1]
  again, _ = runs(np.stack([other, theta, other]), *args)
  assert again[1] == val[0] and again[0] == val[1]


def test_a_run_resumes_after_an_estimate_to_the_same_controller(tmp_path):
  traced = {}
  straight = training.ControllerTrainer(_config(), str(tmp_path / "a"),
                                        log=lambda line: None, traced=traced)
  straight.run()
  first = training.ControllerTrainer(_config(estimates=1),
                                     str(tmp_path / "b"),
                                     log=lambda line: None, traced=traced)
  first.run()
  # A log line past the saved state (a copy of the run taken between the
  # two writes) is dropped on resume.
  with open(str(tmp_path / "b" / training.LOG_FILE), "a") as f:
    f.write(json.dumps(dict(estimate=2, objective=0.)) + "\n")
  lines = []
  resumed = training.ControllerTrainer(_config(), str(tmp_path / "b"),
                                       log=lines.append, traced=traced)
  assert resumed.resumed and resumed.learner.done == 1
  resumed.run()
  assert lines[0].startswith("resuming")
  np.testing.assert_array_equal(resumed.learner.theta,
                                straight.learner.theta)
  assert not np.array_equal(straight.learner.theta, rule.initial_theta(1))
  with np.load(str(tmp_path / "b" / "controller-2.npz")) as saved:
    np.testing.assert_array_equal(saved["theta"], straight.learner.theta)
  log = [json.loads(l) for l in open(str(tmp_path / "b" /
                                         training.LOG_FILE))]
  assert [r["estimate"] for r in log] == [1, 2]
  # Other settings in the same folder are refused, naming the flag.
  with pytest.raises(ValueError, match="--sigma=0.1"):
    training.ControllerTrainer(_config(sigma=0.2), str(tmp_path / "b"))
  # A damaged state file is refused in one line.
  path = str(tmp_path / "b" / training.STATE_FILE)
  with open(path, "r+b") as f:
    f.truncate(100)
  with pytest.raises(ValueError, match="is damaged"):
    training.ControllerTrainer(_config(), str(tmp_path / "b"))


def test_the_protocol_sets_are_disjoint_and_overlaps_are_refused(
    monkeypatch):
  protocol.check()
  families.check_disjoint(("mlp_blobs",), ("cnn_mnist",), ())
  clusters = families.get_family("mlp_blobs").task(0, 1)
  monkeypatch.setitem(registry.REGISTRY, "clusters", dataclasses.replace(
      clusters, name="clusters"))
  with pytest.raises(ValueError, match="clusters uses the data of meta-tr"):
    families.check_disjoint(("mlp_blobs",), ("clusters",), ())
  with pytest.raises(ValueError, match="mlp_sigmoid_mnist's model family"):
    families.check_disjoint(("mlp_blobs",), ("text_topics",),
                            ("cnn_mnist", "mlp_sigmoid_mnist"))
  with pytest.raises(ValueError, match="uses data of meta-training or"):
    families.check_disjoint(("mlp_blobs",), ("text_topics",),
                            ("lstm_topics",))


def test_a_family_draws_tasks_of_the_registrys_interface():
  rng = np.random.default_rng(0)
  for name in protocol.META_TRAINING:
    task = families.get_family(name).sample(rng)
    splits = task.data(tiny=True)
    model = task.build(False)
    out = model(splits.train[0][:4])
    assert out.shape[0] == 4 and task.data_source == families.get_family(
        name).data_source
    # The same draw gives the same data; another seed other data.
    again = families.get_family(name).task(0, 1, "small").data(tiny=True)
    other = families.get_family(name).task(0, 2, "small").data(tiny=True)
    assert np.array_equal(again.train[0], families.get_family(name).task(
        0, 1, "small").data(tiny=True).train[0])
    assert not np.array_equal(again.train[0], other.train[0])
