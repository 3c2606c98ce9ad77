"""The L2O-Entropy regularizers as an unroll uses them.

Port of the regularizer additions of L2O-Entropy to
``TrainableOptimizer.train`` (``L2O-Scale-Training/optimizer/
trainable_optimizer.py`` l.33-42 flags, l.300-345 use) and of the
``reg_option`` dispatch of ``Problem.gradients`` (``problems/
problem_generator.py`` l.300-330): which regularizer, its probes, whether it
accumulates in an unroll (the ``jacob_switch``), and whether it can be
evaluated after the trajectory (:func:`defers_regularizer`).
"""

import collections

import numpy as np
import tensorflow as tf

from problems import problem_generator


class RegularizerConfig(collections.namedtuple(
    "RegularizerConfig",
    ["reg_optimizer", "reg_optimizee", "alpha", "beta", "reg_option",
     "hessian_itrs", "seed", "probes"])):
  """The L2O-Entropy regularizer flags (original trainable_optimizer.py l.33-42,
  problem_generator.py l.31-36). ``probes`` are the Rademacher probes of
  'hessian' / 'hessian-esd': the original drew them with numpy while building
  the graph, i.e. once per run, so the same probes serve every step.
  ``seed`` seeds the start vectors of 'hessian-ev' (a fresh
  ``tf.random_normal`` per run in the original)."""

  @property
  def active(self):
    return self.reg_optimizer or self.reg_optimizee


NO_REGULARIZER = RegularizerConfig(False, False, 5e-4, 1e-4, "hessian", 10,
                                   0, None)

# The regularizers Problem.regularizer computes (one list, the problems').
REG_OPTIONS = problem_generator.REG_OPTIONS


def draw_rademacher_probes(param_shapes, num_probes, rng=np.random):
  """Rademacher probes drawn as the original drew them, with numpy.

  The original's ``hessain_trace`` and ``density`` call
  ``np.random.randint(0, 2, shape)`` per parameter per probe while the graph
  is built (then map 0 to -1), i.e. once per run, continuing the global numpy
  stream right after the problem's own random data. Drawing them the same way
  at the same point reproduces the original probes.
  """
  probes = []
  for _ in range(num_probes):
    probe = []
    for shape in param_shapes:
      v = rng.randint(0, 2, tuple(shape))
      v[v == 0] = -1
      probe.append(v.astype(np.float32))
    probes.append(probe)
  return probes


def make_regularizer_config(problem, reg_optimizer=False, reg_optimizee=False,
                            alpha=5e-4, beta=1e-4, reg_option="hessian",
                            hessian_itrs=10):
  """RegularizerConfig; draws the probes the option needs. An unknown
  ``reg_option`` is refused where it is used (``Problem.regularizer``) and,
  on the command line, by its flag's choices."""
  probes = None
  if reg_option == "hessian":
    probes = draw_rademacher_probes(problem.param_shapes, hessian_itrs)
  elif reg_option == "hessian-esd":
    probes = draw_rademacher_probes(problem.param_shapes, 1)
  # A fresh start vector per run, without touching the numpy stream.
  seed = (int(tf.random.uniform([], maxval=2**31 - 1, dtype=tf.int64))
          if reg_option == "hessian-ev" else 0)
  return RegularizerConfig(bool(reg_optimizer), bool(reg_optimizee),
                           float(alpha), float(beta), reg_option,
                           int(hessian_itrs), seed, probes)


def regularizer_value(problem, params, batch_data, batch_labels, clean_grads,
                      reg):
  """The L2O-Entropy regularizer of the batch objective (``reg_option``).

  Dispatches as the original ``Problem.gradients`` (problem_generator.py
  l.300-330): 'hessian' -> Hutchinson trace, 'hessian-ev' -> sum of the top
  power-iteration eigenvalue estimates, 'hessian-esd' -> stochastic Lanczos
  (sum of the Ritz values), 'jacob' -> mean squared gradient. All take
  ``hessian_itrs`` iterations and are differentiable (meta-gradients flow
  through them).
  """
  return problem.regularizer(list(params), batch_data, batch_labels,
                             reg.reg_option, reg.hessian_itrs, seed=reg.seed,
                             grads=clean_grads, probes=reg.probes)


def decided_while_tracing(switch):
  """Whether a ``jacob_switch`` is a Python bool (see :class:`UnrollInputs`)
  rather than a bool tensor."""
  return isinstance(switch, (bool, np.bool_))


def switched_regularizer(problem, params, batch_data, batch_labels,
                         clean_grads, reg, switch):
  """:func:`regularizer_value` while ``switch`` is on, else 0 (the
  original's ``tf.cond`` on ``jacob_switch``). A Python bool ``switch``
  decides while tracing: no ``tf.cond``, whose gradient took half of the
  hessian-esd meta-step's tracing time."""
  if decided_while_tracing(switch):
    return (regularizer_value(problem, params, batch_data, batch_labels,
                              clean_grads, reg) if switch else tf.constant(0.))
  return tf.cond(
      switch,
      lambda: regularizer_value(problem, params, batch_data, batch_labels,
                                clean_grads, reg),
      lambda: tf.constant(0.))


DEFERRABLE_REG_OPTIONS = ("hessian", "hessian-esd", "jacob")


def defers_regularizer(reg, switch):
  """Whether the regularizer can be evaluated after the trajectory: it only
  enters the meta-objective (``reg_optimizer`` without ``reg_optimizee``),
  its switch is decided while tracing, and it draws nothing at random
  ('hessian-ev' draws its start vectors per evaluation)."""
  return (reg.reg_optimizer and not reg.reg_optimizee and
          decided_while_tracing(switch) and
          reg.reg_option in DEFERRABLE_REG_OPTIONS)


def acts_in_meta_objective(reg, switches, mode_mt):
  """Whether the optimizer regularizer enters the differentiated objective
  of an unroll: ``reg_optimizer``, no imitation (``mode_mt``: its objective
  has no regularizer) and every instance's ``jacob_switch`` decided on while
  tracing (:func:`decided_while_tracing`)."""
  return (reg.reg_optimizer and not mode_mt and
          all(decided_while_tracing(s) and s for s in switches))


def gradient_share(total_grads, reg_grads):
  """The regularizer's share of a meta-gradient:
  ``||reg_grads|| / ||total_grads - reg_grads||``, where ``total_grads`` is
  the gradient of the whole differentiated objective and ``reg_grads`` that
  of its regularizer part (``alpha`` times the accumulated regularizer), so
  the denominator is the gradient of the objective without the regularizer.
  Linear in ``alpha``: the trajectory does not depend on it."""
  objective = [t - r for t, r in zip(total_grads, reg_grads)]
  return tf.linalg.global_norm(reg_grads) / tf.linalg.global_norm(objective)
