"""Meta-training of the schedule head (l2o_scale/head_training/): the
antithetic estimate against closed forms (a quadratic; a finite difference
of the real objective on a tiny task), the normalised objective, exact
resume, a smoke run of the driver and its refusals."""

import os
import subprocess
import sys

import numpy as np
import pytest

from l2o_scale import keras_optimizer
from l2o_scale.head_training import estimator
from l2o_scale.head_training import tasks as task_lib
from l2o_scale.head_training import training
from l2o_scale.steps import learned_schedule as ls
from tests import paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = paths.mnist_dir()
TINY = dict(tasks=("regression_synthetic",), tasks_per_estimate=1, pairs=1,
            min_length=4, max_length=8, length_grid=2, seeds_per_task=2,
            batch_size=16)


@pytest.fixture(scope="module")
def frozen():
  return keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale").learned_optimizer


@pytest.fixture(scope="module")
def traced():
  return {}


def test_antithetic_estimate_of_a_quadratic_is_its_gradient():
  # F(x) = sum a (x - c)^2: the antithetic difference is exactly linear, so
  # the estimate is the sample second moment of the draws times the
  # gradient, and its expectation is the gradient.
  rng = np.random.default_rng(0)
  p = ls.NUM_PARAMETERS
  a, c = rng.uniform(0.5, 2., p), rng.standard_normal(p)
  theta = rng.standard_normal(p).astype(np.float32)

  def objective(x):
    return np.sum(a * (np.asarray(x, np.float64) - c) ** 2, axis=-1)

  true = 2. * a * (theta - c)
  eps = rng.standard_normal((4000, p)).astype(np.float32)
  sigma = 0.1
  f = objective(estimator.perturbed(theta, eps, sigma))
  g = estimator.antithetic_gradient(f[:4000], f[4000:], eps, sigma)
  moment = eps.T.astype(np.float64) @ eps / len(eps)
  np.testing.assert_allclose(g, moment @ true, rtol=1e-3,
                             atol=1e-3 * np.abs(true).max())
  cosine = g @ true / np.linalg.norm(g) / np.linalg.norm(true)
  assert cosine > 0.95


def test_estimate_matches_a_finite_difference_on_a_tiny_task(frozen):
  # Perturbations along one direction u (the multiplier's bias): the
  # antithetic estimate is the directional derivative times the mean of
  # z^2 (its expectation: the derivative), to first order in sigma.
  task = task_lib.build("regression_synthetic", DATA_DIR)
  pairs = 2
  runs = estimator.TaskRuns(task, frozen, 2 * pairs, 16, (1e-3, 10., 3e-3))
  u = np.zeros(ls.NUM_PARAMETERS, np.float32)
  u[-2] = 1.
  theta = ls.initial_theta() + 0.3 * u
  scales = np.ones(len(task.initial))
  h = 0.02
  val, _ = runs(np.stack([theta + h * u, theta - h * u] +
                         [theta] * (2 * pairs - 2)), 3, scales, 20)
  finite_difference = (np.log(val[0]) - np.log(val[1])) / (2 * h)
  z = np.array([0.7, -1.3], np.float32)
  eps = z[:, None] * u[None]
  val, _ = runs(estimator.perturbed(theta, eps, h), 3, scales, 20)
  f = np.log(val.astype(np.float64))
  g = estimator.antithetic_gradient(f[:pairs], f[pairs:], eps, h)
  assert np.count_nonzero(g) == 1  # Along u only.
  assert abs(finite_difference) > 0.05
  np.testing.assert_allclose(g[-2] / np.mean(z ** 2), finite_difference,
                             rtol=0.05)


