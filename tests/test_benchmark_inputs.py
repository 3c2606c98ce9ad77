"""The task-suite benchmark's bad inputs and faults: every one a one-line
refusal naming the flag or file before any work, or the right result.

Why: a benchmark run takes hours and its stored runs are reused; a stored
run reused for a changed checkpoint or data file, a damaged stored run, a
bad flag or an unwritable ``--out`` must never give silently wrong numbers,
a traceback, or a half-written file kept as if complete.
"""

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys

import matplotlib
import pytest

from l2o_scale import pretrained
from l2o_scale.benchmark import __main__ as cli
from l2o_scale.benchmark import config as bench_config
from l2o_scale.benchmark import figures
from l2o_scale.benchmark import optimizers
from l2o_scale.benchmark import report
from l2o_scale.benchmark import suite
from l2o_scale.benchmark import tasks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A few seconds: one generated task, 5 steps, Adam alone (2 learning rates).
TINY = ["--size=small", "--tasks=regression_synthetic", "--budgets=5",
        "--baselines=adam", "--optimizer=adam:1e-3", "--no_report"]


def _main(argv, capsys):
  """(exit code, stderr lines) of the command line."""
  try:
    code = cli.main(argv)
  except SystemExit as e:
    code = e.code
  return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("argv, message", [
    (["--tasks="], "--tasks is empty: give at least one (logreg_mnist, "),
    (["--baselines="], "--baselines is empty"),
    (["--budgets="], "--budgets is empty"),
    (["--tasks=logreg_mnist,cnn_mnist,logreg_mnist"],
     "--tasks names logreg_mnist more than once"),
    (["--budgets=50,50"], "--budgets names 50 more than once"),
    (["--tasks=logreg_mnist,"], "--tasks: unknown task ''; the tasks: "),
    (["--baselines=adam,rmsprop"], "--baselines: unknown baseline "
     "'rmsprop'; the baselines: adam, adamw, sgd"),
    (["--budgets=-5"], "--budgets must be positive step counts, not -5"),
    (["--optimizer=adam:-1"], "--optimizer='adam:-1': the learning rate "
     "must be a positive finite number, not -1"),
    (["--optimizer=adam:0"], "must be a positive finite number, not 0"),
    (["--optimizer=adam:nan"], "must be a positive finite number, not nan"),
    (["--optimizer=sgd:inf"], "must be a positive finite number, not inf"),
    (["--optimizer=adam:fast"], "--optimizer='adam:fast': the learning rate "
     "after ':' must be a number, e.g. adam:1e-3"),
    (["--optimizer=adam:"], "the learning rate after ':' must be a number"),
    (["--optimizer=:1e-3"], "--optimizer=':1e-3' names no optimizer"),
    (["--optimizer=checkpoint:"], "give the checkpoint after 'checkpoint:'"),
    (["--optimizer=checkpoint:/nonexistent/model.ckpt-3"],
     "--optimizer='checkpoint:/nonexistent/model.ckpt-3': No checkpoint"),
    (["--optimizer=import:nodots"], "give a dotted path after 'import:'"),
    (["--optimizer=import:no_such_module_anywhere.make"],
     "cannot import no_such_module_anywhere"),
    (["--optimizer=import:os.path.no_such_function"],
     "os.path has no callable 'no_such_function'"),
    (["--optimizer=+hold_zero_gradients"], "goes with a learned optimizer"),
    (["--optimizer=import:os.getcwd"], "getcwd() returned a str ("),
    (["--optimizer=import:builtins.dict"], "builtins.dict() returned a dict "
     "({}), not a Keras optimizer"),
])
def test_bad_flag_is_one_line_naming_it_before_any_work(argv, message,
                                                        capsys, tmp_path):
  out = tmp_path / "never-written"
  code, err = _main(argv + ["--out={}".format(out)], capsys)
  assert code == 2
  assert len(err) == 1 and message in err[0], err
  assert not out.exists()


def test_data_and_checkpoint_are_checked_before_any_work(tmp_path, capsys):
  """A missing MNIST folder, a batch larger than the training split, a
  checkpoint without the run record that rebuilds its optimizer, a
  checkpoint folder that does not say which is its latest: one line each,
  and --out never created."""
  folder = tmp_path / "ckpt"
  folder.mkdir()
  for path in glob.glob(pretrained.checkpoint("l2o-scale") + ".*"):
    shutil.copy(path, folder)
  out = tmp_path / "never-written"
  for argv, message in [
      (["--data_dir={}".format(tmp_path / "none"), "--tasks=logreg_mnist"],
       "MNIST train split not found"),
      (["--batch_size=600"], "--batch_size=600 is larger than the training "
       "split of regression_synthetic (512 examples, the small size's tiny "
       "data)"),
      (["--optimizer=checkpoint:{}".format(folder / "model.ckpt-0")],
       "has no run_record.json"),
      (["--optimizer=checkpoint:{}".format(folder)],
       "--optimizer='checkpoint:{}': {} holds model.ckpt-0 but no "
       "'checkpoint' state file".format(folder, folder))]:
    code, err = _main(TINY + argv + ["--out={}".format(out)], capsys)
    assert code == 2 and len(err) == 1 and message in err[-1], err
    assert not out.exists()


