"""What a meta-training run says: progress lines and TensorBoard summaries.

One reporter for the single-process run and the distributed chief, so both
print the same lines, numbered alike, and write the same tags: the
original's summaries (``metaopt.py``: ``MetaObjective``,
``<Problem>_MetaObjective``, ``EvaluationCost``, histograms of the optimizer
state, variables and raw/clipped meta-gradients), which it defined but never
wrote, ``SelectionScore`` for ``--selection=robust``,
``PeakMemoryGiB``: the process's peak resident memory so far, also on every
unroll's line and at the end of the run, and ``RegularizerShareMean`` /
``RegularizerShareMax``: the optimizer regularizer's share of the
meta-gradient over a meta-iteration's unrolls where it acts, also on their
lines and in the events file (``--record_regularizer_share``).
"""

import collections
import json
import resource
import sys
import textwrap
import time

import numpy as np
import tensorflow as tf

from optimizer import utils

UnrollRecord = collections.namedtuple(
    "UnrollRecord",
    ["unroll_itr", "num_unrolls", "length", "objective", "first_objective",
     "last_objective", "seconds", "mt_training", "nonfinite", "step",
     "regularizer_share"], defaults=(None,))
UnrollRecord.__doc__ = """One applied partial unroll: its 0-based index in
the series and the series' length, its number of steps, the meta-objective
(or imitation objective), the optimizee objective at its start and end, its
wall time, whether it imitated, how many meta-gradient entries were not
finite, the summary step after its meta-update, and the regularizer's share
of its meta-gradient (None where not measured: see
:func:`~l2o_scale.meta_training.regularizer.gradient_share`)."""


def regularizer_share(outs):
  """The measured regularizer share of an unroll's outputs (one per
  optimizee instance, all holding the meta-batch's share) as a float, or
  None where it was not measured."""
  share = outs[0].regularizer_share
  return None if share is None else float(share)


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


# The events file in a train dir: one JSON object a line, each with
# ``event`` (evaluation, selection, rollback, best, regularizer_share) and
# ``meta_iteration``.
EVENTS = "meta_training_events.jsonl"

DIVERGENCE_ACTIONS = {
    "continue": ("its meta-gradients are applied as the original does "
                 "(--on_divergence=rollback undoes such meta-iterations)"),
    "rollback": "rolling back",
    "stop": "stopping (--on_divergence=stop)",
}


# The width of the run's explanatory lines: a terminal's, not a paragraph
# on one line of hundreds of characters.
LINE_WIDTH = 100


def paragraph(text):
  """``text`` (a sentence or more) wrapped to :data:`LINE_WIDTH`, its
  continuation lines indented by two spaces."""
  return textwrap.fill(text, LINE_WIDTH, subsequent_indent="  ",
                       break_long_words=False, break_on_hyphens=False)


