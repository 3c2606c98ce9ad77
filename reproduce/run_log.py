"""What a reproduction run leaves besides its results, as Markdown tables:
each meta-training's events (``<train_root>/<name>/<subdir>/
meta_training_events.jsonl``, written by metarun.py: evaluations,
selections, rollbacks, the best model) and the facts of an ``all.sh`` run
(its settings, machine, invocations and stage times).

Plain Python, unit-tested in tests/test_reproduce_plot.py.
"""

import glob
import json
import math
import os
import re

from reproduce.styles import label as variant_label
from reproduce.styles import ordered as ordered_variants
from reproduce.styles import split_name

# metarun.py's events file in a train dir
# (l2o_scale/meta_training/reporting.py).
EVENTS = "meta_training_events.jsonl"
# Robust selection score at or below which a meta-training run counts as
# having produced a trained optimizer (the final train loss of an untrained
# one on the MNIST MLP stays near 2.3).
TRAINED_SCORE = 0.05


def read_events(path):
  """Reads a metarun.py events file (``meta_training_events.jsonl``, one
  JSON object a line). Returns dict of lists ``evaluations``
  [(meta-iteration, num_steps or None, cost)], ``selections``
  [(meta-iteration, score)], ``rollbacks`` [meta-iteration] and ``best``
  (int or None).

  A resumed run repeats the meta-iterations after its last checkpoint: an
  event at an earlier meta-iteration than the one before it drops the
  events it repeats, and a repeated event replaces the earlier one.
  """
  events = []
  with open(path) as f:
    for line in f:
      if not line.strip():
        continue
      e = json.loads(line)
      if events and e["meta_iteration"] < events[-1]["meta_iteration"]:
        events = [x for x in events
                  if x["meta_iteration"] < e["meta_iteration"]]
      key = lambda x: (x["event"], x["meta_iteration"], x.get("number"),
                       x.get("num_steps"))
      events = [x for x in events if key(x) != key(e)] + [e]
  out = {"evaluations": [], "selections": [], "rollbacks": [], "best": None}
  for e in events:
    k = e["meta_iteration"]
    if e["event"] == "evaluation":
      out["evaluations"].append((k, e.get("num_steps"), float(e["cost"])))
    elif e["event"] == "selection":
      out["selections"].append((k, float(e["score"])))
    elif e["event"] == "rollback":
      out["rollbacks"].append(k)
    elif e["event"] == "best":
      out["best"] = e["index"]
  return out


def load_train_records(train_root):
  """``{variant: {train_seed: events}}`` from the train dirs
  ``<train_root>/<name>/<checkpoint subdir>/`` (their events file, and
  ``seed``: the training seed of their run_record.json)."""
  out = {}
  pattern = os.path.join(train_root, "*", "*", EVENTS)
  for path in sorted(glob.glob(pattern)):
    name = os.path.basename(os.path.dirname(os.path.dirname(path)))
    record = read_events(path)
    record["seed"] = None
    run_record = os.path.join(os.path.dirname(path), "run_record.json")
    if os.path.exists(run_record):
      with open(run_record) as f:
        record["seed"] = json.load(f).get("training_flags", {}).get("seed")
    variant, tseed = split_name(name)
    out.setdefault(variant, {})[tseed] = record
  return out


def training_table(logs, stage_seconds=None):
  """One row per meta-training run (variant, training seed) from its log:
  the best score and where, the first meta-iteration whose robust score is
  at or below TRAINED_SCORE, rollbacks, and the stage's wall time from
  ``stage_seconds`` ({stage name: seconds}) when given."""
  stage_seconds = stage_seconds or {}
  lines = ["| optimizer | training seed | score kind | best score "
           "(meta-iteration) | first meta-iteration with score ≤ {:g} | "
           "rollbacks | wall time |"
           .format(TRAINED_SCORE), "|---|---|---|---|---|---|---|"]
  for v in ordered_variants(logs):
    for seed in sorted(logs[v], key=lambda s: -1 if s is None else s):
      log = logs[v][seed]
      robust = bool(log["selections"])
      points = (log["selections"] if robust else
                [(k, c) for k, _, c in log["evaluations"]])
      finite = [(k, y) for k, y in points if math.isfinite(y)]
      best = ("{:.4g} ({})".format(*min(finite, key=lambda p: p[1])[::-1])
              if finite else ("diverged" if points else "—"))
      first = next((k for k, y in points if y <= TRAINED_SCORE), None)
      name = "train-{}{}".format(v, "" if seed is None else ".t%d" % seed)
      secs = stage_seconds.get(name)
      lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
          variant_label(v), seed if seed is not None else (
              log["seed"] if log["seed"] is not None else "—"),
          "robust selection" if robust else "evaluation cost", best,
          (str(first) if first is not None else
           "not reached") if robust else "—",
          len(log["rollbacks"]), "—" if secs is None else
          format_duration(secs)))
  return "\n".join(lines) + "\n"


