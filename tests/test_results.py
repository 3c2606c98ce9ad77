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
from l2o_scale import results_reading
from l2o_scale.meta_testing import result_files

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
          results.summarize(results_reading.read_dir(save_dir), last=10)}
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
  rows = results.summarize(results_reading.read_dir(d), last=5)
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


def _run(*args):
  return subprocess.run([sys.executable, "-m", "l2o_scale.results"] +
                        [str(a) for a in args], capture_output=True,
                        text=True, cwd=ROOT, timeout=120)


def test_damaged_files_are_skipped_by_name_and_the_rest_shown(tmp_path):
  """A truncated or empty pickle, a pickled dict, a pickle of a foreign
  class, a truncated held-out JSON, one without heldout_loss, a leftover
  .tmp and a folder named like a result: one warning line each naming the
  file; the readable seeds and models still show."""
  d = tmp_path / "res"
  _write(str(d), "good", 6, [1.] * 20, accuracy=0.9)
  _write(str(d), "good", 12, [2.] * 20)
  whole = pickle.dumps([np.float32(1.)] * 20)
  (d / "seed18_eval_loss_record.pickle-good").write_bytes(whole[:30])
  (d / "seed24_eval_loss_record.pickle-good").write_bytes(b"")
  (d / "seed30_eval_loss_record.pickle-good").write_bytes(
      pickle.dumps({"loss": [1., 2.]}))
  marker = tmp_path / "ran"
  (d / "seed36_eval_loss_record.pickle-good").write_bytes(pickle.dumps(
      [getattr(os, "system")]))
  (d / "seed42_eval_loss_record.pickle-good.tmp").write_bytes(whole)
  (d / "seed48_eval_loss_record.pickle-good").mkdir()
  (d / "seed12_heldout_record-good.json").write_text('{"iteration": [0, 2')
  (d / "seed6_heldout_record-other.json").write_text(json.dumps(
      {"iteration": [0], "heldout_accuracy": [0.5]}))
  (d / "metatest_record-good.json").write_text('{"model_name": "go')
  (d / "seed6_heldout_record-good.json.tmp").write_text("{")
  out = _run(d)
  assert out.returncode == 0, out.stderr
  warnings = out.stderr.strip().splitlines()
  expected = {
      "seed18_eval_loss_record.pickle-good": "truncated pickle",
      "seed24_eval_loss_record.pickle-good": "empty or truncated pickle",
      "seed30_eval_loss_record.pickle-good": "holds a dict, not the list",
      "seed36_eval_loss_record.pickle-good": "not numbers",
      "seed42_eval_loss_record.pickle-good.tmp": "partly written",
      "seed6_heldout_record-good.json.tmp": "partly written",
      "seed48_eval_loss_record.pickle-good": "cannot read it",
      "seed12_heldout_record-good.json": "truncated or not JSON",
      "seed6_heldout_record-other.json": "has no 'heldout_loss'",
      "metatest_record-good.json": "truncated or not JSON (Unterminated "
                                   "string starting at: line 1 column 16 "
                                   "(char 15)); the model's problems are "
                                   "named from its files instead"}
  assert len(warnings) == len(expected), out.stderr
  for name, why in expected.items():
    line = [w for w in warnings if os.path.join(str(d), name) + ":" in w]
    assert len(line) == 1 and why in line[0], (name, out.stderr)
    assert line[0].startswith("python -m l2o_scale.results: warning: skipped ")
  assert not marker.exists()
  row = [l for l in out.stdout.splitlines() if "| good |" in l][0]
  assert "| good | 2 | 20 | 1.5 ± 0.71 | 0.9000 |" in row
  assert "10 damaged file(s) skipped" in out.stdout
  # Nothing readable at all: one line, exit 2.
  only = tmp_path / "only"
  only.mkdir()
  (only / "seed6_eval_loss_record.pickle-x").write_bytes(b"\x80\x04")
  out = _run(only)
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1] == (
      "python -m l2o_scale.results: error: no readable result files in {} "
      "(1 damaged; see the warnings above)".format(only))


def test_read_dir_names_the_damaged_file_without_a_skip_list(tmp_path):
  (tmp_path / "seed6_eval_loss_record.pickle-a").write_bytes(b"")
  with pytest.raises(ValueError, match=r"seed6_eval_loss_record\.pickle-a: "
                     r"empty or truncated pickle"):
    results_reading.read_dir(str(tmp_path))


