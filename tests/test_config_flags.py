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
  given on the command line reaches the config (its own process: absl flags
  are global)."""
  code = (
      "import sys\n"
      "sys.argv = ['metarun.py', '--alpha=0.25', '--selection_seeds=5,6']\n"
      "import metarun\n"
      "from absl import flags\n"
      "from l2o_scale.meta_training import config as training\n"
      "metarun.FLAGS(['metarun.py'])\n"
      "assert metarun.training_config(metarun.FLAGS) == training.TrainingConfig()\n"
      "metarun.FLAGS.unparse_flags()\n"
      "metarun.FLAGS(sys.argv)\n"
      "c = metarun.training_config(metarun.FLAGS)\n"
      "assert c == training.TrainingConfig(alpha=0.25, selection_seeds=(5, 6)), c\n"
      "print('ok')\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, cwd=ROOT, timeout=300,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


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
