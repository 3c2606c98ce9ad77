"""The shipped optimizer with a learned schedule head (``l2o-scale-head``):
it is the shipped ``l2o-scale`` byte for byte with the head the
registered selection chose, and by name it runs with that head and no
hand-set setting, in Keras, in metatest.py and in the benchmark; a run's
length, where given, feeds the head's progress input; a ``.keras`` file
holds the whole headed optimizer, so a saved run continues exactly in
another process."""

import filecmp
import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from l2o_scale import pretrained
from l2o_scale.benchmark import optimizers as bench_optimizers
from l2o_scale.keras_optimizer import LearnedOptimizer
from l2o_scale.meta_testing import metatest_config
from l2o_scale.steps import learned_schedule
from tests import keras_steps
from tests import paths

NAME = "l2o-scale-head"
BASE = "l2o-scale"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SELECTION = os.path.join(ROOT, "reproduce", "results", "head", "scaled-decay",
                         "selection.json")


def _chosen_head():
  """The head the registered order ships: among the chosen heads of the
  meta-training seeds, the one with the best validation score."""
  with open(SELECTION) as f:
    selection = json.load(f)
  best = min(selection["chosen_by_run"].values(),
             key=lambda path: selection["scores"][path])
  return os.path.join(ROOT, best)


def test_it_is_the_base_checkpoint_with_the_chosen_head():
  folder, base = pretrained.folder(NAME), pretrained.folder(BASE)
  for suffix in (".index", ".data-00000-of-00001"):
    assert filecmp.cmp(os.path.join(folder, "model.ckpt-0" + suffix),
                       os.path.join(base, "model.ckpt-0" + suffix),
                       shallow=False)
  assert pretrained.schedule_head(NAME) == os.path.join(
      folder, pretrained.HEAD_FILE)
  assert filecmp.cmp(pretrained.schedule_head(NAME), _chosen_head(),
                     shallow=False)
  assert pretrained.schedule_head(BASE) is None
  record = pretrained.record(NAME)
  assert record["optimizer_flags"] == pretrained.record(BASE)[
      "optimizer_flags"]
  card = record["card"]
  assert card["name"] == NAME and card["base"] == BASE
  assert pretrained.long_run_settings(NAME) is None  # nothing hand-set
  assert card["schedule_head_training"]["validation_score"] < 0
  assert "/work/" not in json.dumps(record)
  assert any(line.startswith("  schedule head ")
             for line in pretrained.describe(NAME))


def _weights(optimizer):
  return keras_steps.weights_after_steps(optimizer, steps=4)


def _same(a, b):
  return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def test_by_name_it_runs_with_its_head_and_no_setting():
  """pretrained(name) alone: the head, no weight decay, no schedule, the
  head's default run length; total_steps goes to the head's progress
  input and applies no card setting. Its steps are l2o-scale's with the
  head file, and not l2o-scale's without it."""
  plain = LearnedOptimizer.pretrained(NAME)
  assert isinstance(plain.schedule_head, learned_schedule.ScheduleHead)
  np.testing.assert_array_equal(
      plain.schedule_head.theta.numpy(),
      learned_schedule.ScheduleHead.load(_chosen_head()).theta.numpy())
  assert plain.total_steps is None and plain.weight_decay is None
  assert float(plain.learning_rate) == 1.
  sized = LearnedOptimizer.pretrained(NAME, total_steps=40)
  assert sized.total_steps == 40 and sized.weight_decay is None
  assert float(sized.learning_rate) == 1.

  headed = _weights(sized)
  by_hand = _weights(LearnedOptimizer.pretrained(
      BASE, schedule_head=_chosen_head(), total_steps=40))
  assert _same(headed, by_hand)
  assert not _same(headed, _weights(LearnedOptimizer.pretrained(BASE)))
  # The progress input: 4 of 40 steps is not 4 of the default 2,000.
  assert not _same(headed, _weights(LearnedOptimizer.pretrained(NAME)))
  # A head given by the caller takes the shipped one's place.
  zero = LearnedOptimizer.pretrained(
      NAME, schedule_head=learned_schedule.ScheduleHead(), total_steps=40)
  assert _same(_weights(zero), _weights(LearnedOptimizer.pretrained(BASE)))


def _metatest(**flags):
  return metatest_config.MetatestConfig(
      pretrained=NAME, problems=("include_mnist_mlp_problems",),
      save_dir="/tmp/l2o-head-unused", **flags)


