"""Configuration declared once: dataclass fields define the absl flags."""

import dataclasses
import os
import subprocess
import sys

from absl import flags
import pytest

from l2o_scale.config import config_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flag = config_flags.flag


@dataclasses.dataclass
class _Config:
  steps: int = flag(100, "Steps.")
  rate: float = flag(0.5, "Rate.")
  on: bool = flag(False, "Switch.")
  name: str = flag("a", "Name.")
  mode: str = flag("x", "Mode.", ("x", "y"))
  seeds: tuple = flag((1, 2), "Seeds.")
  internal: int = 7  # Not a flag.


def _parse(*args):
  values = flags.FlagValues()
  config_flags.define_flags(_Config, "my_script", values)
  values(["prog"] + list(args))
  return values


def test_fields_define_flags_with_their_defaults_and_help():
  values = _parse()
  assert config_flags.from_flags(_Config, values) == _Config()
  assert values["steps"].help == "Steps."
  assert values["mode"].help == "<x|y>: Mode."  # absl's enum help
  assert values["seeds"].value == ["1", "2"]
  assert sorted(f.name for f in values.get_key_flags_for_module(
      "my_script")) == ["mode", "name", "on", "rate", "seeds", "steps"]
  assert "internal" not in values


def test_parsed_values_reach_the_dataclass_with_their_types():
  config = config_flags.from_flags(_Config, _parse(
      "--steps=3", "--rate=0.25", "--on", "--name=b", "--mode=y",
      "--seeds=5,6,7"))
  assert config == _Config(steps=3, rate=0.25, on=True, name="b", mode="y",
                           seeds=(5, 6, 7))


def test_choices_make_an_enum():
  with pytest.raises(flags.IllegalFlagValueError):
    _parse("--mode=z")


def test_metarun_training_config_is_the_dataclass_defaults():
  """metarun's flags at their defaults give TrainingConfig(), and a flag
  given on the command line reaches the config (parsed into flags of its
  own: metarun.FLAGS stay as they are)."""
  import metarun  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import training_config as training  # pylint: disable=g-import-not-at-top
  assert (metarun.parse_config(["metarun.py"]).training ==
          training.TrainingConfig())
  given = metarun.parse_config(["metarun.py", "--alpha=0.25",
                                "--selection_seeds=5,6"])
  assert given.training == training.TrainingConfig(alpha=0.25,
                                                   selection_seeds=(5, 6))
  assert given.given == {"alpha", "selection_seeds"}
  assert metarun.FLAGS["alpha"].value != 0.25  # The program's own flags.


def test_a_recipe_is_a_flagfile_whose_flags_the_command_line_overrides():
  """Every shipped recipe parses as metarun's flags; --recipe expands to its
  flagfile before the command line, so a flag given there wins; the recipe
  name itself is a flag (recorded with the run)."""
  from l2o_scale.config import recipes  # pylint: disable=g-import-not-at-top
  assert {"fast", "stable"} <= set(recipes.names())
  argv = ["metarun.py", "--train_dir=x", "--recipe=stable",
          "--evaluation_period=7"]
  expanded = recipes.expand(argv)
  assert expanded == ["metarun.py", "--flagfile=" + recipes.path("stable")] + (
      argv[1:])
  assert recipes.expand(["metarun.py", "--recipe=nope"]) == [
      "metarun.py", "--recipe=nope"]
  code = (
      "import sys\n"
      "from l2o_scale.config import recipes\n"
      "import metarun\n"
      "from absl import flags\n"
      "F = metarun.FLAGS\n"
      "for name in recipes.names():\n"
      "  F.unparse_flags()\n"
      "  F(recipes.expand(['metarun.py', '--recipe=' + name,\n"
      "                    '--evaluation_period=7']))\n"
      "  values = recipes.read(name)\n"
      "  for flag, value in values.items():\n"
      "    if flag != 'evaluation_period':\n"
      "      assert F[flag].value == F[flag].parser.parse(value), flag\n"
      "  assert F.evaluation_period == 7 and F.recipe == name\n"
      "  print(name, 'ok', len(values))\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, cwd=ROOT, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert sorted(l.split()[0] for l in result.stdout.splitlines()) == (
      recipes.names())


@dataclasses.dataclass
class _Bounded:
  count: int = flag(3, "Count.", ge=1)
  rate: float = flag(0.5, "Rate.", gt=0, lt=1)
  scale: float = flag(1., "Scale.")
  path: str = flag("x", "Path.", nonempty=True)
  renamed: float = flag(1e-6, "Renamed.", name="other_name", gt=0)