def test_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
  out = tmp_path / "results.json"
  out.write_text("{}")
  code, err = _main(TINY + ["--out={}".format(out)], capsys)
  assert code == 2
  assert err == ["error: --out={} is a file, not a folder: give another "
                 "--out".format(out)] or (
                     len(err) == 1 and "--out={} is a file".format(out)
                     in err[0]), err
  assert out.read_text() == "{}"


def _under_faults(disk, mode, args, pages=1):
  from tests import faultfs  # pylint: disable=g-import-not-at-top
  return subprocess.run(
      faultfs.command(disk, mode, os.path.join(
          ROOT, "l2o_scale", "benchmark", "__main__.py"), args, pages),
      capture_output=True, text=True, cwd=ROOT, timeout=600,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _files(folder):
  return sorted(os.path.relpath(os.path.join(d, f), folder)
                for d, _, names in os.walk(folder) for f in names)


def test_read_only_out_is_one_line_before_any_work(tmp_path, data_dir):
  """A read-only disk (tests/faultfs.py): refused before any training, one
  line naming --out."""
  disk = tmp_path / "disk"
  disk.mkdir()
  done = _under_faults(disk, "ro", TINY + ["--out={}".format(disk / "b"),
                                           "--data_dir=" + data_dir])
  lines = done.stderr.strip().splitlines()
  assert done.returncode == 2, done.stderr
  assert "--out={}: cannot write there (Read-only file system)".format(
      disk / "b") in lines[-1]
  assert "seed 0" not in done.stdout  # nothing trained
  assert _files(disk) == []


def test_full_disk_is_one_line_and_keeps_only_whole_files(tmp_path,
                                                          data_dir):
  """A disk of one 4 KiB page fills at the second stored run: one line
  naming the file; the first stored run is whole, nothing half-written
  (no .tmp), no results.json."""
  disk = tmp_path / "disk"
  disk.mkdir()
  out = disk / "b"
  done = _under_faults(disk, "full", TINY + ["--out={}".format(out),
                                             "--data_dir=" + data_dir])
  lines = done.stderr.strip().splitlines()
  assert done.returncode == 2, done.stderr
  assert "No space left on device" in lines[-1], lines
  assert "cannot write {}".format(out / "runs") in lines[-1]
  stored = [f for f in _files(out) if not f.startswith("tensorboard")]
  assert len(stored) == 1 and stored[0].startswith("runs/"), stored
  with open(out / stored[0], encoding="utf-8") as f:
    assert json.load(f)["record"]["steps"][-1] == 5


def _tiny_config(out, data_dir):
  return bench_config.Config.for_size(
      "small", tasks=("regression_synthetic",), budgets=(5,),
      baselines=("adam",), untuned=(), optimizer="adam:1e-3", out=str(out),
      data_dir=data_dir)


def test_damaged_or_incomplete_stored_runs_are_named_and_run_again(
    tmp_path, data_dir):
  config = _tiny_config(tmp_path / "b", data_dir)
  first = suite.run(config, log=lambda line: None)
  runs = tmp_path / "b" / "runs"
  paths = sorted(runs.iterdir())
  assert len(paths) == 3  # the optimizer, Adam at 2 learning rates
  text = paths[0].read_text()
  paths[0].write_text(text[:text.index('"key": "') + 12])  # truncated
  stored = json.loads(paths[1].read_text())
  del stored["record"]["final_train_loss"]
  paths[1].write_text(json.dumps(stored))
  lines = []
  again = suite.run(config, log=lines.append)
  damaged = {p: [l for l in lines if str(p) in l] for p in paths[:2]}
  assert len([l for l in lines if "damaged" in l]) == 2
  truncated, = damaged[paths[0]]
  assert truncated.endswith("running it again") and (
      "Unterminated string" in truncated)
  incomplete, = damaged[paths[1]]
  assert "its record lacks final_train_loss" in incomplete
  assert again["runs_reused"] == 1
  assert sorted(again["runs_rerun"]) == [str(p) for p in paths[:2]]
  for path in paths[:2]:  # stored again, whole
    assert "final_train_loss" in json.loads(path.read_text())["record"]
  assert [e["task"] for e in again["entries"]] == [
      e["task"] for e in first["entries"]]
  # Rewritten, they are reused.
  assert suite.run(config, log=lambda line: None)["runs_reused"] == 3


def _copy_mnist(source, target):
  shutil.copytree(source, target)
  for name in os.listdir(target):
    os.chmod(os.path.join(target, name), 0o644)


def test_a_changed_data_file_never_reuses_stored_runs(tmp_path, data_dir):
  """The key holds a digest of the data a task uses: the same files in
  another folder give the same key, a changed label another."""
  a, b = tmp_path / "a", tmp_path / "b"
  _copy_mnist(data_dir, a)
  _copy_mnist(data_dir, b)
  task = tasks.get("logreg_mnist")

  def key(folder):
    tasks._mnist.cache_clear()  # pylint: disable=protected-access
    config = bench_config.Config.for_size("medium", data_dir=str(folder))
    runner = suite.TaskRunner(task, 5, config, None, log=lambda line: None)
    return runner.key("adam", 1e-3, 0)

  before = key(a)
  assert key(b) == before and str(a) not in json.dumps(before)
  labels = a / "train-labels-idx1-ubyte.gz"
  with gzip.open(labels) as f:
    data = bytearray(f.read())
  data[8] = (data[8] + 1) % 10  # the first label
  with gzip.open(labels, "wb") as f:
    f.write(bytes(data))
  assert key(a) != before


def _checkpoint_copy(tmp_path):
  folder = tmp_path / "ckpt"
  shutil.copytree(pretrained.folder("l2o-scale"), folder)
  return folder, "checkpoint:{}".format(folder / pretrained.CHECKPOINT_NAME)


def test_a_changed_checkpoint_never_reuses_stored_runs(tmp_path):
  """``checkpoint:PATH`` is keyed by a digest of the checkpoint files and
  of the optimizer flags of its run record: another file at the same path
  gets other keys. The checkpoint is resolved once."""
  folder, spec = _checkpoint_copy(tmp_path)
  make, name = optimizers.factory(spec)
  assert name.startswith(spec + "@") and name == optimizers.identity(spec)
  assert type(make(10)).__name__ == "LearnedOptimizer"
  data = folder / (pretrained.CHECKPOINT_NAME + ".data-00000-of-00001")
  content = bytearray(data.read_bytes())
  content[-1] ^= 1
  data.write_bytes(bytes(content))
  changed = optimizers.identity(spec)
  assert changed != name
  record = folder / "run_record.json"
  flags = json.loads(record.read_text())
  flags["optimizer_flags"]["max_log_lr"] = -5.
  record.write_text(json.dumps(flags))
  assert optimizers.identity(spec) not in (name, changed)
  # The folder names its latest checkpoint: the same digest as its prefix.
  folder_spec = "checkpoint:{}".format(folder)
  (folder / "checkpoint").write_text(
      'model_checkpoint_path: "model.ckpt-0"\n')
  assert optimizers.identity(folder_spec).split("@")[1] == (
      optimizers.identity(spec).split("@")[1])


def test_import_spec_is_keyed_by_its_source(tmp_path, monkeypatch):
  module = tmp_path / "my_bench_optimizer.py"
  module.write_text("import keras\ndef make():\n"
                    "  return keras.optimizers.Adam(1e-3)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  before = optimizers.identity("import:my_bench_optimizer.make")
  module.write_text(module.read_text() + "# changed\n")
  assert optimizers.identity("import:my_bench_optimizer.make") != before


# --------------------------------------------------------------- figures
def _entry(same_adam_and_adamw=True, seeds=1):
  steps = [0, 10, 20, 30, 40, 50]
  run = dict(steps=steps, train_loss=[2., 1., .6, .5, .45, .42],
             final_train_loss=.42)
  other = dict(run, train_loss=[2., .6, .4, .3, .3, .2], final_train_loss=.2)
  baselines = {name: dict(runs=[run if same_adam_and_adamw or name == "adam"
                                else other] * seeds, chosen_lr=1e-2)
               for name in ("adam", "adamw")}
  baselines["sgd"] = dict(runs=[other] * seeds, chosen_lr=0.1)
  return dict(task="regression_synthetic",
              family="regression (generated data)", budget=50,
              optimizer=dict(runs=[other] * seeds), baselines=baselines)


def test_every_curve_stays_visible_where_lines_coincide(tmp_path,
                                                        monkeypatch):
  """Adam's and AdamW's curves are the same here: each line has its own
  dash pattern and marker, and a line drawn over another is thinner, so the
  one beneath shows on both sides."""
  figs = []
  monkeypatch.setattr(figures, "save", lambda fig, path: figs.append(fig))
  figures.curves(_entry(), str(tmp_path / "c.png"), label="l2o-scale")
  ax = figs[0].axes[0]
  lines = sorted(ax.get_lines(), key=lambda l: l.get_zorder())
  assert [l.get_label() for l in lines] == [
      "l2o-scale", "tuned adam (lr 0.01)", "tuned adamw (lr 0.01)",
      "tuned sgd (lr 0.1)"]
  looks = {(l.get_linestyle(), l.get_marker()) for l in lines}
  assert len(looks) == len(lines)
  adam, adamw = lines[1], lines[2]
  assert adamw.get_zorder() > adam.get_zorder()
  assert adamw.get_linewidth() < adam.get_linewidth()
  assert adamw.get_markersize() < adam.get_markersize()
  matplotlib.pyplot.close("all")


def test_titles_and_pages_say_each_thing_once_and_in_good_english():
  assert figures.title(_entry(), 1) == (
      "regression_synthetic: regression (generated data), 50 steps, 1 seed")
  assert figures.title(_entry(), 3).endswith("50 steps, 3 seeds")
  results = dict(
      config=dict(optimizer="adam:1e-3", size="small",
                  tasks=["regression_synthetic"], budgets=[50], seeds=1,
                  batch_size=32, eval_points=5, grid="small",
                  grid_extension=0, select_on="metric",
                  baselines=["adam", "adamw", "sgd"]),
      machine=dict(cpu="cpu", cpu_count=2, load_average_1min_at_start=1.,
                   tensorflow="2", keras="3", python="3"),
      date="2026-01-01T00:00:00", wall_time_s=1., runs_reused=1,
      runs_wall_s_sum=1., peak_memory_mib=1., entries=[])
  text = " ".join(report._header(results))  # pylint: disable=protected-access
  assert "(s)" not in text and "half-decade" not in text
  assert "1 task, budget of 50 steps, 1 seed per run" in text
  assert "1 stored run reused" in text
  results["config"].update(grid_extension=1, seeds=3, budgets=[50, 500])
  text = " ".join(report._header(results))  # pylint: disable=protected-access
  assert "grown up to 1 half-decade past an end" in text
  assert "budgets of 50 and 500 steps, 3 seeds per run" in text


def test_report_refuses_a_json_that_is_not_benchmark_results(tmp_path,
                                                             capsys):
  path = tmp_path / "other.json"
  path.write_text(json.dumps({"entries": []}))
  assert report.main([str(path), "--out", str(tmp_path / "r")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "is not the results.json of" in err[0]
  assert not (tmp_path / "r").exists()
  missing = str(tmp_path / "missing.json")
  assert report.main([str(path), "--against", missing, "--out",
                      str(tmp_path / "r")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == ["error: cannot read {}: No such file or directory".format(
      missing)] or (len(err) == 1 and missing in err[0]), err


def test_listing_the_tasks_needs_no_tensorflow():
  """--list_tasks imports neither TensorFlow nor Keras (fast, and none of
  their start-up messages)."""
  code = ("import sys; from l2o_scale.benchmark import __main__ as m; "
          "assert m.main(['--list_tasks']) == 0; "
          "print(sorted(x for x in ('tensorflow', 'keras') "
          "if x in sys.modules))")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, cwd=ROOT, timeout=120, check=True)
  lines = done.stdout.splitlines()
  assert lines[-1] == "[]", done.stdout
  assert [l.split()[0] for l in lines[:-1] if not l.startswith(" ")] == (
      list(tasks.REGISTRY))
  assert done.stderr == ""
  # Wrapped to the terminal's width, the descriptions whole.
  wrapped = cli.task_lines(width=60)
  assert max(len(l) for l in wrapped) <= 60
  assert " ".join(" ".join(wrapped).split()).count("ELU MLP fitting a fixed "
                                                   "random tanh network") == 1


def test_a_damaged_shipped_optimizer_is_one_line_saying_what_restores_it(
    tmp_path, monkeypatch):
  """A shipped name whose run record is damaged (a copy of the shipped
  folder; the real one is never touched): refused naming the file and that
  reinstalling restores it, never a traceback or advice to delete it."""
  root = tmp_path / "pretrained"
  shutil.copytree(pretrained.ROOT, root,
                  ignore=shutil.ignore_patterns("*.py", "__pycache__"))
  monkeypatch.setattr(pretrained, "ROOT", str(root))
  record = os.path.join(pretrained.folder("l2o-scale"), "run_record.json")
  with open(record, "r+", encoding="utf-8") as f:
    f.truncate(30)
  with pytest.raises(pretrained.DamagedError) as e:
    optimizers.factory("l2o-scale")
  assert str(e.value).startswith("the shipped file {} is damaged (".format(
      record)) and "reinstalling the package restores it" in str(e.value)
  assert report.main(["--claims"]) == 2
