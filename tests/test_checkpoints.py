"""Restoring TF1 checkpoints of the original, TF2 round trips, and mismatches."""

import os

import numpy as np
import pytest

from l2o_scale.runs import checkpoints
from optimizer import hierarchical_rnn

FIXTURE_KWARGS = dict(
    init_lr_range=(1e-3, 1e-3), use_problem_lr_mean=True,
    use_gradient_shortcut=True, use_grad_products=True)


def _ckpt(fixtures_dir):
  return os.path.join(fixtures_dir, "quadratic20", "ckpt", "model.ckpt-0")


def test_tf1_checkpoint_restores_every_variable(fixtures_dir):
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20], **FIXTURE_KWARGS)
  checkpoints.restore_optimizer(_ckpt(fixtures_dir), opt)
  arrays = np.load(os.path.join(fixtures_dir, "quadratic20", "arrays.npz"))
  expected = {k[len("meta/"):-len(":0")]: arrays[k] for k in arrays.files
              if k.startswith("meta/")}
  assert set(expected) == set(opt.tf1_variables())
  for name, var in opt.tf1_variables().items():
    np.testing.assert_array_equal(var.numpy(), expected[name])


def test_tf2_round_trip(tmp_path):
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20], **FIXTURE_KWARGS)
  path = checkpoints.save_optimizer(str(tmp_path / "model.ckpt-3"), opt)
  other = hierarchical_rnn.HierarchicalRNN([10, 20, 20], **FIXTURE_KWARGS)
  before = {n: v.numpy() for n, v in opt.tf1_variables().items()}
  assert any(not np.array_equal(v.numpy(), before[n])
             for n, v in other.tf1_variables().items())
  assert checkpoints.checkpoint_format(path) == "tf2"
  checkpoints.restore_optimizer(path, other)
  for name, var in other.tf1_variables().items():
    np.testing.assert_array_equal(var.numpy(), before[name])


def test_mismatch_names_variable_and_assigns_nothing(fixtures_dir):
  # Two levels and no gradient shortcut: Layer2/GradsToDelta are unused, but
  # a different number of gradient scales changes the cell input size.
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20], num_gradient_scales=3,
                                         **FIXTURE_KWARGS)
  before = {n: v.numpy() for n, v in opt.tf1_variables().items()}
  with pytest.raises(checkpoints.CheckpointMismatchError) as err:
    checkpoints.restore_optimizer(_ckpt(fixtures_dir), opt)
  assert "LOL/" in str(err.value) and "shape" in str(err.value)
  for name, var in opt.tf1_variables().items():
    np.testing.assert_array_equal(var.numpy(), before[name])


def test_missing_variable_is_named(fixtures_dir):
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20], use_attention=True,
                                         **FIXTURE_KWARGS)
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match="has no variable 'LOL/.*Att"):
    checkpoints.restore_optimizer(_ckpt(fixtures_dir), opt)


def test_missing_checkpoint_lists_existing(tmp_path):
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20], **FIXTURE_KWARGS)
  checkpoints.save_optimizer(str(tmp_path / "model.ckpt-7"), opt)
  with pytest.raises(FileNotFoundError, match="model.ckpt-7"):
    checkpoints.restore_optimizer(str(tmp_path / "model.ckpt-9"), opt)
