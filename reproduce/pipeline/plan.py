"""A size x variants x problems -> the stages of a run, in order.

A stage is a named command with a kind (for the estimate of the time
left) and a queue: queue 0 holds the meta-trainings, then the baselines'
meta-tests (they need no trained optimizer, so they fill the slots the
last, longest trainings leave free); queue 1 the learned optimizers'
meta-tests, which need queue 0 done. The plot comes last, on its own.
"""

import dataclasses
import os

from . import problem_list as problem_registry
from . import variants as variant_registry

PLOT = "plot"


@dataclasses.dataclass(frozen=True)
class Stage:
  """``argv``: the command (run in the repository root); ``queue``: 0 or 1
  (queue 1 starts when queue 0 is done); ``kind``: stages of one kind take
  about as long as each other."""
  name: str
  argv: tuple
  kind: str
  queue: int


@dataclasses.dataclass(frozen=True)
class Settings:
  """Where a run reads and writes: ``python`` (the interpreter of every
  stage), ``out`` (output folder, absolute), ``root`` (the repository),
  ``data_dir`` (absolute, or '' for tensorflow-datasets)."""
  python: str
  out: str
  root: str
  data_dir: str = ""

  @property
  def data_flags(self):
    return ["--data_dir=" + self.data_dir] if self.data_dir else []


def train_dir(size, settings, name):
  if size.pretrained_only:
    return os.path.join(settings.root, "l2o_scale", "pretrained", name)
  return os.path.join(settings.out, "train", name)


def train_seed(size, name):
  seed = variant_registry.split_name(name)[1]
  return size.train_seed if seed is None else seed


def train_stage(size, settings, name):
  """Meta-training of learned optimizer ``name``."""
  variant = variant_registry.lookup(name)
  flags = size.train_flags()
  if variant.name == "l2o-entropy-paper-cmd" and size.paper_flags:
    flags = list(size.paper_flags)
  argv = ([settings.python, "metarun.py",
           "--train_dir=" + train_dir(size, settings, name)] + flags +
          ["--seed={}".format(train_seed(size, name))] +
          list(variant.flags) + settings.data_flags)
  return Stage("train-" + name, tuple(argv), kind_of("train-" + name), 0)


def common_test_flags(size, settings, problem):
  """metatest.py's flags for ``problem``."""
  p = problem_registry.PROBLEMS[problem]
  flags = [p.flag, "--num_testing_itrs={}".format(size.test_steps_of(problem)),
           "--save_dir=" + os.path.join(settings.out, "test", problem),
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
  argv = ([settings.python, "metatest.py"] + head +
          ["--model_name=" + baseline] +
          common_test_flags(size, settings, problem))
  name = "test-{}-{}".format(problem, baseline)
  return Stage(name, tuple(argv), kind_of(name, [problem], [baseline]), 0)


def learned_test_stage(size, settings, problem, name):
  """Meta-test of learned optimizer ``name`` from its best evaluated
  checkpoint."""
  argv = ([settings.python, "metatest.py", "--test_optimizer=L2o",
           "--train_dir=" + train_dir(size, settings, name),
           "--restore_model_name=model.ckpt-0", "--model_name=" + name] +
          common_test_flags(size, settings, problem))
  stage = "test-{}-{}".format(problem, name)
  return Stage(stage, tuple(argv), kind_of(stage, [problem], []), 1)


def tested_on(size, problem, name):
  return (not problem_registry.PROBLEMS[problem].conv or
          not size.conv_learned or name in size.conv_learned)


def build(size, settings, plot_argv):
  """Every stage of a run, in the order they start; the plot last with
  ``plot_argv``."""
  stages = []
  if not size.pretrained_only:
    stages += [train_stage(size, settings, v) for v in size.variants]
  stages += [baseline_stage(size, settings, p, b) for p in size.problems
             for b in size.baselines]
  stages += [learned_test_stage(size, settings, p, v) for p in size.problems
             for v in size.variants if tested_on(size, p, v)]
  stages.append(Stage(PLOT, tuple(plot_argv), PLOT, 2))
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
