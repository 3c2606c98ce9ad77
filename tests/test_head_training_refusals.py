"""python -m l2o_scale.head_training refuses what it cannot use in one
line, before it makes or changes anything: an --optimizer that names
nothing, a state or settings file that cannot be read."""

import os
import subprocess
import sys

import pytest

from l2o_scale.head_training import training
from tests import paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "python -m l2o_scale.head_training"


def test_an_unknown_optimizer_names_the_shipped_ones_and_makes_no_folder(
    tmp_path):
  train_dir = tmp_path / "D"
  result = subprocess.run(
      [sys.executable, "-m", "l2o_scale.head_training",
       "--optimizer=nope", "--train_dir=" + str(train_dir)],
      cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert result.returncode == 2, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  line = result.stderr.strip().splitlines()[-1]
  assert line.startswith(PROG + ": error: --optimizer=nope is neither a "
                         "shipped optimizer (")
  assert "l2o-scale" in line and "l2o-generalist" in line
  assert not train_dir.exists()


@pytest.mark.parametrize("name,damage", [
    (training.STATE_FILE, "truncate"), (training.STATE_FILE, "text"),
    (training.SETTINGS_FILE, "truncate")])
def test_a_damaged_state_or_settings_file_is_one_line_naming_it(
    tmp_path, name, damage):
  """A run's saved state cut short (a copy stopped part way, a full
  disk), or another file in its place: the resume refuses it, naming the
  file and what to do; the file is left as it is."""
  config = training.HeadTrainingConfig(
      estimates=1, tasks=("regression_synthetic",), tasks_per_estimate=1,
      pairs=1, min_length=4, max_length=8, length_grid=2, seeds_per_task=2,
      batch_size=16)
  # No estimate runs: the trainer's first state is saved as it is.
  training.HeadTrainer(config, str(tmp_path), paths.mnist_dir(),
                       optimizer=object()).save()
  path = tmp_path / name
  raw = path.read_bytes()
  path.write_bytes(raw[:len(raw) // 2] if damage == "truncate" else
                   b"not the state\n")
  kept = path.read_bytes()
  with pytest.raises(ValueError) as refused:
    training.HeadTrainer(config, str(tmp_path), paths.mnist_dir(),
                         optimizer=object())
  line = str(refused.value)
  assert "\n" not in line
  assert line.startswith("{} is damaged (".format(path)), line
  assert line.endswith("restore it from a copy, or start the head training "
                       "over in another --train_dir")
  assert path.read_bytes() == kept
