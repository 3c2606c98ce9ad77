"""Meta-training configuration, declared once.

:class:`TrainingConfig` holds the settings ``metarun.py`` takes as flags
beyond the schedule (its fields define the absl flags, see
:mod:`l2o_scale.config.config_flags`); :class:`Schedule` holds the
original ``train_optimizer`` arguments (how many meta-iterations, how long
their unrolls, when to evaluate and save). A :class:`MetaTrainer
<l2o_scale.meta_training.trainer.MetaTrainer>` reads both from one
:class:`TrainerConfig`.
"""

import dataclasses
import typing

from l2o_scale.config import config_flags
from l2o_scale.meta_training import meta_learner as meta_learner_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.meta_training import stability

flag = config_flags.flag

REGULARIZE_TIMES = ("posterior", "prior", "none", "always")


OPTIMIZEE_INITS = ("normal", "problem")
FAST_FORWARD_INITS = ("same", "problem")

META_OBJECTIVES = ("train", "validation")


@dataclasses.dataclass
class TrainingConfig:
  """The meta-training settings metarun.py takes as flags, each declared once
  here with its default and ``--help`` text (l2o_scale.config.config_flags defines
  the flags from these fields).

  The original defined them as module-level flags in ``metaopt.py``
  (l.34-75), ``optimizer/trainable_optimizer.py`` (alpha, beta,
  reg_optimizer, reg_optimizee) and ``problems/problem_generator.py``
  (hessian_itrs, reg_option); names, defaults and help are the original's.
  """
  mini_batch_size: int = flag(10000, "mini batch size.")
  l2_reg: float = flag(0., "Lambda value for parameter regularization.")
  # Defined by the original but unused there too.
  nan_l2_reg: float = flag(
      1e-2, "Strength of l2-reg when NaNs are encountered (unused, as in the "
      "original).")
  rms_decay: float = flag(0.9, "Decay value for the RMSProp metaoptimizer.")
  rms_epsilon: float = flag(1e-20,
                            "Epsilon value for the RMSProp metaoptimizer.")
  data_freeze: bool = flag(False,
                           "Freeze the data while training the optimizer.")
  reset_rnn_params: bool = flag(
      True, "Reset the optimizer state only at the first unroll of training "
      "(original semantics).")
  regularize_time: str = flag(
      "posterior", "When to add the regularization to the optimizer "
      "training: posterior, prior, none (= never), always (the original "
      "read any other word as always; only these four are accepted, so that "
      "a typo is not).", REGULARIZE_TIMES)
  reg_scale: float = flag(0.5, "The regularize scale for meta regularization.")
  if_mt: bool = flag(False, "Imitation learning of Adam (MT).")
  mt_ratio: float = flag(0.1, "Probability of an imitation meta-iteration.")
  mt_k: int = flag(1, "Teacher steps per imitation step.")
  reg_optimizer: bool = flag(False, "Whether to regularize the optimizer.")
  reg_optimizee: bool = flag(False, "Whether to regularize the optimizee.")
  alpha: float = flag(5e-4, "The scale for optimizer regularization.")
  beta: float = flag(1e-4, "The scale for optimizee regularization.")
  reg_option: str = flag("hessian", "Which regularization to use: hessian, "
                         "hessian-ev, hessian-esd, jacob.",
                         regularizer_lib.REG_OPTIONS)
  hessian_itrs: int = flag(
      10, "Number of iterations for hessian information calculation.")
  # New in the port (defaults = the original's behaviour): meta-training
  # that learns and stays stable (README "Meta-training that learns";
  # l2o_scale/meta_training/stability.py, selection.py).
  optimizee_init: str = flag(
      "normal", "Initial optimizee parameters of each meta-iteration: "
      "'normal' = standard normal (the original), 'problem' = the problem's "
      "own initialisation, as meta-testing starts.", OPTIMIZEE_INITS)
  on_divergence: str = flag(
      "continue", "When an unroll diverges (non-finite meta-objective or "
      "meta-gradient, or the optimizee objective grows more than "
      "--divergence_growth_limit times): 'continue' = warn and apply it (the "
      "original), 'rollback' = undo the meta-iteration (back to "
      "model.ckpt-0 or its start) and lower the meta learning rate, 'stop' = "
      "end training.", stability.ON_DIVERGENCE)
  divergence_growth_limit: float = flag(
      100., "An unroll (and a --selection=robust run) diverged when its "
      "optimizee objective ends above this many times its start. <= 0: only "
      "non-finite values count.")
  divergence_lr_decay: float = flag(
      0.5, "--on_divergence=rollback multiplies the meta learning rate by "
      "this.")
  selection: str = flag(
      "original", "Which evaluation picks model.ckpt-0: 'original' = lowest "
      "evaluation cost (--evaluation_epochs runs of --fix_num_steps_eval "
      "steps from N(0,1) parameters); 'robust' = lowest mean final objective "
      "of --selection_steps-step meta-test runs on fixed --selection_seeds (a "
      "diverging optimizer never wins).", selection_lib.SELECTIONS)
  selection_steps: int = flag(1000, "Steps of each --selection=robust run.")
  # New in the port: speed (README "Speed").
  jit_compile: bool = flag(
      False, "Compile the optimizer's step inside each meta-training unroll "
      "with XLA (forward and meta-gradient); the numbers change by float "
      "rounding only.")
  meta_optimizer: str = flag(
      "rmsprop", "The meta-optimizer: 'rmsprop' = TF1 RMSProp with its mean "
      "square starting at 1 (the original; its first steps are small, an "
      "implicit warm-up), 'rmsprop_ms0' = the same with the mean square "
      "starting at 0 (as Keras' RMSprop), 'adam' = TF1 Adam with bias "
      "correction (beta1 0.9, beta2 0.999, epsilon 1e-8; --rms_decay and "
      "--rms_epsilon apply to the RMSProp rules only).",
      meta_learner_lib.META_OPTIMIZERS)
  meta_lr_warmup: int = flag(
      0, "If > 0: the meta learning rate rises linearly from 1/N of "
      "--meta_learning_rate to it over the first N meta-updates (one per "
      "unroll; counted by the checkpointed update counter). 0: no warm-up "
      "(the original).")
  meta_batch_size: int = flag(
      1, "Optimizee instances trained per partial unroll (a meta-batch): "
      "each with its own initial parameters, batches and mini dataset; the "
      "meta-gradient is that of the mean of their meta-objectives. 1 = the "
      "original.")
  time_parallel: bool = flag(
      True, "Evaluate the objective on the mini dataset (and a regularizer "
      "that only enters the meta-objective) at all steps of an unroll after "
      "its trajectory, in one vectorized pass, instead of step by step; an "
      "unroll that the original's stop rules end early runs step by step. "
      "The numbers change by float rounding only.")
  time_parallel_memory_gib: float = flag(
      2., "With --time_parallel: the memory budget (GiB) of that "
      "evaluation. Where its estimated size (steps x mini dataset rows x the "
      "objective's activations per row, twice for the meta-gradient) "
      "exceeds it, the steps are evaluated a chunk at a time and the "
      "meta-gradient keeps one gradient per step instead of the "
      "activations; the numbers change by float rounding only. <= 0: no "
      "bound (all steps at once).")
  # New in the port: long horizons (docs/meta-training.md, "Long horizons").
  fast_forward_max_steps: int = flag(
      0, "If > 0: before the series of a meta-iteration, train the fresh "
      "optimizee for S steps with the current learned optimizer (no "
      "meta-gradient; a compiled run on the training data, fresh optimizer "
      "state), S drawn log-uniformly from 1..N with probability "
      "--fast_forward_fraction and 0 otherwise, so that the unrolls see late "
      "phases of long runs as well as the start. 0: off (the original).")
  fast_forward_fraction: float = flag(
      0.5, "With --fast_forward_max_steps: the share of meta-iterations "
      "whose series starts after a fast-forward.")
  fast_forward_init: str = flag(
      "same", "With --fast_forward_max_steps: where a fast-forwarded series "
      "starts: 'same' = as every series (--optimizee_init); 'problem' = the "
      "problem's own initialisation, as meta-testing starts, so that the "
      "unrolls after a fast-forward see the late phases of the runs a user "
      "runs (series without a fast-forward keep --optimizee_init).",
      FAST_FORWARD_INITS)
  # New in the port: a meta-objective that rewards generalization
  # (docs/meta-training.md, "A validation meta-objective").
  meta_objective: str = flag(
      "train", "What the meta-objective measures: 'train' = the optimizee's "
      "objective on its mini dataset, the rows it trains on (the original); "
      "'validation' = its objective on a fixed share "
      "(--validation_fraction) of the training rows that meta-training never "
      "trains on: batches, mini datasets, fast-forwards, imitation and the "
      "--selection=robust runs use the other rows, and the robust score is "
      "then the loss on the held-back rows at the end of its runs.",
      META_OBJECTIVES)
  validation_fraction: float = flag(
      0.2, "With --meta_objective=validation: the share of the training rows "
      "held back for the meta-objective (a fixed draw, the same for every "
      "seed).")
  selection_seeds: tuple = flag(
      (1001, 1002, 1003), "Seeds of the --selection=robust runs (each fixes "
      "the initial parameters, initial learning rates and batches).")


