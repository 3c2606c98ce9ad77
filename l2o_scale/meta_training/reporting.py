"""What a meta-training run says: progress lines and TensorBoard summaries.

One reporter for the single-process run and the distributed chief, so both
print the same lines, numbered alike, and write the same tags: the
original's summaries (``metaopt.py``: ``MetaObjective``,
``<Problem>_MetaObjective``, ``EvaluationCost``, histograms of the optimizer
state, variables and raw/clipped meta-gradients), which it defined but never
wrote, ``SelectionScore`` for ``--selection=robust`` and
``PeakMemoryGiB``: the process's peak resident memory so far, also on every
unroll's line and at the end of the run.
"""

import collections
import resource
import sys
import time

import numpy as np
import tensorflow as tf

from optimizer import utils

UnrollRecord = collections.namedtuple(
    "UnrollRecord",
    ["unroll_itr", "num_unrolls", "length", "objective", "first_objective",
     "last_objective", "seconds", "mt_training", "nonfinite", "step"])
UnrollRecord.__doc__ = """One applied partial unroll: its 0-based index in
the series and the series' length, its number of steps, the meta-objective
(or imitation objective), the optimizee objective at its start and end, its
wall time, whether it imitated, how many meta-gradient entries were not
finite, and the summary step after its meta-update."""


def peak_memory_gib():
  """The process's peak resident memory so far, in GiB (``getrusage``'s
  ``ru_maxrss``: KiB on Linux, bytes on macOS)."""
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return peak / (2.**30 if sys.platform == "darwin" else 2.**20)


def nonfinite_warning(k, unroll_itr, value, nonfinite, entries):
  """The warning for an unroll of (0-based) meta-iteration ``k`` whose
  meta-objective ``value`` or ``nonfinite`` of its ``entries`` meta-gradient
  entries are not finite; None when all are finite."""
  if not nonfinite and np.isfinite(value):
    return None
  what = None if np.isfinite(value) else "meta-objective {:.6g}".format(value)
  counted = "{} of {} meta-gradient entries non-finite{}".format(
      nonfinite, entries,
      ", replaced by zeros as the original does" if nonfinite else "")
  return "warning: [meta-iteration {}] unroll {}: {}{}.".format(
      k + 1, unroll_itr + 1, what + "; " if what else "", counted)


class Progress(object):
  """Lines while a long phase runs (an evaluation of many runs): after a
  part finishes, at most one line every ``every`` seconds, with the parts
  done and an estimate of the time left."""

  def __init__(self, reporter, what, total, every=10., clock=time.time):
    self.reporter, self.what, self.total = reporter, what, total
    self.every, self.clock = every, clock
    self.start = self.last = clock()

  def done(self, count):
    now = self.clock()
    if count >= self.total or now - self.last < self.every:
      return
    self.last = now
    left = (now - self.start) / count * (self.total - count)
    self.reporter.log("  {}: {} of {} runs done, about {:.0f} s left".format(
        self.what, count, self.total, left))


DIVERGENCE_ACTIONS = {
    "continue": ("its meta-gradients are applied as the original does "
                 "(--on_divergence=rollback undoes such meta-iterations)"),
    "rollback": "rolling back",
    "stop": "stopping (--on_divergence=stop)",
}


