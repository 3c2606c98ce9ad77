"""Meta-training configuration, declared once.

:class:`TrainingConfig` holds the settings ``metarun.py`` takes as flags
beyond the schedule (its fields define the absl flags, see
:mod:`l2o_scale.config.config_flags`); :class:`Schedule` holds the
original ``train_optimizer`` arguments (how many meta-iterations, how long
their unrolls, when to evaluate and save). A :class:`MetaTrainer
<l2o_scale.meta_training.trainer.MetaTrainer>` reads both from one
:class:`TrainerConfig`. :class:`RunConfig` is everything one meta-training
command is told (``metarun.py`` builds it from its flags in one function,
``metarun.run_config``); :mod:`l2o_scale.meta_training.validation` holds
the rules that combine its settings.
"""

import dataclasses
import functools
import typing

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_training import meta_learner as meta_learner_lib
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import selection as selection_lib
from l2o_scale.meta_training import stability

flag = config_flags.flag

REGULARIZE_TIMES = ("posterior", "prior", "none", "always")


OPTIMIZEE_INITS = ("normal", "problem")
FAST_FORWARD_INITS = ("same", "problem")

META_OBJECTIVES = ("train", "validation")
SELECTION_OBJECTIVES = ("same", "validation")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
  """The meta-training settings metarun.py takes as flags, each declared once
  here with its default and ``--help`` text (l2o_scale.config.config_flags defines
  the flags from these fields).

  The original defined them as module-level flags in ``metaopt.py``
  (l.34-75), ``optimizer/trainable_optimizer.py`` (alpha, beta,
  reg_optimizer, reg_optimizee) and ``problems/problem_generator.py``
  (hessian_itrs, reg_option); names, defaults and help are the original's.
  """
  mini_batch_size: int = flag(10000, "mini batch size.", ge=1)
  l2_reg: float = flag(0., "Lambda value for parameter regularization.")
  # Defined by the original but unused there too.
  nan_l2_reg: float = flag(
      1e-2, "Strength of l2-reg when NaNs are encountered (unused, as in the "
      "original).")
  rms_decay: float = flag(0.9, "Decay value for the RMSProp metaoptimizer.",
                          ge=0, lt=1)
  rms_epsilon: float = flag(1e-20,
                            "Epsilon value for the RMSProp metaoptimizer.",
                            gt=0)
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
  mt_ratio: float = flag(0.1, "Probability of an imitation meta-iteration.",
                         ge=0, le=1)
  mt_k: int = flag(1, "Teacher steps per imitation step.", ge=1)
  reg_optimizer: bool = flag(False, "Whether to regularize the optimizer.")
  reg_optimizee: bool = flag(False, "Whether to regularize the optimizee.")
  alpha: float = flag(5e-4, "The scale for optimizer regularization.")
  beta: float = flag(1e-4, "The scale for optimizee regularization.")
  reg_option: str = flag("hessian", "Which regularization to use: hessian, "
                         "hessian-ev, hessian-esd, jacob.",
                         regularizer_lib.REG_OPTIONS)
  hessian_itrs: int = flag(
      10, "Number of iterations for hessian information calculation.", ge=1)
  # New in the port: the regularizer's weight made visible
  # (docs/meta-training.md, "The regularizer's share").
  record_regularizer_share: bool = flag(
      True, "With --reg_optimizer=True: in every unroll whose meta-objective "
      "holds the regularizer (--regularize_time), measure its share of the "
      "meta-gradient, ||alpha * d(regularizer)|| / ||d(meta-objective "
      "without it)||, into the summaries (RegularizerShareMean, "
      "RegularizerShareMax) and "
      "meta_training_events.jsonl; costs a second backward pass of the "
      "regularizer part on those unrolls and changes no number of the run.")
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
      "this.", gt=0, le=1)
  selection: str = flag(
      "original", "Which evaluation picks model.ckpt-0: 'original' = lowest "
      "evaluation cost (--evaluation_epochs runs of --fix_num_steps_eval "
      "steps from N(0,1) parameters); 'robust' = lowest mean final objective "
      "of --selection_steps-step meta-test runs on fixed --selection_seeds (a "
      "diverging optimizer never wins).", selection_lib.SELECTIONS)
  selection_steps: int = flag(1000, "Steps of each --selection=robust run.",
                              ge=10)
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
      "(the original).", ge=0)
  meta_batch_size: int = flag(
      1, "Optimizee instances trained per partial unroll (a meta-batch): "
      "each with its own initial parameters, batches and mini dataset; the "
      "meta-gradient is that of the mean of their meta-objectives. 1 = the "
      "original.", ge=1)
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
  recompute_memory_gib: float = flag(
      2., "The memory budget (GiB) of the learned optimizer's values that an "
      "unroll's meta-gradient keeps. Where their estimated size (steps x "
      "optimizee instances x parameters x the step's kept bytes per "
      "parameter, measured from the step's gradient) exceeds it, the "
      "meta-gradient keeps only each step's inputs and recomputes the step's "
      "values in the backward pass (more time, the same numbers up to float "
      "rounding). <= 0: always keep them (the original).")
  # New in the port: long horizons (docs/meta-training.md, "Long horizons").
  fast_forward_max_steps: int = flag(
      0, "If > 0: before the series of a meta-iteration, train the fresh "
      "optimizee for S steps with the current learned optimizer (no "
      "meta-gradient; a compiled run on the training data, fresh optimizer "
      "state), S drawn log-uniformly from 1..N with probability "
      "--fast_forward_fraction and 0 otherwise, so that the unrolls see late "
      "phases of long runs as well as the start. 0: off (the original).",
      ge=0)
  fast_forward_fraction: float = flag(
      0.5, "With --fast_forward_max_steps: the share of meta-iterations "
      "whose series starts after a fast-forward.", ge=0, le=1)
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
      0.2, "With --meta_objective=validation or "
      "--selection_objective=validation: the share of the training rows "
      "held back (a fixed draw, the same for every seed).", gt=0, lt=1)
  selection_objective: str = flag(
      "same", "What the --selection=robust score measures: 'same' = what "
      "the meta-objective measures (the last minibatch objectives of its "
      "runs; with --meta_objective=validation the held-back rows); "
      "'validation' = the loss on a fixed share (--validation_fraction) of "
      "the training rows held back from all of meta-training (batches, mini "
      "datasets, fast-forwards, imitation, the selection runs), at the end "
      "of each selection run, while the meta-objective stays that of "
      "--meta_objective: the checkpoint is chosen on a validation split.",
      SELECTION_OBJECTIVES)
  # New in the port: meta-training on a distribution of problems
  # (docs/meta-training.md, "Training on a mixture of problems").
  mix_problems: bool = flag(
      False, "Draw the problem of every meta-iteration from all the problems "
      "the --include_* flags select (a draw fixed by the meta-iteration's "
      "number), each meta-iteration from a fresh optimizee and optimizer "
      "state, in one run of --num_meta_iterations. Off: the original, "
      "--num_problems problems one after the other, --num_meta_iterations "
      "each.")
  selection_set: str = flag(
      "", "With --selection=robust: score on the problems of this problem "
      "set (the geometric mean of their robust scores) instead of on the "
      "problem being trained; needed for a comparable score with "
      "--mix_problems or --num_problems > 1. Empty: the current problem.")
  max_compiled_problems: int = flag(
      8, "With --mix_problems: at most this many problems keep their "
      "compiled unrolls (and fast-forward loop) between the meta-iterations "
      "that draw them; drawing another releases those of the problem drawn "
      "least recently, which compiles again when drawn again (a few seconds; "
      "the numbers stay the same). Bounds the run's memory, which otherwise "
      "grows with every distinct problem drawn. 0: no bound.", ge=0)
  warm_start: str = flag(
      "", "Start a fresh run's meta-parameters from this checkpoint "
      "(model.ckpt-N path) or shipped optimizer (name, e.g. l2o-scale) "
      "instead of their initialisation; a resumed run ignores it (new).")
  selection_seeds: tuple = flag(
      (1001, 1002, 1003), "Seeds of the --selection=robust runs (each fixes "
      "the initial parameters, initial learning rates and batches).")


