"""A model family is added in one place (one register_family call) and is
then a task for the benchmark, the schedule head's trainer and the
controller's trainer alike, by the name of one of its tasks."""

import numpy as np
import pytest

from l2o_scale.benchmark import config as config_module
from l2o_scale.benchmark import families
from l2o_scale.benchmark import suite
from l2o_scale.controller_training import training as controller_training
from l2o_scale.head_training import tasks as head_tasks


def _rings(config, rng, count):
  """Points on two noisy concentric rings, labelled by ring."""
  labels = rng.integers(0, 2, count)
  angle = rng.uniform(0, 2 * np.pi, count)
  radius = 1. + labels + 0.1 * rng.standard_normal(count)
  x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
  return np.tanh(x).astype(np.float32), labels.astype(np.int32)


@pytest.fixture
def rings(monkeypatch):
  monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
  return families.register_family(families.TaskFamily(
      "mlp_rings", "MLP", "noisy rings", "MLP classifier of two rings",
      families.grid(inputs=(2,), width=(8,), depth=(1,),
                    activation=("tanh",)),
      lambda c: families.mlp(c, 2), _rings, "sparse_ce", "accuracy"))


def test_a_new_family_runs_in_the_benchmark_and_both_trainers(rings,
                                                              tmp_path):
  name = "mlp_rings/0/small/3"
  task = families.get_task(name)
  assert (task.family, task.data_source) == ("MLP", "noisy rings")
  # The benchmark.
  config = config_module.Config.for_size(
      "small", optimizer="adam:1e-2", tasks=(name,), baselines=("adam",),
      untuned=(), out=str(tmp_path / "bench"))
  results = suite.run(config, log=lambda line: None)
  entry, = results["entries"]
  assert entry["task"] == name and entry["family"] == "MLP"
  assert entry["optimizer"]["runs"][0]["final_train_loss"] < entry[
      "optimizer"]["runs"][0]["train_loss"][0]
  # The schedule head's tasks.
  head_task = head_tasks.build(name)
  assert head_task.train[0].shape == (512, 2)
  head_tasks.check_names((name,))
  # The controller's trainer draws it from its family.
  trainer = controller_training.ControllerTrainer(
      controller_training.ControllerTrainingConfig(
          estimates=1, tasks_per_estimate=1, pairs=1, min_length=3,
          max_length=3, families=("mlp_rings",), batch_size=8),
      str(tmp_path / "controller"), log=lambda line: None)
  trainer.run()
  assert trainer.learner.done == 1


def test_a_family_task_name_that_names_nothing_is_refused():
  with pytest.raises(ValueError, match="configurations 0 to"):
    families.get_task("mlp_blobs/99/small/1")
  with pytest.raises(ValueError, match="is not a task"):
    families.get_task("mlp_blobs/x/small/1")
  with pytest.raises(ValueError, match="unknown task family"):
    families.get_task("nope/0/small/1")
