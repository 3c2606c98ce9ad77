"""The sizes of the reproduction, as data.

A size fixes how the learned variants are meta-trained (a ``metarun.py``
recipe, or a fixed-unroll schedule of its own), which variants and
problems it runs, and how they are meta-tested. ``select(env)`` picks one
from the environment (REPRO_TINY, REPRO_QUICK, REPRO_MEDIUM, REPRO_STUDY,
REPRO_PRETRAINED, else full) and applies REPRO_RECIPE, REPRO_META_LR and
REPRO_META_ITERS. ``doc_row(size)`` renders the size's row of the Sizes
table in docs/reproduction.md (tests/test_repro_sizes.py holds the page to
it).
"""

import dataclasses

from l2o_scale.config import recipes

from . import names
from . import problem_list as problems

# The medium size: the stable recipe's 30 meta-iterations for L2O-Scale,
# the Hessian-ESD and Jacobian regularizers at three alphas and reg.+CL+MT,
# 3 training seeds each (24 optimizers, seed by seed); the conv net tests
# the first four at training seed 1.
MEDIUM_VARIANTS = ("l2o-scale", "hess-1e-4", "hess-1e-3", "hess-1e-2",
                   "jacob-1e-4", "jacob-1e-3", "jacob-1e-2",
                   "l2o-entropy-reg-cl-mt")
MEDIUM_CONV = ("l2o-scale.t1", "hess-1e-4.t1", "hess-1e-2.t1",
               "l2o-entropy-reg-cl-mt.t1")
# The full size: four variants x 3 training seeds, plus the paper's command.
FULL_VARIANTS = ("l2o-scale", "hess-1e-4", "hess-1e-2",
                 "l2o-entropy-reg-cl-mt")
TUNED_SWEEPS = ("Adam-lr3e-4", "Adam-lr1e-3", "Adam-lr3e-3", "Adam-lr1e-2",
                "SGD-lr0.1", "SGD-lr0.3", "SGD-lr1")
ORIGINAL_BASELINES = ("SGD", "Adam", "Adagrad")
# The paper-cmd variant's own schedule in the full size: the original's
# defaults, meta learning rate 1e-6.
PAPER_FLAGS = ("--num_meta_iterations=100", "--fix_unroll=True",
               "--fix_unroll_length=20", "--fix_num_steps=100",
               "--fix_num_steps_eval=100", "--evaluation_epochs=20",
               "--meta_learning_rate=1e-6")

# The flatness study (docs/flatness-study.md): the Hessian-ESD alphas at a
# 5% and a 25% share of the meta-gradient, per --regularize_time (the share
# differs where the term acts), from reproduce/results/study/calibration.json
# (alpha = target share / median share per unit alpha over the first 4
# meta-iterations of training seeds 1-3), to two significant digits. The
# arms (variants.py) read them from here; a test ties them to the file.
STUDY_ALPHAS = {("5pct", "always"): "4.8e-4", ("25pct", "always"): "2.4e-3",
                ("5pct", "posterior"): "3.6e-4",
                ("25pct", "posterior"): "1.8e-3"}
STUDY_ALPHAS_CALIBRATED = True
STUDY_ARMS = ("l2o-scale", "hess-5pct-always", "hess-5pct-posterior",
              "hess-25pct-always", "hess-25pct-posterior", "reg-cl-mt")
STUDY_SEEDS = tuple(range(1, 9))
# The study's output folder, inside the repository (committed, so that the
# study resumes from a fresh clone); relative to the repository root.
STUDY_OUT = "reproduce/results/study/runs"
# What the repository keeps of a meta-training (in its checkpoint folder;
# reproduce/results/study/.gitignore): the chosen checkpoint, the run record
# and the events, the files the analysis and shipping read (fnmatch
# patterns).
KEPT_TRAIN_FILES = ("model.ckpt-0.index", "model.ckpt-0.data-*",
                    "run_record.json", "meta_training_events.jsonl")

# The flags of a recipe that the config line names on their own (the
# schedule) or leaves out (the unroll mode and evaluation period, which
# the line never recorded); the recipe's other flags are listed under the
# recipe's name.
_SCHEDULE = ("num_meta_iterations", "meta_learning_rate", "fix_unroll",
             "fix_unroll_length", "fix_num_steps", "fix_num_steps_eval",
             "evaluation_epochs", "evaluation_period")


def seed_by_seed(variants, seeds):
  """``<variant>.t<seed>`` for every seed, seed by seed (every variant's
  seed 1, then seed 2, ...): an unfinished run holds balanced arms."""
  return tuple("{}.t{}".format(v, s) for s in seeds for v in variants)


