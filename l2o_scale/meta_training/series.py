"""A series of partial unrolls in this process: the gradient estimator
(:mod:`l2o_scale.meta_training.meta_step`) and the learner
(:mod:`l2o_scale.meta_training.meta_learner`) applied unroll by unroll.

Port of the inner loop of ``metaopt.train_optimizer`` (L2O-Entropy
``L2O-Scale-Training/metaopt.py`` l.310-395: one ``sess.run`` of the unroll
and meta-update per partial unroll, with the checks between them) and of
``validate`` (l.395-430). The cluster's counterpart, whose series run on
workers, is :class:`l2o_scale.meta_training.distributed.ClusterSeries`; both
return a :class:`SeriesOutcome` to the
:class:`~l2o_scale.meta_training.trainer.MetaTrainer`.
"""

import collections
import time

import numpy as np

from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import stability
from l2o_scale.meta_training import unroll as unroll_lib

SeriesOutcome = collections.namedtuple(
    "SeriesOutcome",
    ["applied", "diverged", "state", "grads", "switch", "mini_rows"])
SeriesOutcome.__doc__ = """What one meta-iteration's series did: how many
unrolls were applied, why one diverged (None if none did; the series stopped
there without applying it), the first tensor's optimizer state after the
last applied unroll (TF1 slot names, for the histograms; None if none was
applied), the last (raw, clipped) meta-gradients, the last applied unroll's
regularizer switch and the mini dataset rows of the last unroll that ran
(the evaluation runs on them, as the original's ``validate`` ran on the fed
placeholders)."""


