"""The compiled meta-gradient of one partial unroll.

Port of the meta-gradient part of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.205-250: ``get_meta_grad``): the
gradient of the differentiated objective (the scaled meta-objective, or the
imitation objective in MT mode) plus ``l2_reg * sum(theta^2)`` with respect
to every meta-parameter, computed with a ``GradientTape`` around the whole
unroll, all inside one ``tf.function``.

With ``time_parallel`` (the default of the callers) the unroll evaluates the
objective on the mini dataset at all steps after the trajectory
(:func:`l2o_scale.meta_training.unroll.unroll`); an unroll that the
original's stop rules end early is then run again sequentially, so the
result is the original's either way (up to float rounding).
``memory_budget`` (bytes) bounds the memory of that evaluation
(:func:`l2o_scale.meta_training.parallel_eval.steps_per_chunk`).
``recompute_budget`` (bytes) bounds the optimizer's values that the
meta-gradient keeps: above it, it recomputes each step's values from the
step's inputs instead (:mod:`l2o_scale.meta_training.recompute` chooses,
:mod:`l2o_scale.meta_training.fused_step` recomputes).
"""

import tensorflow as tf

from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.meta_training import unroll_method


def make_meta_step(problem, optimizer, reg=regularizer_lib.NO_REGULARIZER,
                   l2_reg=0., jit_compile=False, time_parallel=False,
                   memory_budget=None, recompute_budget=None,
                   regularizer_share=False):
  """Returns ``meta_step(inputs, carried, mode_mt) -> (UnrollOutput, grads)``
  compiled with tf.function (``inputs``: unroll.UnrollInputs). For a
  meta-batch, ``inputs`` and ``carried`` are tuples (one item per optimizee
  instance), the outputs a tuple too, and the meta-gradient is that of the
  mean of the instances' objectives.

  ``grads`` follow ``optimizer.meta_variables`` (sorted TF1 names); a
  meta-parameter the objective does not depend on gets a zero gradient.
  ``jit_compile``, ``time_parallel``, ``memory_budget``,
  ``recompute_budget``: how the unroll runs
  (:class:`~l2o_scale.meta_training.unroll_method.UnrollMethod`; the module doc).

  ``regularizer_share``: in an unroll whose objective holds the optimizer
  regularizer (:func:`~l2o_scale.meta_training.regularizer.
  acts_in_meta_objective`), also measure the regularizer's share of the
  meta-gradient (:func:`~l2o_scale.meta_training.regularizer.gradient_share`)
  into each output's ``regularizer_share``. It costs a second backward
  pass, of the regularizer part alone, on the same tape. ``grads`` come
  from the same operations as without it, but TensorFlow's graph
  optimizations may arrange a graph holding both backward passes
  differently: they can then differ by float rounding. Without it (and
  in every unroll where the regularizer does not act) the function is the
  one of a run that never measures.
  """
  method = unroll_method.UnrollMethod(jit_compile, time_parallel, memory_budget,
                                   recompute_budget)
  gradient = _MetaGradient(problem, optimizer, reg, l2_reg, method,
                           regularizer_share)

  def compiled(parallel):
    @tf.function(autograph=False)
    def meta_step(inputs, carried, mode_mt):
      return gradient(inputs, carried, mode_mt, parallel)
    return meta_step

  return method.compile(compiled, outputs=lambda result: result[0])


class _MetaGradient(object):
  """The body of :func:`make_meta_step`'s compiled function."""

  def __init__(self, problem, optimizer, reg, l2_reg, method,
               regularizer_share):
    self.problem = problem
    self.optimizer = optimizer
    self.reg = reg
    self.l2_reg = l2_reg
    self.method = method
    self.regularizer_share = regularizer_share

  def __call__(self, inputs, carried, mode_mt, parallel):
    meta_vars = self.optimizer.meta_variables
    instances = unroll_method.instances(inputs)
    steps = instances[0].obj_weights.shape[0]
    # With jit_compile the fused step already recomputes its values in the
    # meta-gradient (fused_step), so the budget has nothing to choose.
    update = self.method.update(self.optimizer,
                                steps and steps * len(instances))
    measure = self.regularizer_share and (
        regularizer_lib.acts_in_meta_objective(
            self.reg, [i.jacob_switch for i in instances], mode_mt))
    with tf.GradientTape(persistent=measure) as tape:
      outs = [unroll_lib.unroll(self.problem, self.optimizer, i, c, mode_mt,
                                self.reg, update, time_parallel=parallel,
                                budget_bytes=self.method.memory_budget)
              for i, c in zip(instances, unroll_method.instances(carried))]
      loss = self._loss(outs, mode_mt, meta_vars)
      regular = _mean([o.regular for o in outs]) if measure else None
    grads = _dense(tape.gradient(loss, meta_vars), meta_vars)
    if measure:
      share = regularizer_lib.gradient_share(
          grads, _dense(tape.gradient(regular, meta_vars), meta_vars))
      outs = [o._replace(regularizer_share=share) for o in outs]
    return (outs[0] if hasattr(inputs, "_fields") else tuple(outs)), grads

  def _loss(self, outs, mode_mt, meta_vars):
    """The differentiated objective: the instances' mean (imitation)
    objective plus ``l2_reg * sum(theta^2)``."""
    loss = _mean([o.metaobjmt if mode_mt else o.metaobj for o in outs])
    if self.l2_reg:
      loss += self.l2_reg * tf.add_n([tf.reduce_sum(v ** 2)
                                      for v in meta_vars])
    return loss


def _mean(values):
  """The mean of a list of scalar tensors (the one itself if alone)."""
  return values[0] if len(values) == 1 else tf.add_n(values) / len(values)


def _dense(grads, meta_vars):
  """Gradients with a zero for each meta-parameter they do not reach."""
  return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
          for g, v in zip(grads, meta_vars)]


def make_eval_unroll(problem, optimizer, reg=regularizer_lib.NO_REGULARIZER,
                     jit_compile=False, time_parallel=False,
                     memory_budget=None):
  """Compiled unroll without gradients (validation, original ``validate``)."""
  method = unroll_method.UnrollMethod(jit_compile, time_parallel, memory_budget)
  update = method.update(optimizer)

  def compiled(parallel):
    @tf.function(autograph=False)
    def eval_unroll(inputs, carried):
      return unroll_lib.unroll(problem, optimizer, inputs, carried, False,
                               reg, update, time_parallel=parallel,
                               budget_bytes=memory_budget,
                               differentiable=False)
    return eval_unroll

  return method.compile(compiled)
