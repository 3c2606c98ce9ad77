"""The learned optimizer's absl flags, shared by ``metarun.py`` and ``metatest.py``.

Port of the optimizer-related flags of the original ``metarun.py`` (l.60-200)
and of the init-scale flags that ``optimizer/hierarchical_rnn.py`` defined at
import time (l.31-55): same names, meanings and defaults. ``optimizer_spec``
turns them into the ``Spec`` the original built (l.300-330).
"""

import importlib
import types

from absl import flags

from optimizer import hierarchical_rnn
from problems import problem_spec

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
  """Error lines for optimizer flags that make no sense (both scripts)."""
  errors = []
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
  for name in ("cell_size", "num_cells", "num_gradient_scales"):
    if getattr(flag_values, name) < 1:
      errors.append("--{} must be >= 1".format(name))
  if not 0 < flag_values.min_lr <= flag_values.max_lr:
    errors.append("--min_lr and --max_lr must satisfy 0 < min_lr <= max_lr")
  return errors


def register_optimizers():
  """Optimizer name -> class (original ``register_optimizers``)."""
  return {name: optimizer_class(name) for name in OPTIMIZER_MODULES}


_BOOL_FLAGS = [
    ("zero_init_lr_weights", True, "Initialize the learning rate weights to 0."),
    ("use_relative_lr", True, "Use the relative learning rate as an input."),
    ("use_extreme_indicator", False, "Use the extreme-LR indicator input."),
    ("use_log_means_squared", True, "Track the log of the mean squared grads."),
    ("use_problem_lr_mean", True,
     "Use the mean over all LRs of the problem for the relative LR."),
    ("learnable_decay", True, "Learn the RMS decay of the input scale."),
    ("dynamic_output_scale", True, "Learn the output scale dynamically."),
    ("use_log_objective", True, "Train on the log of the scaled objective."),
    ("use_attention", False, "Learn where to attend."),
    ("use_second_derivatives", True, "Use second derivatives."),
    ("use_gradient_shortcut", True,
     "Add a learned affine projection of the gradient to the update."),
    ("use_lr_shortcut", False, "Add log LR minus log 1e-3 to the RNN input."),
    ("use_grad_products", True, "Use gradient products in the RNN input."),
    ("use_multiple_scale_decays", False, "Use many-timescale scale decays."),
    ("use_numerator_epsilon", False,
     "Use epsilon in the numerator of the log objective."),
    ("learnable_inp_decay", True, "Learn input decay weight and bias."),
    ("learnable_rnn_init", True, "Learn RNN state initialization."),
]

_INIT_SCALE_HELP = {
    "biasgrucell_scale": "The scale for the internal BiasGRUCell vars.",
    "biasgrucell_gate_bias_init": "The bias for the BiasGRUCell gates.",
    "hrnn_rnn_readout_scale": "The initialization scale for the RNN readouts.",
    "hrnn_default_decay_var_init": "Default init of decay/momentum variables.",
    "scale_decay_bias_init": "Initial bias of the scale decay.",
    "learning_rate_momentum_logit_init": "Init of the learning rate momentum.",
    "hrnn_affine_scale": "Init scale of the layer0/1 bias weights.",
}


def define_optimizer_flags():
  """Defines the optimizer flags once (safe to call from two scripts)."""
  if "num_gradient_scales" in flags.FLAGS:
    return
  flags.DEFINE_string("optimizer", "HierarchicalRNN",
                      "Which meta-optimizer to train.")
  flags.DEFINE_integer("cell_size", 20,
                       "Size of the RNN hidden state in each layer.")
  flags.DEFINE_integer("num_cells", 2, "Number of RNN layers.")
  flags.DEFINE_string("cell_cls", "GRUCell", "Type of RNN cell to use.")
  flags.DEFINE_float("min_lr", _VALUE_DEFAULTS["min_lr"],
                     "The minimum initial learning rate.")
  flags.DEFINE_float("max_lr", _VALUE_DEFAULTS["max_lr"],
                     "The maximum initial learning rate.")
  for name, default, helptext in _BOOL_FLAGS:
    flags.DEFINE_boolean(name, default, helptext)
  flags.DEFINE_integer("num_gradient_scales",
                       _VALUE_DEFAULTS["num_gradient_scales"],
                       "How many timescales of gradient history to keep.")
  flags.DEFINE_float("max_log_lr", _VALUE_DEFAULTS["max_log_lr"],
                     "The maximum log learning rate allowed.")
  flags.DEFINE_float("objective_training_max_multiplier",
                     _VALUE_DEFAULTS["objective_training_max_multiplier"],
                     "How much the objective can grow before training on "
                     "this problem is stopped. If <= 0, not used.")
  for name, default in hierarchical_rnn.INIT_DEFAULTS.items():
    flags.DEFINE_float(name, default, _INIT_SCALE_HELP[name])


# Defaults of the non-boolean optimizer flags (metarun.py l.150-200).
_VALUE_DEFAULTS = dict(min_lr=1e-6, max_lr=1e-2, num_gradient_scales=4,
                       max_log_lr=33, objective_training_max_multiplier=-1)


def default_optimizer_kwargs():
  """HierarchicalRNN keyword arguments with every flag at its default.

  What ``optimizer_kwargs`` gives for a command line without optimizer
  flags: the configuration ``metarun.py`` trains by default, and so the one a
  checkpoint has unless told otherwise (e.g. for the Keras optimizer).
  """
  return optimizer_kwargs(types.SimpleNamespace(**default_flag_values()))


def default_flag_values():
  """Default of every optimizer flag that sets a HierarchicalRNN option."""
  return dict(**{name: default for name, default, _ in _BOOL_FLAGS},
              **_VALUE_DEFAULTS, **hierarchical_rnn.INIT_DEFAULTS)


def optimizer_flag_names():
  """Names of the flags :func:`define_optimizer_flags` defines (the run
  record's ``optimizer_flags`` section)."""
  return (["optimizer", "cell_size", "num_cells", "cell_cls", "min_lr",
           "max_lr"] + [name for name, _, _ in _BOOL_FLAGS] +
          list(_VALUE_DEFAULTS)[2:] + list(hierarchical_rnn.INIT_DEFAULTS))


def optimizer_kwargs_from_values(values):
  """HierarchicalRNN keyword arguments from a ``{flag name: value}`` dict
  (e.g. a run record's optimizer flags); missing flags take their defaults."""
  defaults = dict(optimizer="HierarchicalRNN", cell_size=20, num_cells=2,
                  cell_cls="GRUCell",
                  **{name: default for name, default, _ in _BOOL_FLAGS},
                  **_VALUE_DEFAULTS, **hierarchical_rnn.INIT_DEFAULTS)
  defaults.update({k: v for k, v in values.items() if k in defaults})
  return optimizer_kwargs(types.SimpleNamespace(**defaults))


def optimizer_kwargs(flag_values):
  """The keyword arguments the original passed to the optimizer class."""
  kwargs = {
      "init_lr_range": (flag_values.min_lr, flag_values.max_lr),
      "max_log_lr": flag_values.max_log_lr,
      "num_gradient_scales": flag_values.num_gradient_scales,
      "obj_train_max_multiplier": flag_values.objective_training_max_multiplier,
  }
  for name, _, _ in _BOOL_FLAGS:
    kwargs[name] = getattr(flag_values, name)
  for name in hierarchical_rnn.INIT_DEFAULTS:
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
