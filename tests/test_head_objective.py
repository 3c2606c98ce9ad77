"""reproduce/head_objective.py: the hand-built head that imitates the card
does what its docstring says for every input, the summary's means are the
rows' means, and a zero head scores the frozen optimizer's own objective."""

import os
import subprocess
import sys

import numpy as np
import pytest

from l2o_scale.head_training import training
from l2o_scale.steps import learned_schedule as ls
from reproduce import head_objective
from tests import paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = paths.mnist_dir()
BOUNDS = (1e-3, 1., 3e-3)


def _outputs(theta, progress, rng):
  # Random gradient-norm features and tensor features: the card-like head
  # reads the progress alone.
  embedding = np.tanh(10. * (progress - np.array(ls.PROGRESS_CENTRES)))
  relative = rng.uniform(-5., 5., ls.NUM_GLOBAL_FEATURES - len(embedding))
  feats = np.concatenate([embedding, relative]).astype(np.float32)
  tensor_feats = rng.uniform(-5., 5., (6, ls.NUM_TENSOR_FEATURES)).astype(
      np.float32)
  tensor_feats[:, 0] = [0., 1., 0., 1., 0., 1.]
  m, w = ls.head_outputs(theta, feats, tensor_feats, *BOUNDS)
  return m.numpy(), w.numpy()


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_card_like_head_decays_and_anneals_like_the_card(seed):
  theta = head_objective.card_like_theta(seed, BOUNDS[0], BOUNDS[2])
  rng = np.random.default_rng(seed)
  for progress in np.linspace(0., 1., 41):
    m, w = _outputs(theta, progress, rng)
    np.testing.assert_allclose(w, head_objective.CARD_WEIGHT_DECAY,
                               rtol=1e-4)
    assert np.ptp(m) < 1e-6  # one multiplier for every tensor
    if progress <= 0.75:
      assert m[0] > 0.98, progress
    if progress >= 0.95:
      assert m[0] < 0.3, progress
  m, _ = _outputs(theta, head_objective.CARD_HALF_STEP_AT, rng)
  np.testing.assert_allclose(m, 0.5, rtol=1e-4)
  # Monotone: the step only shrinks as the run goes on.
  ms = [_outputs(theta, p, rng)[0][0] for p in np.linspace(0., 1., 101)]
  assert np.all(np.diff(ms) <= 1e-7)


def test_card_like_head_refuses_a_decay_the_head_cannot_give():
  with pytest.raises(ValueError, match="outside the head's range"):
    head_objective.card_like_theta(0, 1e-3, 5e-4)


def test_summary_means_split_by_length():
  rows = [dict(task="a", length=100, objectives=[1., 0.]),
          dict(task="a", length=400, objectives=[3., 0.]),
          dict(task="a", length=700, objectives=[5., 1.]),
          dict(task="a", length=2000, objectives=[-7., 2.])]
  s = head_objective.summary(rows, ["x", "y"])
  assert s["x"] == dict(all=0.5, short=2., long=-7.)
  assert s["y"] == dict(all=0.75, short=0., long=2.)
  assert head_objective.summary(rows[:2], ["x", "y"])["x"]["long"] is None


def test_zero_head_scores_the_frozen_optimizers_objective(tmp_path):
  zero = tmp_path / "zero.npz"
  ls.ScheduleHead(None, *BOUNDS).save(str(zero))
  config = training.HeadTrainingConfig(
      tasks=("regression_synthetic",), min_length=4, max_length=12,
      length_grid=2, batch_size=16, max_multiplier=1.)
  lines = []
  result = head_objective.measure([str(zero)], config, data_dir=DATA_DIR,
                                  log=lines.append)
  assert [r["length"] for r in result["rows"]] == [4, 12]
  for row in result["rows"]:
    # The reference is the frozen optimizer traced alone; the zero head is
    # it bit for bit, up to the rounding of a graph of two heads.
    assert abs(row["objectives"][1]) < 1e-3
    assert np.isfinite(row["objectives"][0])
  assert lines[-1].startswith(str(zero))


def _refusal(tmp_path, *args):
  proc = subprocess.run(
      [sys.executable, "-m", "reproduce.head_objective", *args, "--out",
       str(tmp_path / "o.json")],
      cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2
  lines = [l for l in proc.stderr.splitlines()
           if l.startswith(head_objective.PROG)]
  assert len(lines) == 1
  assert not (tmp_path / "o.json").exists()
  return lines[0]


def test_the_objective_is_the_runs_own(tmp_path):
  """The settings come from the run's settings file, one place: a run
  started before ``task_models`` existed reads as the small models."""
  import json  # pylint: disable=g-import-not-at-top
  run = tmp_path / "run"
  run.mkdir()
  config = training.HeadTrainingConfig(seed=3, task_data="full",
                                       max_multiplier=1., sigma=0.05)
  settings = config.settings()
  settings.pop("task_models")
  (run / training.SETTINGS_FILE).write_text(json.dumps(settings))
  loaded = training.saved_config(str(run))
  assert loaded.settings() == config.settings()
  assert loaded.task_models == "small"
  assert "no head training there" in _refusal(
      tmp_path, "--run", str(tmp_path / "nothing"))
  assert "no such head" in _refusal(
      tmp_path, str(tmp_path / "nothing.npz"), "--run", str(run))
