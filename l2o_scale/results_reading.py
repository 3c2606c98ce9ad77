"""The result files of a ``metatest.py --save_dir`` as runs, for
``python -m l2o_scale.results``: which file holds what
(:mod:`l2o_scale.meta_testing.result_files` names them), each read and
checked (a damaged one skipped with the reason, so the others still show),
and the runs' order and names.

Only numpy: no TensorFlow import.
"""

import collections
import json
import os
import pickle
import re

import numpy as np

from l2o_scale.meta_testing import result_files
from problems import registry


def _parser(pattern):
  """The regular expression of a file name pattern of
  :mod:`~l2o_scale.meta_testing.result_files`: groups seed (if any) and
  the rest of the name."""
  parts = re.split(r"(\{seed\}|\{model_name\}|\{index\})", pattern)
  groups = {"{seed}": r"(-?\d+)", "{model_name}": r"(.+)",
            "{index}": r"(\d+)"}
  return re.compile("^" + "".join(groups.get(p, re.escape(p))
                                  for p in parts) + "$")


LOSS_FILE = _parser(result_files.LOSS_FILE)
HELDOUT_FILE = _parser(result_files.HELDOUT_FILE)
# Held-out records of several problems as versions before the run record
# named them (the suffix after ".json").
OLD_HELDOUT_FILE = re.compile(r"^seed(-?\d+)_heldout_record-(.+)\.json"
                              r"(-problem\d+)$")
RUN_RECORD_FILE = _parser(result_files.RUN_RECORD)
PROBLEM_SUFFIX = _parser("{model_name}" + result_files.PROBLEM_SUFFIX)
PARTIAL_SUFFIX = ".tmp"  # l2o_scale.runs.atomic_file's temporary files.

Run = collections.namedtuple("Run", ["directory", "model", "problem",
                                     "label"])
Run.__new__.__defaults__ = (None,)


class _NumpyOnlyUnpickler(pickle.Unpickler):
  """Loads lists and arrays of numbers only (what metatest.py and the
  original write): any other class in the file is refused, so a damaged
  or foreign pickle runs no code."""
  ALLOWED = {"scalar", "dtype", "ndarray", "_reconstruct", "_frombuffer"}

  def find_class(self, module, name):
    if (module.split(".")[0] == "numpy" and name in self.ALLOWED or
        (module, name) == ("_codecs", "encode")):  # Bytes of protocol 2.
      return super().find_class(module, name)
    raise pickle.UnpicklingError("it holds a {}.{}, not numbers".format(
        module, name))


def _load_losses(path):
  """The per-step losses of a pickle, a 1-D float array; ValueError naming
  what is wrong."""
  with open(path, "rb") as f:
    try:
      # latin1: the original's Python 2 pickles of numpy values load too.
      value = _NumpyOnlyUnpickler(f, encoding="latin1").load()
    except EOFError:
      raise ValueError("empty or truncated pickle") from None
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, ImportError, UnicodeDecodeError) as e:
      if "truncated" in str(e):
        raise ValueError("empty or truncated pickle") from None
      raise ValueError("not a readable pickle ({})".format(
          str(e).splitlines()[0] if str(e) else type(e).__name__)) from None
  if not isinstance(value, (list, tuple, np.ndarray)):
    raise ValueError("holds a {}, not the list of per-step losses".format(
        type(value).__name__))
  try:
    losses = np.asarray(value)
  except ValueError:
    losses = np.asarray([], object)
  if losses.ndim != 1 or losses.dtype.kind not in "fiu":
    raise ValueError("holds a {} that is not a flat list of numbers".format(
        type(value).__name__))
  if not losses.size:
    raise ValueError("holds no steps")
  return losses.astype(np.float64)


def _numbers(record, key):
  values = record.get(key)
  if not isinstance(values, list) or not all(
      isinstance(v, (int, float)) and not isinstance(v, bool)
      for v in values):
    raise ValueError("{} {}".format(
        "has no" if values is None else "has a malformed", repr(key)))
  return values


def _load_heldout(path):
  """A held-out record (dict); ValueError naming what is wrong."""
  with open(path, "rb") as f:
    text = f.read()
  if not text.strip():
    raise ValueError("empty file")
  try:
    record = json.loads(text)
  except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
    raise ValueError("truncated or not JSON ({})".format(e)) from None
  if not isinstance(record, dict):
    raise ValueError("holds a {}, not a held-out record".format(
        type(record).__name__))
  lengths = {len(_numbers(record, k)) for k in
             ("iteration", "heldout_accuracy", "heldout_loss")}
  if len(lengths) > 1:
    raise ValueError("'iteration', 'heldout_accuracy' and 'heldout_loss' "
                     "differ in length")
  return record


def _load_run_record(path, model):
  """A ``metatest_record-<model>.json``; ValueError naming what is wrong."""
  with open(path, "rb") as f:
    try:
      record = json.loads(f.read())
    except ValueError as e:
      raise ValueError("truncated or not JSON ({})".format(e)) from None
  if not (isinstance(record, dict) and record.get("model_name") == model and
          isinstance(record.get("problems"), list) and
          all(isinstance(p, dict) for p in record["problems"])):
    raise ValueError("not a metatest record of --model_name={}".format(model))
  return record


