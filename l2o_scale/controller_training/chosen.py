"""The protocol's chosen learned AdamW, as the benchmark measures it on the
test tasks: ``--optimizer=import:l2o_scale.controller_training.chosen.optimizer``.

The choice is the one the selection recorded
(``reproduce/results/learned-adamw/selection/selection.json``, written by
``python -m l2o_scale.controller_training select``): its base learning rate
and weight decay, and the shipped choice's controller, none where it is the
zero controller (then the optimizer is AdamW with a cosine decay at the
base setting).
"""

import functools
import json
import os

from l2o_scale import learned_adamw
from l2o_scale.controller_training import selection

SELECTION_FILE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "reproduce", "results", "learned-adamw", "selection",
    selection.RESULT_FILE)


@functools.cache
def choice(path=SELECTION_FILE):
  """(controller path or None for the zero controller, learning rate,
  weight decay) of the selection recorded at ``path``; ValueError with one
  line where it is missing or holds no choice."""
  try:
    with open(path, encoding="utf-8") as f:
      result = json.load(f)
    base, shipped = result["base"], result["shipped"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ValueError("{}: not a selection's result ({}); run python -m "
                     "l2o_scale.controller_training select".format(
                         path, e)) from None
  controller = None if shipped == selection.ZERO else shipped
  return controller, base["learning_rate"], base["weight_decay"]


def optimizer(total_steps):
  """The chosen learned AdamW for a run of ``total_steps`` steps."""
  controller, lr, wd = choice()
  return learned_adamw.LearnedAdamW(total_steps, controller=controller,
                                    learning_rate=lr, weight_decay=wd)