@dataclasses.dataclass(frozen=True)
class Schedule:
  """The original ``train_optimizer`` arguments (L2O-Entropy
  ``L2O-Scale-Training/metaopt.py`` l.117-140) and the ``metarun.py`` flags
  that set them (l.36-75, 228-235): the meta-iterations, their partial
  unrolls, the meta-update's learning rate and clipping, and when to
  evaluate and save. Defaults are the original ``metarun.py``'s.

  ``num_unroll_func`` / ``num_partial_unroll_itrs_func`` draw the number of
  partial unrolls and their length when ``fix_unroll`` is off; when None
  they are the original's draws, ``sample_numiter(num_unroll_scale,
  min_num_unrolls)`` and ``sample_numiter(num_partial_unroll_itr_scale,
  min_num_itr_partial_unroll)`` (metarun.py l.390-400).
  """
  num_meta_iterations: int = flag(
      5, "Number of meta-iterations to optimize.", ge=1)
  num_unroll_func: typing.Optional[typing.Callable[[], int]] = None
  num_partial_unroll_itrs_func: typing.Optional[
      typing.Callable[[], int]] = None
  learning_rate: float = flag(
      1e-6, "The learning rate for the meta-optimizer.",
      name="meta_learning_rate", gt=0)
  gradient_clip: float = flag(
      1e4, "The level to clip gradients to (each meta-gradient entry to "
      "[-level, level]).", name="gradient_clip_level", gt=0)
  obj_train_max_multiplier: float = -1  # --objective_training_max_multiplier
  fix_unroll: bool = flag(False, "Use fixed unroll lengths.")
  fix_unroll_length: int = flag(20, "Length of a fixed unroll.", ge=1)
  fix_num_steps: int = flag(100, "Steps per meta-iteration (fixed).", ge=0)
  fix_num_steps_eval: int = flag(100, "Steps per evaluation run.", ge=1)
  evaluation_period: int = flag(
      1, "Meta-iterations between evaluations.", ge=1)
  evaluation_epochs: int = flag(20, "Runs averaged per evaluation.", ge=1)
  save_period: int = flag(1, "Meta-iterations between checkpoints.", ge=1)
  if_cl: bool = flag(False, "Curriculum learning over unroll lengths.")
  num_problems: int = flag(1, "Number of sub-problems to run.", ge=1)
  select_random_problems: bool = True
  num_unroll_scale: int = flag(
      40, "Scale of the exponential distribution of the number of partial "
      "unrolls.", ge=0)
  min_num_unrolls: int = flag(
      10, "The minimum number of unrolls per problem.", ge=1)
  num_partial_unroll_itr_scale: int = flag(
      20, "Scale of the exponential distribution of the number of "
      "iterations per unroll.", ge=0)
  min_num_itr_partial_unroll: int = flag(
      10, "The minimum number of iterations for one unroll.", ge=1)

  def __post_init__(self):
    if self.num_unroll_func is None:
      object.__setattr__(self, "num_unroll_func", functools.partial(
          plan_lib.sample_numiter, self.num_unroll_scale,
          self.min_num_unrolls))
    if self.num_partial_unroll_itrs_func is None:
      object.__setattr__(self, "num_partial_unroll_itrs_func",
                         functools.partial(plan_lib.sample_numiter,
                                           self.num_partial_unroll_itr_scale,
                                           self.min_num_itr_partial_unroll))


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


