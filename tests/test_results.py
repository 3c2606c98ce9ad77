"""python -m l2o_scale.results on small synthetic result files of the format
metatest.py writes (a pickled list of per-step losses per seed, a held-out
JSON record per seed)."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from l2o_scale import results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(directory, model, seed, losses, accuracy=None, suffix=""):
  os.makedirs(directory, exist_ok=True)
  name = "seed{}_eval_loss_record.pickle-{}{}".format(seed, model, suffix)
  with open(os.path.join(directory, name), "wb") as f:
    pickle.dump([np.float32(v) for v in losses], f)
  if accuracy is not None:
    record = {"seed": seed, "iteration": [0, len(losses)],
              "train_loss": [2.3, losses[-1]], "train_accuracy": [0.1, 0.9],
              "heldout_loss": [2.3, 1. - accuracy],
              "heldout_accuracy": [0.1, accuracy]}
    name = "seed{}_heldout_record-{}{}.json".format(seed, model, suffix)
    with open(os.path.join(directory, name), "w") as f:
      json.dump(record, f)


@pytest.fixture
def save_dir(tmp_path):
  d = str(tmp_path / "results")
  # "my-run": constant tails 0.5, 0.7 -> final 0.6 ± 0.1414 (sample std).
  _write(d, "my-run", 6, [2.] * 20 + [0.5] * 10, accuracy=0.90)
  _write(d, "my-run", 12, [2.] * 20 + [0.7] * 10, accuracy=0.94)
  # "adam": one seed, no held-out record.
  _write(d, "adam", 6, list(np.linspace(2., 1., 30)))
  return d


def test_summary_is_mean_and_sample_std_over_seeds(save_dir):
  rows = {row.run.model: row for row in
          results.summarize(results.read_dir(save_dir), last=10)}
  mine = rows["my-run"]
  assert mine.seeds == [6, 12] and mine.steps == [30]
  assert mine.final_loss[0] == pytest.approx(0.6, abs=1e-6)
  assert mine.final_loss[1] == pytest.approx(np.std([0.5, 0.7], ddof=1),
                                             abs=1e-6)
  assert mine.heldout_accuracy[0] == pytest.approx(0.92)
  assert mine.heldout_accuracy[1] == pytest.approx(np.std([.9, .94], ddof=1))
  adam = rows["adam"]
  assert adam.seeds == [6] and adam.final_loss[1] is None
  assert adam.final_loss[0] == pytest.approx(
      np.mean(np.linspace(2., 1., 30)[-10:]), rel=1e-6)
  assert np.isnan(adam.heldout_accuracy[0])


def test_names_with_dashes_and_problem_suffixes(tmp_path):
  d = str(tmp_path)
  _write(d, "l2o-entropy-reg", 6, [1.] * 5, suffix="-problem1")
  _write(d, "l2o-entropy-reg", 6, [3.] * 5, suffix="-problem0")
  rows = results.summarize(results.read_dir(d), last=5)
  assert [(r.run.model, r.run.problem, r.final_loss[0]) for r in rows] == [
      ("l2o-entropy-reg", 0, 3.), ("l2o-entropy-reg", 1, 1.)]


def test_command_prints_the_table_and_draws_the_figure(save_dir, tmp_path):
  other = str(tmp_path / "other")
  _write(other, "pretrained", 6, [1.] * 30, accuracy=0.8)
  figure = str(tmp_path / "cmp.png")
  out = subprocess.run(
      [sys.executable, "-m", "l2o_scale.results", save_dir, other,
       "--figure", figure], capture_output=True, text=True, cwd=ROOT,
      timeout=120)
  assert out.returncode == 0, out.stderr
  lines = out.stdout.splitlines()
  assert lines[0].startswith("| directory | model | seeds | steps | final "
                             "training loss | held-out accuracy |")
  row = [l for l in lines if "| my-run |" in l][0]
  assert "| 2 | 30 | 0.6 ± 0.14 | 0.9200 ± 0.0283 |" in row
  assert [l for l in lines if "| adam |" in l][0].count(" - ") == 2
  assert any("| pretrained |" in l for l in lines)
  assert "mean ± std over seeds" in out.stdout
  assert os.path.getsize(figure) > 1000


def test_bad_input_is_one_line(tmp_path, capsys):
  empty = tmp_path / "empty"
  empty.mkdir()
  for args, message in [([str(empty)], "no seed<S>_eval_loss_record"),
                        ([str(tmp_path / "missing")], "is not a directory"),
                        ([str(empty), "--last=0"], "--last must be >= 1")]:
    with pytest.raises(SystemExit) as e:
      results.main(args)
    assert e.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
