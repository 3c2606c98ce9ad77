"""Choosing a schedule head (``python -m l2o_scale.head_training.selection``):
the zero head is always a candidate and wins ties, the shipped optimizer
with its card is one where asked, a head that only shrinks
the steps loses to it, the choice never reads a test split or runs a test
task, and a selection resumes from its file."""

import json

import numpy as np
import pytest

from l2o_scale.benchmark import training as bench_training
from l2o_scale.head_training import selection
from l2o_scale.head_training import training
from l2o_scale.steps import learned_schedule as ls
from tests import paths

DATA_DIR = paths.mnist_dir()
TASKS = ("logreg_mnist", "regression_synthetic_rich")


def _shrinking_head():
  """A head whose multiplier is its minimum for every input: the output
  bias of the multiplier far below 0."""
  theta = ls.initial_theta()
  theta[-2] = -20.
  return ls.ScheduleHead(theta)


def test_named_validation_and_test_tasks_are_apart_and_exist():
  from l2o_scale.benchmark import tasks  # pylint: disable=g-import-not-at-top
  assert not set(selection.VALIDATION_TASKS) & set(selection.TEST_TASKS)
  for name in selection.VALIDATION_TASKS + selection.TEST_TASKS:
    tasks.get(name)
  for names in (selection.VALIDATION_TASKS, selection.TEST_TASKS):
    assert {tasks.get(n).regime for n in names} == {"small-data",
                                                    "data-rich"}


def test_selection_prefers_the_zero_head_to_a_shrinking_one_and_resumes(
    tmp_path, monkeypatch):
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  _shrinking_head().save(str(run_dir / training.snapshot_name(20)))
  ls.ScheduleHead().save(str(run_dir / training.HEAD_FILE))  # zero again
  seen = []
  original = bench_training.Trainer.__init__

  optimizers = []

  def spy(self, task, splits, *args, **kwargs):
    seen.append(splits)
    optimizers.append(args[1])
    original(self, task, splits, *args, **kwargs)
  monkeypatch.setattr(bench_training.Trainer, "__init__", spy)
  out = str(tmp_path / "selection.json")
  lines = []
  result = selection.select([str(run_dir)], out, tasks=TASKS, budget=30,
                         data_dir=DATA_DIR, tiny=True, log=lines.append,
                         with_card=True)
  shrinking, last = (str(run_dir / training.snapshot_name(20)),
                     str(run_dir / training.HEAD_FILE))
  # With with_card, the shipped optimizer with its card's settings and no
  # head is a candidate too: what a head must beat.
  assert list(result["scores"]) == [selection.ZERO, selection.CARD, shrinking,
                                    last]
  assert result["scores"][selection.ZERO] == 0.
  assert result["scores"][shrinking] > 0.  # 1e-3 of each step: barely moves
  assert result["scores"][last] == 0.  # the same steps as the zero head
  heads = {k: v for k, v in result["scores"].items() if k != selection.CARD}
  assert selection.choose(heads) == selection.ZERO  # ties go to the warm start
  assert result["chosen"] == selection.choose(result["scores"])
  card = optimizers[len(TASKS):2 * len(TASKS)]
  assert all(o.weight_decay and type(o.schedule_head).__name__ !=
             "ScheduleHead" for o in card)
  assert all(type(o.schedule_head).__name__ == "ScheduleHead" and
             not o.weight_decay for o in optimizers[:len(TASKS)])
  # Never the test split: the trainer's test split is validation data.
  assert len(seen) == 4 * len(TASKS)
  for splits in seen:
    assert np.array_equal(splits.test[0], splits.validation[0][:1])
  with open(out, encoding="utf-8") as f:
    assert json.load(f)["chosen"] == result["chosen"]
  # Run again: every number comes from the file, nothing trains.
  seen.clear()
  again = selection.select([str(run_dir)], out, tasks=TASKS, budget=30,
                        data_dir=DATA_DIR, tiny=True, log=lines.append,
                        with_card=True)
  assert not seen and again["scores"] == result["scores"]


def test_a_better_candidate_is_chosen():
  scores = {selection.ZERO: 0., "a": -0.1, "b": 0.2}
  assert selection.choose(scores) == "a"
  runs = {"t": dict(validation_loss=1., diverged=False)}
  assert selection.score({"t": dict(validation_loss=np.e, diverged=False)},
                      runs) == pytest.approx(1.)
  assert selection.score({"t": dict(validation_loss=0.5, diverged=True)},
                      runs) == float("inf")


def test_each_run_chooses_among_its_own_heads_and_the_zero_head():
  found = [(selection.ZERO, None), ("r1/head-20.npz", "r1/head-20.npz"),
           ("r1/head.npz", "r1/head.npz"), ("r2/head-20.npz",
                                            "r2/head-20.npz")]
  scores = {selection.ZERO: 0., "r1/head-20.npz": -0.3, "r1/head.npz": -0.1,
            "r2/head-20.npz": 0.4}
  assert selection.choose(scores) == "r1/head-20.npz"
  assert selection.choose_by_run(["r1", "r2"], found, scores) == {
      "r1": "r1/head-20.npz", "r2": selection.ZERO}
  found.insert(1, (selection.CARD, selection.CARD))
  scores[selection.CARD] = -0.2
  assert selection.choose_by_run(["r1", "r2"], found, scores) == {
      "r1": "r1/head-20.npz", "r2": selection.CARD}


def test_refusals(tmp_path):
  with pytest.raises(ValueError, match="test tasks"):
    selection.select([str(tmp_path)], str(tmp_path / "s.json"),
                  tasks=("logreg_mnist", selection.TEST_TASKS[0]))
  with pytest.raises(FileNotFoundError, match="no schedule head there"):
    selection.select([str(tmp_path)], str(tmp_path / "s.json"),
                  tasks=("logreg_mnist",))