def test_reference_run_is_each_zero_head_of_the_batched_runs(frozen):
  # The heads of one task run as branches of one graph; a head at zero in
  # it rounds as the frozen optimizer's reference run does, so the
  # normalised objective of a zero head is exactly 0. With Grappler's
  # arithmetic optimizer on (estimator.same_numerics_per_head undone), the
  # second head ends 300 steps of this task at another validation loss.
  task = task_lib.build("mlp_tanh_mnist", DATA_DIR)
  scales = task_lib.augmentation_scales(len(task.initial), 5, 0.5)
  assert not np.all(scales == 1.)
  zero = ls.initial_theta()[None]
  reference, _ = estimator.TaskRuns(task, frozen, 1, 16, (1e-3, 10., 3e-3))(
      zero, 5, scales, 300)
  batched, _ = estimator.TaskRuns(task, frozen, 2, 16, (1e-3, 10., 3e-3))(
      np.tile(zero, [2, 1]), 5, scales, 300)
  assert batched.tobytes() == np.tile(reference, 2).tobytes()


def test_normalized_objective():
  f = estimator.normalized_objective([1., 2., np.nan, np.inf, 1e-30], 2.,
                                     3.)
  np.testing.assert_allclose(f, [np.log(0.5), 0., 3., 3., -3.])


def test_resume_ends_with_the_head_of_the_uninterrupted_run(
    frozen, traced, tmp_path):
  lines = []
  whole = training.HeadTrainer(
      training.HeadTrainingConfig(estimates=2, keep_every=1, **TINY),
      str(tmp_path / "whole"), DATA_DIR, frozen, lines.append, traced)
  head = whole.run()
  # The heads kept along the way are the candidates of the selection; a
  # resume may change how often heads are kept.
  kept = ls.ScheduleHead.load(str(tmp_path / "whole" /
                                  training.snapshot_name(2)))
  assert kept.theta.numpy().tobytes() == head.theta.numpy().tobytes()
  assert os.path.exists(tmp_path / "whole" / training.snapshot_name(1))
  assert len(lines) == 2 and lines[1].startswith("estimate 2: objective")
  assert not np.array_equal(head.theta.numpy(), ls.initial_theta())
  first = training.HeadTrainer(
      training.HeadTrainingConfig(estimates=1, **TINY),
      str(tmp_path / "cut"), DATA_DIR, frozen, lines.append, traced)
  first.run()
  resumed = training.HeadTrainer(
      training.HeadTrainingConfig(estimates=2, **TINY),
      str(tmp_path / "cut"), DATA_DIR, frozen, lines.append, traced)
  assert resumed.resumed and resumed.learner.done == 1
  resumed.run()
  assert resumed.learner.theta.tobytes() == whole.learner.theta.tobytes()
  assert resumed.learner.adam_v.tobytes() == whole.learner.adam_v.tobytes()
  assert resumed.references == whole.references
  saved = ls.ScheduleHead.load(str(tmp_path / "cut" / training.HEAD_FILE))
  assert saved.theta.numpy().tobytes() == whole.learner.theta.tobytes()
  # Other settings in the same folder are refused, naming them.
  with pytest.raises(ValueError, match="--sigma=0.1"):
    training.HeadTrainer(
        training.HeadTrainingConfig(estimates=3, sigma=0.2, **TINY),
        str(tmp_path / "cut"), DATA_DIR, frozen, lines.append, traced)


@pytest.mark.parametrize("setting,other", [
    ("task_data", "full"), ("task_models", "full"),
    ("decay_scaled_by_multiplier", True)])
def test_a_run_started_before_a_setting_existed_resumes_with_its_old_value(
    frozen, traced, tmp_path, setting, other):
  """A settings file without ``task_data``, ``task_models`` or
  ``decay_scaled_by_multiplier`` (written before the setting existed) holds
  a run on the small data and models with the plain decay: it resumes as
  such, and a resume with the other value is refused, naming the old
  one."""
  import json  # pylint: disable=g-import-not-at-top
  folder = tmp_path / "old"
  training.HeadTrainer(training.HeadTrainingConfig(estimates=1, **TINY),
                       str(folder), DATA_DIR, frozen, lambda line: None,
                       traced).run()
  settings_file = folder / training.SETTINGS_FILE
  settings = json.loads(settings_file.read_text())
  old_value = settings.pop(setting)
  assert old_value == training.ADDED_SETTINGS[setting]
  settings_file.write_text(json.dumps(settings))
  resumed = training.HeadTrainer(
      training.HeadTrainingConfig(estimates=2, **TINY), str(folder),
      DATA_DIR, frozen, lambda line: None, traced)
  assert resumed.resumed and resumed.learner.done == 1
  with pytest.raises(ValueError, match="--{}={}".format(setting,
                                                       old_value)):
    training.HeadTrainer(
        training.HeadTrainingConfig(estimates=2, **{setting: other}, **TINY),
        str(folder), DATA_DIR, frozen, lambda line: None, {})


