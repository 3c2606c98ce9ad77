"""metarun.py as a user runs it: bad input fails early with one clear message
and loses nothing.

The commands run in another process than the tests (metarun.py's flags are
module state): one per module (the ``metarun`` fixture,
tests/metarun_process.py: the program's entry point once a command, so
TensorFlow is imported once); those that need a process of their own (a
fault-injected disk, a patched ``metarun.train``) start one. Functions of a
configuration (``metarun.parse_config``, which leaves ``metarun.FLAGS`` as
they are) run in the test's. The rules that combine flags:
tests/test_flag_rules.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code):
  """Runs ``python -c code`` in the repository root (absl flags are global,
  so in-process checks of metarun's functions need their own process)."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, cwd=ROOT, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


TINY = ["--num_meta_iterations=1", "--fix_unroll=True",
        "--fix_unroll_length=2", "--fix_num_steps=2", "--fix_num_steps_eval=2",
        "--evaluation_epochs=1", "--mini_batch_size=256", "--summaries=False"]


def test_missing_data_gives_one_clear_message(tmp_path, metarun):
  empty = tmp_path / "no_mnist_here"
  empty.mkdir()
  result = metarun("--train_dir={}".format(tmp_path / "run"), *TINY,
                   env={"L2O_SCALE_DATA_DIR": str(empty)})
  assert result.returncode == 2
  assert "MNIST train split not found" in result.stderr
  assert str(empty) in result.stderr and "--data_dir" in result.stderr
  assert "Traceback" not in result.stderr


def test_resume_with_other_optimizer_options_names_the_flag(tmp_path,
                                                            data_dir, metarun):
  train_dir = "--train_dir={}".format(tmp_path)
  data = "--data_dir={}".format(data_dir)
  first = metarun(train_dir, data, "--num_gradient_scales=3", *TINY)
  assert first.returncode == 0, first.stderr[-2000:]
  logdir = tmp_path / "HierarchicalRNN_GRUCell_20_2"
  before = sorted(os.listdir(logdir))
  record = (logdir / "run_record.json").read_text()
  second = metarun(train_dir, data, *TINY)
  assert second.returncode == 2
  assert second.stderr.strip().splitlines()[-1] == (
      "metarun.py: {} was trained with --num_gradient_scales=3; this run "
      "gives --num_gradient_scales=4. Use the same flags, another "
      "--train_dir, or --resume=False --overwrite to start over.".format(
          tmp_path))
  assert sorted(os.listdir(logdir)) == before  # nothing written or lost
  assert (logdir / "run_record.json").read_text() == record
  # Without the record (e.g. a TF1 train dir) the checkpoint check names the
  # first variable that does not fit.
  (logdir / "run_record.json").unlink()
  third = metarun(train_dir, data, *TINY)
  assert third.returncode == 2
  assert "cannot resume" in third.stderr and "'LOL/" in third.stderr


def test_paper_command_quirk_is_reported(tmp_path, data_dir, metarun):
  result = metarun("--train_dir={}".format(tmp_path),
                   "--data_dir={}".format(data_dir), "--reg_optimizer=True",
                   "--reg_option=hessian-esd", "--regularize_time=none",
                   *TINY)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "--regularize_time=none switches the optimizer regularizer" in (
      result.stdout)
  assert "[meta-iteration 1/1] unroll 1/1" in result.stdout


# The optimizer defaults of the original, transcribed as literals from its
# flag definitions (L2O-Scale-Training/metarun.py and
# L2O-Scale-Training/optimizer/hierarchical_rnn.py, file:line of each).
ORIGINAL_OPTIMIZER_DEFAULTS = {
    "init_lr_range": (1e-6, 1e-2),  # metarun.py:154 min_lr, :156 max_lr
    "zero_init_lr_weights": True,  # metarun.py:160
    "use_relative_lr": True,  # metarun.py:164
    "use_extreme_indicator": False,  # metarun.py:168
    "use_log_means_squared": True,  # metarun.py:172
    "use_problem_lr_mean": True,  # metarun.py:175
    "learnable_decay": True,  # metarun.py:181
    "dynamic_output_scale": True,  # metarun.py:184
    "use_log_objective": True,  # metarun.py:187
    "use_attention": False,  # metarun.py:190
    "use_second_derivatives": True,  # metarun.py:192
    "num_gradient_scales": 4,  # metarun.py:194
    "max_log_lr": 33,  # metarun.py:198
    "obj_train_max_multiplier": -1,  # metarun.py:200 objective_training_max_multiplier
    "use_gradient_shortcut": True,  # metarun.py:205
    "use_lr_shortcut": False,  # metarun.py:209
    "use_grad_products": True,  # metarun.py:213
    "use_multiple_scale_decays": False,  # metarun.py:217
    "use_numerator_epsilon": False,  # metarun.py:219
    "learnable_inp_decay": True,  # metarun.py:222
    "learnable_rnn_init": True,  # metarun.py:224
    "biasgrucell_scale": 0.5,  # hierarchical_rnn.py:33
    "biasgrucell_gate_bias_init": 2.2,  # hierarchical_rnn.py:36
    "hrnn_rnn_readout_scale": 0.5,  # hierarchical_rnn.py:40
    "hrnn_default_decay_var_init": 2.2,  # hierarchical_rnn.py:42
    "scale_decay_bias_init": 3.2,  # hierarchical_rnn.py:47
    "learning_rate_momentum_logit_init": 3.2,  # hierarchical_rnn.py:51
    "hrnn_affine_scale": 0.5,  # hierarchical_rnn.py:54
}


def test_default_optimizer_kwargs_are_the_original_flag_defaults():
  """What metarun.py builds the optimizer with when no flag is given, and
  ``optimizer_flags.default_optimizer_kwargs`` (what the Keras optimizer
  assumes a checkpoint was trained with), both equal the original's flag
  defaults (the literals above)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top
  values = flags.FlagValues()  # A program's own set, as metarun.py's.
  optimizer_flags.define_optimizer_flags(values, "metarun")
  values(["metarun"])
  expected = {k: list(v) if isinstance(v, tuple) else v
              for k, v in ORIGINAL_OPTIMIZER_DEFAULTS.items()}
  # Compared as JSON (tuples as lists), as the literals are written.
  from_flags, defaults = json.loads(json.dumps([
      optimizer_flags.optimizer_kwargs(values),
      optimizer_flags.default_optimizer_kwargs()]))
  assert from_flags == expected
  assert defaults == expected


def test_a_stray_false_and_divergence_exit_with_one_line(
    tmp_path, metarun, monkeypatch, capsys):
  """A stray 'False' (the combination rules: tests/test_flag_rules.py), and
  the end-of-run report of a run whose every evaluation was non-finite."""
  import metarun as program  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(sys, "argv", ["metarun.py", "--fix_unroll", "False"])
  assert program.stray_arguments(["metarun.py", "False"]) == (
      "unexpected argument 'False': boolean flags take their value after "
      "'=', e.g. --fix_unroll=False")
  capsys.readouterr()
  assert program.report_end(program.parse_config(["metarun.py"]), dict(
      evaluations=2, best_evaluation=float("inf"),
      last_checkpoint="x/model.ckpt-2", best_model_idx=None), "x") == 3
  assert "meta-training diverged: all 2 evaluation(s) gave a non-finite " in (
      capsys.readouterr().err)
  stray = metarun("--train_dir={}".format(tmp_path), "--fix_unroll", "False")
  assert stray.returncode == 2 and not os.listdir(tmp_path)
  assert stray.stderr.strip().splitlines()[-1] == (
      "metarun.py: unexpected argument 'False': boolean flags take their "
      "value after '=', e.g. --fix_unroll=False")


@pytest.mark.parametrize("mode,failed", [
    ("full", "HierarchicalRNN_GRUCell_20_2/run_record.json failed: No "
             "space left on device"),
    ("ro", "run failed: Read-only file system")])
def test_full_or_read_only_disk_is_one_line_naming_the_file(
    tmp_path, data_dir, mode, failed):
  """A train dir on a full (one 4 KiB page) or read-only disk: exit 2, one
  line naming the file that could not be written and what to do; nothing
  left behind. The disk is a fault-injected folder (tests/faultfs.py), so
  this runs everywhere, without mount or privileges."""
  from tests import faultfs  # pylint: disable=g-import-not-at-top
  disk = tmp_path / "disk"
  disk.mkdir()
  out = subprocess.run(
      faultfs.command(disk, mode, os.path.join(ROOT, "metarun.py"),
                      ["--train_dir={}".format(disk / "run"),
                       "--data_dir={}".format(data_dir), *TINY]),
      capture_output=True, text=True, cwd=ROOT, timeout=600,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  lines = out.stderr.strip().splitlines()
  assert out.returncode == 2, out.stderr
  assert lines[-1].startswith("metarun.py: reading or writing "), lines
  assert failed in lines[-1]
  assert "free space or give another --train_dir" in lines[-1]
  left = [os.path.join(d, f) for d, _, files in os.walk(disk / "run")
          for f in files]
  assert left == [], left


def test_only_errors_of_the_train_dir_are_reported_as_disk_errors(
    tmp_path, data_dir):
  """A TensorFlow error that names a file of the run (a full disk while
  saving a checkpoint, as TF's SaveV2 reports it) is the one-line disk
  message; an error of the computation (here, incompatible shapes raised
  inside training) keeps its traceback instead of blaming the disk."""
  code = """
import sys
import tensorflow as tf
import metarun
from l2o_scale import metaopt

def fails(message):
  def train(*args, **kwargs):
    if message is None:
      tf.matmul(tf.zeros([2, 3]), tf.zeros([2, 3]))  # InvalidArgumentError
    raise tf.errors.ResourceExhaustedError(None, None, message)
  return train

metarun.FLAGS(["metarun.py", "--train_dir={train_dir}",
               "--data_dir={data_dir}"] + {tiny!r})
logdir = "{train_dir}/HierarchicalRNN_GRUCell_20_2"
metarun.train = fails(
    "{{{{function_node __wrapped__SaveV2}}}} " + logdir +
    "/model.ckpt-1_temp/part-00000; No space left on device [Op:SaveV2]")
print("disk exit", metarun.main(["metarun.py"]))
metarun.train = fails(None)
metarun.main(["metarun.py"])
""".format(train_dir=tmp_path / "run", data_dir=data_dir, tiny=TINY)
  out = _python(code)
  lines = out.stderr.strip().splitlines()
  assert "disk exit 2" in out.stdout, (out.stdout, out.stderr)
  disk = [l for l in lines if l.startswith("metarun.py: reading or writing")]
  assert disk == [
      "metarun.py: reading or writing {}/HierarchicalRNN_GRUCell_20_2/"
      "model.ckpt-1_temp/part-00000 failed: No space left on device. If the "
      "disk is full or read-only, free space or give another --train_dir; if "
      "a checkpoint is damaged (truncated .data, empty .index), restore it, "
      "name an earlier one in the 'checkpoint' file, or start over with "
      "--resume=False --overwrite.".format(
          tmp_path / "run")], lines
  assert out.returncode == 1
  assert lines[-1].startswith("tensorflow.python.framework.errors_impl."
                              "InvalidArgumentError"), lines[-3:]


def _end(stdout):
  """The end-of-run lines of a run's output (from its best model on)."""
  return stdout[stdout.index("Best model: "):]


def test_a_finished_run_run_again_reports_what_it_reported(
    tmp_path, data_dir, metarun):
  """The same command after the run finished: its verdict (from the
  resume state: its first evaluation, its best model's meta-iteration),
  best model and latest checkpoint as the run itself said them, and no
  warning of TensorFlow about values the restore left unread. The run's
  lines fit a terminal (paths aside): the explanations are wrapped, and
  the note on --mini_batch_size (the original's 10,000 rows, more than the
  offline MNIST's 5,000) says that nothing needs changing."""
  args = ["--train_dir={}".format(tmp_path), "--data_dir={}".format(data_dir),
          "--selection=robust", "--selection_steps=10",
          "--meta_learning_rate=1e-3"] + [
              a for a in TINY[1:] if not a.startswith("--mini_batch_size")
          ] + ["--num_meta_iterations=2"]
  first = metarun(*args)
  assert first.returncode == 0, first.stderr[-2000:]
  # The longest, an unroll's line of numbers: about 130 characters.
  lines = first.stdout.replace(str(tmp_path), "D").splitlines()
  assert max(len(l) for l in lines) <= 150, max(lines, key=len)
  assert "Nothing to change" in first.stdout
  # A process of its own: TensorFlow warns as the process's objects go.
  again = subprocess.run([sys.executable, "metarun.py"] + args, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "Training already complete (2 of 2 meta-iterations)" in again.stdout
  assert _end(again.stdout) == _end(first.stdout)
  verdict = _end(first.stdout).splitlines()[2]
  assert verdict.startswith(("Done. It learned", "Done, but it learned "
                             "nothing")), verdict
  assert "unrestored values" not in again.stderr


def test_a_run_whose_every_selection_diverged_says_so_and_so_does_a_rerun(
    tmp_path, data_dir, metarun):
  """--divergence_growth_limit=1e-9: every --selection=robust run counts as
  diverged on every machine, while training and its evaluation stay
  finite. No model.ckpt-0 is written; the run and the same command again
  exit 3 with the line that says it was the selection, and neither names a
  best model."""
  args = ["--train_dir={}".format(tmp_path), "--data_dir={}".format(data_dir),
          "--selection=robust", "--selection_steps=10",
          "--divergence_growth_limit=1e-9"] + TINY
  logdir = tmp_path / "HierarchicalRNN_GRUCell_20_2"
  line = (
      "metarun.py: no model was selected: each of the 1 robust selection "
      "score(s) was infinite (a 10-step --selection_steps run diverged on at "
      "least one of its seeds), so no best model (model.ckpt-0) was "
      "written; the latest checkpoint {} holds the meta-parameters "
      "trained.".format(logdir / "model.ckpt-1"))
  first, again = metarun(*args), metarun(*args)
  for run in (first, again):
    assert run.returncode == 3, (run.stdout[-2000:], run.stderr[-2000:])
    assert run.stderr.strip().splitlines()[-1].startswith(line)
    assert "Best model" not in run.stdout
  assert "Training already complete" in again.stdout
  costs = [float(l.split("cost=")[1]) for l in first.stdout.splitlines()
           if l.startswith("evaluation 1, cost=")]
  assert len(costs) == 1 and np.isfinite(costs[0])
  assert not (logdir / "model.ckpt-0.index").exists()