@pytest.mark.parametrize("field,value,line", [
    ("count", 0, "--count must be >= 1 (got 0)"),
    ("rate", 1., "--rate must be in (0, 1) (got 1)"),
    ("rate", 0., "--rate must be in (0, 1) (got 0)"),
    ("rate", float("nan"), "--rate must be a finite number (got nan)"),
    ("scale", float("inf"), "--scale must be a finite number (got inf)"),
    ("scale", -float("inf"), "--scale must be a finite number (got -inf)"),
    ("path", " ", "--path must not be empty"),
    ("renamed", 0., "--other_name must be > 0 (got 0)"),
])
def test_declared_bounds_refuse_one_line_per_flag(field, value, line):
  """validate() reads the bounds declared on the fields, from parsed flags
  and from a dataclass instance alike; the defaults pass."""
  assert config_flags.validate(_Bounded, _Bounded()) == []
  assert config_flags.validate(_Bounded, _Bounded(**{field: value})) == [line]
  values = flags.FlagValues()
  config_flags.define_flags(_Bounded, "my_script", values)
  values(["prog", "--{}={}".format(config_flags.flag_name(
      {f.name: f for f in dataclasses.fields(_Bounded)}[field]), value)])
  assert config_flags.validate(_Bounded, values) == [line]


def test_each_program_has_its_own_flags_and_defaults():
  """metarun.py and metatest.py (and a tool) live in one process: each has
  its own FlagValues with the original script's defaults, whichever was
  imported first, and absl's global registry holds none of them."""
  import metarun  # pylint: disable=g-import-not-at-top
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.tools import horizon_check  # pylint: disable=g-import-not-at-top
  metarun_flags, metatest_flags = (metarun.define_flags(),
                                   metatest.define_flags())
  for name, metarun_default, metatest_default in [
      ("num_unroll_scale", 40, 10), ("min_num_unrolls", 10, 4),
      ("num_partial_unroll_itr_scale", 20, 50), ("num_meta_iterations", 5, 5),
      ("meta_learning_rate", 1e-6, 1e-6), ("train_dir", "opt/", "opt/")]:
    assert metarun_flags[name].default == metarun_default, name
    assert metatest_flags[name].default == metatest_default, name
  assert "num_unroll_scale" not in flags.FLAGS
  assert "train_dir" in horizon_check.FLAGS
  assert horizon_check.FLAGS["train_dir"] is not metatest_flags["train_dir"]
  # The schedule's defaults are metarun's, in the flags and the dataclass.
  from l2o_scale.meta_training import training_config as training  # pylint: disable=g-import-not-at-top
  schedule = training.Schedule()
  assert (schedule.learning_rate, schedule.gradient_clip,
          schedule.fix_unroll) == (1e-6, 1e4, False)
  assert schedule.num_unroll_func.args == (40, 10)


def test_new_flags_line_and_recipes_in_help_are_whole():
  """The "New flags" of each program's help is derived: every flag that is
  not the original's (--recipe and --overwrite included); each recipe's
  whole description is in --recipe's help."""
  import metarun  # pylint: disable=g-import-not-at-top
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale.config import programs  # pylint: disable=g-import-not-at-top
  from l2o_scale.config import recipes  # pylint: disable=g-import-not-at-top
  metarun_new = programs.new_flags(metarun.define_flags(),
                                   programs.ORIGINAL_METARUN_FLAGS)
  assert {"recipe", "overwrite", "data_dir", "seed", "resume", "summaries",
          "allow_data_change", "selection", "meta_batch_size"} <= set(
              metarun_new)
  assert not {"alpha", "train_dir", "max_log_lr", "include_mnist_mlp_problems",
              "meta_learning_rate"} & set(metarun_new)
  metatest_new = programs.new_flags(metatest.define_flags(),
                                    programs.ORIGINAL_METATEST_FLAGS)
  assert {"overwrite", "seeds", "pretrained", "baseline_learning_rate",
          "heldout_every"} <= set(metatest_new)
  assert not {"save_dir", "model_name", "num_unroll_scale"} & set(
      metatest_new)
  help_text = metarun.define_flags()["recipe"].help
  for name in recipes.names():
    with open(recipes.path(name)) as f:
      comment = " ".join(l.lstrip("#").strip() for l in f
                         if l.startswith("#"))
    assert recipes.summary(name) == comment
    assert "{}: {}".format(name, comment) in help_text


def test_define_appears_only_in_the_config_package():
  """Flags are declared in l2o_scale/config (dataclass fields); no program
  or tool calls absl's DEFINE_ functions itself."""
  found = []
  for base, dirs, files in os.walk(ROOT):
    dirs[:] = [d for d in dirs if not d.startswith(".") and d not in (
        "tests", "config", "build")]
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(base, name)
        with open(path) as f:
          if "DEFINE_" in f.read():
            found.append(os.path.relpath(path, ROOT))
  assert found == []


def test_problem_registry_names_flags_and_labels():
  from problems import registry  # pylint: disable=g-import-not-at-top
  from problems import problem_sets  # pylint: disable=g-import-not-at-top
  assert registry.names()[:4] == ["mnist-mlp-sigmoid", "mnist-mlp-relu",
                                  "mnist-mlp-deeper", "mnist-conv"]
  assert registry.label("mnist-mlp-relu") == "MNIST MLP 784-20-10, ReLU"
  assert registry.label("unregistered") == "unregistered"
  assert registry.get("include_mnist_conv_problems").name == "mnist-conv"
  for problem in registry.PROBLEMS:
    assert problem.problem_set in problem_sets.EVALUATION_SETS
    assert problem.dataset in registry.DATASETS
  with pytest.raises(ValueError, match="known: mnist-mlp-sigmoid"):
    registry.get("nope")