@pytest.mark.parametrize("figure,message", [
    ("{tmp}/missing/cmp.png", "no folder {tmp}/missing; create it"),
    ("{tmp}/cmp.xyz", "has an unknown image format .xyz; end the name in "
     "one of .avif"),
    ("{tmp}/cmp", "has no extension"),
    ("{tmp}", "is a folder; give a file name in it"),
])
def test_figure_path_is_refused_before_any_work(save_dir, tmp_path, figure,
                                                message):
  figure = figure.format(tmp=tmp_path)
  out = _run(save_dir, "--figure", figure)
  assert out.returncode == 2 and out.stdout == ""
  line = out.stderr.strip().splitlines()
  assert len(line) == 1 and line[0].startswith(
      "python -m l2o_scale.results: error: --figure=" + figure)
  assert message.format(tmp=tmp_path) in line[0]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_figure_onto_a_read_only_location_is_refused(save_dir):
  """/proc takes no new files, not even from root (a chmod would not stop
  root)."""
  out = _run(save_dir, "--figure", "/proc/self/cmp.png")
  assert out.returncode == 2 and out.stdout == ""
  line = out.stderr.strip().splitlines()
  assert len(line) == 1 and line[0].startswith(
      "python -m l2o_scale.results: error: --figure=/proc/self/cmp.png: "
      "cannot write in /proc/self (")
  assert line[0].endswith("); give another path")


def test_diverged_seeds_are_not_shown_as_unrecorded(tmp_path):
  d = str(tmp_path)
  _write(d, "half", 6, [1.] * 10 + [0.5] * 10)
  _write(d, "half", 12, [1.] * 10 + [float("nan")] * 10)
  _write(d, "all", 6, [1.] * 10 + [float("inf")] * 10)
  _write(d, "all", 12, [float("nan")] * 20)
  rows = {row.run.model: row for row in
          results.summarize(results_reading.read_dir(d), last=10)}
  assert rows["half"].final_loss == (0.5, None, 1, 2)
  assert rows["all"].final_loss[2:] == (2, 2)
  assert rows["all"].heldout_accuracy[2:] == (0, 0)
  text = results.table(list(rows.values()))
  assert "| all | 2 | 20 | diverged (2/2 seeds) | - | - |" in text
  assert "| half | 2 | 20 | 0.5, 1/2 seeds diverged | - | - |" in text
  assert "diverged: the value is nan or inf" in text


def test_seeds_of_different_lengths_are_noted(tmp_path):
  d = str(tmp_path)
  _write(d, "short", 6, [1.] * 20)
  _write(d, "short", 12, [1.] * 30)
  runs = results_reading.read_dir(d)
  text = results.table(results.summarize(runs))
  assert ("short: its seeds ran different numbers of steps (20/30); each "
          "seed's final loss is over its own last steps, the figure cuts "
          "them to the shortest.") in text
  fig = results.figure(runs, str(tmp_path / "f.png"))
  assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
      "short (seeds cut to 20 steps)"]


def test_old_files_and_model_names_ending_like_a_problem_suffix(tmp_path):
  """Files without a run record (older versions): a name that ends in
  -problem<k> is a problem suffix only where the name has files of several
  problems; with a record, the record decides."""
  d = str(tmp_path)
  _write(d, "adam-problem3", 6, [1.] * 5)
  _write(d, "set", 6, [1.] * 5, suffix="-problem0")
  _write(d, "set", 6, [2.] * 5, suffix="-problem1")
  _write(d, "rec-problem0", 6, [3.] * 5)
  with open(os.path.join(d, "metatest_record-rec-problem0.json"), "w") as f:
    json.dump(result_files.run_record("rec-problem0", "Adam",
                                      [("include_mnist_mlp_problems",
                                        "MNIST MLP 784-20-10, sigmoid")]), f)
  _write(d, "rec-problem1", 6, [3.] * 5)  # no record: the whole name
  # Held-out records of several problems as older versions named them.
  for k in (0, 1):
    with open(os.path.join(d, "seed6_heldout_record-set.json-problem{}".format(
        k)), "w") as f:
      json.dump({"iteration": [0, 5], "heldout_accuracy": [0.1, 0.5 + k / 4],
                 "heldout_loss": [2., 1.]}, f)
  runs = results_reading.read_dir(d)
  assert [runs[r][6]["heldout"]["heldout_accuracy"][-1] for r in sorted(
      runs, key=lambda r: (r.model, r.problem or 0)) if r.model == "set"] == [
          0.5, 0.75]
  assert sorted((r.model, r.problem, r.label) for r in runs) == [
      ("adam-problem3", None, None), ("rec-problem0", None,
                                      "MNIST MLP 784-20-10, sigmoid"),
      ("rec-problem1", None, None), ("set", 0, None), ("set", 1, None)]