def _model_and_problem(rest, records, suffixed_bases):
  """(model, problem index or None) of the name part after ``pickle-`` /
  ``heldout_record-``: the run record says whether a ``-problem<k>``
  suffix is part of the name; without one (files of older versions) the
  suffix counts when the same name has files of several problems."""
  if rest in records and not records[rest].get("problem_suffix"):
    return rest, None
  match = PROBLEM_SUFFIX.match(rest)
  if match and (records.get(match.group(1), {}).get("problem_suffix") or
                (rest not in records and
                 match.group(1) in suffixed_bases)):
    return match.group(1), int(match.group(2))
  return rest, None


def _label_of(record, problem):
  """The problem's label in a run record, or None."""
  for entry in (record or {}).get("problems", []):
    if entry.get("index", 0) == (problem or 0) and isinstance(
        entry.get("label"), str):
      return entry["label"]
  return None


def _heldout_label(record):
  """The problem's label in a held-out record: metatest.py writes it;
  older records name the problem set's flag only."""
  if isinstance(record.get("problem_label"), str):
    return record["problem_label"]
  entry = registry.by_flag().get(record.get("problem_set"))
  return entry.label if entry is not None else None


def read_dir(directory, skipped=None):
  """{Run: {seed: {"loss": array or None, "heldout": dict or None}}} of one
  dir. A damaged file raises ValueError naming it, or, with a list
  ``skipped``, is left out and (its path, what is wrong) appended."""
  try:
    names = sorted(os.listdir(directory))
  except OSError as e:
    raise OSError(e.errno, "cannot list {}: {}".format(
        directory, e.strerror), directory) from None

  def damaged(name, why):
    path = os.path.join(directory, name)
    if skipped is None:
      raise ValueError("{}: {}".format(path, why))
    skipped.append((path, why))

  records = _run_records(directory, names, damaged)
  parts = _result_files(names, damaged)
  suffixed = _suffixed_bases(parts, records)
  seeds = collections.defaultdict(dict)
  labels = {}
  for name, kind, seed, rest in parts:
    path = os.path.join(directory, name)
    try:
      value = (_load_losses(path) if kind == "loss" else _load_heldout(path))
    except OSError as e:
      damaged(name, "cannot read it ({})".format(e.strerror or e))
      continue
    except ValueError as e:
      damaged(name, str(e))
      continue
    key = _model_and_problem(rest, records, suffixed)
    entry = seeds[key].setdefault(seed, {"loss": None, "heldout": None})
    entry[kind] = value
    if kind == "heldout" and key not in labels:
      labels[key] = _heldout_label(value)
  runs = {}
  for (model, problem), by_seed in seeds.items():
    label = _label_of(records.get(model), problem) or labels.get(
        (model, problem))
    runs[Run(directory, model, problem, label)] = by_seed
  return runs


def _run_records(directory, names, damaged):
  """{model: run record} of the dir's files ``names``; a damaged record is
  reported to ``damaged(name, why)`` and left out."""
  records = {}
  for name in names:
    match = RUN_RECORD_FILE.match(name)
    if match:
      try:
        records[match.group(1)] = _load_run_record(
            os.path.join(directory, name), match.group(1))
      except (ValueError, OSError) as e:
        damaged(name, "{}; the model's problems are named from its files "
                "instead".format(getattr(e, "strerror", None) or e))
  return records


def _result_files(names, damaged):
  """(name, kind, seed, rest of the name) of each loss (``kind`` "loss")
  and held-out ("heldout") file among ``names``; a partly written one is
  reported to ``damaged(name, why)`` and left out."""
  parts = []
  for name in names:
    for kind, pattern in (("loss", LOSS_FILE), ("heldout", HELDOUT_FILE),
                          ("heldout", OLD_HELDOUT_FILE)):
      match = pattern.match(name)
      if name.endswith(PARTIAL_SUFFIX) and pattern.match(
          name[:-len(PARTIAL_SUFFIX)]):
        damaged(name, "a partly written file left by an interrupted "
                "metatest run")
        break
      if match:
        parts.append((name, kind, int(match.group(1)),
                      "".join(match.groups()[1:])))
        break
  return parts


def _suffixed_bases(parts, records):
  """The names that, without a run record, have files of several
  ``-problem<k>`` suffixes (:func:`_model_and_problem`)."""
  problems_of = collections.defaultdict(set)
  for _, _, _, rest in parts:
    match = PROBLEM_SUFFIX.match(rest)
    if match and rest not in records:
      problems_of[match.group(1)].add(match.group(2))
  return {base for base, found in problems_of.items() if len(found) > 1}


def sort_key(run):
  """The order runs show in: directory, model name, problem."""
  return (run.directory, run.model, -1 if run.problem is None
          else run.problem)


def run_name(run, show_dir):
  """How a run is named in the table and the figure's legend."""
  name = run.model
  if run.problem is not None and not run.label:
    name += " problem {}".format(run.problem)
  if show_dir:
    name += " ({})".format(run.directory)
  return name

