"""Pretrained learned optimizers shipped with the package, by name.

Each ``l2o_scale/pretrained/<name>/<optimizer subdir>/`` holds one
``model.ckpt-0`` (meta-parameters only) and its ``run_record.json``: the
flags it was trained with (which rebuild the optimizer) and a ``card``
(description, data, seeds, wall time, meta-test metrics and the settings
for long runs with what they give at 2,000 and 10,000 steps), written by
``python -m reproduce.ship_pretrained``. ``LearnedOptimizer.pretrained(name)``
and ``metatest.py --pretrained=name`` load them; ``python -m
l2o_scale.pretrained`` lists them with their cards (``--help``).

A learned AdamW (docs/learned-adamw.md) ships as its controller: its card's
``kind`` is ``learned_adamw``, ``controller`` names the controller's file
beside the run record and ``settings`` holds the base rule's settings;
``LearnedOptimizer.pretrained(name, total_steps=N)`` and
``LearnedAdamW.pretrained(name, total_steps=N)`` give it as a Keras
optimizer, and it has no checkpoint.

An optimizer may ship with a learned schedule-and-decay head
(docs/schedule-head.md): its card's ``schedule_head`` names the head's file
beside the checkpoint, which ``LearnedOptimizer.pretrained(name)`` and
``metatest.py --pretrained=name`` put on the learned step; a run's length,
where given, feeds the head's progress input.

A damaged shipped file is named with what restores it (reinstalling the
package), never with advice to delete it; the listing marks such an
optimizer and lists the others.

A run record is read once per process (:func:`read_record`): the card's
several readers (the checkpoint, its head, its settings, the listing) and
the restore of its optimizer share that read, which a changed file (a
reinstall) renews.
"""

import copy
import os
import shutil
import textwrap

import numpy as np

from l2o_scale.runs import entry_point
from l2o_scale.runs import run_record

ROOT = os.path.dirname(os.path.abspath(__file__))
CHECKPOINT_NAME = "model.ckpt-0"
# The file of a shipped schedule head, beside the checkpoint.
HEAD_FILE = "schedule_head.npz"
# The card's kind of a shipped learned AdamW (module doc).
LEARNED_ADAMW = "learned_adamw"


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
  """The checkpoint prefix of ``name`` (``.../model.ckpt-0``), once its
  shipped files are found whole (:class:`DamagedError` otherwise, saying
  what restores them); ValueError for a learned AdamW, which has none."""
  if is_learned_adamw(name):
    raise ValueError("{} is a learned AdamW, a controller without a "
                     "checkpoint: use it as a Keras optimizer "
                     "(LearnedAdamW.pretrained({!r}, total_steps=N))".format(
                         name, name))
  return os.path.join(folder(name), CHECKPOINT_NAME)


def is_learned_adamw(name):
  """Whether ``name`` ships a learned AdamW's controller (module doc)."""
  return record(name).get("card", {}).get("kind") == LEARNED_ADAMW


class Controller:
  """A shipped learned AdamW: its controller's file and parameters, and the
  base rule's settings (``learning_rate``, ``weight_decay``, ...)."""

  def __init__(self, path, theta, settings):
    self.path, self.theta, self.settings = path, theta, dict(settings)


def controller(name):
  """The :class:`Controller` of the learned AdamW ``name``; ValueError for
  any other shipped optimizer, :class:`DamagedError` for a damaged file."""
  card = record(name).get("card", {})
  if card.get("kind") != LEARNED_ADAMW:
    raise ValueError("{} is not a learned AdamW (the learned AdamWs: "
                     "{})".format(name, ", ".join(
                         n for n in names() if is_learned_adamw(n)) or
                                   "none"))
  path = os.path.join(folder(name), card["controller"])
  try:
    with np.load(path, allow_pickle=False) as saved:
      theta = np.asarray(saved["theta"], np.float32)
  except Exception as e:  # pylint: disable=broad-except
    raise DamagedError("the shipped file {} is damaged ({}): {}".format(
        path, type(e).__name__, RESTORE)) from None
  return Controller(path, theta, card.get("settings", {}))


class DamagedError(OSError):
  """A shipped file of a pretrained optimizer is missing or unreadable."""


DAMAGED = "cannot be used: "  # what the listing says of a damaged one
RESTORE = ("reinstalling the package restores it (pip install "
           "--force-reinstall --no-deps l2o-scale; in a source checkout: git "
           "checkout -- l2o_scale/pretrained)")


# folder -> (what its run record's stat says, the record read).
_RECORDS = {}


def _signature(path):
  try:
    found = os.stat(path)
  except OSError:
    return None
  return found.st_ino, found.st_size, found.st_mtime_ns