class Reporter(object):
  """Progress lines to ``out`` and summaries to ``summary_writer`` (or
  None) for one problem named ``problem_name``."""

  def __init__(self, out, summary_writer, problem_name, optimizer,
               num_meta_iterations):
    self.out = out
    self.summary_writer = summary_writer
    self.problem_name = problem_name
    self.optimizer = optimizer
    self.num_meta_iterations = num_meta_iterations
    self.meta_entries = sum(v.shape.num_elements()
                            for v in optimizer.meta_variables)

  def log(self, message):
    self.out.write(message + "\n")
    self.out.flush()

  def prefix(self, k):
    return "[meta-iteration {}/{}]".format(k + 1, self.num_meta_iterations)

  def _scalar(self, tag, value, step):
    if self.summary_writer is not None:
      with self.summary_writer.as_default(step=step):
        tf.summary.scalar(tag, value)

  def meta_iteration(self, plan):
    lengths = plan.lengths
    self.log("{} {} on {}: {} unrolls of {} steps".format(
        self.prefix(plan.k), "imitation" if plan.mt_training else "training",
        self.problem_name, len(lengths),
        lengths[0] if len(set(lengths)) == 1 else lengths))

  def unroll(self, k, record):
    """The unroll's line, its summaries, and after them the warning about
    non-finite values, numbered as the line is. Returns whether it warned."""
    peak = peak_memory_gib()
    self.log("{} unroll {}/{} ({} steps{}) meta-objective {:.6g} "
             "problem objective {:.4g} -> {:.4g} {:.2f}s, peak memory "
             "{:.2f} GiB".format(
                 self.prefix(k), record.unroll_itr + 1, record.num_unrolls,
                 record.length, ", imitation" if record.mt_training else "",
                 record.objective, record.first_objective,
                 record.last_objective, record.seconds, peak))
    self._scalar("PeakMemoryGiB", peak, record.step)
    self._scalar("MetaObjective", record.objective, record.step)
    self._scalar(self.problem_name + "_MetaObjective", record.objective,
                 record.step)
    warning = nonfinite_warning(k, record.unroll_itr, record.objective,
                                record.nonfinite, self.meta_entries)
    if warning:
      self.log(warning)
    return warning is not None

  def peak_memory(self):
    """The run's last line about memory: its peak resident memory."""
    self.log("peak resident memory {:.2f} GiB".format(peak_memory_gib()))

  def divergence(self, k, unroll_itr, num_unrolls, reason, on_divergence):
    self.log("warning: {} unroll {}/{} diverged: {}; {}.".format(
        self.prefix(k), unroll_itr + 1, num_unrolls, reason,
        DIVERGENCE_ACTIONS[on_divergence]))

  def broke_early(self, k, unroll_itr, num_unrolls):
    self.log("{} broke early at unroll {} of {}: objective grew more than "
             "obj_train_max_multiplier.".format(self.prefix(k),
                                                unroll_itr + 1, num_unrolls))

  def evaluation(self, number, cost, step, num_steps=None):
    self.log("evaluation {}, {}cost={:.6g}".format(
        number, "" if num_steps is None else "num_steps={}, ".format(
            num_steps), cost))
    if num_steps is None:
      self._scalar("EvaluationCost", cost, step)

  def selection(self, number, result, seeds, seconds, step):
    self.log("selection {}, robust score={:.6g} (mean final objective over "
             "seeds {}: {}{}) {:.1f}s".format(
                 number, result.score, ",".join(str(s) for s in seeds),
                 ", ".join("{:.4g}".format(f) for f in result.finals),
                 "; diverged on seeds {}".format(result.diverged_runs)
                 if result.diverged_runs else "", seconds))
    if np.isfinite(result.score):
      self._scalar("SelectionScore", result.score, step)

  def histograms(self, state, grads, step):
    """The original's histogram summaries (states, raw/clipped grads, vars).

    ``state``: the first tensor's optimizer state as a dict with the TF1
    slot names (as the original summarised it), or None. ``grads``: the last
    (raw, clipped) meta-gradients.
    """
    if self.summary_writer is None or state is None:
      return
    with self.summary_writer.as_default(step=step):
      for key, val in sorted(state.items()):
        tf.summary.histogram("State/{}".format(key),
                             utils.make_finite(val, tf.zeros_like(val)))
      raw, clipped = grads
      for (name, var), g, c in zip(self.optimizer.tf1_variables().items(),
                                   raw, clipped):
        tf.summary.histogram(name + "_rawgrad",
                             utils.make_finite(g, tf.zeros_like(g)))
        tf.summary.histogram(name + "_var", var)
        tf.summary.histogram(name + "_grad", c)
