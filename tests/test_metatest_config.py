"""The rules of metatest's flags, each checked twice: through the library
(:func:`l2o_scale.meta_testing.metatest_run.run` of a ``MetatestConfig``
built in code) and through the command line (``metatest.py``'s flags
parsed, then its ``main``). Both refuse before any work: no file written,
no data read."""

import pytest

import metatest
from l2o_scale.config import optimizer_flags
from l2o_scale.meta_testing import metatest_config
from l2o_scale.meta_testing import metatest_run

FLAGS = metatest.FLAGS
MetatestConfig = metatest_config.MetatestConfig
MLP = "include_mnist_mlp_problems"
# A training set without a held-out split (not in problems.registry).
NO_SPLIT = metatest_config.TRAINING_PROBLEM_FLAGS[0][0]


@pytest.fixture(autouse=True)
def _reset_flags():
  yield
  FLAGS.unparse_flags()


def _cli(*args):
  """``metatest.py *args`` up to its first refusal (its main, in this
  process)."""
  FLAGS.unparse_flags()
  FLAGS(["metatest.py"] + list(args))
  return metatest.main(["metatest.py"])


# (command line, the same config in code, the refusal)
RULES = [
    (["--test_optimizer=Adam", "--" + MLP, "--flatness_probes=3"],
     dict(test_optimizer="Adam", problems=(MLP,), flatness_probes=3),
     r"^--flatness_probes measures the solution of a --heldout_every run; "
     r"pass --heldout_every=N too\.$"),
    (["--test_optimizer=Adam"], dict(test_optimizer="Adam"),
     r"^No test problem selected\. Pass one of: .*"
     r"--include_mnist_mlp_relu_problems"),
    (["--test_optimizer=Adam", "--include_vgg16_problems"],
     dict(test_optimizer="Adam", problems=("include_vgg16_problems",)),
     r"^--include_vgg16_problems was declared by the original metatest\.py "
     r"but has no problem set"),
    (["--test_optimizer=Adam", "--heldout_every=5", "--" + NO_SPLIT],
     dict(test_optimizer="Adam", heldout_every=5, problems=(NO_SPLIT,)),
     r"^--heldout_every needs a problem trained on a dataset with a "
     r"held-out split \(MNIST or CIFAR-10 problem sets\); {} has "
     r"none\.$".format(NO_SPLIT)),
    (["--test_optimizer=SGD", "--pretrained=l2o-scale", "--" + MLP],
     dict(test_optimizer="SGD", pretrained="l2o-scale", problems=(MLP,)),
     r"^--pretrained tests a learned optimizer; it does not go with "
     r"--test_optimizer=SGD$"),
    (["--baseline_learning_rate=0.1", "--" + MLP],
     dict(baseline_learning_rate=0.1, problems=(MLP,)),
     r"^--baseline_learning_rate sets the learning rate of the SGD/Adam/"
     r"Adagrad baselines; --test_optimizer=L2o has none\.$"),
    (["--test_optimizer=Adam", "--baseline_learning_rate=0", "--" + MLP],
     dict(test_optimizer="Adam", baseline_learning_rate=0., problems=(MLP,)),
     r"^invalid flags: --baseline_learning_rate must be > 0 \(got 0\)$"),
    (["--test_optimizer=Rprop", "--" + MLP],
     dict(test_optimizer="Rprop", problems=(MLP,)),
     r"^Unknown --test_optimizer='Rprop'; choose one of L2o, SGD, Adam, "
     r"Adagrad$"),
    (["--pretrained=l2o-scale", "--train_dir=runs/x",
      "--restore_model_name=model.ckpt-0", "--" + MLP],
     dict(pretrained="l2o-scale", train_dir="runs/x",
          restore_model_name="model.ckpt-0", problems=(MLP,)),
     r"^--pretrained=l2o-scale names the checkpoint; drop --train_dir and "
     r"--restore_model_name$"),
    # The learned optimizer's flags count for L2o only; the bad ones are
    # all named, in the order of their flags.
    (["--test_optimizer=Adam", "--schedule_head=h.npz", "--" + MLP],
     dict(test_optimizer="Adam", schedule_head="h.npz", problems=(MLP,)),
     r"^--schedule_head goes with the learned optimizer "
     r"\(--test_optimizer=L2o\), not --test_optimizer=Adam$"),
    (["--pretrained=l2o-scale", "--schedule_head=h.npz",
      "--step_schedule=cosine", "--" + MLP],
     dict(pretrained="l2o-scale", schedule_head="h.npz",
          step_schedule="cosine", problems=(MLP,)),
     r"^--schedule_head decides the step's scale and the weight decay: "
     r"drop --step_schedule and --weight_decay$"),
    (["--pretrained=l2o-scale", "--schedule_head=no/such/head.npz",
      "--" + MLP],
     dict(pretrained="l2o-scale", schedule_head="no/such/head.npz",
          problems=(MLP,)),
     r"^--schedule_head=no/such/head\.npz: no such file"),
    (["--num_testing_itrs=0", "--seeds=6,x", "--cell_cls=LSTMFoo", "--" + MLP],
     dict(num_testing_itrs=0, seeds=("6", "x"), problems=(MLP,),
          optimizer_config=optimizer_flags.OptimizerConfig(
              cell_cls="LSTMFoo")),
     r"^invalid flags: --num_testing_itrs must be >= 1 \(got 0\); --seeds "
     r"must be a comma-separated list of integers \(got '6,x'\); "
     r"--cell_cls='LSTMFoo' is not one of GRUCell, LSTMCell, BasicLSTMCell$"),
]