class LocalSeries(object):
  """Runs series of ``task``'s unrolls here, applying meta-updates with
  ``learner`` and carrying ``state.carried`` between unrolls."""

  def __init__(self, task, learner, state, reporter, schedule):
    self.task = task
    self.learner = learner
    self.state = state
    self.reporter = reporter
    self.obj_train_max_multiplier = schedule.obj_train_max_multiplier
    self._announced = False

  def _announce_compile(self):
    if not self._announced:
      self.reporter.log(reporting.paragraph(
          "compiling the unroll (tf.function): the first unroll of each "
          "length (and the first evaluation) includes its compile time: "
          "seconds on an idle CPU, minutes on a loaded one..."))
      self._announced = True

  def _breaks_early(self, out, sub_obj):
    """The original's ``obj_train_max_multiplier`` stop between unrolls."""
    if np.any(sub_obj < 0):
      raise ValueError("Training problem objectives must be nonnegative.")
    return self.obj_train_max_multiplier > 0 and (
        sub_obj[-1] > unroll_lib.objective_limit(
            out.initial_obj.numpy(), self.obj_train_max_multiplier))

  def _unroll(self, plan, u, tensors, teacher):
    """Unroll ``u`` of every optimizee instance of ``plan`` with its
    meta-gradient: (the instances' UnrollOutputs, the meta-gradients)."""
    task, inputs, carried = self.task, [], []
    for i, draws in enumerate(plan.instances):
      # After a fast-forward the series continues its trajectory.
      first = u == 0 and draws.fast_forward is None
      inputs.append(task.unroll_inputs(
          tensors[i], u, task.mini_dataset(draws.mini_rows[u]),
          task.static_switch(plan.switches[u]), first,
          first and plan.reset_first, teacher[i][u]))
      carried.append(self.state.carried[i].value)
    if len(inputs) == 1:
      out, grads = task.meta_step(inputs[0], carried[0],
                                  bool(plan.mt_training))
      return [out], grads
    outs, grads = task.meta_step(tuple(inputs), tuple(carried),
                                 bool(plan.mt_training))
    return list(outs), grads

  def _divergence(self, outs, objectives, subs, grads):
    """Why the first diverging instance diverged, or None."""
    for objective, sub_obj in zip(objectives, subs):
      reason = stability.divergence_reason(
          sub_obj, objective, grads, self.task.config.divergence_growth_limit)
      if reason:
        return reason
    return None

  def _fast_forward(self, plan):
    """Starts each instance that has a fast-forward where it ends."""
    for carried, draws in zip(self.state.carried, plan.instances):
      if draws.fast_forward is None:
        continue
      start = time.time()
      carried.update(self.task.fast_forward(
          draws, self.task.mini_dataset(draws.mini_rows[0])))
      self.reporter.log("meta-iteration {}: fast-forward of {} steps "
                        "({:.1f} s)".format(plan.k, len(draws.fast_forward),
                                            time.time() - start))

  def run(self, plan, step):
    """Trains over the series of ``plan``; ``step`` is the summary step
    before it. Returns a :class:`SeriesOutcome`; with ``on_divergence``
    other than ``continue`` a diverging unroll ends the series unapplied.
    With a meta-batch, the progress line shows the instances' means."""
    task, config, k = self.task, self.task.config, plan.k
    instances = range(len(plan.instances))
    teacher = [task.teacher_steps(plan, i) for i in instances]
    tensors = [task.series_tensors(plan, i) for i in instances]
    applied, last_out, switch, rows = 0, None, False, None
    self._fast_forward(plan)
    for u, length in enumerate(plan.lengths):
      rows = plan.draws.mini_rows[u]
      self._announce_compile()
      start = time.time()
      outs, grads = self._unroll(plan, u, tensors, teacher)
      objectives = [float((o.metaobjmt if plan.mt_training else o.metaobj)
                          .numpy()) for o in outs]
      subs = [o.problem_objectives.numpy() for o in outs]
      if not plan.mt_training and any(
          self._breaks_early(o, s) for o, s in zip(outs, subs)):
        self.reporter.broke_early(k, u, plan.num_unrolls)
        break
      reason = self._divergence(outs, objectives, subs, grads)
      if reason and config.on_divergence != "continue":
        self.reporter.divergence(k, u, plan.num_unrolls, reason,
                                 config.on_divergence)
        return SeriesOutcome(applied, reason, None, None, switch, rows)
      update = self.learner.apply(grads)
      if u + 1 < plan.num_unrolls:
        for carried, out in zip(self.state.carried, outs):
          carried.update(out.final_state)
      step += 1
      record = reporting.UnrollRecord(
          u, plan.num_unrolls, length, float(np.mean(objectives)),
          float(np.mean([s[0] for s in subs])),
          float(np.mean([s[-1] for s in subs])), time.time() - start,
          plan.mt_training, update.nonfinite, step,
          reporting.regularizer_share(outs))
      if self.reporter.unroll(k, record):
        self.state.count("nonfinite")
      if reason:
        self.reporter.divergence(k, u, plan.num_unrolls, reason,
                                 config.on_divergence)
      applied, last_out, switch = u + 1, outs[0], plan.switches[u]
    self.state.series_ran()
    return SeriesOutcome(applied, None, self._first_state(last_out),
                         self.learner.last_grads, switch, rows)

  def _first_state(self, out):
    """The first tensor's optimizer state at the end of the unroll ``out``
    (None without one), for the histograms of the series."""
    if out is None:
      return None
    per_tensor = unroll_lib.per_tensor_states(self.task.optimizer,
                                              out.final_state)
    return per_tensor[0] if per_tensor else None

  def validate(self, plan):
    """Final objective of one evaluation series (original ``validate``)."""
    task = self.task
    fetched = None
    tensors = task.series_tensors(plan)
    mini = task.mini_dataset(plan.draws.mini_rows[0])
    for u in range(plan.num_unrolls):
      inputs = task.unroll_inputs(tensors, u, mini,
                                  task.static_switch(plan.switches[u]),
                                  u == 0, u == 0 and plan.reset_first)
      fetched = task.eval_unroll(inputs, self.state.carried[0].value)
      if u + 1 < plan.num_unrolls:
        self.state.carried[0].update(fetched.final_state)
    return float(fetched.problem_objectives.numpy()[-1])

  def evaluate(self, plans):
    """Mean final objective of the evaluation series ``plans`` (each drawn
    just before it runs: a callable returning the plan), with progress
    lines while it takes long."""
    progress = reporting.Progress(self.reporter, "evaluation", len(plans))
    costs = []
    for draw in plans:
      costs.append(self.validate(draw()))
      progress.done(len(costs))
    return sum(costs) / len(costs)