def read_record(path):
  """:func:`l2o_scale.runs.run_record.read` of the folder ``path``, the file
  opened once per process where it lies among the shipped optimizers (the
  same inode, size and modification time: the same file); a copy each time,
  so that no reader changes another's."""
  if not os.path.abspath(path).startswith(ROOT + os.sep):
    return run_record.read(path)
  key = os.path.abspath(path)
  signature = _signature(run_record.path(path))
  cached = _RECORDS.get(key)
  if signature is None or cached is None or cached[0] != signature:
    found = run_record.read(path)
    if signature is None:
      return found
    cached = _RECORDS[key] = (signature, found)
  return copy.deepcopy(cached[1])


def record(name):
  """The run record (flags and card) of ``name``; :class:`DamagedError`
  naming the file when it is damaged."""
  path = folder(name)
  try:
    found = read_record(path)
  except ValueError as e:
    reason = e.__context__ if isinstance(e.__context__, ValueError) else None
    raise DamagedError("the shipped file {} is damaged{}: {}".format(
        run_record.path(path), " ({})".format(reason) if reason else "",
        RESTORE)) from None
  card = found.get("card")
  head = card.get("schedule_head") if isinstance(card, dict) else None
  if isinstance(card, dict) and card.get("kind") == LEARNED_ADAMW:
    needed_files = [card.get("controller") or "controller.npz"]
  else:
    needed_files = [CHECKPOINT_NAME + suffix for suffix in
                    (".index", ".data-00000-of-00001")] + (
                        [head] if isinstance(head, str) else [])
  for needed in needed_files:
    if not os.path.exists(os.path.join(path, needed)):
      raise DamagedError("the shipped file {} is missing: {}".format(
          os.path.join(path, needed), RESTORE))
  return found


def schedule_head(name):
  """The file of the schedule head shipped with ``name`` (its card's
  ``schedule_head``, beside the checkpoint), or None if it ships none."""
  head = record(name).get("card", {}).get("schedule_head")
  return os.path.join(folder(name), head) if head else None


def long_run_settings(name):
  """The card's settings for a run of thousands of steps (``weight_decay``,
  ``step_schedule``, ``step_decay_start``: metatest.py's flags, Keras'
  ``weight_decay`` and learning-rate schedule), or None if it has none."""
  card = record(name).get("card", {})
  settings = card.get("long_runs", {}).get("settings")
  return dict(settings) if settings else None


def long_run_flags(settings):
  """``--name=value`` flags of long-run settings, sorted: what
  metatest.py takes for them."""
  return ["--{}={}".format(k, v) for k, v in sorted(settings.items())]


def describe(name):
  """Lines about ``name``: its one-line description, what it was trained on,
  and the command (training flags) that trained it."""
  found = record(name)
  card = found.get("card", {})
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
  lines.append("  command: {}".format(found.get("command", "?")))
  if card.get("schedule_head"):
    lines.append("  schedule head (sets the step's schedule and the weight "
                 "decay; total_steps feeds its progress): {}".format(
                     card.get("schedule_head_trained_by",
                              card["schedule_head"])))
  long_runs = card.get("long_runs")
  if long_runs:
    lines.append("  long runs: {} ({})".format(
        " ".join(long_run_flags(long_runs["settings"])),
        long_runs.get("summary", "")))
  return lines


def listing(width=None):
  """The lines of ``python -m l2o_scale.pretrained``: each optimizer with its
  card, wrapped to ``width`` columns (the terminal's, 80 when it has none);
  a damaged one is one line saying so, and the others are listed."""
  width = width or shutil.get_terminal_size((80, 24)).columns
  lines = ["Pretrained optimizers (LearnedOptimizer.pretrained(NAME), "
           "metatest.py --pretrained=NAME):"]
  for name in names():
    try:
      lines += describe(name)
    except DamagedError as e:
      lines.append("{}: {}{}".format(name, DAMAGED, e))
    except (AttributeError, TypeError, KeyError):  # a card of wrong types
      lines.append("{}: {}the card in the shipped file {} is damaged: {}"
                   .format(name, DAMAGED, run_record.path(folder(name)),
                           RESTORE))
  for name in sorted(set(os.listdir(ROOT)) - set(names())):
    path = os.path.join(ROOT, name)
    if os.path.isdir(path) and not name.startswith((".", "_")):
      lines.append("{}: {}the folder {} holds no single sub-folder with a "
                   "{}: {}".format(name, DAMAGED, path, run_record.FILENAME,
                                   RESTORE))
  wrapped = []
  for line in lines:
    indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
    wrapped += textwrap.wrap(line, max(width, 40), subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False)
  return wrapped


def main(argv=None):
  """Lists the shipped optimizers; 0, or 1 when one of them is damaged."""
  parser = entry_point.ArgumentParser(
      prog="python -m l2o_scale.pretrained",
      description="Lists the pretrained learned optimizers shipped with "
      "l2o-scale with their cards: what each was trained on, the command "
      "that trained it and its settings for long runs. Use one by name: "
      "LearnedOptimizer.pretrained(NAME) or metatest.py --pretrained=NAME.")
  parser.parse_args(argv)
  lines = listing()
  print("\n".join(lines))
  return 1 if any(DAMAGED in line for line in lines) else 0
