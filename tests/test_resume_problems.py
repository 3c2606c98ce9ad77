"""Resume of a run of several sub-problems (``--num_problems``) and of a run
of one problem drawn from a set: stopped at a checkpoint and started again
in a process whose random streams differ (another seed, or none), it ends
with the uninterrupted run's meta-parameters, or refuses in one line.

The interruption is deterministic: the uninterrupted run's train dir is
copied right after a chosen checkpoint is written, which is what a
``kill -9`` just after that write leaves on disk; the copy is resumed.
"""

import io
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import train_state
from l2o_scale.meta_training import training
from l2o_scale.runs import checkpoints
from optimizer import hierarchical_rnn
from problems import problem_generator as pg
from problems import problem_spec

# Three problems of different sizes (a sub-problem drawn wrongly cannot
# take the carried state of another), without a random_seed, as the
# original's quadratic_problems: each draws its matrix from numpy's stream
# when it is built, so a sub-problem built from other streams differs.
PROBLEMS = [(problem_spec.Spec(pg.Quadratic, (n,), {}), None, None)
            for n in (3, 4, 5)]


def _optimizer_spec():
  # Random initial learning rates (each fresh optimizer state draws them).
  return problem_spec.Spec(hierarchical_rnn.HierarchicalRNN, ([6, 8, 5],),
                           {"init_lr_range": (1e-6, 1e-2),
                            "use_second_derivatives": False})


def _config(logdir, num_problems, evaluate, **training_flags):
  # Two meta-iterations of two 2-step unrolls per sub-problem (the state
  # carried from one unroll to the next is saved), with ``evaluate`` one
  # evaluation at its end (model.ckpt-0 is the best over the sub-problems).
  schedule = config_lib.Schedule(
      num_meta_iterations=2, learning_rate=1e-3, fix_unroll=True,
      fix_unroll_length=2, fix_num_steps=4, fix_num_steps_eval=2,
      evaluation_epochs=1, evaluation_period=2 if evaluate else 3,
      num_problems=num_problems)
  return config_lib.TrainerConfig(
      logdir=str(logdir), schedule=schedule, summaries=False,
      training=config_lib.TrainingConfig(**training_flags))


def _seed(seed):
  np.random.seed(seed)
  random.seed(seed)
  tf.random.set_seed(seed)


def _train(logdir, num_problems, seed, problems=PROBLEMS, evaluate=True,
           **training_flags):
  _seed(seed)
  out = io.StringIO()
  training.run_meta_training(
      _config(logdir, num_problems, evaluate, **training_flags),
      _optimizer_spec(), problems, out=out)
  return out.getvalue()


def _train_copying(logdir, num_problems, copies, **train_args):
  """The uninterrupted run (seed 0); ``copies``: {(sub-problem index,
  checkpoint name): folder} to copy the train dir to right after that
  checkpoint is written (the last such write)."""
  save = train_state.TrainState.save

  def save_and_copy(state, path):
    written = save(state, path)
    key = (int(state.progress.problem_itr.numpy()), os.path.basename(path))
    if key in copies:
      shutil.rmtree(copies[key], ignore_errors=True)
      shutil.copytree(logdir, copies[key])
    return written

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(train_state.TrainState, "save", save_and_copy)
    return _train(logdir, num_problems, 0, **train_args)


def _variables(path):
  reader = tf.train.load_checkpoint(str(path))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(("optimizer/", "meta_optimizer/", "progress/"))}


def _assert_same_checkpoints(a, b, names):
  for name in names:
    expected, seen = _variables(a / name), _variables(b / name)
    assert sorted(expected) == sorted(seen)
    for key in expected:
      np.testing.assert_array_equal(seen[key], expected[key],
                                    err_msg=name + " " + key)


INSIDE = (2, "model.ckpt-1")   # Sub-problem 3 of 4 after its first
                               # meta-iteration.
BETWEEN = (1, "model.ckpt-2")  # Sub-problem 2 of 4 done, 3 not begun.


@pytest.fixture(scope="module")
def four_problems(tmp_path_factory):
  """A run of 4 sub-problems drawn from PROBLEMS, and copies of its train
  dir at INSIDE and BETWEEN."""
  folder = tmp_path_factory.mktemp("four_problems")
  copies = {INSIDE: folder / "inside", BETWEEN: folder / "between"}
  log = _train_copying(folder / "straight", 4, copies)
  assert log.count("[meta-iteration 2/2] unroll 2/2") == 4
  return folder, log


@pytest.mark.parametrize("point,line", [
    (INSIDE, "at meta-iteration 1 of 2 of sub-problem 3 of 4."),
    (BETWEEN, "at meta-iteration 0 of 2 of sub-problem 3 of 4 (sub-problem "
              "2 is done).")], ids=["inside_sub_problem_3", "between_2_and_3"])