def test_figure_names_each_problem_and_shows_every_accuracy_point(tmp_path):
  """One row of panels per problem, titled by its label (from the held-out
  record's problem set); with two records per run (step 0 and the end) the
  accuracy axis spans both, so no line enters from below the frame;
  overlapping lines differ in style and marker."""
  d = str(tmp_path)
  for model, acc in (("adam", 0.909), ("l2o", 0.893), ("l2o-b", 0.893)):
    for seed in (6, 12):
      _write(d, model, seed, list(np.linspace(2., 0.1, 300)), accuracy=acc)
      path = os.path.join(d, "seed{}_heldout_record-{}.json".format(seed,
                                                                    model))
      with open(path) as f:
        record = json.load(f)
      record["problem_set"] = "include_mnist_mlp_problems"
      with open(path, "w") as f:
        json.dump(record, f)
  _write(d, "other", 6, [1.] * 300)
  fig = results.figure(results_reading.read_dir(d), str(tmp_path / "f.svg"))
  titles = [ax.get_title().splitlines()[0] for ax in fig.axes]
  assert titles == ["MNIST MLP 784-20-10, sigmoid"] * 2 + [
      "problem not recorded"] * 2
  low, high = fig.axes[1].get_ylim()
  assert -0.2 < low < 0.1 and 0.909 < high < 1.1
  assert "second half" not in fig.axes[1].get_ylabel()
  lines = [l for l in fig.axes[1].get_lines()]
  assert len({(l.get_linestyle(), l.get_marker()) for l in lines}) == 3
  assert os.path.getsize(str(tmp_path / "f.svg")) > 1000


def test_the_accuracy_axis_zooms_to_the_second_half_of_long_records(
    tmp_path):
  """Records every tenth of a run: the axis spans the second half's
  values (where the optimizers differ), not the 0.1 of step 0, and says
  so."""
  d = str(tmp_path)
  for model, final in (("a", 0.909), ("b", 0.893)):
    _write(d, model, 6, list(np.linspace(2., 0.1, 100)), accuracy=final)
    path = os.path.join(d, "seed6_heldout_record-{}.json".format(model))
    with open(path) as f:
      record = json.load(f)
    record["iteration"] = list(range(0, 101, 10))
    record["heldout_accuracy"] = [0.1] + list(np.linspace(0.85, final, 10))
    for key in ("heldout_loss", "train_loss", "train_accuracy"):
      record[key] = list(np.linspace(record[key][0], record[key][-1], 11))
    with open(path, "w") as f:
      json.dump(record, f)
  fig = results.figure(results_reading.read_dir(d), str(tmp_path / "f.png"))
  low, high = fig.axes[1].get_ylim()
  assert 0.8 < low < 0.87 and 0.909 < high < 0.95
  assert "second half" in fig.axes[1].get_ylabel()


@pytest.mark.parametrize("mode,message", [
    ("ro", "error: --figure={fig}: cannot write in {disk} (Read-only file "
     "system); give another path"),
    ("full", "error: cannot write {fig}: No space left on device"),
])
def test_figure_onto_a_read_only_or_full_disk_is_one_line(save_dir, tmp_path,
                                                          mode, message):
  """The disk is a fault-injected folder (tests/faultfs.py); a read-only one
  is refused before any work, a full one when the figure is written, with
  no partial file left."""
  from tests import faultfs  # pylint: disable=g-import-not-at-top
  disk = tmp_path / "disk"
  disk.mkdir()
  fig = disk / "cmp.png"
  out = subprocess.run(
      faultfs.command(disk, mode, os.path.join(ROOT, "l2o_scale",
                                               "results.py"),
                      [save_dir, "--figure", str(fig)]),
      capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert out.returncode == 2, out.stderr
  assert out.stderr.strip().splitlines() == [
      "python -m l2o_scale.results: " + message.format(fig=fig, disk=disk)]
  assert ("| my-run |" in out.stdout) == (mode == "full")
  assert os.listdir(disk) == []


def test_the_originals_python2_pickles_and_every_protocol_load(tmp_path):
  """The original evaluation (Python 2) pickled lists of numpy.float32 with
  cPickle's protocol 2, strings as bytes: they load (as latin1), as do the
  lists and arrays of every protocol Python 3 writes."""
  py2 = (b"\x80\x02]q\x00(cnumpy.core.multiarray\nscalar\nq\x01cnumpy\ndtype"
         b"\nq\x02U\x02f4K\x00K\x01\x87Rq\x03(K\x03U\x01<NNNJ\xff\xff\xff\xff"
         b"J\xff\xff\xff\xffK\x00tbU\x04\x00\x00\xc0?\x86Rq\x04h\x01h\x03U\x04"
         b"\x00\x00\x80>\x86Rq\x05e.")
  (tmp_path / "seed6_eval_loss_record.pickle-orig").write_bytes(py2)
  for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
    for name, value in (("list", [np.float32(1.5), np.float32(.25)]),
                        ("array", np.array([1.5, .25], np.float32))):
      with open(tmp_path / "seed{}_eval_loss_record.pickle-{}".format(
          protocol, name), "wb") as f:
        pickle.dump(value, f, protocol=protocol)
  runs = results_reading.read_dir(str(tmp_path))
  assert sorted(r.model for r in runs) == ["array", "list", "orig"]
  for seeds in runs.values():
    for entry in seeds.values():
      assert entry["loss"].tolist() == [1.5, .25]


def test_a_folder_given_twice_shows_once(save_dir):
  out = _run(save_dir, save_dir + "/",
             os.path.join(save_dir, "..", "results"))
  assert out.returncode == 0, out.stderr
  assert sum("| my-run |" in l for l in out.stdout.splitlines()) == 1
  assert "| directory |" not in out.stdout
