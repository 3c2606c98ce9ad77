"""``python -m l2o_scale.head_training.inspect HEAD.npz``: what a schedule
head does over a run, as a table (docs/schedule-head.md, "Seeing what a head
learned").

The head's outputs depend on the run's progress, the gradient norm relative
to its first and recent values, and per tensor on its kind and scale
(:mod:`l2o_scale.steps.learned_schedule`). The table fixes the tensor
features at typical values (a weight matrix and a bias vector of RMS 0.1
whose proposed step is 1% of it) and the gradient norm at its first value
(``relative 0``) or at ``e**-2`` of it (``relative -2``, a run whose
gradients have shrunk), and gives, at each progress, the step multiplier
and the decoupled weight decay per step of both tensors.
"""

import math

import numpy as np

PROG = "python -m l2o_scale.head_training.inspect"
PROGRESS = (0., 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.)
RELATIVE_LOG_NORMS = (0., -2.)
# (name, whether it is a vector, RMS of its values, RMS of its step over
# them).
TENSORS = (("matrix", False, 0.1, 0.01), ("vector", True, 0.1, 0.01))


def outputs(head, progress, relative_log_norm):
  """(multipliers, decays) of ``head`` for :data:`TENSORS`, at a progress
  and a log gradient norm relative to the first step's and to the running
  averages. The features come from the head's own feature functions: a
  gradient of norm ``e**relative_log_norm`` after a first step and running
  averages of norm 1, and per tensor values of its RMS with a step of its
  ratio."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import learned_schedule as ls  # pylint: disable=g-import-not-at-top
  state = tf.constant([1.] + [0.] * (ls.STATE_SIZE - 1))  # log norms 0
  gradient = tf.constant([math.exp(relative_log_norm)], tf.float32)
  global_feats, _ = ls.global_features(progress, [gradient], state)
  old, proposed = [], []
  for _, vector, rms, ratio in TENSORS:
    values = tf.fill([4] if vector else [2, 2], rms)
    old.append(values)
    proposed.append(values * (1. + ratio))
  m, d = ls.head_outputs(head.theta, global_feats,
                         ls.tensor_features(old, proposed), *head.bounds)
  return m.numpy(), d.numpy()


def table(head):
  """The lines of the table (module doc)."""
  names = [t[0] for t in TENSORS]
  lines = ["| gradient norm, log relative | progress | " + " | ".join(
      "multiplier, {0} | decay per step, {0}".format(n) for n in names) +
           " |", "|---|---|" + "---|---|" * len(names)]
  for relative in RELATIVE_LOG_NORMS:
    for progress in PROGRESS:
      m, d = outputs(head, progress, relative)
      lines.append("| {:+g} | {:.1f} | {} |".format(
          relative, progress, " | ".join(
              "{:.3g} | {:.2g}".format(mi, di) for mi, di in zip(m, d))))
  return lines


def main(argv=None):
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  p = entry_point.ArgumentParser(
      prog=PROG, description="Prints what a schedule head does over a run: "
      "its step multiplier and weight decay against the run's progress, "
      "for typical tensors and gradient norms.")
  p.add_argument("head", help="a saved head (head.npz of python -m "
                 "l2o_scale.head_training)")
  args = p.parse_args(argv)
  print("\n".join(table(learned_schedule.ScheduleHead.load(args.head))))
  return 0


if __name__ == "__main__":
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  entry_point.run_main(PROG, main)