def test_a_head_trained_with_the_scaled_decay_is_saved_with_it(
    frozen, traced, tmp_path):
  # The meta-trained head must be used as it was trained: its file says
  # that its decay is scaled by its multiplier.
  config = training.HeadTrainingConfig(estimates=1, max_multiplier=1.,
                                       decay_scaled_by_multiplier=True,
                                       **TINY)
  training.HeadTrainer(config, str(tmp_path), DATA_DIR, frozen,
                       lambda line: None, traced).run()
  saved = ls.ScheduleHead.load(str(tmp_path / training.HEAD_FILE))
  assert saved.bounds == (1e-3, 1., 3e-3, True) == config.bounds()


def test_full_task_models_are_the_suites_own_models():
  from l2o_scale.benchmark import tasks as suite  # pylint: disable=g-import-not-at-top
  small = task_lib.build("cnn_mnist", DATA_DIR, data="full")
  full = task_lib.build("cnn_mnist", DATA_DIR, data="full", models="full")
  model = suite.get("cnn_mnist").build(False)
  assert full.sizes == [int(np.prod(v.shape))
                        for v in model.trainable_variables]
  assert sum(full.sizes) > 4 * sum(small.sizes)
  np.testing.assert_array_equal(full.train[0], small.train[0])
  # Its loss is the model's: finite, near log(10) at the start.
  loss = float(full.loss(full.initial_parameters(0), full.train[0][:64],
                         full.train[1][:64]))
  assert 1. < loss < 4.
  with pytest.raises(ValueError, match="small, full"):
    task_lib.build("cnn_mnist", DATA_DIR, models="large")


def test_full_task_data_trains_the_small_model_on_the_suites_splits():
  from l2o_scale.benchmark import tasks as suite  # pylint: disable=g-import-not-at-top
  small = task_lib.build("mlp_tanh_mnist", DATA_DIR)
  full = task_lib.build("mlp_tanh_mnist", DATA_DIR, data="full")
  splits = suite.get("mlp_tanh_mnist").data(False, DATA_DIR)
  assert small.sizes == full.sizes  # the same small model
  assert len(small.train[0]) == suite.TINY_SIZES[0]
  np.testing.assert_array_equal(full.train[0], splits.train[0])
  np.testing.assert_array_equal(full.validation[1], splits.validation[1])
  assert len(full.train[0]) > 4 * len(small.train[0])
  with pytest.raises(ValueError, match="small, full"):
    task_lib.build("mlp_tanh_mnist", DATA_DIR, data="large")


def test_config_checks():
  with pytest.raises(ValueError, match="--pairs must be >= 1"):
    training.HeadTrainingConfig(pairs=0).check()
  with pytest.raises(ValueError, match="--max_length"):
    training.HeadTrainingConfig(min_length=50, max_length=10).check()
  with pytest.raises(ValueError, match="mlp_relu_bn_mnist"):
    training.HeadTrainingConfig(tasks=("mlp_relu_bn_mnist",)).check()
  with pytest.raises(ValueError, match="unknown task"):
    training.HeadTrainingConfig(tasks=("nope",)).check()
  config = training.HeadTrainingConfig()
  lengths = config.lengths()
  assert lengths[0] == 100 and lengths[-1] == 2000
  assert config.tasks_per_estimate >= 8
  ratios = np.array(lengths[1:]) / np.array(lengths[:-1])
  np.testing.assert_allclose(ratios, ratios[0], rtol=0.02)  # Log-spaced.


def test_cli_refuses_bad_flags_in_one_line(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "l2o_scale.head_training",
       "--train_dir=" + str(tmp_path), "--pairs=0"],
      cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      "python -m l2o_scale.head_training: error: --pairs must be >= 1 (got 0)")
