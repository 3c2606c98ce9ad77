"""The baselines a user picks without tuning: Keras's own
``keras.optimizers.ScheduleFreeAdamW`` at its defaults, and Adam and AdamW
at Keras's defaults, with a constant learning rate and with a cosine decay
over the run (``keras.optimizers.schedules.CosineDecay``). Each runs once
per task, budget and seed, with no grid; the page sets their rows beside
the tuned baselines with the same criteria and speedups.

Schedule-free is scored as its method prescribes, at the averaged point
``x`` (Keras keeps the interpolation ``y`` in the model; ``x = (y - (1 -
beta_1) z) / beta_1`` with ``z`` its ``momentum`` slot,
:class:`l2o_scale.benchmark.training.AveragedPoint`), and also at ``y``,
the weights the model holds: the same runs, read twice (the block
:data:`AT_Y`).
"""

import dataclasses
from typing import Callable

# The block of schedule-free's runs read at y, the model's own weights.
AT_Y = "schedule_free_adamw_at_y"


@dataclasses.dataclass(frozen=True)
class Untuned:
  """A baseline without tuning: its name, label and ``make(total_steps)``
  (a fresh Keras optimizer); ``averaged``: scored at schedule-free's
  averaged point."""
  name: str
  label: str
  make: Callable
  averaged: bool = False


def _keras():
  import keras  # pylint: disable=g-import-not-at-top
  return keras


def _cosine(total_steps):
  return _keras().optimizers.schedules.CosineDecay(1e-3, total_steps)


UNTUNED = (
    Untuned("schedule_free_adamw", "ScheduleFreeAdamW (Keras defaults: "
            "lr 0.0025), scored at x",
            lambda total_steps: _keras().optimizers.ScheduleFreeAdamW(),
            averaged=True),
    Untuned("adam_default", "Adam (Keras defaults: lr 1e-3, constant)",
            lambda total_steps: _keras().optimizers.Adam()),
    Untuned("adam_default_cosine", "Adam (lr 1e-3, cosine decay)",
            lambda total_steps: _keras().optimizers.Adam(_cosine(
                total_steps))),
    Untuned("adamw_default", "AdamW (Keras defaults: lr 1e-3, weight decay "
            "0.004, constant)",
            lambda total_steps: _keras().optimizers.AdamW()),
    Untuned("adamw_default_cosine", "AdamW (lr 1e-3, weight decay 0.004, "
            "cosine decay)",
            lambda total_steps: _keras().optimizers.AdamW(_cosine(
                total_steps))),
)
NAMES = tuple(u.name for u in UNTUNED)
AT_Y_LABEL = "ScheduleFreeAdamW (Keras defaults), scored at y"


def get(name):
  for u in UNTUNED:
    if u.name == name:
      return u
  raise ValueError("unknown baseline without tuning {!r}; they are: "
                   "{}".format(name, ", ".join(NAMES)))


def identity(baseline):
  """What names the baseline's runs in the store: its name and Keras's
  version (a new Keras may change its defaults)."""
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  return "untuned:{}@keras-{}".format(baseline.name,
                                      importlib.metadata.version("keras"))


def blocks_in_order(entry):
  """The entry's untuned blocks as (name, block), in :data:`UNTUNED`'s
  order with schedule-free's y reading after its x."""
  out = []
  for name in NAMES + (AT_Y,):
    if name in entry.get("untuned", {}):
      out.append((name, entry["untuned"][name]))
  order = {n: i for i, n in enumerate(NAMES[:1] + (AT_Y,) + NAMES[1:])}
  return sorted(out, key=lambda kv: order[kv[0]])
