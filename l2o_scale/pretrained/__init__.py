"""Pretrained learned optimizers shipped with the package, by name.

Each ``l2o_scale/pretrained/<name>/<optimizer subdir>/`` holds one
``model.ckpt-0`` (meta-parameters only) and its ``run_record.json``: the
flags it was trained with (which rebuild the optimizer) and a ``card``
(description, data, seeds, wall time, meta-test metrics and the settings
for long runs with what they give at 2,000 and 10,000 steps), written by
``reproduce/ship_pretrained.py``. ``LearnedOptimizer.pretrained(name)`` and
``metatest.py --pretrained=name`` load them; ``python -m l2o_scale.pretrained``
lists them with their cards.
"""

import os

from l2o_scale.runs import run_record

ROOT = os.path.dirname(os.path.abspath(__file__))
CHECKPOINT_NAME = "model.ckpt-0"


def names():
  """The shipped names, sorted."""
  return sorted(name for name in os.listdir(ROOT)
                if _record_folder(os.path.join(ROOT, name)) is not None)


def _record_folder(path):
  """The one sub-folder of ``path`` with a run record, or None."""
  if not os.path.isdir(path):
    return None
  found = [os.path.join(path, sub) for sub in sorted(os.listdir(path))
           if os.path.exists(run_record.path(os.path.join(path, sub)))]
  return found[0] if len(found) == 1 else None


def folder(name):
  """The checkpoint folder of ``name``; ValueError listing the names."""
  path = _record_folder(os.path.join(ROOT, name)) if name else None
  if path is None:
    raise ValueError("no pretrained optimizer {!r}; the shipped ones are: {} "
                     "(python -m l2o_scale.pretrained lists them with their "
                     "cards)".format(name, ", ".join(names())))
  return path


def checkpoint(name):
  """The checkpoint prefix of ``name`` (``.../model.ckpt-0``)."""
  return os.path.join(folder(name), CHECKPOINT_NAME)


def long_run_settings(name):
  """The card's settings for a run of thousands of steps (``weight_decay``,
  ``step_schedule``, ``step_decay_start``: metatest.py's flags, Keras'
  ``weight_decay`` and learning-rate schedule), or None if it has none."""
  card = run_record.read(folder(name)).get("card", {})
  settings = card.get("long_runs", {}).get("settings")
  return dict(settings) if settings else None


def long_run_flags(settings):
  """``--name=value`` flags of long-run settings, sorted: what
  metatest.py takes for them."""
  return ["--{}={}".format(k, v) for k, v in sorted(settings.items())]


def describe(name):
  """Lines about ``name``: its one-line description, what it was trained on,
  and the command (training flags) that trained it."""
  record = run_record.read(folder(name))
  card = record.get("card", {})
  lines = ["{}: {}".format(name, card.get("description") or "(no description)")]
  if card.get("data"):
    lines.append("  data: {}".format(card["data"]))
  facts = [("meta-iterations", card.get("meta_iterations")),
           ("training seed", card.get("training_seed")),
           ("wall time", None if card.get("wall_time_seconds") is None
            else "{:.0f} s".format(card["wall_time_seconds"]))]
  facts = ", ".join("{} {}".format(k, v) for k, v in facts if v is not None)
  if facts:
    lines.append("  trained: {}".format(facts))
  lines.append("  command: {}".format(record.get("command", "?")))
  long_runs = card.get("long_runs")
  if long_runs:
    lines.append("  long runs: {} ({})".format(
        " ".join(long_run_flags(long_runs["settings"])),
        long_runs.get("summary", "")))
  return lines


def main():
  print("Pretrained optimizers (LearnedOptimizer.pretrained(NAME), "
        "metatest.py --pretrained=NAME):")
  for name in names():
    print("\n".join(describe(name)))
  return 0
