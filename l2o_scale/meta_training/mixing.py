"""``--mix_problems`` (new in the port): one run of ``num_meta_iterations``,
each on a problem drawn by :func:`mixed_problem_index`, with at most
``max_compiled_problems`` of the problems' tasks holding their compiled
functions (:class:`CompiledTasks`). The
:class:`~l2o_scale.meta_training.trainer.MetaTrainer` runs it
(:meth:`~l2o_scale.meta_training.trainer.MetaTrainer.train_mixed`)."""

import collections
import random


def mixed_problem_index(k, count):
  """``--mix_problems``: which of ``count`` problems meta-iteration ``k``
  trains on. A draw seeded by ``k`` alone: a resumed run draws the same
  sequence without a stream to restore, and the run's other random draws
  stay as they are."""
  return random.Random(7919 * k + 1).randrange(count)


class CompiledTasks(object):
  """Keeps the compiled functions of at most ``size`` tasks (0: no bound):
  :meth:`use` of one more releases those of the task used least recently
  (:meth:`~l2o_scale.meta_training.task.MetaTrainingTask.release_compiled`).
  A task's compiled unrolls hold tens of MB, so a mixture of many problems
  is bounded by ``size`` of them, not by the number it has drawn."""

  def __init__(self, size):
    self.size = size
    self._recent = collections.OrderedDict()  # index -> task, oldest first

  def use(self, index, task):
    self._recent.pop(index, None)
    self._recent[index] = task
    while self.size and len(self._recent) > self.size:
      self._recent.popitem(last=False)[1].release_compiled()