def test_a_run_of_several_sub_problems_resumes_exactly(four_problems, point,
                                                       line, tmp_path):
  folder, straight_log = four_problems
  resumed = tmp_path / "resumed"
  shutil.copytree(folder / ("inside" if point == INSIDE else "between"),
                  resumed)
  log = _train(resumed, 4, seed=99)
  assert line in log.splitlines()[0], log.splitlines()[0]
  # The rest of sub-problem 3 and all of sub-problem 4 trained.
  trained = 1 if point == INSIDE else 2
  assert log.count("[meta-iteration 2/2] unroll 2/2") == 2
  assert log.count("[meta-iteration 1/2] unroll 2/2") == trained
  assert "already complete" not in log
  _assert_same_checkpoints(folder / "straight", resumed,
                           ["model.ckpt-2", "model.ckpt-0"])
  # The best model of the same meta-iteration as the uninterrupted run's.
  best = [l for l in straight_log.splitlines() if l.startswith("best model")]
  assert len(best) == 1 and best[0] in log.splitlines()
  assert "already complete (2 of 2 meta-iterations of each of 4 " \
      "sub-problems)" in _train(resumed, 4, seed=99)


def test_a_resume_that_does_not_fit_the_problems_is_refused(four_problems,
                                                            tmp_path):
  """Other problems (or another --num_problems): one line naming the
  checkpoint and the sub-problem, before anything is trained."""
  folder, _ = four_problems
  resumed = tmp_path / "resumed"
  shutil.copytree(folder / "inside", resumed)
  with pytest.raises(checkpoints.CheckpointMismatchError) as refused:
    _train(resumed, 4, seed=0, problems=PROBLEMS[:2])
  assert "continues sub-problem 3 of a run of 4 sub-problems drawn from 3 " \
      "problems; this run has --num_problems=4 and 2 problems" in str(
          refused.value)
  with pytest.raises(checkpoints.CheckpointMismatchError) as refused:
    _train(resumed, 2, seed=0)
  assert "is of sub-problem 3, and this run has 2 (--num_problems=2)" in str(
      refused.value)
  # --reg_option=hessian-ev draws a sub-problem's seed from TensorFlow's
  # stream: a sub-problem not begun cannot start as it would have.
  between = tmp_path / "between"
  shutil.copytree(folder / "between", between)
  files = sorted(os.listdir(between))
  with pytest.raises(checkpoints.CheckpointMismatchError) as refused:
    _train(between, 4, seed=0, reg_option="hessian-ev")
  assert "ends sub-problem 2, and sub-problem 3 cannot start" in str(
      refused.value)
  assert sorted(os.listdir(between)) == files


def test_a_checkpoint_beside_the_resume_state_of_another_save_is_refused(
    four_problems, tmp_path):
  """A run stopped while rewriting a checkpoint (model.ckpt-K again in the
  next sub-problem; its resume state is written first) leaves the new
  resume state beside the old variables: refused, naming the file."""
  folder, _ = four_problems
  resumed = tmp_path / "resumed"
  shutil.copytree(folder / "between", resumed)
  shutil.copy(folder / "straight" / "model.ckpt-2.resume.npz",
              resumed / "model.ckpt-2.resume.npz")
  with pytest.raises(checkpoints.DamagedCheckpointError) as refused:
    _train(resumed, 4, seed=0)
  assert refused.value.filename == str(resumed / "model.ckpt-2.resume.npz")
  assert "are of different saves" in str(refused.value)


def test_a_problem_drawn_from_a_set_is_drawn_again_on_resume(tmp_path):
  """--num_problems=1 over a set of 3: the resumed run trains the problem
  the interrupted run drew, though its own streams would draw another
  (as a restarted distributed chief's, which draws the same way)."""
  def first_pick(seed):
    random.seed(seed)
    return training.sample_problems(range(3), 1, True)[0]
  assert first_pick(0) != first_pick(2)  # Else this test proves nothing.
  straight, copy = tmp_path / "straight", tmp_path / "copy"
  _train_copying(straight, 1, {(0, "model.ckpt-1"): copy}, evaluate=False)
  log = _train(copy, 1, seed=2, evaluate=False)
  assert "at meta-iteration 1 of 2." in log.splitlines()[0]
  _assert_same_checkpoints(straight, copy, ["model.ckpt-2"])


def test_a_mixed_run_resumes_exactly_whatever_the_resumed_processs_seed(
    tmp_path):
  """--mix_problems builds every problem (drawing its matrix) at the start:
  the resumed run builds them from the interrupted run's streams."""
  straight, copy = tmp_path / "straight", tmp_path / "copy"
  _train_copying(straight, 1, {(0, "model.ckpt-1"): copy},
                 problems=PROBLEMS[:2], evaluate=False, mix_problems=True)
  log = _train(copy, 1, seed=2, problems=PROBLEMS[:2], evaluate=False,
               mix_problems=True)
  assert "at meta-iteration 1 of 2." in log.splitlines()[0]
  _assert_same_checkpoints(straight, copy, ["model.ckpt-2"])