class Reporter(object):
  """Progress lines to ``out`` and summaries to ``summary_writer`` (or
  None) for one problem named ``problem_name``."""

  def __init__(self, out, summary_writer, problem_name, optimizer,
               num_meta_iterations, events_path=None):
    self.out = out
    # The run's events as JSON lines (evaluations, selections, rollbacks,
    # the best model): what its log says, for programs to read
    # (reproduce/medium.py, reproduce/ship_pretrained.py).
    self.events_path = events_path
    self.k = 0
    self.summary_writer = summary_writer
    self.problem_name = problem_name
    self.optimizer = optimizer
    self.num_meta_iterations = num_meta_iterations
    self._explained = set()
    self._shares = []  # (unroll, share, step) of the meta-iteration so far
    self.meta_entries = sum(v.shape.num_elements()
                            for v in optimizer.meta_variables)

  def log(self, message):
    self.out.write(message + "\n")
    self.out.flush()

  def event(self, kind, **fields):
    """Appends one event of the current meta-iteration (1-based) to the
    events file (none without ``events_path``)."""
    if self.events_path is None:
      return
    record = dict(event=kind, meta_iteration=self.k + 1, **fields)
    with open(self.events_path, "a") as f:
      f.write(json.dumps(record) + "\n")

  def prefix(self, k):
    return "[meta-iteration {}/{}]".format(k + 1, self.num_meta_iterations)

  def _scalar(self, tag, value, step):
    if self.summary_writer is not None:
      with self.summary_writer.as_default(step=step):
        tf.summary.scalar(tag, value)

  def meta_iteration(self, plan):
    self.regularizer_shares()
    self.k = plan.k
    lengths = plan.lengths
    self.log("{} {} on {}: {} unrolls of {} steps".format(
        self.prefix(plan.k), "imitation" if plan.mt_training else "training",
        self.problem_name, len(lengths),
        lengths[0] if len(set(lengths)) == 1 else lengths))

  def unroll(self, k, record):
    """The unroll's line, its summaries, and after them the warning about
    non-finite values, numbered as the line is. Returns whether it warned."""
    peak = peak_memory_gib()
    share = record.regularizer_share
    self.log("{} unroll {}/{} ({} steps{}) meta-objective {:.6g} "
             "problem objective {:.4g} -> {:.4g} {:.2f}s, peak memory "
             "{:.2f} GiB{}".format(
                 self.prefix(k), record.unroll_itr + 1, record.num_unrolls,
                 record.length, ", imitation" if record.mt_training else "",
                 record.objective, record.first_objective,
                 record.last_objective, record.seconds, peak,
                 "" if share is None else
                 ", regularizer share {:.3g}".format(share)))
    if share is not None:
      self.explain_once("share", "The regularizer share is "
                        "||alpha * d(regularizer)|| / ||d(meta-objective "
                        "without it)|| over the meta-parameters, in the "
                        "unroll's meta-gradient (--record_regularizer_share)"
                        "; linear in --alpha.")
      self._shares.append((record.unroll_itr, share, record.step))
    self._scalar("PeakMemoryGiB", peak, record.step)
    self._scalar("MetaObjective", record.objective, record.step)
    self._scalar(self.problem_name + "_MetaObjective", record.objective,
                 record.step)
    warning = nonfinite_warning(k, record.unroll_itr, record.objective,
                                record.nonfinite, self.meta_entries)
    if warning:
      self.log(warning)
    if record.unroll_itr + 1 == record.num_unrolls:
      self.regularizer_shares()
    return warning is not None

  def regularizer_shares(self):
    """Reports the regularizer shares of the meta-iteration's unrolls so
    far, if any were measured, and starts afresh: their mean and max as
    summaries (at the last one's step) and, with every unroll's share, as a
    ``regularizer_share`` event. A non-finite share (a non-finite
    meta-gradient) is listed as null and left out of the mean and max."""
    shares, self._shares = self._shares, []
    if not shares:
      return
    finite = [s for _, s, _ in shares if np.isfinite(s)]
    mean = float(np.mean(finite)) if finite else None
    largest = float(np.max(finite)) if finite else None
    self.event("regularizer_share", mean=mean, max=largest,
               unrolls=[u + 1 for u, _, _ in shares],
               shares=[s if np.isfinite(s) else None for _, s, _ in shares])
    if finite:
      self._scalar("RegularizerShareMean", mean, shares[-1][2])
      self._scalar("RegularizerShareMax", largest, shares[-1][2])

  def peak_memory(self):
    """The run's last line about memory: its peak resident memory."""
    self.regularizer_shares()
    self.log("peak resident memory {:.2f} GiB".format(peak_memory_gib()))

  def divergence(self, k, unroll_itr, num_unrolls, reason, on_divergence):
    self.log("warning: {} unroll {}/{} diverged: {}; {}.".format(
        self.prefix(k), unroll_itr + 1, num_unrolls, reason,
        DIVERGENCE_ACTIONS[on_divergence]))

  def broke_early(self, k, unroll_itr, num_unrolls):
    self.log("{} broke early at unroll {} of {}: objective grew more than "
             "obj_train_max_multiplier.".format(self.prefix(k),
                                                unroll_itr + 1, num_unrolls))

  def explain_once(self, key, text):
    """Logs ``text`` (what a number of the log means) the first time
    ``key`` comes."""
    if key not in self._explained:
      self._explained.add(key)
      self.log(paragraph(text))

  def evaluation(self, number, cost, step, num_steps=None):
    self.log("evaluation {}, {}cost={:.6g}".format(
        number, "" if num_steps is None else "num_steps={}, ".format(
            num_steps), cost))
    self.event("evaluation", number=number, num_steps=num_steps,
               cost=float(cost))
    if num_steps is None:
      self._scalar("EvaluationCost", cost, step)

  def selection(self, number, result, seeds, seconds, step):
    self.log("selection {}, robust score={:.6g} (seeds {}: {}{}) "
             "{:.1f}s".format(
                 number, result.score, ", ".join(str(s) for s in seeds),
                 ", ".join("{:.4g}".format(f) for f in result.finals),
                 "; diverged: {}".format(", ".join(
                     str(s) for s in result.diverged_runs))
                 if result.diverged_runs else "", seconds))
    self.event("selection", number=number, score=float(result.score))
    if np.isfinite(result.score):
      self._scalar("SelectionScore", result.score, step)

  def promoted(self, number, num_steps, cost):
    """The curriculum's promotion and the evaluation at its new length."""
    self.log("curriculum: promoted to num_steps={}; evaluation {}, "
             "num_steps={}, cost={:.6g}".format(num_steps, number, num_steps,
                                                cost))
    self.event("evaluation", number=number, num_steps=num_steps,
               cost=float(cost))

  def rolled_back(self, k, to, learning_rate):
    self.log("{} rolled back to {}; meta learning rate now {:.3g}.".format(
        self.prefix(k), to, learning_rate))
    self.event("rollback", to=str(to))

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
