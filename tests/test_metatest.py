"""Tests of metatest.py (flags, result files, errors)."""

import json
import os
import pickle
import re
import shutil

from absl import flags
import numpy as np
import pytest

import metatest
from l2o_scale import results_reading
from l2o_scale.meta_testing import metatest_config
from l2o_scale.meta_testing import metatest_run
from l2o_scale.meta_testing import result_files
from l2o_scale.meta_testing import tested_optimizer
from l2o_scale.runs import checkpoints
from problems import datasets

FLAGS = metatest.FLAGS
SUBDIR = "HierarchicalRNN_GRUCell_20_2"


def _parse(*args):
  FLAGS.unparse_flags()
  FLAGS(["metatest.py"] + list(args))
  return FLAGS


def _config(*args):
  """The config of ``metatest.py *args``."""
  return metatest.build_config(_parse(*args))


def _run():
  """metatest.py's work for the parsed flags, as its main() does it."""
  return metatest_run.run(metatest.build_config(FLAGS))


@pytest.fixture
def train_dir(fixtures_dir, tmp_path):
  """A train dir holding the original TF1 checkpoint, as metarun.py left it."""
  folder = tmp_path / "train" / SUBDIR
  folder.mkdir(parents=True)
  ckpt = os.path.join(fixtures_dir, "mnist_mlp_sigmoid", "ckpt")
  for name in os.listdir(ckpt):
    if name.startswith("model.ckpt-0"):
      shutil.copy(os.path.join(ckpt, name), folder)
  return str(tmp_path / "train")


@pytest.fixture(autouse=True)
def _reset_flags():
  yield
  FLAGS.unparse_flags()


def test_original_flag_defaults():
  _parse()
  assert FLAGS.train_dir == "opt/" and FLAGS.save_dir == "opt/"
  assert FLAGS.test_optimizer == "L2o"
  assert FLAGS.num_testing_itrs == 100
  assert FLAGS.model_name == "mt" and FLAGS.restore_model_name == ""
  assert FLAGS.seeds == ["6", "12", "18", "24", "30"]
  assert FLAGS.optimizer == "HierarchicalRNN"
  assert FLAGS.use_gradient_shortcut and FLAGS.num_gradient_scales == 4
  assert not FLAGS.include_mnist_mlp_relu_problems


def test_l2o_from_tf1_checkpoint_writes_five_pickles(train_dir, data_dir,
                                                      tmp_path):
  save_dir = str(tmp_path / "results")
  _parse("--train_dir=" + train_dir, "--restore_model_name=model.ckpt-0",
         "--include_mnist_mlp_relu_problems", "--num_testing_itrs=200",
         "--data_dir=" + data_dir, "--save_dir=" + save_dir,
         "--model_name=mnist-relu", "--progress_every=100")
  written = _run()
  expected = ["seed{}_eval_loss_record.pickle-mnist-relu".format(s)
              for s in (6, 12, 18, 24, 30)]
  assert sorted(os.listdir(save_dir)) == sorted(
      expected + ["metatest_record-mnist-relu.json"])
  assert len(written) == 5
  # The run record names the problem as the docs do, for the results command.
  with open(os.path.join(save_dir, "metatest_record-mnist-relu.json")) as f:
    record = json.load(f)
  assert record["problems"] == [{
      "index": 0, "flag": "include_mnist_mlp_relu_problems",
      "label": "MNIST MLP 784-20-10, ReLU"}]
  assert not record["problem_suffix"]
  finals = []
  for name in expected:
    with open(os.path.join(save_dir, name), "rb") as f:
      values = pickle.load(f)
    assert isinstance(values, list) and len(values) == 200
    values = np.array(values, dtype=np.float64)
    assert np.all(np.isfinite(values))
    assert np.mean(values[-20:]) < np.mean(values[:20])
    finals.append(values[-20:].mean())
  # Different seeds are different runs.
  assert len(set(np.round(finals, 6))) == 5


@pytest.mark.parametrize("name", ["Adam", "SGD", "Adagrad"])
def test_baselines_run_without_checkpoint(name, data_dir, tmp_path):
  save_dir = str(tmp_path / name)
  _parse("--test_optimizer=" + name, "--train_dir=" + str(tmp_path / "none"),
         "--include_mnist_mlp_relu_problems", "--num_testing_itrs=30",
         "--seeds=6", "--data_dir=" + data_dir, "--save_dir=" + save_dir)
  _run()
  with open(os.path.join(save_dir, "seed6_eval_loss_record.pickle-mt"),
            "rb") as f:
    values = pickle.load(f)
  assert len(values) == 30 and np.all(np.isfinite(values))


