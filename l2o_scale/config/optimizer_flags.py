"""The learned optimizer's flags, shared by ``metarun.py`` and ``metatest.py``.

Port of the optimizer-related flags of the original ``metarun.py`` (l.60-200)
and of the init-scale flags that ``optimizer/hierarchical_rnn.py`` defined at
import time (l.31-55): same names, meanings and defaults, declared once as
the fields of :class:`OptimizerConfig`. ``optimizer_spec`` turns them into
the ``Spec`` the original built (l.300-330).
"""

import dataclasses
import importlib

from l2o_scale.config import config_flags
from optimizer import hierarchical_rnn
from problems import problem_spec

flag = config_flags.flag

# [PerParam, PerTensor, Global] sizes, as the original's HRNN_CELL_SIZES.
HRNN_CELL_SIZES = [10, 20, 20]


# Optimizer class name -> module of the ``optimizer`` package defining it.
OPTIMIZER_MODULES = {
    "CoordinatewiseRNN": "optimizer.coordinatewise_rnn",
    "GlobalLearningRate": "optimizer.global_learning_rate",
    "HierarchicalRNN": "optimizer.hierarchical_rnn",
    "LearningRateSchedule": "optimizer.learning_rate_schedule",
    "TrainableAdam": "optimizer.trainable_adam",
}


def optimizer_class(name):
  """The optimizer class called ``name``; ValueError listing valid names."""
  if name not in OPTIMIZER_MODULES:
    raise ValueError("Unknown optimizer {!r}; choose one of {}".format(
        name, ", ".join(sorted(OPTIMIZER_MODULES))))
  return getattr(importlib.import_module(OPTIMIZER_MODULES[name]), name)


# RNN cell names --cell_cls may give (the TF1 rnn_cell classes the original's
# optimizers accepted; HierarchicalRNN uses its own GRU and ignores the flag,
# which only names the checkpoint folder).
CELL_NAMES = ("GRUCell", "LSTMCell", "BasicLSTMCell")


def check_optimizer_flags(flag_values):
  """Error lines for optimizer flags that make no sense (both scripts):
  their bounds (:class:`OptimizerConfig`) and the combinations."""
  errors = config_flags.validate(OptimizerConfig, flag_values)
  if flag_values.optimizer == "CoordinatewiseRNN":
    errors.append("--optimizer=CoordinatewiseRNN cannot be built from these "
                  "flags (the original's metarun.py passed it no cell sizes "
                  "and crashed too); use --optimizer=HierarchicalRNN")
  elif flag_values.optimizer not in OPTIMIZER_MODULES:
    errors.append("--optimizer={!r} is not one of {}".format(
        flag_values.optimizer, ", ".join(sorted(OPTIMIZER_MODULES))))
  if flag_values.cell_cls not in CELL_NAMES:
    errors.append("--cell_cls={!r} is not one of {}".format(
        flag_values.cell_cls, ", ".join(CELL_NAMES)))
  if (0 < flag_values.min_lr < float("inf") and
      0 < flag_values.max_lr < flag_values.min_lr):
    errors.append("--min_lr and --max_lr must satisfy min_lr <= max_lr")
  return errors


def register_optimizers():
  """Optimizer name -> class (original ``register_optimizers``)."""
  return {name: optimizer_class(name) for name in OPTIMIZER_MODULES}