def format_duration(seconds):
  """``42 s``, ``6.3 min``, ``1 h 54 min``."""
  if seconds < 100:
    return "{:.0f} s".format(seconds)
  if seconds < 3600:
    return "{:.1f} min".format(seconds / 60.)
  return "{} h {:02d} min".format(int(seconds // 3600),
                                  int(round(seconds % 3600 / 60.)))


def read_timings(path):
  """``{stage: seconds}`` from all.sh's timings.tsv (the last entry of a
  stage wins); {} when there is none."""
  out = {}
  if path and os.path.exists(path):
    with open(path) as f:
      for line in f:
        name, _, secs = line.strip().partition("\t")
        try:
          out[name] = float(secs)
        except ValueError:
          continue
  return out


CONFIG_NAMES = (
    ("size", "size"), ("meta_iters", "meta-iterations per optimizer"),
    ("meta_lr", "meta learning rate"), ("stable", "recipe flags"),
    ("recipe", "metarun recipe (l2o_scale/config/recipes)"),
    ("fix_num_steps", "steps per meta-iteration"),
    ("fix_num_steps_eval", "steps per evaluation run"),
    ("evaluation_epochs", "runs per evaluation"),
    ("train_seed", "default training seed"), ("seeds", "test seeds"),
    ("test_steps", "meta-test steps"),
    ("test_steps_conv", "meta-test steps, conv net"),
    ("heldout_every", "held-out accuracy every (steps)"))


def run_section(run_dir):
  """The facts of an all.sh run (Markdown): its settings (config.txt, local
  paths left out), the machine and end-to-end wall time of each invocation
  (invocations.tsv) and stage times (timings.tsv). '' without config.txt."""
  config_path = os.path.join(run_dir, "config.txt")
  if not os.path.exists(config_path):
    return ""
  config = {}
  # key=value pairs; a value may hold spaces (the recipe's flags).
  for key, value in re.findall(r"(\w+)=(.*?)(?= \w+=|$)",
                               open(config_path).read().strip()):
    config[key] = value
  lines = ["| setting | value |", "|---|---|"]
  for key, name in CONFIG_NAMES:
    if config.get(key):
      lines.append("| {} | {} |".format(name, config[key].replace(",", ", ")))
  invocations = os.path.join(run_dir, "invocations.tsv")
  if os.path.exists(invocations):
    # date, wall seconds, stages run, machine; one line per invocation of
    # all.sh that ran a stage.
    with open(invocations) as f:
      rows = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    machines = sorted({r[3] for r in rows if len(r) > 3})
    for m in machines:
      lines.append("| machine | {} |".format(m))
    lines.append("| wall time, end to end | {} in {} invocation{} of "
                 "reproduce/all.sh ({}), up to the last meta-test |".format(
                     format_duration(sum(float(r[1]) for r in rows)),
                     len(rows), "" if len(rows) == 1 else "s",
                     ", ".join("{}: {} stages in {}".format(
                         r[0], r[2], format_duration(float(r[1])))
                               for r in rows)))
  timings = read_timings(os.path.join(run_dir, "timings.tsv"))
  for kind, prefix in (("meta-training", "train-"),
                       ("meta-testing", "test-")):
    secs = [s for n, s in timings.items() if n.startswith(prefix)]
    if secs:
      lines.append("| {}: sum of stage times | {} ({} stages, {}–{} each) "
                   "|".format(kind, format_duration(sum(secs)), len(secs),
                              format_duration(min(secs)),
                              format_duration(max(secs))))
  return "\n".join(lines) + "\n"