@pytest.fixture(scope="module")
def metatest_runs(tmp_path_factory):
  """metatest.py runs (20 steps, held-out loss every 10, seed 6) by name
  (``--pretrained=l2o-scale-head``), of l2o-scale with the chosen head's
  file given by hand, and of l2o-scale alone: {which: (the training
  losses, the held-out record)}."""
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import metatest_run  # pylint: disable=g-import-not-at-top
  runs = {}
  for which, flags in (("by_name", ["--pretrained=" + NAME]),
                       ("by_hand", ["--pretrained=" + BASE,
                                    "--schedule_head=" + _chosen_head()]),
                       ("base", ["--pretrained=" + BASE])):
    save_dir = str(tmp_path_factory.mktemp(which))
    metatest.FLAGS.unparse_flags()
    metatest.FLAGS(["metatest.py"] + flags + [
        "--include_mnist_mlp_problems", "--num_testing_itrs=20",
        "--heldout_every=10", "--seeds=6", "--data_dir=" + paths.mnist_dir(),
        "--save_dir=" + save_dir, "--model_name=h"])
    try:
      written = metatest_run.run(metatest.build_config(metatest.FLAGS))
    finally:
      metatest.FLAGS.unparse_flags()
      metatest.FLAGS(["metatest.py"])
    losses, = [p for p in written if "eval_loss_record" in p]
    records = [p for p in os.listdir(save_dir) if "heldout_record" in p]
    assert len(records) == 1, os.listdir(save_dir)
    with open(losses, "rb") as f, open(os.path.join(save_dir,
                                                    records[0])) as g:
      runs[which] = (np.asarray(pickle.load(f), np.float64), json.load(g))
  return runs


def test_metatest_by_name_runs_its_head_and_refuses_hand_set_settings(
    metatest_runs):
  """By name, metatest.py's run is l2o-scale's with the chosen head's file
  given by hand, loss for loss, and not l2o-scale's without it."""
  by_name, by_hand, base = (metatest_runs[k][0]
                            for k in ("by_name", "by_hand", "base"))
  assert len(by_name) == 20 and np.all(np.isfinite(by_name))
  assert by_name.tobytes() == by_hand.tobytes()
  assert by_name.tobytes() != base.tobytes()
  assert metatest_config.long_run_note(_metatest()) is None
  for flags in (dict(weight_decay=1e-3), dict(step_schedule="cosine")):
    with pytest.raises(ValueError, match="^--pretrained=l2o-scale-head has "
                       "a learned schedule head, which decides the step's "
                       "scale and the weight decay: drop --step_schedule "
                       "and --weight_decay$"):
      metatest_config.validate(_metatest(**flags))
  other = _chosen_head()
  assert metatest_config.head_file(_metatest(schedule_head=other)) == other
  assert metatest_config.head_file(
      metatest_config.MetatestConfig(pretrained=BASE)) is None
  # The command reads the head once, where it starts: its plan holds it.
  plan = metatest_config.step_plan(_metatest(schedule_head=other))
  assert plan.head_file == other
  assert type(plan.transforms.transforms[-1]).__name__ == "ScheduleHead"


def test_the_benchmark_runs_it_as_shipped_and_has_no_bare_variant():
  """The benchmark's optimizer for a budget of 300 steps takes the steps
  of l2o-scale with the chosen head over a run of 300 steps, bit for bit
  (not those of l2o-scale alone, nor of the head over the default
  length)."""
  make, identity = bench_optimizers.factory(NAME)
  benchmark = _weights(make(300))
  assert _same(benchmark, _weights(LearnedOptimizer.pretrained(
      BASE, schedule_head=_chosen_head(), total_steps=300)))
  assert not _same(benchmark, _weights(LearnedOptimizer.pretrained(BASE)))
  assert not _same(benchmark, _weights(LearnedOptimizer.pretrained(
      BASE, schedule_head=_chosen_head())))
  assert bench_optimizers.bare_variant(NAME) is None
  with pytest.raises(ValueError, match="l2o-scale-head has no hand-set "
                     r"settings to leave out: .*it is l2o-scale\+bare"):
    bench_optimizers.parse(NAME + "+bare")
  # Stored runs of the headed optimizer are never taken for the base's.
  assert identity.split("@")[1] != bench_optimizers.identity(
      BASE + "+bare").split("@")[1].split("+")[0]