_INIT = hierarchical_rnn.INIT_DEFAULTS


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """The learned optimizer's flags, each declared once with its default,
  help and bounds: the original ``metarun.py`` (l.60-200) and the init-scale
  flags of ``optimizer/hierarchical_rnn.py`` (l.31-55, defaults in
  ``hierarchical_rnn.INIT_DEFAULTS``). Both CLIs define these flags."""
  optimizer: str = flag("HierarchicalRNN", "Which meta-optimizer to train.")
  cell_size: int = flag(20, "Size of the RNN hidden state in each layer.",
                        ge=1)
  num_cells: int = flag(2, "Number of RNN layers.", ge=1)
  cell_cls: str = flag("GRUCell", "Type of RNN cell to use.")
  min_lr: float = flag(1e-6, "The minimum initial learning rate.", gt=0)
  max_lr: float = flag(1e-2, "The maximum initial learning rate.", gt=0)
  zero_init_lr_weights: bool = flag(
      True, "Initialize the learning rate weights to 0.")
  use_relative_lr: bool = flag(
      True, "Use the relative learning rate as an input.")
  use_extreme_indicator: bool = flag(
      False, "Use the extreme-LR indicator input.")
  use_log_means_squared: bool = flag(
      True, "Track the log of the mean squared grads.")
  use_problem_lr_mean: bool = flag(
      True, "Use the mean over all LRs of the problem for the relative LR.")
  learnable_decay: bool = flag(True, "Learn the RMS decay of the input scale.")
  dynamic_output_scale: bool = flag(True, "Learn the output scale dynamically.")
  use_log_objective: bool = flag(
      True, "Train on the log of the scaled objective.")
  use_attention: bool = flag(False, "Learn where to attend.")
  use_second_derivatives: bool = flag(True, "Use second derivatives.")
  use_gradient_shortcut: bool = flag(
      True, "Add a learned affine projection of the gradient to the update.")
  use_lr_shortcut: bool = flag(
      False, "Add log LR minus log 1e-3 to the RNN input.")
  use_grad_products: bool = flag(
      True, "Use gradient products in the RNN input.")
  use_multiple_scale_decays: bool = flag(
      False, "Use many-timescale scale decays.")
  use_numerator_epsilon: bool = flag(
      False, "Use epsilon in the numerator of the log objective.")
  learnable_inp_decay: bool = flag(True, "Learn input decay weight and bias.")
  learnable_rnn_init: bool = flag(True, "Learn RNN state initialization.")
  num_gradient_scales: int = flag(
      4, "How many timescales of gradient history to keep.", ge=1)
  max_log_lr: float = flag(33, "The maximum log learning rate allowed.")
  objective_training_max_multiplier: float = flag(
      -1, "How much the objective can grow before training on this problem "
      "is stopped. If <= 0, not used.")
  biasgrucell_scale: float = flag(
      _INIT["biasgrucell_scale"],
      "The scale for the internal BiasGRUCell vars.")
  biasgrucell_gate_bias_init: float = flag(
      _INIT["biasgrucell_gate_bias_init"],
      "The bias for the BiasGRUCell gates.")
  hrnn_rnn_readout_scale: float = flag(
      _INIT["hrnn_rnn_readout_scale"],
      "The initialization scale for the RNN readouts.")
  hrnn_default_decay_var_init: float = flag(
      _INIT["hrnn_default_decay_var_init"],
      "Default init of decay/momentum variables.")
  scale_decay_bias_init: float = flag(
      _INIT["scale_decay_bias_init"], "Initial bias of the scale decay.")
  learning_rate_momentum_logit_init: float = flag(
      _INIT["learning_rate_momentum_logit_init"],
      "Init of the learning rate momentum.")
  hrnn_affine_scale: float = flag(
      _INIT["hrnn_affine_scale"], "Init scale of the layer0/1 bias weights.")


_BOOL_NAMES = tuple(f.name for f in config_flags.flag_fields(OptimizerConfig)
                    if f.type is bool)


def define_optimizer_flags(flag_values, module_name):
  """Defines the optimizer flags into ``flag_values`` (a program's own set),
  filed under ``module_name``."""
  config_flags.define_flags(OptimizerConfig, module_name, flag_values)


def default_optimizer_kwargs():
  """HierarchicalRNN keyword arguments with every flag at its default.

  What ``optimizer_kwargs`` gives for a command line without optimizer
  flags: the configuration ``metarun.py`` trains by default, and so the one a
  checkpoint has unless told otherwise (e.g. for the Keras optimizer).
  """
  return optimizer_kwargs(OptimizerConfig())


def optimizer_flag_names():
  """Names of the optimizer flags (the run record's ``optimizer_flags``
  section)."""
  return config_flags.flag_names(OptimizerConfig)


def optimizer_kwargs_from_values(values):
  """HierarchicalRNN keyword arguments from a ``{flag name: value}`` dict
  (e.g. a run record's optimizer flags); missing flags take their defaults."""
  known = set(optimizer_flag_names())
  return optimizer_kwargs(OptimizerConfig(
      **{k: v for k, v in values.items() if k in known}))


def optimizer_kwargs(flag_values):
  """The keyword arguments the original passed to the optimizer class."""
  kwargs = {
      "init_lr_range": (flag_values.min_lr, flag_values.max_lr),
      "max_log_lr": flag_values.max_log_lr,
      "num_gradient_scales": flag_values.num_gradient_scales,
      "obj_train_max_multiplier": flag_values.objective_training_max_multiplier,
  }
  for name in _BOOL_NAMES:
    kwargs[name] = getattr(flag_values, name)
  for name in _INIT:
    kwargs[name] = getattr(flag_values, name)
  return kwargs


def optimizer_spec(flag_values):
  """``Spec`` of the optimizer chosen by ``--optimizer`` and its flags.

  Raises a ValueError naming the valid choices for an unknown optimizer.
  Only HierarchicalRNN takes ``level_sizes`` and the full option set, as in
  the original (which also passed ``cell_cls``: unused by the HRNN).
  """
  cls = optimizer_class(flag_values.optimizer)
  if cls is hierarchical_rnn.HierarchicalRNN:
    return problem_spec.Spec(cls, (list(HRNN_CELL_SIZES),),
                             optimizer_kwargs(flag_values))
  return problem_spec.Spec(cls, (), {})


def checkpoint_subdir(flag_values):
  """``<optimizer>_<cell_cls>_<cell_size>_<num_cells>``, the original logdir name."""
  return "{}_{}_{}_{}".format(flag_values.optimizer, flag_values.cell_cls,
                              flag_values.cell_size, flag_values.num_cells)
