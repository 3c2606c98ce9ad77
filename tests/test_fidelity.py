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

from l2o_scale import tf1_reference


@pytest.mark.parametrize("name", ["quadratic20", "mnist_mlp_sigmoid",
                                  "train_plain", "train_mt"])
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
