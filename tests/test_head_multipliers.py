"""``python -m l2o_scale.head_training.multipliers``: a head's multiplier and
decay over a run, alone or in a run of a task, checked on heads whose
outputs are known in closed form."""

import subprocess
import sys

import numpy as np
import pytest

from l2o_scale.head_training import multipliers
from l2o_scale.steps import learned_schedule as ls
from tests import paths


def test_a_zero_head_changes_nothing_and_a_shrinking_one_gives_its_minimum():
  for progress in multipliers.PROGRESS:
    for relative in multipliers.RELATIVE_LOG_NORMS:
      m, d = multipliers.outputs(ls.ScheduleHead(), progress, relative)
      assert np.all(m == 1.) and np.all(d == 0.)
  theta = ls.initial_theta()
  theta[-2] = -20.  # the multiplier's output bias: tanh saturates at -1
  shrinking = ls.ScheduleHead(theta, min_multiplier=0.01)
  m, d = multipliers.outputs(shrinking, 0.5, 0.)
  np.testing.assert_allclose(m, 0.01, rtol=1e-4)
  assert np.all(d == 0.)
  lines = multipliers.table(ls.ScheduleHead())
  assert len(lines) == 2 + len(multipliers.PROGRESS) * len(
      multipliers.RELATIVE_LOG_NORMS)
  assert all(line.endswith(" | 1 | 0" * len(multipliers.TENSORS) + " |")
             for line in lines[2:])


def test_a_traced_run_records_every_step_the_head_gave():
  theta = ls.initial_theta()
  theta[-2] = -20.  # the multiplier at its minimum for every input
  shrinking = ls.ScheduleHead(theta, min_multiplier=0.01)
  for head, multiplier in ((ls.ScheduleHead(), 1.), (shrinking, 0.01)):
    traced = multipliers.trace(head, "logreg_mnist", steps=12, every=4,
                           data_dir=paths.mnist_dir(), tiny=True)
    assert traced["steps"] == [0, 4, 8, 12]
    assert traced["is_vector"] == [False, True]  # kernel, bias
    # Every step's row was written (the record starts at 1, not 0.01).
    np.testing.assert_allclose(traced["multipliers"], multiplier, rtol=1e-4)
    assert np.all(traced["decays"] == 0.)
    assert np.all(np.isfinite(traced["train_loss"]))
    lines = multipliers.run_table(traced)
    assert len(lines) == 2 + 3 and lines[-1].startswith("| 12 | ")
  # A hundredth of every step: the loss moves far less than at full steps.
  full = multipliers.trace(ls.ScheduleHead(), "logreg_mnist", steps=12, every=12,
                       data_dir=paths.mnist_dir(), tiny=True)["train_loss"]
  small = multipliers.trace(shrinking, "logreg_mnist", steps=12, every=12,
                        data_dir=paths.mnist_dir(), tiny=True)["train_loss"]
  assert full[0] == small[0]
  assert abs(small[1] - small[0]) < 0.1 * abs(full[1] - full[0])


@pytest.mark.parametrize("steps,every", [(0, 4), (12, 0)])
def test_a_trace_needs_a_length_and_a_spacing(steps, every):
  # A spacing of 0 would never end the run.
  with pytest.raises(ValueError, match="at least 1"):
    multipliers.trace(ls.ScheduleHead(), "logreg_mnist", steps=steps,
                      every=every, data_dir=paths.mnist_dir(), tiny=True)


@pytest.mark.parametrize("content", [None, "not a head"])
def test_a_missing_or_bad_file_is_one_line(tmp_path, content):
  path = tmp_path / "head.npz"
  if content is not None:
    path.write_text(content)
  done = subprocess.run([sys.executable, "-m",
                         "l2o_scale.head_training.multipliers", str(path)],
                        capture_output=True, text=True, check=False)
  assert done.returncode != 0
  lines = [l for l in done.stderr.splitlines() if "multipliers" in l]
  assert len(lines) == 1 and "error:" in lines[0], done.stderr