@dataclasses.dataclass(frozen=True)
class ClusterTask:
  """This process's task in a parameter-server cluster, as ``TF_CONFIG``
  gives it: its job (``chief``, ``worker`` or ``ps``), its index in that
  job, and the cluster (job -> addresses)."""
  job: str
  index: int = 0
  cluster: typing.Mapping[str, typing.Sequence[str]] = dataclasses.field(
      default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """Everything one meta-training command is told, interpreted once.

  ``metarun.py`` builds it from its flags (``metarun.run_config``); the
  library's entry points, given a :class:`TrainerConfig`, know its
  ``schedule`` and ``training`` only (:meth:`of_trainer`), and the rules of
  the parts they are not given do not apply
  (:func:`l2o_scale.meta_training.validation.validate`).

  ``optimizer``: the learned optimizer's flags (None: the caller builds the
  optimizer itself); ``program``: metarun.py's own flags (None: not a
  metarun.py command); ``problem_sets``: the ``--include_*`` flags that are
  on, in the registry's order; ``given``: the names of the flags given
  explicitly (on the command line or in a recipe), for the rules about
  what a user said rather than what a default says; ``cluster``: this
  process's :class:`ClusterTask` (None: a single process).
  """
  schedule: Schedule
  training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
  optimizer: typing.Optional[optimizer_flags.OptimizerConfig] = None
  program: typing.Optional[programs.MetarunConfig] = None
  problem_sets: typing.Tuple[str, ...] = ()
  given: typing.FrozenSet[str] = frozenset()
  cluster: typing.Optional[ClusterTask] = None

  @classmethod
  def of_trainer(cls, config, cluster=None):
    """The part of a run a :class:`TrainerConfig` gives (the library's
    entry points); ``cluster``: the :class:`ClusterTask` of a distributed
    chief."""
    return cls(schedule=config.schedule, training=config.training,
               cluster=cluster)

  @property
  def is_chief(self):
    """Whether this process is the chief of a cluster."""
    return self.cluster is not None and self.cluster.job == "chief"

  def trainer_config(self, logdir):
    """The :class:`TrainerConfig` of this run, writing into ``logdir``."""
    return TrainerConfig(logdir=logdir, schedule=self.schedule,
                         training=self.training, resume=self.program.resume,
                         summaries=self.program.summaries)
