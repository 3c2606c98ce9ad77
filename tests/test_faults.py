"""Fault injection: bad data, damaged checkpoints, run records, locks, signals,
disks and the cluster launcher. Each fault ends in an exit status, one line of
the script's own saying what is wrong and what to do, and no file of the run
changed. metarun.py's refusals run in a process of their own (its absl flags
are global: ``_metarun_cases`` parses each case's flags and calls ``main``),
one for all the tests on copies of a trained dir (the ``refusals`` fixture);
metatest.py's run in this process, as tests/test_metatest.py does."""

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import metatest
from l2o_scale import keras_optimizer
from l2o_scale.meta_testing import metatest_config
from l2o_scale.meta_testing import metatest_run
from l2o_scale.meta_testing import tested_optimizer
from l2o_scale import pretrained
from l2o_scale.runs import checkpoints
from l2o_scale.runs import dir_lock
from l2o_scale.runs import run_record
from l2o_scale import cluster
from problems import datasets
from tests.paths import mnist_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBDIR = "HierarchicalRNN_GRUCell_20_2"
TINY = ["--fix_unroll=True", "--fix_num_steps=20", "--fix_num_steps_eval=20",
        "--evaluation_epochs=1", "--mini_batch_size=200", "--summaries=False"]
FLAGS = metatest.FLAGS


