"""The run record: ``<logdir>/run_record.json``, the flags a train dir was
trained with, next to its ``model.ckpt-K`` files.

One format for metarun (writes it, refuses a run with other flags),
metatest and ``LearnedOptimizer.from_checkpoint`` (rebuild the optimizer
from it) and the pretrained optimizers' cards (which add a ``card`` key).
Readers ignore keys they do not know.
"""

import datetime
import json
import os

from l2o_scale.runs import atomic_file

FORMAT = "l2o-scale run record"
VERSION = 1
FILENAME = "run_record.json"
# What every record holds, each a mapping of flag names to values (write).
SECTIONS = ("optimizer_flags", "training_flags")
# Flags that may change between runs on one train dir: paths, what a run
# does with the dir, how long it trains, and resources that leave the
# numbers as they are.
NOT_COMPARED = frozenset(["train_dir", "data_dir", "resume", "overwrite",
                          "summaries", "num_meta_iterations", "set_profiling",
                          "max_compiled_problems"])


def path(logdir):
  return os.path.join(logdir, FILENAME)


def write(logdir, optimizer, optimizer_flags, training_flags, command,
          **extra):
  """Writes the record atomically (l2o_scale.runs.atomic_file); returns its
  path."""
  record = dict(format=FORMAT, version=VERSION, optimizer=optimizer,
                optimizer_flags=dict(optimizer_flags),
                training_flags=dict(training_flags),
                created=datetime.datetime.now(
                    datetime.timezone.utc).isoformat(timespec="seconds"),
                command=command, **extra)
  target = path(logdir)
  with atomic_file.replace(target) as f:
    json.dump(record, f, indent=1, sort_keys=True)
    f.write("\n")
  return target


def read(logdir):
  """The record in ``logdir`` (a dict), or None when there is none.

  Raises ValueError naming the file when it is not a run record or lacks
  one of :data:`SECTIONS`.
  """
  target = path(logdir)
  if not os.path.exists(target):
    return None
  try:
    with open(target) as f:
      record = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError("{} is not readable JSON ({}); delete it or restore "
                     "it".format(target, e))
  if not isinstance(record, dict) or record.get("format") != FORMAT:
    raise ValueError("{} is not an l2o-scale run record".format(target))
  for section in SECTIONS:
    # A missing section would read as "no flags recorded": the optimizer
    # rebuilt with defaults, a resume with other flags let through.
    if section not in record:
      raise ValueError("{} is damaged: it has no {} (the flags the run was "
                       "trained with); restore it".format(target, section))
    if not isinstance(record[section], dict):
      raise ValueError("{} is damaged: its {} is not a mapping of flag "
                       "names to values; restore it".format(target, section))
  return record


class MissingRunRecordError(ValueError):
  """A checkpoint of this port whose folder has no run record: the optimizer
  flags it was trained with are unknown."""


def record_for_checkpoint(checkpoint_path, checkpoint_format, flags_given,
                          how_to_give, read_record=None):
  """``(record or None, note or None)`` for rebuilding the optimizer of a
  checkpoint: the record in its folder, as ``read_record(folder)`` reads it
  (:func:`read` where None).

  Without one: a TF1 checkpoint (the original code wrote no record) is
  rebuilt from the given flags or the original's defaults, with a note; a TF2
  checkpoint (this port's metarun.py always writes a record beside it) raises
  MissingRunRecordError unless ``flags_given`` (the caller was told the
  flags explicitly), since other flags than it was trained with run silently
  wrong. ``how_to_give`` completes the error's advice.
  """
  folder = os.path.dirname(checkpoint_path) or "."
  record = (read_record or read)(folder)
  if record is not None or flags_given:
    return record, None
  if checkpoint_format == "tf2":
    raise MissingRunRecordError(
        "{} was written by metarun.py but {} has no {}, so the optimizer "
        "flags it was trained with are unknown (other flags than those run "
        "silently wrong). Copy the {} of its train dir into {}, or {}.".format(
            checkpoint_path, folder, FILENAME, FILENAME, folder, how_to_give))
  return None, ("Note: {} is a TF1 checkpoint of the original code (no {}): "
                "the optimizer is built with the original's defaults for the "
                "optimizer flags not given.".format(checkpoint_path, FILENAME))


def optimizer_flag_values(record):
  """``{flag: value}`` of the optimizer flags a record holds ({} for None)."""
  return dict((record or {}).get("optimizer_flags", {}))


def merge_optimizer_flags(record, given, explicit):
  """Optimizer flag values to rebuild a recorded optimizer with.

  ``given``: ``{flag: value}`` of this run; ``explicit``: the flags named on
  its command line, which win over the record (with a note when they
  differ). Returns ``(values, notes)``.
  """
  recorded = optimizer_flag_values(record)
  values, notes = dict(given), []
  for name, value in recorded.items():
    if name not in given:
      continue
    if name in explicit:
      if given[name] != value:
        notes.append("Note: {} differs from the run record's {}; using the "
                     "command line's.".format(format_flag(name, given[name]),
                                              format_flag(name, value)))
    else:
      values[name] = value
  return values, notes


def mismatches(record, flag_values):
  """``[(flag, recorded, given)]`` for recorded flags that ``flag_values``
  (a dict) gives otherwise, paths and run-length flags excepted."""
  recorded = dict(record.get("training_flags", {}))
  recorded.update(record.get("optimizer_flags", {}))
  return [(name, recorded[name], flag_values[name])
          for name in sorted(recorded)
          if name not in NOT_COMPARED and name in flag_values and
          flag_values[name] != recorded[name]]


def format_flag(name, value):
  return "--{}={}".format(name, value)
