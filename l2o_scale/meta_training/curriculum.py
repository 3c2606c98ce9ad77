"""Curriculum over unroll lengths (``if_cl``), port of the "MODIFY" parts of
L2O-Entropy ``L2O-Scale-Training/metaopt.py`` (l.170-180 set-up, l.520-590
evaluation/promotion).

Meta-training runs ``num_steps[i]`` optimizee steps per meta-iteration at
stage ``i`` and is evaluated on ``num_steps[i+1]``. After each evaluation:
  * an improvement on the best cost saves ``model.ckpt-<stage>`` and
    ``model.ckpt-0``;
  * otherwise, once ``min_num_eval`` evaluations were made at this stage and
    some improved, the best model of the stage is restored and the stage
    advances (the best cost is re-measured at the new evaluation length);
  * once ``min_num_eval`` evaluations were made and none improved, training
    stops.
"""

import collections

NUM_STEPS = (100, 200, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500,
             5000)
MIN_NUM_EVAL = 3

Decision = collections.namedtuple("Decision", ["action", "stage"])
# action: 'improved' (save stage and best), 'promote' (restore stage
# checkpoint, advance), 'stop', or 'continue'.


class Curriculum(object):
  """State machine of the original's curriculum learning."""

  def __init__(self, unroll_length, num_steps=NUM_STEPS,
               min_num_eval=MIN_NUM_EVAL):
    self.num_steps = tuple(num_steps)
    self.num_unrolls_train = [int(n / unroll_length) for n in self.num_steps]
    self.num_unrolls_eval = self.num_unrolls_train[1:]
    self.min_num_eval = min_num_eval
    self.stage = 0
    self.num_eval = 0
    self.improved = False
    self.best = float("inf")

  @property
  def train_unrolls(self):
    return self.num_unrolls_train[self.stage]

  @property
  def eval_unrolls(self):
    return self.num_unrolls_eval[self.stage]

  @property
  def has_next_stage(self):
    return self.stage + 1 < len(self.num_unrolls_eval)

  def observe(self, cost):
    """Records an evaluation cost and returns what to do (a Decision)."""
    self.num_eval += 1
    if cost < self.best:
      self.best = cost
      self.improved = True
      return Decision("improved", self.stage)
    if self.num_eval >= self.min_num_eval and self.improved:
      if not self.has_next_stage:
        # The original would index past its step list here; stop instead.
        return Decision("stop", self.stage)
      finished = self.stage
      self.num_eval = 0
      self.improved = False
      self.stage += 1
      return Decision("promote", finished)
    if self.num_eval >= self.min_num_eval and not self.improved:
      return Decision("stop", self.stage)
    return Decision("continue", self.stage)

  def reset_best(self, cost):
    """After a promotion the best cost is the new stage's first evaluation."""
    self.best = cost

  def state_dict(self):
    return dict(stage=self.stage, num_eval=self.num_eval,
                improved=self.improved, best=self.best)

  def load_state_dict(self, state):
    self.stage = int(state["stage"])
    self.num_eval = int(state["num_eval"])
    self.improved = bool(state["improved"])
    self.best = float(state["best"])