def _metatest_config():
  """The config of metatest.py's parsed flags (parse_metatest)."""
  return metatest.build_config(FLAGS)


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
              PYTHONPATH=os.pathsep.join(
                  [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def _script(name, *args, cwd=ROOT):
  return subprocess.run([sys.executable, os.path.join(ROOT, name)] +
                        list(args), capture_output=True, text=True,
                        env=_env(), cwd=cwd, timeout=600)


def _own_line(stderr, script):
  """The script's one line on stderr (TF's start-up lines aside)."""
  assert "Traceback" not in stderr, stderr[-3000:]
  own = [l for l in stderr.splitlines() if l.startswith(script + ":")]
  assert len(own) == 1, stderr[-3000:]
  return own[0]


def _files(folder):
  """relative path -> sha256 of every file under ``folder``."""
  out = {}
  for base, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(base, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(
            f.read()).hexdigest()
  return out


RUNNER = textwrap.dedent("""
    import contextlib, io, json, sys
    import metarun
    from absl import flags
    F = metarun.FLAGS
    out = {}
    for name, args, result in json.load(open(sys.argv[1])):
      F.unparse_flags()
      F(["metarun.py"] + args)
      err, std = io.StringIO(), io.StringIO()
      with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
        if result is None:
          rc = metarun.main(["metarun.py"])
        else:
          rc = metarun.report_end(
              metarun.parse_config(["metarun.py"] + args), result, "logdir")
      out[name] = [rc, err.getvalue(), std.getvalue()]
    print("RESULTS " + json.dumps(out))
    """)


def _metarun_cases(tmp_path, cases):
  """{name: (status, stderr, stdout)} of ``metarun.main`` for each
  ``(name, args, None)``, or of ``metarun.report_end(result)`` for each
  ``(name, args, result)``, all in one process."""
  spec = tmp_path / "cases.json"
  spec.write_text(json.dumps(cases))
  done = subprocess.run([sys.executable, "-c", RUNNER, str(spec)],
                        capture_output=True, text=True, env=_env(), cwd=ROOT,
                        timeout=600)
  results = [l for l in done.stdout.splitlines() if l.startswith("RESULTS ")]
  assert done.returncode == 0 and results, done.stderr[-3000:]
  return {k: tuple(v) for k, v in json.loads(results[0][8:]).items()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A train dir of 2 meta-iterations (model.ckpt-0..2, run record)."""
  train_dir = tmp_path_factory.mktemp("trained")
  done = _script("metarun.py", "--train_dir={}".format(train_dir),
                 "--data_dir={}".format(mnist_dir()),
                 "--num_meta_iterations=2", *TINY)
  assert done.returncode == 0, done.stderr[-3000:]
  return str(train_dir), done.stdout


def _copy(trained_dir, tmp_path, name):
  target = str(tmp_path / name)
  shutil.copytree(trained_dir, target)
  return target, os.path.join(target, SUBDIR)


@pytest.fixture
def parse_metatest():
  def parse(*args):
    FLAGS.unparse_flags()
    FLAGS(["metatest.py"] + list(args))
    return FLAGS
  yield parse
  FLAGS.unparse_flags()
  FLAGS(["metatest.py"])


# ------------------------------------------------------------------- data
def _edit_gz(path, offset, value):
  with gzip.open(path, "rb") as f:
    raw = bytearray(f.read())
  raw[offset] = value
  with gzip.open(path, "wb") as f:
    f.write(bytes(raw))


def test_data_faults(tmp_path, data_dir):
  bad = tmp_path / "mnist"
  bad.mkdir()
  for name in os.listdir(data_dir):
    if name.endswith(".gz"):
      shutil.copy(os.path.join(data_dir, name), bad / name)
  _edit_gz(bad / "train-labels-idx1-ubyte.gz", 8 + 5, 12)  # header: 8 bytes
  _edit_gz(bad / "t10k-labels-idx1-ubyte.gz", 8 + 7, 200)
  before = _files(bad)
  run = _script("metarun.py", "--train_dir={}".format(tmp_path / "run"),
                "--data_dir={}".format(bad), "--num_meta_iterations=1", *TINY)
  assert run.returncode == 2
  assert _own_line(run.stderr, "metarun.py") == (
      "metarun.py: {} holds label 12 at row 5 (1 label(s) outside the classes "
      "0..9): the file is corrupt or not of this dataset; download it "
      "again.".format(bad / "train-labels-idx1-ubyte.gz"))
  assert not (tmp_path / "run").exists()
  with pytest.raises(datasets.DataNotFoundError,
                     match="t10k-labels-idx1-ubyte.gz holds label 200 at "
                     "row 7"):
    datasets.mnist(train=False, data_dir=str(bad))
  (bad / "t10k-labels-idx1-ubyte.gz").unlink()
  (bad / "t10k-labels-idx1-ubyte").write_bytes(b"")
  with pytest.raises(datasets.DataNotFoundError,
                     match=r"t10k-labels-idx1-ubyte is truncated \(0 bytes"):
    datasets.mnist(train=False, data_dir=str(bad))
  cifar = tmp_path / "cifar" / "cifar-10-batches-py"
  cifar.mkdir(parents=True)
  for name in ["data_batch_{}".format(i) for i in range(1, 6)]:
    (cifar / name).write_bytes(b"\x80\x04not a pickle")
  with pytest.raises(datasets.DataNotFoundError,
                     match="data_batch_1 is not a CIFAR-10 python batch"):
    datasets.cifar10(train=True, data_dir=str(tmp_path / "cifar"))
  binary = tmp_path / "cifar_bin" / "cifar-10-batches-bin"
  binary.mkdir(parents=True)
  (binary / "test_batch.bin").write_bytes(bytes(3073 * 2 + 5))
  with pytest.raises(datasets.DataNotFoundError,
                     match=r"test_batch.bin is not a CIFAR-10 binary batch "
                     r"\(6151 bytes"):
    datasets.cifar10(train=False, data_dir=str(tmp_path / "cifar_bin"))
  before.pop("t10k-labels-idx1-ubyte.gz")
  before["t10k-labels-idx1-ubyte"] = hashlib.sha256(b"").hexdigest()
  assert _files(bad) == before


# ------------------------------------------------------------ checkpoints
def _damage(logdir, how):
  data = os.path.join(logdir, "model.ckpt-2.data-00000-of-00001")
  index = os.path.join(logdir, "model.ckpt-2.index")
  state = os.path.join(logdir, "checkpoint")
  if how == "truncated_data":
    with open(data, "r+b") as f:
      f.truncate(100)
  elif how == "garbled_index":
    with open(index, "wb") as f:
      f.write(os.urandom(3000))
  elif how == "empty_index":
    open(index, "w").close()
  elif how == "missing_data":
    os.remove(data)
  elif how == "garbled_state":
    with open(state, "w") as f:
      f.write("garbage\x01\n")
  elif how == "no_state":
    os.remove(state)
  elif how == "state_names_deleted":
    for name in os.listdir(logdir):
      if name.startswith("model.ckpt-2."):
        os.remove(os.path.join(logdir, name))
  elif how == "state_of_other_folder":
    with open(state, "w") as f:
      f.write('model_checkpoint_path: "/elsewhere/{}/model.ckpt-2"\n'.format(
          SUBDIR))
  return {"truncated_data": data, "garbled_index": index,
          "empty_index": index, "missing_data": data}.get(how, state)


RESUME_FAULTS = ["truncated_data", "garbled_index", "empty_index",
                 "missing_data", "garbled_state", "no_state",
                 "state_names_deleted", "state_of_other_folder"]


def _checkpoint_fault_cases(trained_dir, folder, data_dir):
  """Copies of ``trained_dir`` damaged each way (and one named by its log
  dir): (how -> (train dir, log dir, file the refusal names, its files),
  metarun cases resuming each)."""
  dirs, cases = {}, []
  for how in RESUME_FAULTS + ["as_train_dir"]:
    train_dir, logdir = _copy(trained_dir, folder, how)
    named = _damage(logdir, how) if how != "as_train_dir" else logdir
    dirs[how] = (train_dir, logdir, named, _files(train_dir))
    cases.append((how, ["--train_dir={}".format(
        logdir if how == "as_train_dir" else train_dir),
                        "--data_dir={}".format(data_dir),
                        "--num_meta_iterations=3"] + TINY, None))
  return dirs, cases


def _run_record_cases(trained_dir, folder, data_dir):
  """Copies of ``trained_dir`` without or with a damaged run record, and a
  file where a train dir should be: (their paths and files, metarun cases
  on them and of its end-of-run verdict)."""
  data = "--data_dir={}".format(data_dir)
  no_record, no_record_log = _copy(trained_dir, folder, "no_record")
  os.remove(run_record.path(no_record_log))
  other, _ = _copy(trained_dir, folder, "other")
  damaged, damaged_log = _copy(trained_dir, folder, "damaged")
  record = run_record.read(damaged_log)
  record["optimizer_flags"] = [1, 2]
  with open(run_record.path(damaged_log), "w") as f:
    json.dump(record, f)
  a_file = folder / "a_file"
  a_file.write_text("keep")
  paths = dict(no_record=no_record, no_record_log=no_record_log,
               before=_files(no_record), other=other,
               other_before=_files(other), damaged_log=damaged_log,
               a_file=a_file)
  same = ["--num_meta_iterations=2"] + TINY
  return paths, [
      ("wrong", ["--train_dir=" + no_record, data,
                 "--num_gradient_scales=3"] + same, None),
      ("right", ["--train_dir=" + no_record, data] + same, None),
      ("all_differ", ["--train_dir=" + other, data, "--num_gradient_scales=3",
                      "--max_log_lr=-3", "--rms_decay=0.5"] + same, None),
      ("idle_regularizer", ["--train_dir=" + other, data,
                            "--reg_option=hessian-esd"] + same, None),
      ("damaged", ["--train_dir=" + damaged, data] + same, None),
      ("under_a_file", ["--train_dir={}".format(a_file / "run"), data] + same,
       None),
      ("learned_nothing", same, dict(
          best_evaluation=2.3, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=5,
          best_model_idx=1, evaluations=5, first_evaluation=2.3)),
      ("learned", same, dict(
          best_evaluation=2.1, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=5,
          best_model_idx=4, evaluations=5, first_evaluation=2.3)),
      ("robust_learned", same + ["--selection=robust"], dict(
          best_evaluation=0.05, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=5,
          best_model_idx=4, evaluations=5, first_evaluation=0.4)),
      ("one_evaluation", same, dict(
          best_evaluation=2.1, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=1,
          best_model_idx=1, evaluations=1, first_evaluation=2.1)),
      ("curriculum_learned_nothing", same + ["--if_cl=True"], dict(
          best_evaluation=1.9, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=5,
          best_model_idx=1, evaluations=5, first_evaluation=2.3)),
      ("curriculum_learned", same + ["--if_cl=True"], dict(
          best_evaluation=2.5, last_checkpoint="c",
          best_checkpoint="logdir/model.ckpt-0", meta_iterations=5,
          best_model_idx=3, evaluations=5, first_evaluation=2.3)),
  ]


def _data_change_cases(trained_dir, folder, data_dir):
  """A copy of ``trained_dir`` and of the MNIST folder: (their paths and the
  train dir's files, metarun cases resuming it with the other data)."""
  other_data = folder / "other_mnist"
  shutil.copytree(data_dir, other_data)
  train_dir, _ = _copy(trained_dir, folder, "run")
  paths = dict(train_dir=train_dir, other_data=other_data,
               before=_files(train_dir))
  same = ["--train_dir=" + train_dir, "--num_meta_iterations=2"] + TINY
  return paths, [
      ("other", same + ["--data_dir={}".format(other_data)], None),
      ("allowed", same + ["--data_dir={}".format(other_data),
                          "--allow_data_change=True"], None),
      ("inf", same + ["--data_dir={}".format(data_dir),
                      "--meta_learning_rate=inf"], None),
  ]


@pytest.fixture(scope="module")
def refusals(trained, tmp_path_factory):
  """{group: (setup, {case: (status, stderr, stdout)}, {dir: its files right
  after the cases ran})} of the metarun cases of the tests on copies of the
  trained dir (checkpoint faults, run records, a data change), all run in
  one process: its start (a TensorFlow import) costs seconds, once per
  module instead of once per test. A group's cases run on its own copies,
  so no case sees another's writes."""
  base = tmp_path_factory.mktemp("refusals")
  data_dir = mnist_dir()
  setups, cases = {}, []
  for group, make in (("checkpoint", _checkpoint_fault_cases),
                      ("data_change", _data_change_cases),
                      ("run_record", _run_record_cases)):
    folder = base / group
    folder.mkdir()
    setups[group], group_cases = make(trained[0], folder, data_dir)
    cases += [("{}/{}".format(group, name), args, result)
              for name, args, result in group_cases]
  results = _metarun_cases(base, cases)
  out = {}
  for group in setups:
    folder = base / group
    watched = [str(folder / name) for name in sorted(os.listdir(folder))]
    out[group] = (setups[group],
                  {name.split("/", 1)[1]: value
                   for name, value in results.items()
                   if name.startswith(group + "/")},
                  {path: _files(path) for path in watched
                   if os.path.isdir(path)})
  return out


def test_checkpoint_faults_refuse_resuming_and_testing(refusals, tmp_path,
                                                       data_dir,
                                                       parse_metatest):
  """metarun resumes nothing on a guess (the original restarted at
  meta-iteration 1 over a garbled state file); metatest and the Keras
  optimizer name the damaged file instead of a reader traceback."""
  dirs, results, after = refusals["checkpoint"]
  for how, (train_dir, logdir, named, before) in dirs.items():
    status, stderr, _ = results[how]
    line = _own_line(stderr, "metarun.py")
    assert status == 2 and named in line, (how, line)
    if how != "as_train_dir":
      assert line.startswith("metarun.py: cannot resume: "), line
      assert "--resume=False --overwrite" in line, line
    assert after[train_dir] == before, how  # nothing written or lost
  assert "is garbled" in results["garbled_state"][1]
  assert "is truncated" in results["truncated_data"][1]
  assert "pass --train_dir={}".format(dirs["as_train_dir"][0]) in (
      results["as_train_dir"][1])

  # metatest: one line, exit status 2, for a damaged checkpoint.
  tested = _script("metatest.py", "--train_dir={}".format(
      dirs["truncated_data"][0]), "--include_mnist_mlp_problems",
                   "--data_dir={}".format(data_dir),
                   "--save_dir={}".format(tmp_path / "out"))
  assert tested.returncode == 2
  line = _own_line(tested.stderr, "metatest.py")
  assert line.startswith("metatest.py: error: checkpoint {} is damaged: {} is "
                         "truncated (".format(
                             os.path.join(dirs["truncated_data"][1],
                                          "model.ckpt-2"),
                             dirs["truncated_data"][2])), line
  assert not (tmp_path / "out").exists()
  for how in ["garbled_index", "empty_index", "missing_data"]:
    parse_metatest("--train_dir={}".format(dirs[how][0]))
    with pytest.raises(checkpoints.DamagedCheckpointError) as error:
      tested_optimizer.build(_metatest_config())
    assert error.value.filename == dirs[how][2]
    assert "\n" not in str(error.value)
    with pytest.raises(checkpoints.DamagedCheckpointError,
                       match="model.ckpt-2"):
      keras_optimizer.LearnedOptimizer.from_checkpoint(dirs[how][1])
  with pytest.raises(FileNotFoundError, match=r"LearnedOptimizer.pretrained\("
                     "'l2o-scale'\\)"):
    keras_optimizer.LearnedOptimizer.from_checkpoint("l2o-scale")
  for how in ["garbled_state", "no_state", "state_of_other_folder"]:
    parse_metatest("--train_dir={}".format(dirs[how][0]))
    with pytest.raises(checkpoints.CheckpointStateError, match=dirs[how][1]):
      tested_optimizer.build(_metatest_config())


# ------------------------------------------------------------ run records
def test_run_record_faults(refusals, trained, parse_metatest):
  """A train dir without its run record resumes only with the flags of its
  checkpoint; other flags, a damaged record or a file in the way are
  refused in one line, nothing changed; the end of a run says whether it
  learned; metatest and the Keras optimizer need the record or the flags."""
  paths, results, after = refusals["run_record"]
  no_record, other = paths["no_record"], paths["other"]
  damaged_log, a_file = paths["damaged_log"], paths["a_file"]
  # A dir without its record: the wrong flags write nothing, the right ones
  # resume (here: already complete) and record the flags.
  status, stderr, _ = results["wrong"]
  assert status == 2 and _own_line(stderr, "metarun.py").startswith(
      "metarun.py: cannot resume: Variable 'LOL/PerTensor/GradsToDelta/Matrix' "
      "has shape [4, 1]")
  status, stderr, stdout = results["right"]
  assert status == 0, stderr[-3000:]
  assert "has no run_record.json; its checkpoint model.ckpt-2 fits" in stdout
  after_right = dict(after[no_record])
  assert after_right.pop(os.path.join(SUBDIR, "run_record.json"))
  assert after_right == paths["before"]
  status, stderr, _ = results["all_differ"]
  assert status == 2 and _own_line(stderr, "metarun.py") == (
      "metarun.py: {} was trained with --max_log_lr=33.0, "
      "--num_gradient_scales=4, --rms_decay=0.9; this run gives "
      "--max_log_lr=-3.0, --num_gradient_scales=3, --rms_decay=0.5. Use the "
      "same flags, another --train_dir, or --resume=False --overwrite to "
      "start over.".format(other))
  status, stderr, stdout = results["idle_regularizer"]
  assert ("Note: --reg_option=hessian-esd has no effect: the regularizer is "
          "off (original behaviour). --reg_optimizer=True regularizes the "
          "optimizer") in stdout
  assert status == 2 and "--reg_option=hessian" in stderr  # the record's
  assert after[other] == paths["other_before"]
  status, stderr, _ = results["damaged"]
  assert status == 2 and _own_line(stderr, "metarun.py") == (
      "metarun.py: {} is damaged: its optimizer_flags is not a mapping of "
      "flag names to values; restore it".format(run_record.path(damaged_log)))
  status, stderr, _ = results["under_a_file"]  # a disk fault
  assert status == 2 and _own_line(stderr, "metarun.py").startswith(
      "metarun.py: reading or writing {} failed: Not a directory.".format(
          a_file / "run"))
  assert a_file.read_text() == "keep"
  # The end of a run says whether it learned.
  for name, start in [
      ("learned_nothing", "Done, but it learned nothing: no evaluation "
       "improved on the first one (evaluation cost 2.3) in 5 meta-iterations "
       "(--meta_learning_rate=1e-06: the original's default"),
      ("learned", "Done. It learned: the best evaluation cost (2.1) improved "
       "on the first (2.3)."),
      # The evaluation lines print costs; the robust score is named as such.
      ("robust_learned", "Done. It learned: the best robust selection score "
       "(0.05) improved on the first (0.4)."),
      ("one_evaluation", "Done. One evaluation only, so whether it learned "
       "is not measured"),
      ("curriculum_learned_nothing", "Done, but it learned nothing"),
      ("curriculum_learned", "Done. It learned: a later evaluation")]:
    status, _, stdout = results[name]
    # The verdict comes last, wrapped to the width of a terminal.
    assert status == 0 and " ".join(stdout.split()).split(
        "Latest checkpoint: c ")[1].startswith(start), (name, stdout)
    assert "Best model: logdir/model.ckpt-0" in stdout
  # ...consistently with the evaluation lines of a real run.
  costs = [float(l.split("cost=")[1]) for l in trained[1].splitlines()
           if l.startswith("evaluation ")]
  assert len(costs) == 2
  assert ("Done. It learned: the best evaluation cost" if costs[1] < costs[0]
          else "Done, but it learned nothing") in trained[1]

  # metatest / LearnedOptimizer on a TF2 checkpoint without its record:
  # refused, unless the flags are given explicitly.
  parse_metatest("--pretrained=nope")
  with pytest.raises(ValueError, match="no pretrained optimizer 'nope'; the "
                     "shipped ones are: l2o-entropy-reg"):
    tested_optimizer.build(_metatest_config())
  shutil.copytree(no_record, no_record + "_")
  os.remove(run_record.path(os.path.join(no_record + "_", SUBDIR)))
  parse_metatest("--train_dir=" + no_record + "_")
  with pytest.raises(run_record.MissingRunRecordError) as error:
    tested_optimizer.build(_metatest_config())
  assert str(error.value).endswith(
      "has no run_record.json, so the optimizer flags it was trained with are "
      "unknown (other flags than those run silently wrong). Copy the "
      "run_record.json of its train dir into {}, or give the optimizer flags "
      "it was trained with and --assume_optimizer_flags.".format(
          os.path.join(no_record + "_", SUBDIR)))
  parse_metatest("--train_dir=" + no_record + "_", "--assume_optimizer_flags")
  assert tested_optimizer.build(_metatest_config())[1].endswith("model.ckpt-2")
  with pytest.raises(run_record.MissingRunRecordError,
                     match="pass the options it was trained with as "
                     "optimizer_kwargs"):
    keras_optimizer.LearnedOptimizer.from_checkpoint(
        os.path.join(no_record + "_", SUBDIR))


def test_resume_with_other_data_is_refused_unless_allowed(refusals, data_dir):
  """A train dir resumed with another --data_dir: refused naming the flag
  and nothing changed; --allow_data_change=True takes it (the run is
  complete, so it only resumes); an inf meta learning rate never starts."""
  paths, results, after = refusals["data_change"]
  train_dir, other_data = paths["train_dir"], paths["other_data"]
  status, stderr, _ = results["other"]
  assert status == 2
  assert _own_line(stderr, "metarun.py") == (
      "metarun.py: {} was trained with --data_dir={}; this run gives "
      "--data_dir={}. Use the same flags, another --train_dir, or "
      "--resume=False --overwrite to start over (--allow_data_change=True: "
      "train on the other data).".format(train_dir, data_dir, other_data))
  status, stderr, _ = results["inf"]
  assert status == 2 and _own_line(stderr, "metarun.py") == (
      "metarun.py: invalid flag: --meta_learning_rate must be a finite number "
      "(got inf)")
  assert after[train_dir] == paths["before"]
  status, stderr, _ = results["allowed"]
  assert status == 0, stderr[-3000:]


# ------------------------------------------------------------------ locks
def test_lock_of_a_reused_pid_is_taken_over_and_a_held_one_named(tmp_path):
  other = subprocess.Popen([sys.executable, "-c",
                            "import time; time.sleep(60)"])
  try:
    lock = os.path.join(str(tmp_path), dir_lock.FILENAME)
    start = dir_lock.process_start(other.pid)
    assert start is not None
    holder = dict(pid=other.pid, host=os.uname().nodename, started="earlier",
                  command="metarun.py --train_dir=x")
    for recorded, taken in [("another-boot:1", True), (start, False),
                            (None, False)]:
      with open(lock, "w") as f:
        json.dump(dict(holder, process_start=recorded), f)
      os.utime(lock, (0, 0))
      if taken:  # The pid lives but is another process than the lock's.
        assert dir_lock.acquire(str(tmp_path)) == lock
        with open(lock) as f:
          assert json.load(f)["pid"] == os.getpid()
        continue
      with pytest.raises(dir_lock.LockedError) as error:
        dir_lock.acquire(str(tmp_path))
      assert str(error.value).endswith(
          "if no run uses it any more (that pid is now another process, or "
          "the host is gone), delete {}.".format(lock))
      with open(lock) as f:
        assert json.load(f)["pid"] == other.pid  # left as it was
  finally:
    other.kill()
    other.wait()


# ---------------------------------------------------------------- signals
def _interrupt_after(command, marker, cwd):
  # The child starts with SIGINT's default action, as a command typed at a
  # terminal does: under a shell that runs the suite in the background,
  # SIGINT is ignored and every child inherits that (Python then installs
  # no KeyboardInterrupt handler at all).
  proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=_env(),
                          cwd=cwd, preexec_fn=lambda: signal.signal(
                              signal.SIGINT, signal.SIG_DFL))
  seen = []
  for line in proc.stdout:
    seen.append(line)
    if marker in line:
      proc.send_signal(signal.SIGINT)
      break
  out, err = proc.communicate(timeout=300)
  return proc.returncode, "".join(seen) + out, err


def test_ctrl_c_is_one_line_exit_130_and_resumes(tmp_path, data_dir):
  run = [sys.executable, os.path.join(ROOT, "metarun.py"),
         "--train_dir={}".format(tmp_path), "--data_dir={}".format(data_dir),
         "--num_meta_iterations=1000"] + TINY
  status, stdout, stderr = _interrupt_after(run, "[meta-iteration 2/", ROOT)
  assert status == 130, stderr[-3000:]
  assert _own_line(stderr, "metarun.py") == (
      "metarun.py: interrupted; resume with the same command.")
  assert not os.path.exists(tmp_path / dir_lock.FILENAME)
  latest = checkpoints.latest_checkpoint(str(tmp_path / SUBDIR))
  number = int(latest.rsplit("-", 1)[1])
  assert number >= 1 and "evaluation {},".format(number) in stdout
  # The same command resumes from there (with as many meta-iterations as
  # are done, to end at once: the checkpoint is restored all the same).
  run[4] = "--num_meta_iterations={}".format(number)
  again = subprocess.run(run, capture_output=True, text=True, env=_env(),
                         cwd=ROOT, timeout=600)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Resuming from {} (TF2 checkpoint) at meta-iteration {}".format(
      latest, number) in again.stdout

  test = [sys.executable, os.path.join(ROOT, "metatest.py"),
          "--pretrained=l2o-scale", "--include_mnist_mlp_problems",
          "--num_testing_itrs=1000000", "--data_dir={}".format(data_dir),
          "--save_dir={}".format(tmp_path / "out")]
  status, _, stderr = _interrupt_after(test, "testing include_", ROOT)
  assert status == 130
  assert _own_line(stderr, "metatest.py").startswith(
      "metatest.py: interrupted; the result files written so far are "
      "complete")
  assert os.listdir(tmp_path / "out") == []


# ------------------------------------------------------------------ disks
def test_disk_faults(tmp_path, data_dir, parse_metatest):
  """(metarun's --train_dir under a file: test_run_record_faults; a full or
  read-only disk: tests/test_metarun.py, tests/test_metatest.py.)"""
  a_file = tmp_path / "a_file"
  a_file.write_text("keep")
  parse_metatest("--test_optimizer=Adam", "--include_mnist_mlp_problems",
                 "--num_testing_itrs=1", "--seeds=6",
                 "--data_dir={}".format(data_dir),
                 "--save_dir={}".format(a_file))
  with pytest.raises(ValueError, match="--save_dir={} is a file, not a "
                     "folder; give a folder.".format(a_file)):
    metatest_run.run(_metatest_config())
  assert a_file.read_text() == "keep"


# ------------------------------------------------------------- bad input
def _numeric_flags(flag_values):
  """name -> Flag of every integer or float flag of a program."""
  return {n: f for n, f in flag_values._flags().items()  # pylint: disable=protected-access
          if n == f.name and f.flag_type() in ("int", "float")}


def _parse_metarun(*args):
  import metarun  # pylint: disable=g-import-not-at-top
  metarun.FLAGS.unparse_flags()
  metarun.FLAGS(["metarun.py"] + list(args))
  return metarun


def test_every_numeric_flag_of_both_programs_refuses_non_finite_values(
    parse_metatest):
  """Each float flag of metarun.py and metatest.py given nan, inf or -inf
  is refused with one line naming it (before any work: check_flags is the
  first thing main does); the two programs' flags live side by side in
  this one process, each with its own defaults."""
  metarun = _parse_metarun()
  assert metarun.FLAGS["num_unroll_scale"].default == 40
  assert metatest.FLAGS["num_unroll_scale"].default == 10
  for name, item in _numeric_flags(metarun.FLAGS).items():
    if item.flag_type() != "float":
      continue
    for value in ("nan", "inf", "-inf"):
      _parse_metarun("--{}={}".format(name, value))
      errors = [e for e in metarun.check_flags(metarun.FLAGS)
                if e.startswith("--{} ".format(name))]
      assert errors == ["--{} must be a finite number (got {})".format(
          name, float(value))], (name, value, errors)
  for name, item in _numeric_flags(metatest.FLAGS).items():
    if item.flag_type() != "float":
      continue
    parse_metatest("--{}=nan".format(name))
    errors = [e for e in metatest_config.flag_errors(_metatest_config())
              if e.startswith("--{} ".format(name))]
    assert errors == ["--{} must be a finite number (got nan)".format(
        name)], (name, errors)


@pytest.mark.parametrize("args,line", [
    (["--heldout_every=-1"], "--heldout_every must be >= 0 (got -1)"),
    (["--num_testing_itrs=0"], "--num_testing_itrs must be >= 1 (got 0)"),
    (["--step_decay_start=1"], "--step_decay_start must be in [0, 1) (got 1)"),
    (["--baseline_learning_rate=-1", "--test_optimizer=Adam"],
     "--baseline_learning_rate must be > 0 (got -1)"),
    (["--save_dir="], "--save_dir must not be empty"),
    (["--cell_size=0"], "--cell_size must be >= 1 (got 0)"),
    (["--min_num_unrolls=0"], "--min_num_unrolls must be >= 1 (got 0)"),
    (["--save_dir=" + os.path.join(ROOT, "l2o_scale", "pretrained",
                                   "l2o-scale")],
     "--save_dir={} is inside the package's shipped optimizers".format(
         os.path.join(ROOT, "l2o_scale", "pretrained", "l2o-scale"))),
])
def test_metatest_out_of_range_flags_are_one_line(parse_metatest, args, line):
  parse_metatest(*args)
  errors = metatest_config.flag_errors(_metatest_config())
  assert [e for e in errors if e.startswith(line)], errors
  with pytest.raises(ValueError, match="invalid flags: "):
    metatest_run.run(_metatest_config())


def test_recipe_given_twice_is_refused(tmp_path):
  from l2o_scale.config import recipes  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match=r"--recipe is given 2 times \(fast, "
                     r"stable\)"):
    recipes.expand(["metarun.py", "--recipe=fast", "--recipe", "stable"])
  assert recipes.expand(["metarun.py", "--recipe=fast"])[1].endswith(
      "fast.flags")
  done = _script("metarun.py", "--recipe=fast", "--recipe=stable",
                 "--train_dir={}".format(tmp_path / "run"))
  assert done.returncode == 2
  assert _own_line(done.stderr, "metarun.py") == (
      "metarun.py: error: --recipe is given 2 times (fast, stable); give one "
      "recipe and set other flags on the command line.")
  assert not (tmp_path / "run").exists()


def test_metatest_keeps_results_and_warns_on_identical_splits(
    tmp_path, data_dir, parse_metatest, capsys):
  """Result files of the same --model_name are not replaced without
  --overwrite (refused before any work); a data dir whose test split is a
  copy of its train split is warned about."""
  args = ["--test_optimizer=SGD", "--include_mnist_mlp_problems",
          "--num_testing_itrs=4", "--heldout_every=2", "--seeds=6",
          "--progress_every=0", "--save_dir={}".format(tmp_path / "out")]
  parse_metatest(*args, "--data_dir={}".format(data_dir))
  written = metatest_run.run(_metatest_config())
  assert len(written) == 2
  assert "Warning: the train and held-out" not in capsys.readouterr().out
  before = _files(tmp_path / "out")
  with pytest.raises(ValueError, match=r"2 result file\(s\) of "
                     r"--model_name=mt are in --save_dir=.* already \(e.g. "
                     r"seed6_eval_loss_record.pickle-mt\); add --overwrite"):
    metatest_run.run(_metatest_config())
  assert _files(tmp_path / "out") == before
  same = tmp_path / "same_mnist"
  same.mkdir()
  for kind in ("images-idx3", "labels-idx1"):
    source = os.path.join(data_dir, "train-{}-ubyte.gz".format(kind))
    shutil.copy(source, same / "train-{}-ubyte.gz".format(kind))
    shutil.copy(source, same / "t10k-{}-ubyte.gz".format(kind))
  parse_metatest(*args, "--data_dir={}".format(same), "--overwrite")
  assert metatest_run.run(_metatest_config()) == written
  assert ("Warning: the train and held-out splits of "
          "include_mnist_mlp_problems hold the same 5000 rows" in
          capsys.readouterr().out)


# ---------------------------------------------------------------- cluster
def test_cluster_passes_the_chiefs_reason_lines(tmp_path):
  log = tmp_path / "chief-0.err.log"
  log.write_text("I0000 oneDNN custom operations are on.\n"
                 "metarun.py: invalid flags:\n"
                 "  --fix_unroll_length must be >= 1\n"
                 "  distributed mode needs --fix_unroll=True\n"
                 "E0000 grpc: connection reset\n")

  class Out(list):
    write = list.append

  out = Out()
  cluster._print_tail(str(log), out)
  assert "".join(out).splitlines()[1:] == [
      "metarun.py: invalid flags:", "  --fix_unroll_length must be >= 1",
      "  distributed mode needs --fix_unroll=True"]


# ------------------------------------------------------------------ keras
KERAS_SAVE = textwrap.dedent("""
    import shutil, sys
    import keras, numpy as np
    from l2o_scale.keras_optimizer import LearnedOptimizer
    keras.utils.set_random_seed(0)
    x = np.random.RandomState(0).normal(size=(32, 4)).astype("float32")
    y = np.random.RandomState(1).normal(size=(32, 2)).astype("float32")
    def model(name):
      m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                            keras.layers.Dense(2)])
      m.compile(optimizer=LearnedOptimizer.from_checkpoint(
          "ckpt/model.ckpt-0"), loss="mse")
      return m
    trained = model("trained")
    trained.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    trained.save("trained.keras")
    model("fresh").save("fresh.keras")  # never stepped: no slots saved
    trained.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    np.savez("trained.npz", *trained.get_weights())
    shutil.rmtree("ckpt")
    """)
KERAS_LOAD = textwrap.dedent("""
    import sys
    import l2o_scale
    assert "tensorflow" not in sys.modules  # the import stays light
    import keras, numpy as np
    import l2o_scale.keras_optimizer  # Keras' rule: import the class' module
    x = np.random.RandomState(0).normal(size=(32, 4)).astype("float32")
    y = np.random.RandomState(1).normal(size=(32, 2)).astype("float32")
    m = keras.models.load_model(sys.argv[1] + "/trained.keras")
    m.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    want = np.load(sys.argv[1] + "/trained.npz")
    for i, w in enumerate(m.get_weights()):
      np.testing.assert_allclose(w, want["arr_{}".format(i)], rtol=1e-6,
                                 atol=1e-7)
    print("trained: same weights", type(m.optimizer).__name__)
    # A file saved before the first step: the meta-parameters, and slots
    # started from them (their random initial learning rates are drawn anew).
    m = keras.models.load_model(sys.argv[1] + "/fresh.keras")
    from l2o_scale.keras_optimizer import LearnedOptimizer
    shipped = LearnedOptimizer.pretrained("l2o-scale").learned_optimizer
    for name, var in shipped.tf1_variables().items():
      loaded = m.optimizer.learned_optimizer.tf1_variables()[name]
      np.testing.assert_array_equal(loaded.numpy(), var.numpy())
    losses = m.fit(x, y, epochs=2, batch_size=8, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)), losses
    print("fresh: same meta-parameters")
    """)


def test_keras_file_loads_after_the_checkpoint_is_gone(tmp_path, monkeypatch):
  """Saved in one folder (then the checkpoint deleted), loaded in a fresh
  process elsewhere after ``import l2o_scale.keras_optimizer``: training
  goes on as it goes on in the saving process. (The saving runs in this
  process, in its folder: only the loading needs a fresh one.)"""
  saved, elsewhere = tmp_path / "saved", tmp_path / "elsewhere"
  saved.mkdir()
  elsewhere.mkdir()
  shutil.copytree(pretrained.folder("l2o-scale"), saved / "ckpt")
  with monkeypatch.context() as patch:
    patch.chdir(saved)
    exec(compile(KERAS_SAVE, "KERAS_SAVE", "exec"), {})  # pylint: disable=exec-used
  done = subprocess.run([sys.executable, "-c", KERAS_LOAD, str(saved)],
                        capture_output=True, text=True, env=_env(),
                        cwd=str(elsewhere), timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  assert not (saved / "ckpt").exists()
  assert done.stdout.split("\n")[:2] == [
      "trained: same weights LearnedOptimizer", "fresh: same meta-parameters"]


@pytest.mark.parametrize("kwargs,line", [
    (dict(learning_rate=float("nan")), "learning_rate must be a finite"),
    (dict(learning_rate=-1.), "learning_rate must be a finite number >= 0"),
    (dict(weight_decay=float("inf")), "weight_decay must be a finite"),
    (dict(weight_decay=-1e-3), "weight_decay must be a finite number >= 0"),
    (dict(clipnorm=0.), "clipnorm must be a finite number > 0"),
    (dict(global_clipnorm=float("nan")), "global_clipnorm must be a finite"),
    (dict(ema_momentum=1.5), "ema_momentum must be a finite number in"),
])
def test_keras_constructor_refuses_bad_numbers_in_one_line(kwargs, line):
  """The Keras optimizer refuses non-finite or out-of-range numbers before
  it is built (Keras alone would keep them and step into NaN)."""
  with pytest.raises(ValueError, match=line) as error:
    keras_optimizer.LearnedOptimizer.pretrained("l2o-scale", **kwargs)
  assert "\n" not in str(error.value)
  # In range: accepted.
  keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale", learning_rate=0.5, weight_decay=1e-3, clipnorm=1.,
      ema_momentum=0.99)