@dataclasses.dataclass(frozen=True)
class Size:
  """One size. Empty strings are settings the size leaves to the recipe.

  ``variants``: the learned optimizers (``<variant>[.t<k>]``), in the
  order they run; ``conv_learned``: those meta-tested on the conv net
  (empty: all); ``tuned``: tuned baselines ``<Opt>-lr<lr>``;
  ``original_baselines``: whether SGD, Adam and Adagrad at the original's
  learning rates run too; ``extra_flags``: metarun flags after the recipe
  or schedule; ``flatness``: metatest --flatness_probes on the MLPs (0:
  off); ``paper_flags``: the paper-cmd variant's schedule, replacing the
  size's; ``out``: the default output folder, relative to the repository
  root (empty: reproduce/out/<name>); ``env``: the variable that selects
  it; ``about``, ``wall_time``: its row of the docs' Sizes table (the wall
  time is a measurement, stated); ``notes``: lines the plan prints.
  """
  name: str
  meta_iters: int
  test_steps: int
  test_steps_conv: int
  seeds: str
  heldout_every: int
  variants: tuple
  problems: tuple = problems.names()
  meta_lr: str = ""
  recipe: str = ""
  fix_num_steps: str = ""
  fix_num_steps_eval: str = ""
  eval_epochs: str = ""
  eval_period: int = 1
  extra_flags: tuple = ()
  flatness: int = 0
  tuned: tuple = ()
  original_baselines: bool = True
  conv_learned: tuple = ()
  paper_flags: tuple = ()
  pretrained_only: bool = False
  train_seed: int = 1
  out: str = ""
  env: str = ""
  about: str = ""
  wall_time: str = ""
  notes: tuple = ()

  @property
  def baselines(self):
    return ((ORIGINAL_BASELINES if self.original_baselines else ()) +
            tuple(self.tuned))

  def train_flags(self):
    """What every meta-training of this size is given: a recipe (and the
    meta-iterations), or the schedule itself; then ``extra_flags``."""
    if self.recipe:
      flags = ["--recipe=" + self.recipe,
               "--num_meta_iterations={}".format(self.meta_iters)]
      if self.meta_lr:
        flags.append("--meta_learning_rate=" + self.meta_lr)
    else:
      flags = ["--num_meta_iterations={}".format(self.meta_iters),
               "--fix_unroll=True", "--fix_unroll_length=20",
               "--fix_num_steps=" + self.fix_num_steps,
               "--fix_num_steps_eval=" + self.fix_num_steps_eval,
               "--evaluation_epochs=" + self.eval_epochs,
               "--evaluation_period={}".format(self.eval_period),
               "--meta_learning_rate=" + self.meta_lr]
    return flags + list(self.extra_flags)

  def resolved_flags(self):
    """``{flag: value}`` that meta-training runs with: the recipe's, then
    the size's own (a later one wins, as in metarun)."""
    values = recipes.read(self.recipe) if self.recipe else {}
    for flag in self.train_flags():
      if not flag.startswith("--recipe="):
        key, _, value = flag[2:].partition("=")
        values[key] = value
    return values

  def test_steps_of(self, problem):
    return (self.test_steps_conv if problems.PROBLEMS[problem].conv
            else self.test_steps)

  def config_line(self, data_dir):
    """The settings a folder's results were made with (config.txt): the
    schedule resolved from the recipe, and the recipe's other flags (and
    ``extra_flags``) under the recipe's name. ``data_dir``: as the stages
    get it (relative to the repository root), '' for tensorflow-datasets.
    """
    values = self.resolved_flags()
    if self.recipe:
      schedule = dict(meta_lr=values.get("meta_learning_rate", ""),
                      fix_num_steps=values.get("fix_num_steps", ""),
                      fix_num_steps_eval=values.get("fix_num_steps_eval", ""),
                      eval_epochs=values.get("evaluation_epochs", ""))
    else:
      schedule = dict(meta_lr=self.meta_lr, fix_num_steps=self.fix_num_steps,
                      fix_num_steps_eval=self.fix_num_steps_eval,
                      eval_epochs=self.eval_epochs)
    others = " ".join("--{}={}".format(k, v) for k, v in values.items()
                      if k not in _SCHEDULE)
    return ("size={s.name} meta_iters={s.meta_iters} meta_lr={meta_lr} "
            "{key}={others} fix_num_steps={fix_num_steps} "
            "fix_num_steps_eval={fix_num_steps_eval} "
            "evaluation_epochs={eval_epochs} test_steps={s.test_steps} "
            "test_steps_conv={s.test_steps_conv} seeds={s.seeds} "
            "heldout_every={s.heldout_every} train_seed={s.train_seed} "
            "data_dir={d}".format(s=self, key=self.recipe or "recipe",
                                  others=others, d=data_dir or "tfds",
                                  **schedule))


