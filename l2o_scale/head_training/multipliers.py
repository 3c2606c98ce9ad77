"""``python -m l2o_scale.head_training.multipliers HEAD.npz``: what a schedule
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

With ``--task=NAME`` it shows instead what the head does in one real run:
the optimizer with the head trains a task of the benchmark's suite (its
initial weights and minibatches of seed 0, the test split unread), and the
table gives, every ``--every`` steps, the training loss over the whole
split and the multiplier and decay per step the head gave the model's
matrices and its vectors, averaged over them and over the steps since the
row before.
"""

import math

import numpy as np

from l2o_scale.benchmark import tasks
from l2o_scale.head_training import selection
from l2o_scale import pretrained
from l2o_scale.runs import entry_point
from problems import datasets

# TensorFlow, and the modules that load it (the head, the learned optimizer,
# the training), are imported inside the functions that run them: --help
# and a refused argument load none of it.

PROG = "python -m l2o_scale.head_training.multipliers"
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


def _recording(head, num_tensors, total_steps):
  """A copy of ``head`` that also writes the multipliers and decays it
  gives at each step into ``[total_steps, num_tensors]`` variables, at the
  row of the step's progress."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import learned_schedule as ls  # pylint: disable=g-import-not-at-top

  class Recording(ls.ScheduleHead):

    def outputs(self, old, proposed, progress, gradients, state):
      multipliers, decays, new_state = super().outputs(
          old, proposed, progress, gradients, state)
      row = tf.minimum(tf.cast(tf.round(progress * total_steps), tf.int32),
                       total_steps - 1)
      self.multipliers.scatter_nd_update([[row]], [multipliers])
      self.decays.scatter_nd_update([[row]], [decays])
      return multipliers, decays, new_state

  copy = Recording(head.theta.numpy(), *head.bounds)
  copy.multipliers = tf.Variable(tf.ones([total_steps, num_tensors]),
                                 trainable=False)
  copy.decays = tf.Variable(tf.zeros([total_steps, num_tensors]),
                            trainable=False)
  return copy


def trace(head, task_name, optimizer="l2o-scale", steps=2000, every=200,
          data_dir=None, tiny=False):
  """One run of ``optimizer`` with ``head`` on a task (module doc):
  ``{"steps", "train_loss", "multipliers": [steps, tensors], "decays":
  [steps, tensors], "is_vector": [tensors]}``. ValueError for a length or
  a row spacing below 1, or an unknown task."""
  if steps < 1 or every < 1:
    raise ValueError("--steps and --every must be at least 1, got {} and "
                     "{}".format(steps, every))
  from l2o_scale.keras_optimizer import LearnedOptimizer  # pylint: disable=g-import-not-at-top
  model = tasks.get(task_name).build(tiny)
  num_tensors = len(model.trainable_variables)
  recording = _recording(head, num_tensors, steps)
  build = (LearnedOptimizer.pretrained if optimizer in pretrained.names()
           else LearnedOptimizer.from_checkpoint)
  learned = build(optimizer, schedule_head=recording, total_steps=steps)
  trainer, indices = selection.validation_trainer(task_name, learned, steps,
                                               data_dir, tiny)
  record = trainer.run(indices, every)
  return dict(steps=record["steps"], train_loss=record["train_loss"],
              multipliers=recording.multipliers.numpy(),
              decays=recording.decays.numpy(),
              is_vector=[len(v.shape) <= 1
                         for v in trainer.model.trainable_variables])


def run_table(traced):
  """The lines of the table of one run (module doc): at each recorded step
  after the first, the loss then and the head's outputs averaged over the
  steps since the row before."""
  vector = np.array(traced["is_vector"])
  kinds = [(name, mask) for name, mask in (("matrices", ~vector),
                                           ("vectors", vector)) if mask.any()]
  lines = ["| step | training loss | " + " | ".join(
      "multiplier, {0} | decay per step, {0}".format(n) for n, _ in kinds) +
           " |", "|---|---|" + "---|---|" * len(kinds)]
  steps = traced["steps"]
  for start, step, loss in zip(steps, steps[1:], traced["train_loss"][1:]):
    m = traced["multipliers"][start:step].mean(axis=0)
    d = traced["decays"][start:step].mean(axis=0)
    lines.append("| {} | {:.4g} | {} |".format(step, loss, " | ".join(
        "{:.3g} | {:.2g}".format(m[mask].mean(), d[mask].mean())
        for _, mask in kinds)))
  return lines


def main(argv=None):
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  p = entry_point.ArgumentParser(
      prog=PROG, description="Prints what a schedule head does over a run: "
      "its step multiplier and weight decay against the run's progress, "
      "for typical tensors and gradient norms.")
  p.add_argument("head", help="a saved head (head.npz of python -m "
                 "l2o_scale.head_training)")
  p.add_argument("--task", default=None, help="a task of the benchmark's "
                 "suite: show the head's outputs over one run of it")
  p.add_argument("--optimizer", default="l2o-scale", help="with --task: "
                 "the learned optimizer under the head")
  p.add_argument("--steps", type=int, default=2000, help="with --task: "
                 "the run's length, the head's progress input")
  p.add_argument("--every", type=int, default=200, help="with --task: "
                 "steps between the table's rows")
  datasets.add_data_dir_argument(p)
  args = p.parse_args(argv)
  head = learned_schedule.ScheduleHead.load(args.head)
  if args.task is None:
    print("\n".join(table(head)))
  else:
    print("\n".join(run_table(trace(head, args.task, args.optimizer,
                                    args.steps, args.every,
                                    args.data_dir))))
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
