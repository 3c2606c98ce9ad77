"""A size x variants x problems -> the stages of a run, in order.

A stage is a named command with a kind (for the estimate of the time
left) and the stages it needs finished first (``after``): a learned
optimizer's meta-tests need its own meta-training only, so they start as
soon as it is done. The order is optimizer by optimizer (its
meta-training, then its meta-tests), then the baselines' meta-tests (they
need nothing, so they fill the slots that waiting tests leave free); the
plot comes last, on its own.

Paths in the commands are relative to the repository root (where every
stage runs) when they lie inside it, and a command names the interpreter
as :data:`PYTHON` (the runner starts it with ``$PYTHON``), so that the
commands, the stage markers and the config line stay the same when the
repository or its virtual environment moves.
"""

import dataclasses
import os

from . import names
from . import problem_list as problem_registry
from . import variants as variant_registry

PLOT = "plot"
# How a command names the interpreter; the runner replaces it with the one
# it was given (an absolute path of a virtual environment, inside the
# repository or beside it, would otherwise be in every stage marker).
PYTHON = "python"


@dataclasses.dataclass(frozen=True)
class Stage:
  """``argv``: the command (run in the repository root); ``kind``: stages
  of one kind take about as long as each other; ``after``: the names of
  the stages that must be done before it starts."""
  name: str
  argv: tuple
  kind: str
  after: tuple = ()


@dataclasses.dataclass(frozen=True)
class Settings:
  """Where a run reads and writes: ``python`` (the interpreter the runner
  starts every stage's :data:`PYTHON` with), ``out`` (output folder, absolute), ``root`` (the repository),
  ``data_dir`` (as the stages get it: see :func:`stage_path`; '' for
  tensorflow-datasets)."""
  python: str
  out: str
  root: str
  data_dir: str = ""

  @property
  def data_flags(self):
    return ["--data_dir=" + self.data_dir] if self.data_dir else []

  def path(self, *parts):
    """A path under the output folder, as the stages get it."""
    return stage_path(self.root, os.path.join(self.out, *parts))


def stage_path(root, path):
  """``path`` (absolute) relative to the repository ``root`` when it lies
  inside it, else unchanged."""
  rel = os.path.relpath(path, root)
  return path if rel == os.pardir or rel.startswith(
      os.pardir + os.sep) else rel


def train_dir(size, settings, name):
  if size.pretrained_only:
    return os.path.join("l2o_scale", "pretrained", name)
  return settings.path("train", name)


def train_seed(size, name):
  seed = names.split_name(name)[1]
  return size.train_seed if seed is None else seed


def train_stage(size, settings, name):
  """Meta-training of learned optimizer ``name``."""
  variant = variant_registry.lookup(name)
  flags = size.train_flags()
  if variant.name == "l2o-entropy-paper-cmd" and size.paper_flags:
    flags = list(size.paper_flags)
  argv = ([PYTHON, "metarun.py",
           "--train_dir=" + train_dir(size, settings, name)] + flags +
          ["--seed={}".format(train_seed(size, name))] +
          list(variant.flags) + settings.data_flags)
  return Stage("train-" + name, tuple(argv), kind_of("train-" + name))


def common_test_flags(size, settings, problem):
  """metatest.py's flags for ``problem``."""
  p = problem_registry.PROBLEMS[problem]
  flags = [p.flag, "--num_testing_itrs={}".format(size.test_steps_of(problem)),
           "--save_dir=" + settings.path("test", problem),
           "--seeds=" + size.seeds,
           "--heldout_every={}".format(size.heldout_every),
           "--progress_every=1000000",
           # A stage run again after an interruption replaces its partial
           # results.
           "--overwrite", p.xla_flag] + settings.data_flags
  # The flatness of the solution (Hessian trace, top eigenvalue) on the MLPs.
  if size.flatness and not p.conv:
    flags.append("--flatness_probes={}".format(size.flatness))
  return flags


def baseline_stage(size, settings, problem, baseline):
  """Meta-test of a baseline: ``SGD`` (the original's learning rate) or a
  tuned ``<Opt>-lr<lr>``."""
  if "-lr" in baseline:
    opt, lr = baseline.split("-lr", 1)[0], baseline.rsplit("-lr", 1)[1]
    head = ["--test_optimizer=" + opt, "--baseline_learning_rate=" + lr]
  else:
    head = ["--test_optimizer=" + baseline]
  argv = ([PYTHON, "metatest.py"] + head +
          ["--model_name=" + baseline] +
          common_test_flags(size, settings, problem))
  name = "test-{}-{}".format(problem, baseline)
  return Stage(name, tuple(argv), kind_of(name, [problem], [baseline]))


def learned_test_stage(size, settings, problem, name):
  """Meta-test of learned optimizer ``name`` from its best evaluated
  checkpoint."""
  argv = ([PYTHON, "metatest.py", "--test_optimizer=L2o",
           "--train_dir=" + train_dir(size, settings, name),
           "--restore_model_name=model.ckpt-0", "--model_name=" + name] +
          common_test_flags(size, settings, problem))
  stage = "test-{}-{}".format(problem, name)
  after = () if size.pretrained_only else ("train-" + name,)
  return Stage(stage, tuple(argv), kind_of(stage, [problem], []), after)


def tested_on(size, problem, name):
  return (not problem_registry.PROBLEMS[problem].conv or
          not size.conv_learned or name in size.conv_learned)


def build(size, settings, plot_argv):
  """Every stage of a run, in the order they start: optimizer by
  optimizer, then the baselines; the plot last with ``plot_argv``, after
  every other stage."""
  stages = []
  for v in size.variants:
    if not size.pretrained_only:
      stages.append(train_stage(size, settings, v))
    stages += [learned_test_stage(size, settings, p, v)
               for p in size.problems if tested_on(size, p, v)]
  stages += [baseline_stage(size, settings, p, b) for p in size.problems
             for b in size.baselines]
  stages.append(Stage(PLOT, tuple(plot_argv), PLOT,
                      tuple(s.name for s in stages)))
  return stages


def kind_of(name, problems=(), baselines=()):
  """The kind of stage ``name`` (also of names of earlier runs, in
  timings.tsv): meta-training with or without curriculum; a problem's
  learned or baseline meta-tests; else the name itself (the plot)."""
  if name.startswith("train-"):
    variant = variant_registry.lookup(name[len("train-"):])
    curriculum = variant is not None and "--if_cl=True" in variant.flags
    return "train-cl" if curriculum else "train"
  for p in problems:
    prefix = "test-{}-".format(p)
    if name.startswith(prefix):
      return "test-{}-{}".format(
          p, "baseline" if name[len(prefix):] in baselines else "learned")
  return name