@dataclasses.dataclass(frozen=True)
class Schedule:
  """The original ``train_optimizer`` arguments (L2O-Entropy
  ``L2O-Scale-Training/metaopt.py`` l.120-140): the meta-iterations, their
  partial unrolls, the meta-update's learning rate and clipping, and when to
  evaluate and save."""
  num_meta_iterations: int
  num_unroll_func: typing.Callable[[], int] = lambda: 1
  num_partial_unroll_itrs_func: typing.Callable[[], int] = lambda: 20
  learning_rate: float = 1e-4
  gradient_clip: float = 5.
  obj_train_max_multiplier: float = -1
  fix_unroll: bool = False
  fix_unroll_length: int = 20
  fix_num_steps: int = 100
  fix_num_steps_eval: int = 100
  evaluation_period: int = 1
  evaluation_epochs: int = 20
  save_period: int = 1
  if_cl: bool = False
  num_problems: int = 1
  select_random_problems: bool = True


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Everything a meta-training run is told: where it writes (``logdir``),
  its :class:`Schedule`, its :class:`TrainingConfig`, whether it resumes
  from the latest checkpoint in ``logdir`` and writes TensorBoard
  summaries."""
  logdir: str
  schedule: Schedule
  training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
  resume: bool = True
  summaries: bool = True