def test_a_missing_head_file_is_a_damaged_shipped_optimizer(tmp_path,
                                                             monkeypatch):
  root = tmp_path / "pretrained"
  shutil.copytree(pretrained.ROOT, root,
                  ignore=shutil.ignore_patterns("*.py", "__pycache__"))
  monkeypatch.setattr(pretrained, "ROOT", str(root))
  head = os.path.join(pretrained.folder(NAME), pretrained.HEAD_FILE)
  os.remove(head)
  with pytest.raises(pretrained.DamagedError,
                     match="the shipped file {} is missing: reinstalling"
                     .format(head)):
    LearnedOptimizer.pretrained(NAME)
  assert any(line.startswith(NAME + ": cannot be used")
             for line in pretrained.listing(width=1000))


def test_metatest_py_by_name_records_the_shipped_head(metatest_runs):
  """The held-out record of the run by name names the shipped head's file
  and no hand-set setting, and holds the losses of the run with the head
  given by hand (not those of l2o-scale alone)."""
  record = metatest_runs["by_name"][1]
  assert record["schedule_head"] == pretrained.schedule_head(NAME)
  assert record["weight_decay"] == 0 and record["step_schedule"] == "none"
  by_hand, base = metatest_runs["by_hand"][1], metatest_runs["base"][1]
  assert by_hand["schedule_head"] == _chosen_head()
  assert "schedule_head" not in base
  for key in ("train_loss", "heldout_loss"):
    assert len(record[key]) >= 2 and np.all(np.isfinite(record[key])), key
    assert record[key] == by_hand[key], key
  assert record["train_loss"] != base["train_loss"]


# One run of the headed optimizer in Keras' fit, saved and continued: the
# first half in this process, the second in another, which loads the file
# as docs/keras.md says (``import keras``, ``import l2o_scale``,
# ``keras.models.load_model`` without custom_objects). Argument 1 is the
# data folder, 2 the .keras file, 3 where the weights go, 4 the mode.
_HEADED_RUN = """
import sys
import numpy as np
import keras
import l2o_scale
from l2o_scale.data import load_mnist
from l2o_scale.keras_optimizer import LearnedOptimizer

data_dir, path, out, mode = sys.argv[1:5]
x, y = load_mnist(data_dir)
x, y = x[:64], y[:64]


def epoch(model):  # 4 steps of 16 images, in order
  model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)


if mode == "first":
  keras.utils.set_random_seed(3)
  model = keras.Sequential([
      keras.Input((28, 28, 1)), keras.layers.Flatten(),
      keras.layers.Dense(4, activation="sigmoid"), keras.layers.Dense(10)])
  model.compile(optimizer=LearnedOptimizer.pretrained(NAME, total_steps=8),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  epoch(model)
  model.save(path)
  epoch(model)
else:
  model = keras.models.load_model(path)
  epoch(model)
head = model.optimizer.schedule_head
np.savez(out, *model.get_weights(), theta=head.theta.numpy(),
         state=head.state.numpy(), total_steps=model.optimizer.total_steps)
""".replace("NAME", repr(NAME))


def test_a_keras_file_continues_a_headed_run_bit_for_bit_in_another_process(
    data_dir, tmp_path):
  """8 steps of fit with l2o-scale-head (total_steps=8): the model saved
  after 4 and loaded in a fresh process ends its 4 steps at the weights
  of the uninterrupted run, bit for bit, with the head's parameters, its
  state and the run's length."""
  script = tmp_path / "headed_run.py"
  script.write_text(_HEADED_RUN)
  path = str(tmp_path / "model.keras")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (paths.ROOT, os.environ.get("PYTHONPATH")) if p))
  ends = {}
  for mode in ("first", "continued"):
    ends[mode] = str(tmp_path / (mode + ".npz"))
    done = subprocess.run(
        [sys.executable, str(script), os.path.abspath(data_dir), path,
         ends[mode], mode],
        cwd=str(tmp_path), env=env, capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
  whole, continued = np.load(ends["first"]), np.load(ends["continued"])
  assert sorted(whole.files) == sorted(continued.files)
  for key in whole.files:
    assert whole[key].tobytes() == continued[key].tobytes(), key
  assert int(continued["total_steps"]) == 8
  assert continued["state"][0] == 8.  # The head took all 8 steps.
  np.testing.assert_array_equal(
      continued["theta"],
      learned_schedule.ScheduleHead.load(_chosen_head()).theta.numpy())