@pytest.mark.parametrize("args,fields,message", RULES,
                         ids=[str(i) for i in range(len(RULES))])
def test_a_combination_is_refused_by_the_library_and_the_command_line(
    args, fields, message, tmp_path):
  save_dir = tmp_path / "results"
  with pytest.raises(ValueError, match=message):
    metatest_run.run(MetatestConfig(save_dir=str(save_dir), **fields))
  with pytest.raises(ValueError, match=message):
    _cli(*args, "--save_dir={}".format(save_dir))
  assert not save_dir.exists()


def test_the_command_lines_config_is_the_one_built_in_code():
  """build_config maps each flag to its field; an explicit flag at its
  default value counts as given on the command line only."""
  FLAGS.unparse_flags()
  FLAGS(["metatest.py", "--test_optimizer=Adam", "--seeds=1,2",
         "--include_mnist_mlp_relu_problems", "--" + MLP, "--cell_size=5",
         "--save_dir=opt/"])
  config = metatest.build_config(FLAGS)
  assert config.problems == (MLP, "include_mnist_mlp_relu_problems")
  assert config == MetatestConfig(
      test_optimizer="Adam", seeds=("1", "2"), problems=config.problems,
      optimizer_config=optimizer_flags.OptimizerConfig(cell_size=5),
      unused=config.unused, given=config.given)
  assert config.seed_list() == [1, 2]
  assert config.is_given("save_dir") and config.is_given("cell_size")
  assert not config.is_given("train_dir")
  in_code = MetatestConfig(save_dir="opt/", train_dir="x")
  assert not in_code.is_given("save_dir") and in_code.is_given("train_dir")
  # The unused meta-training flags keep their bounds.
  FLAGS.unparse_flags()
  FLAGS(["metatest.py", "--min_num_unrolls=0"])
  assert "--min_num_unrolls must be >= 1 (got 0)" in (
      metatest_config.flag_errors(metatest.build_config(FLAGS)))


def test_the_explicit_default_train_dir_goes_with_pretrained_in_code_only():
  """``--train_dir=opt/`` on the command line contradicts --pretrained;
  a config built in code cannot say it was given, so its default train_dir
  is not refused there."""
  with pytest.raises(ValueError, match="drop --train_dir$"):
    _cli("--pretrained=l2o-scale", "--train_dir=opt/", "--" + MLP)
  assert metatest_config.validate(MetatestConfig(
      pretrained="l2o-scale", save_dir="res", problems=(MLP,),
      weight_decay=1e-3, step_schedule="cosine", step_decay_start=0.8)) == []


def test_notes_of_allowed_combinations():
  """--pretrained without its card's settings for long runs gets one note
  naming them; --native_step without --jit_compile says its kernel does not
  run; the original's default --save_dir is named. A baseline, or the
  card's settings, get none of the first two."""
  notes = metatest_config.validate(MetatestConfig(
      pretrained="l2o-scale", native_step=True, problems=(MLP,)))
  assert notes == [
      "--native_step: it runs in steps compiled by XLA only (--jit_compile); "
      "TensorFlow's ops run instead.",
      "Note: the card of l2o-scale gives settings for runs of thousands of "
      "steps: --step_decay_start=0.8 --step_schedule=cosine "
      "--weight_decay=0.001 (docs/meta-testing.md); this run uses "
      "--step_decay_start=0.0 --step_schedule=none --weight_decay=0.0.",
      "results go to --save_dir=opt/ (the original's default; pass "
      "--save_dir to choose)"]
  assert metatest_config.validate(MetatestConfig(
      test_optimizer="Adam", native_step=True, save_dir="res",
      problems=(MLP,))) == []


def test_a_schedule_head_runs_in_the_meta_test(tmp_path, data_dir):
  """A zero head changes no step: the run's losses equal the run without
  it, bit for bit. A head that takes a thousandth of every step leaves the
  optimizee above the run without it."""
  import pickle  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  zero, shrinking = str(tmp_path / "zero.npz"), str(tmp_path / "small.npz")
  learned_schedule.ScheduleHead().save(zero)
  theta = learned_schedule.initial_theta()
  theta[-2] = -20.  # the multiplier's output bias: the smallest multiplier
  learned_schedule.ScheduleHead(theta).save(shrinking)
  losses = {}
  for name, head in (("none", None), ("zero", zero), ("small", shrinking)):
    save_dir = tmp_path / name
    metatest_run.run(MetatestConfig(
        pretrained="l2o-scale", problems=(MLP,), num_testing_itrs=30,
        seeds=("6",), save_dir=str(save_dir), data_dir=data_dir,
        progress_every=0, schedule_head=head))
    with open(save_dir / "seed6_eval_loss_record.pickle-mt", "rb") as f:
      losses[name] = np.asarray(pickle.load(f), np.float64).reshape(-1)
  assert losses["zero"].tobytes() == losses["none"].tobytes()
  # The same minibatches at each step: the run that barely moves keeps the
  # higher losses on them.
  assert losses["small"][-10:].mean() > losses["none"][-10:].mean()
