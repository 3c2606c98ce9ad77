"""The flags a learned optimizer was trained with, kept next to its checkpoints.

``metarun.py`` writes ``<train_dir>/<optimizer subdir>/run_record.json``
(beside ``model.ckpt-K``) when it starts::

  {"format": "l2o-scale run record", "version": 1,
   "optimizer": "HierarchicalRNN",
   "optimizer_flags": {<every flag of l2o_scale.optimizer_flags>: value},
   "training_flags": {<the other metarun.py flags>: value},
   "created": "<UTC ISO time>", "command": "<command line>"}

The shipped pretrained optimizers (``reproduce/pretrained/<variant>/``) carry
the same file with a ``"card"`` section added (data, seeds, wall time,
meta-test metrics); readers ignore keys they do not know.

Why: an optimizer trained with non-default options (e.g. the learning-rate
cap ``--max_log_lr=-4.6`` of the stable recipe) needs those options again
at meta-test, and a checkpoint alone does not say what they were.
``metatest.py`` and ``LearnedOptimizer.from_checkpoint`` read the record, so
the optimizer is rebuilt as it was trained without extra flags; a folder
without a record (a TF1 checkpoint of the original code) keeps the original
defaults.
"""

import datetime
import json
import os
import sys
import types

from l2o_scale import optimizer_flags

RECORD_NAME = "run_record.json"
FORMAT = "l2o-scale run record"
VERSION = 1


class RunRecordError(ValueError):
  """A run record that cannot be read."""


def _flag_values(flag_values, names):
  return {name: flag_values[name].value for name in sorted(names)}


def optimizer_flag_names(flag_values):
  """Names of the flags ``optimizer_flags.define_optimizer_flags`` defined."""
  return [f.name for f in
          flag_values.get_flags_for_module(optimizer_flags.__name__)]


def build(flag_values, training_flag_names, argv=None):
  """The record of a run configured by absl ``flag_values``."""
  opt_names = optimizer_flag_names(flag_values)
  return {
      "format": FORMAT,
      "version": VERSION,
      "optimizer": flag_values.optimizer,
      "optimizer_flags": _flag_values(flag_values, opt_names),
      "training_flags": _flag_values(
          flag_values, [n for n in training_flag_names if n not in opt_names]),
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      "command": " ".join(sys.argv if argv is None else argv),
  }


def path_in(logdir):
  return os.path.join(logdir, RECORD_NAME)


def write(logdir, record):
  """Writes ``record`` into ``logdir`` atomically (never half-written)."""
  os.makedirs(logdir, exist_ok=True)
  path = path_in(logdir)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(record, f, indent=1, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)
  return path


def read(logdir):
  """The record in ``logdir`` (a folder or a checkpoint prefix), or None."""
  folder = logdir if os.path.isdir(logdir) else os.path.dirname(logdir)
  path = path_in(folder)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      record = json.load(f)
  except (OSError, ValueError) as e:
    raise RunRecordError("Cannot read the run record {}: {}".format(path, e))
  if record.get("format") != FORMAT or not isinstance(
      record.get("optimizer_flags"), dict):
    raise RunRecordError("{} is not an l2o-scale run record (no format {!r} "
                         "/ optimizer_flags).".format(path, FORMAT))
  return record


def non_default_optimizer_flags(record, flag_values):
  """{flag: recorded value} of the recorded optimizer flags whose value
  differs from the flag's default in ``flag_values``."""
  out = {}
  for name, value in record["optimizer_flags"].items():
    if name in flag_values and flag_values[name].default != value:
      out[name] = value
  return out


def apply_to_flags(record, flag_values, out=sys.stdout, where=""):
  """Sets the recorded optimizer flags on ``flag_values`` (metatest.py).

  A flag given on the command line wins; a one-line note says when it
  differs from the record. Returns the names set from the record.
  """
  applied = []
  for name, value in sorted(record["optimizer_flags"].items()):
    if name not in flag_values:
      continue
    flag = flag_values[name]
    if flag.present:
      if flag.value != value:
        out.write("Note: --{}={} given; {}was trained with --{}={}.\n".format(
            name, flag.value, where + " " if where else "", name, value))
      continue
    if flag.value != value:
      flag.value = value
      applied.append(name)
  if applied:
    out.write("Optimizer options from {}: {}\n".format(
        RECORD_NAME, " ".join("--{}={}".format(n, record["optimizer_flags"][n])
                              for n in applied)))
  return applied


def optimizer_kwargs(record):
  """HierarchicalRNN keyword arguments of the recorded optimizer flags."""
  defaults = types.SimpleNamespace(**optimizer_flags.default_flag_values())
  for name, value in record["optimizer_flags"].items():
    if hasattr(defaults, name):
      setattr(defaults, name, value)
  return optimizer_flags.optimizer_kwargs(defaults)
