"""How the unrolls of a meta-training task run: the optimizer's step as an
unroll calls it (:func:`optimizer_update`: XLA, recomputed in the
meta-gradient, or plain) and :class:`UnrollMethod`, the ways to run an
unroll that give the original's numbers up to float rounding
(:mod:`l2o_scale.meta_training.unroll` runs it).
"""

import dataclasses

import tensorflow as tf

from l2o_scale.meta_training import fused_step
from l2o_scale.meta_training import recompute
from l2o_scale.meta_training import step_update


def optimizer_update(optimizer, jit_compile=False, recompute_budget=None,
                     copies=None):
  """The optimizer's packed step as the unroll calls it (a
  :class:`~l2o_scale.meta_training.step_update.StepUpdate`): the one place
  that picks how it runs.

  * ``jit_compile``: compiled with XLA on its own
    (:class:`~l2o_scale.meta_training.fused_step.FusedUpdate`). Why only
    the step: its ~100 small element-wise ops on [k, N] rows cost op
    dispatch, not arithmetic, and XLA fuses them into a few loops, forward
    and backward. The rest of the unroll (the objective's large matmuls on
    the mini dataset, the while loop and its accumulators) stays in
    TensorFlow's executor: XLA has little to fuse there and compiles the
    whole loop for long (docs/performance.md). The regularizer cannot be
    compiled this way in TF 2.21 (its gradient inside the while loop
    fails).
  * else the optimizer's own step
    (:class:`~l2o_scale.meta_training.step_update.PlainUpdate`), whose
    meta-gradient keeps the step's values at every step; with a
    ``recompute_budget`` (bytes) and ``copies`` (steps x optimizee
    instances of the meta-gradient) the same step recomputed in the
    meta-gradient instead where the kept values would exceed the budget
    (:func:`~l2o_scale.meta_training.recompute.choose_update`).

  The numbers differ by float rounding only.
  """
  if jit_compile:
    return fused_step.FusedUpdate(optimizer)
  plain = step_update.PlainUpdate(optimizer)
  if not recompute_budget or not copies:
    return plain
  return recompute.choose_update(
      plain, fused_step.FusedUpdate(optimizer, jit_compile=False), optimizer,
      recompute_budget, copies)


def instances(value):
  """The instances of a meta-batch (a plain tuple), or ``[value]``."""
  if isinstance(value, tuple) and not hasattr(value, "_fields"):
    return list(value)
  return [value]


@dataclasses.dataclass(frozen=True)
class UnrollMethod:
  """How the unrolls of a meta-training task run: ways that give the
  original's unroll up to float rounding, chosen here.

  ``jit_compile``, ``recompute_budget`` (bytes): the optimizer's step
  (:func:`optimizer_update`). ``time_parallel``: the objective on the mini
  dataset evaluated at all steps after the trajectory (:func:`~l2o_scale.meta_training.unroll.unroll`), an
  unroll the original's stop rules end early run again sequentially
  (:meth:`compile`); ``memory_budget`` (bytes) bounds that evaluation
  (:func:`~l2o_scale.meta_training.parallel_eval.steps_per_chunk`).
  """
  jit_compile: bool = False
  time_parallel: bool = False
  memory_budget: float = None
  recompute_budget: float = None

  @classmethod
  def from_config(cls, config):
    """The method a :class:`~l2o_scale.meta_training.training_config.TrainingConfig`
    asks for (``--jit_compile``, ``--time_parallel``,
    ``--time_parallel_memory_gib``, ``--recompute_memory_gib``)."""
    return cls(config.jit_compile, config.time_parallel,
               config.time_parallel_memory_gib * 2**30,
               config.recompute_memory_gib * 2**30)

  def update(self, optimizer, copies=None):
    """The step of an unroll whose meta-gradient holds ``copies`` steps
    (None: no meta-gradient)."""
    return optimizer_update(optimizer, self.jit_compile,
                            self.recompute_budget, copies)

  def compile(self, build, outputs=lambda result: result):
    """The compiled function ``build(time_parallel)`` makes (a callable
    whose result's ``outputs`` are :class:`UnrollOutput` s): time-parallel
    where it is on, with the sequential one's result instead where its
    unroll reports an early stop (eagerly: a second call, traced the first
    time it is needed; inside a graph: a ``tf.cond``)."""
    sequential = build(False)
    if not self.time_parallel:
      return sequential
    parallel = build(True)

    def call(*args):
      result = parallel(*args)
      stops = [o.early_stop for o in instances(outputs(result))]
      stop = stops[0] if len(stops) == 1 else tf.reduce_any(tf.stack(stops))
      if tf.executing_eagerly():
        return sequential(*args) if bool(stop) else result
      return tf.cond(stop, lambda: sequential(*args), lambda: result)

    return call
