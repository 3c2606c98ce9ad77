"""The sizes of the reproduction, as data.

A size fixes how the learned variants are meta-trained (a ``metarun.py``
recipe, or a fixed-unroll schedule of its own), which variants and
problems it runs, and how they are meta-tested. ``select(env)`` picks one
from the environment (REPRO_TINY, REPRO_QUICK, REPRO_MEDIUM,
REPRO_PRETRAINED, else full) and applies REPRO_RECIPE and REPRO_META_LR.
"""

import dataclasses

from . import problem_list as problems

# The learned variants of the medium and full sizes, 3 training seeds each
# (the conv net: training seed 1 only), and their tuned baselines.
SEED1_VARIANTS = ("l2o-scale.t1", "hess-1e-4.t1", "hess-1e-2.t1",
                  "l2o-entropy-reg-cl-mt.t1")
SEEDED_VARIANTS = tuple(v[:-len(".t1")] + ".t{}".format(seed)
                        for seed in (1, 2, 3) for v in SEED1_VARIANTS)
TUNED_SWEEPS = ("Adam-lr3e-4", "Adam-lr1e-3", "Adam-lr3e-3", "Adam-lr1e-2",
                "SGD-lr0.1", "SGD-lr0.3", "SGD-lr1")
ORIGINAL_BASELINES = ("SGD", "Adam", "Adagrad")
# The paper-cmd variant's own schedule in the full size: the original's
# defaults, meta learning rate 1e-6.
PAPER_FLAGS = ("--num_meta_iterations=100", "--fix_unroll=True",
               "--fix_unroll_length=20", "--fix_num_steps=100",
               "--fix_num_steps_eval=100", "--evaluation_epochs=20",
               "--meta_learning_rate=1e-6")


@dataclasses.dataclass(frozen=True)
class Size:
  """One size. Empty strings are settings the size leaves to the recipe.

  ``variants``: the learned optimizers (``<variant>[.t<k>]``);
  ``conv_learned``: those meta-tested on the conv net (empty: all);
  ``tuned``: tuned baselines ``<Opt>-lr<lr>`` besides the original three;
  ``flatness``: metatest --flatness_probes on the MLPs (0: off);
  ``paper_flags``: the paper-cmd variant's schedule, replacing the size's.
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
  flatness: int = 0
  tuned: tuple = ()
  conv_learned: tuple = ()
  paper_flags: tuple = ()
  pretrained_only: bool = False
  train_seed: int = 1

  @property
  def baselines(self):
    return ORIGINAL_BASELINES + tuple(self.tuned)

  def train_flags(self):
    """What every meta-training of this size is given: a recipe (and the
    meta-iterations), or the schedule itself."""
    if self.recipe:
      flags = ["--recipe=" + self.recipe,
               "--num_meta_iterations={}".format(self.meta_iters)]
      if self.meta_lr:
        flags.append("--meta_learning_rate=" + self.meta_lr)
      return flags
    return ["--num_meta_iterations={}".format(self.meta_iters),
            "--fix_unroll=True", "--fix_unroll_length=20",
            "--fix_num_steps=" + self.fix_num_steps,
            "--fix_num_steps_eval=" + self.fix_num_steps_eval,
            "--evaluation_epochs=" + self.eval_epochs,
            "--evaluation_period={}".format(self.eval_period),
            "--meta_learning_rate=" + self.meta_lr]

  def test_steps_of(self, problem):
    return (self.test_steps_conv if problems.PROBLEMS[problem].conv
            else self.test_steps)

  def config_line(self, data_dir):
    """The settings a folder's results were made with (config.txt)."""
    return ("size={s.name} meta_iters={s.meta_iters} meta_lr={s.meta_lr} "
            "recipe={s.recipe} fix_num_steps={s.fix_num_steps} "
            "fix_num_steps_eval={s.fix_num_steps_eval} "
            "evaluation_epochs={s.eval_epochs} test_steps={s.test_steps} "
            "test_steps_conv={s.test_steps_conv} seeds={s.seeds} "
            "heldout_every={s.heldout_every} train_seed={s.train_seed} "
            "data_dir={d}".format(s=self, d=data_dir or "tfds"))


SIZES = {s.name: s for s in (
    # Smoke test (tests/test_reproduce.py).
    Size("tiny", meta_iters=1, test_steps=20, test_steps_conv=20, seeds="6",
         heldout_every=10, variants=("l2o-scale",),
         problems=("mnist-mlp-sigmoid",), meta_lr="1e-3", fix_num_steps="20",
         fix_num_steps_eval="20", eval_epochs="1"),
    # The original's 1e-6 leaves 3 meta-iterations' variants bit-identical;
    # 1e-3 at least moves them (by ~1e-6 in the losses: the TF1 RMSProp
    # starts its mean square at 1). It checks the pipeline, not the paper.
    Size("quick", meta_iters=3, test_steps=300, test_steps_conv=100,
         seeds="6,12,18", heldout_every=50,
         variants=("l2o-scale", "l2o-entropy-paper-cmd", "l2o-entropy-reg",
                   "l2o-entropy-reg-cl-mt"),
         meta_lr="1e-3", fix_num_steps="40", fix_num_steps_eval="40",
         eval_epochs="1"),
    # The recipe sets the meta-optimizer, its learning rate, the unrolls and
    # the evaluations; 10 meta-iterations leave the curriculum room for its
    # stages and the regularizers 50 meta-updates. 12 optimizers: what fits
    # about 2 h on 2 cores.
    Size("medium", meta_iters=10, test_steps=2000, test_steps_conv=300,
         seeds="6,12,18", heldout_every=250, variants=SEEDED_VARIANTS,
         recipe="fast", flatness=10, tuned=TUNED_SWEEPS,
         conv_learned=SEED1_VARIANTS),
    # The paper's test: 10,000 steps, 5 seeds; the variants meta-trained
    # with the long-horizon recipe, plus the paper's own command.
    Size("full", meta_iters=30, test_steps=10000, test_steps_conv=10000,
         seeds="6,12,18,24,30", heldout_every=500,
         variants=SEEDED_VARIANTS + ("l2o-entropy-paper-cmd.t1",),
         recipe="long", flatness=10, tuned=TUNED_SWEEPS,
         conv_learned=SEED1_VARIANTS + ("l2o-entropy-paper-cmd.t1",),
         paper_flags=PAPER_FLAGS),
)}


def pretrained_size(shipped):
  """The medium size's tests of the shipped optimizers ``shipped``
  (names in l2o_scale/pretrained/), no meta-training."""
  return dataclasses.replace(
      SIZES["medium"], name="pretrained", variants=tuple(shipped),
      conv_learned=(), tuned=("Adam-lr1e-3", "SGD-lr0.1"),
      pretrained_only=True)


def select(env, shipped=None):
  """The size the environment names. ``shipped``: a callable giving the
  shipped optimizers' names (REPRO_PRETRAINED only)."""
  on = lambda key: env.get(key, "0") == "1"
  if on("REPRO_TINY"):
    size = SIZES["tiny"]
  elif on("REPRO_QUICK"):
    size = SIZES["quick"]
  elif on("REPRO_PRETRAINED"):
    size = pretrained_size(shipped())
  elif on("REPRO_MEDIUM"):
    size = SIZES["medium"]
  else:
    size = SIZES["full"]
  if size.recipe and env.get("REPRO_RECIPE"):
    size = dataclasses.replace(size, recipe=env["REPRO_RECIPE"])
  if env.get("REPRO_META_LR"):
    size = dataclasses.replace(size, meta_lr=env["REPRO_META_LR"])
  return size