SIZES = {s.name: s for s in (
    # Smoke test (tests/test_reproduce_pipeline.py).
    Size("tiny", meta_iters=1, test_steps=20, test_steps_conv=20, seeds="6",
         heldout_every=10, variants=("l2o-scale",),
         problems=("mnist-mlp-sigmoid",), meta_lr="1e-3", fix_num_steps="20",
         fix_num_steps_eval="20", eval_epochs="1", env="REPRO_TINY"),
    # The original's 1e-6 leaves 3 meta-iterations' variants bit-identical;
    # 1e-3 at least moves them (by ~1e-6 in the losses: the TF1 RMSProp
    # starts its mean square at 1). It checks the pipeline, not the paper.
    Size("quick", meta_iters=3, test_steps=300, test_steps_conv=100,
         seeds="6,12,18", heldout_every=50,
         variants=("l2o-scale", "l2o-entropy-paper-cmd", "l2o-entropy-reg",
                   "l2o-entropy-reg-cl-mt"),
         meta_lr="1e-3", fix_num_steps="40", fix_num_steps_eval="40",
         eval_epochs="1", env="REPRO_QUICK",
         about="checks the pipeline, nothing is learned: ",
         wall_time="minutes (stated in its results below)"),
    # The committed medium results (reproduce/results/medium/config.txt).
    Size("medium", meta_iters=30, test_steps=2000, test_steps_conv=300,
         seeds="6,12,18", heldout_every=250,
         variants=seed_by_seed(MEDIUM_VARIANTS, (1, 2, 3)), recipe="stable",
         flatness=10, tuned=TUNED_SWEEPS, conv_learned=MEDIUM_CONV,
         env="REPRO_MEDIUM",
         about="the result on this page (`reproduce/results/medium/`): ",
         wall_time="6 h 12 min of stage time (its `timings.tsv`), about "
         "3 h 06 min with two stages side by side"),
    # The flatness study's protocol (docs/flatness-study.md).
    Size("study", meta_iters=30, test_steps=10000, test_steps_conv=10000,
         seeds="6,12,18", heldout_every=500,
         variants=seed_by_seed(STUDY_ARMS, STUDY_SEEDS),
         problems=("mnist-mlp-sigmoid", "mnist-mlp-deeper"), recipe="stable",
         extra_flags=("--selection=robust",
                      "--selection_objective=validation"),
         flatness=10, original_baselines=False, out=STUDY_OUT,
         env="REPRO_STUDY",
         notes=() if STUDY_ALPHAS_CALIBRATED else (
             "the alphas of the 5% and 25% shares are PLACEHOLDERS, not yet "
             "the values measured into "
             "reproduce/results/study/calibration.json",),
         about="the [flatness study](flatness-study.md), resumable per arm "
         "and training seed into `{}/`: ".format(STUDY_OUT),
         wall_time="15 h 20 min of stage time (its `timings.tsv`: "
         "meta-training median 9.3 min, meta-test median 2.8 min), about "
         "8 h with two stages side by side, on a 2-core Intel Xeon VM "
         "shared with other work"),
    # This project's protocol: 10,000 steps, 5 seeds; the variants
    # meta-trained with the long-horizon recipe, the paper's own command
    # one of its arms.
    Size("full", meta_iters=30, test_steps=10000, test_steps_conv=10000,
         seeds="6,12,18,24,30", heldout_every=500,
         variants=seed_by_seed(FULL_VARIANTS, (1, 2, 3)) +
         ("l2o-entropy-paper-cmd.t1",),
         recipe="long", flatness=10, tuned=TUNED_SWEEPS,
         conv_learned=seed_by_seed(FULL_VARIANTS, (1,)) +
         ("l2o-entropy-paper-cmd.t1",),
         paper_flags=PAPER_FLAGS,
         about="this project's protocol, the paper's command one of its "
         "arms: ",
         wall_time="4 h 12 min on a 2-core Intel Xeon VM (below); more "
         "where the conv net is slow"),
)}

SIZE_SWITCHES = ("REPRO_TINY", "REPRO_QUICK", "REPRO_PRETRAINED",
                 "REPRO_MEDIUM", "REPRO_STUDY")


def pretrained_size(shipped):
  """The medium size's tests of the shipped optimizers ``shipped``
  (names in l2o_scale/pretrained/), no meta-training."""
  return dataclasses.replace(
      SIZES["medium"], name="pretrained", variants=tuple(shipped),
      conv_learned=(), tuned=("Adam-lr1e-3", "SGD-lr0.1"),
      pretrained_only=True, env="REPRO_PRETRAINED")