def test_heldout_record(train_dir, data_dir, tmp_path, monkeypatch):
  measured = []
  real_flatness = metatest_run.flatness

  def recording_flatness(*args, **kwargs):
    measured.append(real_flatness(*args, **kwargs))
    return measured[-1]
  monkeypatch.setattr(metatest_run, "flatness", recording_flatness)
  save_dir = str(tmp_path / "gen")
  _parse("--train_dir=" + train_dir, "--restore_model_name=model.ckpt-0",
         "--include_mnist_mlp_problems", "--num_testing_itrs=40",
         "--seeds=6", "--heldout_every=20", "--data_dir=" + data_dir,
         "--save_dir=" + save_dir, "--model_name=gen", "--flatness_probes=2",
         "--step_schedule=cosine")
  _run()
  assert os.path.exists(os.path.join(save_dir,
                                     "seed6_eval_loss_record.pickle-gen"))
  with open(os.path.join(save_dir, "seed6_heldout_record-gen.json")) as f:
    report = json.load(f)
  assert report["iteration"] == [0, 20, 40]
  assert report["step_schedule"] == "cosine"
  assert report["heldout_split_size"] == 10000
  assert report["train_split_size"] == len(
      datasets.mnist(train=True, data_dir=data_dir).data)
  for key in ("train_loss", "train_accuracy", "heldout_loss",
              "heldout_accuracy"):
    assert len(report[key]) == 3 and np.all(np.isfinite(report[key]))
  # The report holds what metatest_run.flatness measured at the final
  # parameters (its closed-form check: tests/test_curvature.py);
  # cross-entropy: a positive curvature.
  assert len(measured) == 1
  assert report["hessian_trace"] == measured[0]["hessian_trace"] > 0.
  assert report["hessian_top_eigenvalue"] == (
      measured[0]["hessian_top_eigenvalue"])
  assert report["flatness_probes"] == 2


@pytest.mark.parametrize("optimizer", [["--test_optimizer=Adam"],
                                       ["--pretrained=l2o-scale"]])
def test_measuring_heldout_accuracy_leaves_the_run_as_it_is(
    optimizer, data_dir, tmp_path):
  """The same seed with and without --heldout_every: the same training
  losses, bit for bit (the measurement reads the parameters between
  chunks of steps; it trains on the same split, the same batches)."""
  save_dir = str(tmp_path / "res")
  common = optimizer + ["--include_mnist_mlp_problems",
                        "--num_testing_itrs=20", "--seeds=6",
                        "--data_dir=" + data_dir, "--save_dir=" + save_dir]
  _parse(*common, "--model_name=plain")
  _run()
  _parse(*common, "--model_name=measured", "--heldout_every=10")
  _run()
  plain, measured = (_final_losses(save_dir, m) for m in ("plain",
                                                          "measured"))
  assert len(plain) == 20
  assert plain.tobytes() == measured.tobytes()


def test_optimizee_split_test_keeps_the_original_problem_sets(data_dir):
  """--optimizee_split=test trains on the data of the original evaluation's
  problem sets (MNIST's test split); the default trains on the train split;
  --heldout_every, which measures the test split, is refused with it."""
  from problems import problem_sets  # pylint: disable=g-import-not-at-top
  common = ("--include_mnist_mlp_problems", "--data_dir=" + data_dir)
  (_, _, original, _, _, _), = metatest_run.build_problems(
      _config(*common, "--optimizee_split=test"))
  (_, _, default, _, _, _), = metatest_run.build_problems(_config(*common))
  (_, fn), = metatest_config.selected_problem_sets(_config(*common))
  (_, own, _), = problem_sets.get(fn, data_dir=data_dir)
  train, test = datasets.load_mnist_arrays("train", data_dir), (
      datasets.load_mnist_arrays("test", data_dir))
  assert len(original.data) == len(own.data) == len(test[0]) == 10000
  assert np.array_equal(np.asarray(original.data), np.asarray(own.data))
  assert len(default.data) == len(train[0])
  with pytest.raises(ValueError, match="--optimizee_split=test trains on"):
    metatest_config.validate(_config(*common, "--optimizee_split=test",
                                     "--heldout_every=10"))


