"""``python -m l2o_scale.head_training.inspect``: a head's multiplier and
decay over a run, checked on heads whose outputs are known in closed form."""

import subprocess
import sys

import numpy as np
import pytest

from l2o_scale.head_training import inspect
from l2o_scale.steps import learned_schedule as ls


def test_a_zero_head_changes_nothing_and_a_shrinking_one_gives_its_minimum():
  for progress in inspect.PROGRESS:
    for relative in inspect.RELATIVE_LOG_NORMS:
      m, d = inspect.outputs(ls.ScheduleHead(), progress, relative)
      assert np.all(m == 1.) and np.all(d == 0.)
  theta = ls.initial_theta()
  theta[-2] = -20.  # the multiplier's output bias: tanh saturates at -1
  shrinking = ls.ScheduleHead(theta, min_multiplier=0.01)
  m, d = inspect.outputs(shrinking, 0.5, 0.)
  np.testing.assert_allclose(m, 0.01, rtol=1e-4)
  assert np.all(d == 0.)
  lines = inspect.table(ls.ScheduleHead())
  assert len(lines) == 2 + len(inspect.PROGRESS) * len(
      inspect.RELATIVE_LOG_NORMS)
  assert all(line.endswith(" | 1 | 0" * len(inspect.TENSORS) + " |")
             for line in lines[2:])


@pytest.mark.parametrize("content", [None, "not a head"])
def test_a_missing_or_bad_file_is_one_line(tmp_path, content):
  path = tmp_path / "head.npz"
  if content is not None:
    path.write_text(content)
  done = subprocess.run([sys.executable, "-m",
                         "l2o_scale.head_training.inspect", str(path)],
                        capture_output=True, text=True, check=False)
  assert done.returncode != 0
  lines = [l for l in done.stderr.splitlines() if "inspect" in l]
  assert len(lines) == 1 and "error:" in lines[0], done.stderr