def select(env, shipped=None):
  """The size the environment names. ``shipped``: a callable giving the
  shipped optimizers' names (REPRO_PRETRAINED only). ValueError for two
  sizes at once or a bad REPRO_META_ITERS."""
  on = [key for key in SIZE_SWITCHES if env.get(key, "0") == "1"]
  if len(on) > 1:
    raise ValueError("{} are set: choose one size".format(
        " and ".join(k + "=1" for k in on)))
  named = {s.env: s for s in SIZES.values() if s.env}
  if not on:
    size = SIZES["full"]
  elif on[0] == "REPRO_PRETRAINED":
    size = pretrained_size(shipped())
  else:
    size = named[on[0]]
  if size.recipe and env.get("REPRO_RECIPE"):
    size = dataclasses.replace(size, recipe=env["REPRO_RECIPE"])
  if env.get("REPRO_META_LR"):
    size = dataclasses.replace(size, meta_lr=env["REPRO_META_LR"])
  iters = env.get("REPRO_META_ITERS", "")
  if iters:
    if not iters.isdigit() or int(iters) < 1:
      raise ValueError("REPRO_META_ITERS={} is no whole number of at least "
                       "1".format(iters))
    size = dataclasses.replace(size, meta_iters=int(iters))
    period = int(size.resolved_flags().get("evaluation_period", "1"))
    if size.meta_iters < period and not size.pretrained_only:
      raise ValueError(
          "REPRO_META_ITERS={} is below the evaluation period of the {} "
          "size ({}): no checkpoint would be evaluated and chosen; give at "
          "least {}".format(iters, size.name, period, period))
  return size


# ------------------------------------------------------------ the docs' row
def _code(names):
  return ", ".join("`{}`".format(n) for n in names)


def _seed_text(seeds):
  seeds = sorted(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return "training seeds {}-{}".format(seeds[0], seeds[-1])
  return "training seed{} {}".format("s" if len(seeds) > 1 else "",
                                     ", ".join(map(str, seeds)))


def _optimizers_text(size):
  """``N optimizers: `a`, `b` x training seeds 1-3; ...``, grouped by
  their seeds, in the size's order."""
  seeds = {}
  for name in size.variants:
    variant, seed = names.split_name(name)
    seeds.setdefault(variant, []).append(size.train_seed if seed is None
                                         else seed)
  groups = {}
  for variant, mine in seeds.items():
    groups.setdefault(tuple(sorted(mine)), []).append(variant)
  return "{} optimizers: {}".format(len(size.variants), "; ".join(
      "{} × {}".format(_code(names), _seed_text(s))
      for s, names in groups.items()))


def _schedule_text(size):
  if size.recipe:
    text = "{} meta-iterations with the `{}` recipe".format(size.meta_iters,
                                                            size.recipe)
    if size.meta_lr:
      text += " at meta learning rate " + size.meta_lr
  else:
    text = ("{s.meta_iters} meta-iterations of {s.fix_num_steps} steps at "
            "meta learning rate {s.meta_lr}, evaluation "
            "{s.fix_num_steps_eval} steps × {s.eval_epochs} every "
            "{s.eval_period}".format(s=size))
  if size.extra_flags:
    text += " and `{}`".format(" ".join(size.extra_flags))
  if size.paper_flags:
    text += ("; the paper's command (`l2o-entropy-paper-cmd`, regularizer "
             "off) with its own schedule, `metarun.py`'s defaults: `{}`"
             .format(" ".join(size.paper_flags)))
  return text


def _testing_text(size):
  every = list(problems.PROBLEMS)
  mine = [p for p in every if p in size.problems]
  where = ("the four MNIST problems" if mine == every and len(every) == 4
           else _code(mine))
  seeds = size.seeds.split(",")
  text = "{} seeds ({}), {:,} steps on {}".format(
      len(seeds), ", ".join(seeds), size.test_steps, where)
  conv = any(problems.PROBLEMS[p].conv for p in mine)
  if conv and (size.test_steps_conv != size.test_steps or size.conv_learned):
    parts = []
    if size.test_steps_conv != size.test_steps:
      parts.append("{:,} steps".format(size.test_steps_conv))
    if size.conv_learned:
      parts.append("learned: " + _code(size.conv_learned))
    text += " (conv net: {})".format(", ".join(parts))
  text += ", held-out accuracy every {}".format(size.heldout_every)
  if size.flatness:
    text += ", flatness ({} probes)".format(size.flatness)
  if not size.baselines:
    return text + "; no baselines"
  parts = []
  if size.original_baselines:
    parts.append("{} at the original's learning rates".format(
        ", ".join(ORIGINAL_BASELINES)))
  if size.tuned:
    parts.append("tuned " + _code(size.tuned))
  return text + "; baselines: " + "; ".join(parts)


def doc_row(size):
  """The size's row of the Sizes table in docs/reproduction.md."""
  switch = "`{}=1`".format(size.env) if size.env else "full (default)"
  return "| {} | {}{}, {} | {} | {} |".format(
      switch, size.about, _optimizers_text(size), _schedule_text(size),
      _testing_text(size), size.wall_time)