def test_step_schedule_is_one_of_the_named():
  _parse()
  assert FLAGS.step_schedule == "none"  # the original: constant steps
  with pytest.raises(flags.IllegalFlagValueError):
    _parse("--step_schedule=exponential")
  errors = metatest_config.flag_errors(_config("--step_schedule=cosine",
                                               "--step_decay_start=1"))
  assert any("--step_decay_start" in e for e in errors)


def test_missing_checkpoint_lists_existing(train_dir, tmp_path):
  _parse("--train_dir=" + train_dir, "--restore_model_name=model.ckpt-5",
         "--include_mnist_mlp_relu_problems", "--save_dir=" + str(tmp_path))
  with pytest.raises(FileNotFoundError, match=r"model\.ckpt-5.*model\.ckpt-0"):
    _run()
  _parse("--train_dir=" + str(tmp_path / "empty"),
         "--include_mnist_mlp_relu_problems")
  with pytest.raises(FileNotFoundError, match=SUBDIR):
    _run()


def test_a_missing_checkpoint_is_its_own_line_not_a_write_error(
    train_dir, data_dir, tmp_path, capsys):
  """A checkpoint that is not there (another number, a train dir that does
  not exist or is a file) is one line naming it, exit 2: not "writing
  --save_dir failed", which only the run's own writes say."""
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  save_dir = tmp_path / "res"
  for given, named in (
      (["--train_dir=" + train_dir, "--restore_model_name=model.ckpt-99"],
       "No checkpoint 'model.ckpt-99' in {}".format(
           os.path.join(train_dir, SUBDIR))),
      (["--train_dir=" + str(tmp_path / "none")],
       "No checkpoint folder {}".format(tmp_path / "none" / SUBDIR)),
      (["--train_dir=" + str(a_file)],
       "No checkpoint folder {}".format(a_file / SUBDIR))):
    _parse(*given, "--include_mnist_mlp_problems", "--num_testing_itrs=5",
           "--seeds=6", "--data_dir=" + data_dir,
           "--save_dir=" + str(save_dir))
    with pytest.raises(SystemExit) as ended:
      entry_point.run_main("metatest.py", metatest.main, ["metatest.py"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 2
    assert lines[-1].startswith("metatest.py: error: " + named), lines
    assert "--save_dir" not in lines[-1] and "writing" not in lines[-1]
  assert not save_dir.exists()


def test_a_run_too_long_for_memory_is_refused_before_any_work(
    data_dir, tmp_path, capsys):
  """10**13 steps: their minibatch schedule (5 PB) fits in no machine's
  memory; one line naming the flag and exit 2 before anything is written,
  not numpy's allocation error, and the same rule for every caller of the
  schedule."""
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  save_dir = tmp_path / "res"
  _parse("--test_optimizer=Adam", "--include_mnist_mlp_problems",
         "--num_testing_itrs={}".format(10 ** 13), "--seeds=6",
         "--data_dir=" + data_dir, "--save_dir=" + str(save_dir))
  with pytest.raises(SystemExit) as ended:
    entry_point.run_main("metatest.py", metatest.main, ["metatest.py"])
  lines = capsys.readouterr().err.strip().splitlines()
  assert ended.value.code == 2
  assert re.fullmatch(
      r"metatest.py: error: --num_testing_itrs=10000000000000: "
      r"10000000000000 minibatches of 128 rows need 4.55 PiB of memory for "
      r"their row indices, more than this machine has \([0-9.]+ [KMGTP]?i?B\)"
      r": run fewer steps", lines[-1]), lines
  assert not save_dir.exists()
  with pytest.raises(ValueError, match="run fewer steps"):
    datasets.batch_indices(5000, 10 ** 13, 128)


def test_a_damaged_schedule_head_is_one_line_before_any_work(
    data_dir, tmp_path, capsys):
  """--schedule_head=F, F the first half of the shipped head's file (a
  copy cut short): one line naming it and exit 2, as the benchmark and
  Keras say it, and no result file."""
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  with open(pretrained.schedule_head("l2o-scale-head"), "rb") as f:
    raw = f.read()
  half = tmp_path / "half.npz"
  half.write_bytes(raw[:len(raw) // 2])
  save_dir = tmp_path / "res"
  _parse("--pretrained=l2o-scale", "--schedule_head=" + str(half),
         "--include_mnist_mlp_problems", "--num_testing_itrs=5", "--seeds=6",
         "--data_dir=" + data_dir, "--save_dir=" + str(save_dir))
  with pytest.raises(SystemExit) as ended:
    entry_point.run_main("metatest.py", metatest.main, ["metatest.py"])
  lines = capsys.readouterr().err.strip().splitlines()
  assert ended.value.code == 2
  assert lines[-1].startswith("metatest.py: error: {} is not a saved "
                              "schedule head: it is truncated".format(half))
  assert not save_dir.exists()


def test_other_configuration_names_variable(train_dir, tmp_path):
  _parse("--train_dir=" + train_dir, "--restore_model_name=model.ckpt-0",
         "--include_mnist_mlp_relu_problems", "--nouse_gradient_shortcut",
         "--use_lr_shortcut", "--save_dir=" + str(tmp_path))
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"LOL/PerTensor/Layer0_RNN.*shape"):
    _run()


def test_missing_data_says_how_to_provide_it(train_dir, tmp_path):
  empty = tmp_path / "nodata"
  empty.mkdir()
  _parse("--test_optimizer=Adam", "--include_mnist_mlp_relu_problems",
         "--data_dir=" + str(empty), "--save_dir=" + str(tmp_path))
  with pytest.raises(datasets.DataNotFoundError, match="--data_dir"):
    metatest.main(["metatest.py"])


def _final_losses(save_dir, model_name):
  with open(os.path.join(save_dir, "seed6_eval_loss_record.pickle-" +
                         model_name), "rb") as f:
    return np.array(pickle.load(f), dtype=np.float64)


def test_baseline_learning_rate_overrides_the_original(data_dir, tmp_path):
  """--baseline_learning_rate replaces the original's SGD 1e-3 (and only it)."""
  save_dir = str(tmp_path / "sgd")
  common = ["--test_optimizer=SGD", "--include_mnist_mlp_relu_problems",
            "--num_testing_itrs=60", "--seeds=6", "--data_dir=" + data_dir,
            "--save_dir=" + save_dir]
  assert tested_optimizer.build(_config(
      *common, "--model_name=orig"))[0].learning_rate == 1e-3
  _run()
  assert tested_optimizer.build(_config(
      *common, "--model_name=tuned",
      "--baseline_learning_rate=0.1"))[0].learning_rate == 0.1
  _run()
  orig, tuned = (_final_losses(save_dir, m) for m in ("orig", "tuned"))
  # Same seed: same start point and batches, so the first loss is equal; a
  # 100x larger SGD step then trains much further in 60 steps.
  assert orig[0] == tuned[0]
  assert tuned[-10:].mean() < orig[-10:].mean() - 0.05


def test_recorded_flags_come_from_the_run_record_unless_given(tmp_path,
                                                              capsys):
  """run_record.json rebuilds the optimizer; an explicit flag wins, noted."""
  from l2o_scale.runs import run_record
  ckpt = str(tmp_path / "model.ckpt-0")
  assert tested_optimizer.recorded_flags(_config(), ckpt,
                                         "tf1").num_gradient_scales == 4
  assert "is a TF1 checkpoint of the original" in capsys.readouterr().out
  run_record.write(str(tmp_path), "HierarchicalRNN",
                   {"num_gradient_scales": 3, "max_log_lr": -4.6}, {}, "t")
  values = tested_optimizer.recorded_flags(_config(), ckpt, "tf2")
  assert (values.num_gradient_scales, values.max_log_lr) == (3, -4.6)
  assert capsys.readouterr().out == ""
  values = tested_optimizer.recorded_flags(
      _config("--num_gradient_scales=5"), ckpt, "tf2")
  assert (values.num_gradient_scales, values.max_log_lr) == (5, -4.6)
  assert capsys.readouterr().out == (
      "Note: --num_gradient_scales=5 differs from the run record's "
      "--num_gradient_scales=3; using the command line's.\n")


def test_read_only_save_dir_is_one_line(tmp_path, data_dir):
  """metatest on a read-only disk: exit 2 with one line naming the folder.
  The disk is a fault-injected folder (tests/faultfs.py): no mount needed."""
  import subprocess  # pylint: disable=g-import-not-at-top
  from tests import faultfs  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  disk = tmp_path / "disk"
  disk.mkdir()
  out = subprocess.run(
      faultfs.command(disk, "ro", os.path.join(root, "metatest.py"),
                      ["--test_optimizer=Adam", "--include_mnist_mlp_problems",
                       "--num_testing_itrs=5", "--seeds=6", "--model_name=a",
                       "--save_dir={}".format(disk / "res"),
                       "--data_dir={}".format(data_dir)]),
      capture_output=True, text=True, timeout=300, cwd=root)
  assert out.returncode == 2, out.stderr
  assert out.stderr.strip().splitlines()[-1] == (
      "metatest.py: error: writing {} failed: Read-only file system. Give "
      "another --save_dir (or free space if the disk is full).".format(
          disk / "res"))


def test_hold_zero_gradients_flag_builds_its_step_transform():
  """--hold_zero_gradients puts the hold first in the chain, before the
  weight decay; without it the chain is the original's update."""
  chain = metatest_config.step_plan(_config(
      "--hold_zero_gradients", "--weight_decay=1e-3")).transforms
  assert [type(t).__name__ for t in chain.transforms] == [
      "HoldZeroGradients", "DecoupledWeightDecay"]
  plain = metatest_config.step_plan(_config())
  assert plain.head_file is None and plain.transforms.is_identity


@pytest.mark.parametrize("name,message", [
    ("", "--model_name is empty"),
    ("a/b", "is not a safe file name suffix"),
    ("../x", "is not a safe file name suffix"),
    (".hidden", "is not a safe file name suffix"),
    ("my run", "is not a safe file name suffix"),
    ("adam-problem3", "ends like the -problem<k> suffix of a run of several "
     "problems, so its files would read back as another model's; give "
     "another name, e.g. adam-p3"),
    ("adam.tmp", "ends in .tmp"),
    ("x" * 151, "give at most 150"),
])
def test_unsafe_or_ambiguous_model_names_are_refused_before_any_work(
    name, message, tmp_path):
  save_dir = tmp_path / "res"
  _parse("--test_optimizer=Adam", "--include_mnist_mlp_problems",
         "--model_name=" + name, "--save_dir={}".format(save_dir))
  with pytest.raises(ValueError, match=r"^invalid flags: .*" +
                     re.escape(message)):
    _run()
  assert not save_dir.exists()


def test_model_names_of_the_docs_and_the_reproduction_are_accepted():
  for name in ("mt", "mnist-relu", "l2o-scale", "Adam-lr1e-3", "fast_2",
               "adam-problem", "v1.2+wd=1e-3,x@y"):
    assert result_files.model_name_problem(name) is None, name


def test_problems_are_printed_recorded_and_read_back_by_label(
    data_dir, tmp_path, capsys):
  """Two problems in one run: each is printed by its label (not the Spec's
  repr), the held-out records and the run record name it, and the results
  command reads the -problem<k> files back as one model with two labelled
  problems."""
  save_dir = str(tmp_path / "res")
  _parse("--test_optimizer=Adam", "--include_mnist_mlp_problems",
         "--include_mnist_mlp_relu_problems", "--num_testing_itrs=4",
         "--heldout_every=2", "--seeds=6", "--progress_every=0",
         "--data_dir=" + data_dir, "--save_dir=" + save_dir,
         "--model_name=adam-p")
  _run()
  out = capsys.readouterr().out
  assert ("testing include_mnist_mlp_problems (MNIST MLP 784-20-10, sigmoid) "
          "with Adam using seed 6") in out
  assert ("testing include_mnist_mlp_relu_problems (MNIST MLP 784-20-10, "
          "ReLU) with Adam using seed 6") in out
  assert "Spec(" not in out
  with open(os.path.join(save_dir,
                         "seed6_heldout_record-adam-p-problem1.json")) as f:
    assert json.load(f)["problem_label"] == "MNIST MLP 784-20-10, ReLU"
  runs = results_reading.read_dir(save_dir)
  assert sorted((r.model, r.problem, r.label) for r in runs) == [
      ("adam-p", 0, "MNIST MLP 784-20-10, sigmoid"),
      ("adam-p", 1, "MNIST MLP 784-20-10, ReLU")]
  assert all(set(seeds[6]) == {"loss", "heldout"} and
             seeds[6]["heldout"] is not None and seeds[6]["loss"].size == 4
             for seeds in runs.values())
