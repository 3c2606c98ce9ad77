"""Packs a trained optimizer of a reproduction run as a shipped pretrained one.

Why: the original code was never released with a trained optimizer. This
copies the best evaluated model (``model.ckpt-0``) of one ``reproduce/all.sh``
training stage into
``l2o_scale/pretrained/<name>/HierarchicalRNN_GRUCell_20_2/`` (package data:
``LearnedOptimizer.pretrained(name)``, ``metatest.py --pretrained=name``)
-- meta-parameters only, no meta-optimizer slots -- with its card: the
``run_record.json`` that ``metatest.py`` and ``LearnedOptimizer`` read to
rebuild the optimizer (so it runs without extra flags), plus a ``"card"``
section: data, seeds, meta-iterations, wall time and the meta-test metrics of
the run.

One subcommand per way of shipping (``SUBCOMMAND --help`` lists its flags),
run from the repository root:

* ``stage``: a training stage of an ``all.sh`` run (``--out``, ``--stage``);
* ``train_dir``: the best model of a ``metarun.py --train_dir`` run, with
  the run's ``--wall_time_s``;
* ``long_runs``: the card's settings for long runs of the shipped ``--name``
  and what they give, from a ``python -m l2o_scale.tools.horizon_check``
  report run with them (read from its held-out records);
* ``benchmark``: the card's benchmark section, from a ``python -m
  l2o_scale.benchmark --out`` folder;
* ``schedule_head``: ships ``--name``, the shipped ``--base``'s
  meta-parameters and run record as they are with a learned schedule head
  (a ``head-N.npz`` chosen by ``python -m l2o_scale.head_training.selection``)
  beside them and a card of its own.

For example::

  python -m reproduce.ship_pretrained stage --out=reproduce/out/medium \\
      --stage=l2o-scale.t1 --name=l2o-scale
  python -m reproduce.ship_pretrained long_runs --long_runs=/tmp/hc \\
      --name=l2o-scale --description="..."

The earlier form, one of the flags ``--out``, ``--train_dir``,
``--long_runs``, ``--benchmark`` or ``--schedule_head`` choosing the mode,
is refused with the command in this form.
"""

import json
import os
import shlex
import shutil
import sys

PROG = "python -m reproduce.ship_pretrained"
if __name__ == "__main__" and not __package__:
  # Run by its path, the repository root is not on the import path (and
  # this module does not put it there).
  sys.stderr.write("{}: error: run it from the repository root as {} "
                   "<subcommand> ...\n".format(sys.argv[0], PROG))
  sys.exit(2)

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import metarun  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.benchmark import readme_claims  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.head_training import training as head_training  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import atomic_file  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import run_record  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.tools import horizon_check  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import plot  # pylint: disable=g-import-not-at-top,wrong-import-position
from reproduce import run_log  # pylint: disable=g-import-not-at-top,wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stage_record(out_dir, stage):
  """The pipeline's record of stage ``train-<stage>`` (its marker in
  ``.stages/``): the command it ran and its wall time."""
  path = os.path.join(out_dir, ".stages", "train-{}.done".format(stage))
  if not os.path.exists(path):
    raise ValueError("{} has no finished stage train-{}".format(out_dir,
                                                              stage))
  with open(path) as f:
    text = f.read()
  if not text.strip():
    raise ValueError("{} is empty (a stage finished by an older "
                     "reproduce/all.sh): delete it and run all.sh again to "
                     "record the stage".format(path))
  return json.loads(text)


def training_command(record):
  """The metarun.py argument list of a stage record."""
  argv = record["argv"]
  return argv[argv.index("metarun.py"):]


def training_config(argv):
  """The configuration (``RunConfig``) metarun.py builds from its command
  line ``argv``: a ``--recipe`` expands first, so the record holds the
  values the run trained with (``metarun.parse_config``; metarun.py's own
  flags stay as they are)."""
  return metarun.parse_config(argv)


def run_facts(train_dir):
  """The best model's meta-iteration, the robust scores and the rollbacks,
  from the run's events file (metarun.py writes it in its train dir)."""
  events = run_log.read_events(os.path.join(train_dir, run_log.EVENTS))
  return {"best_meta_iteration": events["best"],
          "robust_scores": [score for _, score in events["selections"]],
          "rollbacks": len(events["rollbacks"])}


def meta_test_metrics(results_dir, model_name):
  """Per problem: final train loss and held-out accuracy, mean/std/n."""
  out = {}
  if not os.path.isdir(results_dir):
    return out
  losses, heldout = plot.load_results(results_dir)
  for problem, by_opt in losses.items():
    if model_name not in by_opt:
      continue
    finals = plot.final_losses(by_opt[model_name])
    entry = {"test_seeds": sorted(by_opt[model_name]),
             "steps": int(min(len(v) for v in by_opt[model_name].values())),
             "final_train_loss_mean": float(np.mean(finals)),
             "final_train_loss_std": float(np.std(finals)),
             "all_finite": bool(all(np.all(np.isfinite(v)) for v in
                                    by_opt[model_name].values()))}
    records = heldout.get(problem, {}).get(model_name)
    if records:
      acc = plot.final_heldout(records)
      entry.update(heldout_accuracy_mean=float(np.mean(acc)),
                   heldout_accuracy_std=float(np.std(acc)))
    out[problem] = entry
  return out


def ship(out_dir, stage, name, description, dest_root,
         trained_by="reproduce/all.sh (REPRO_MEDIUM=1)"):
  stage_run = stage_record(out_dir, stage)
  argv = training_command(stage_run)
  config = training_config(argv)
  subdir = optimizer_flags.checkpoint_subdir(config.optimizer)
  source = os.path.join(out_dir, "train", stage, subdir, "model.ckpt-0")
  return _pack(argv, config, source, name, description, dest_root,
               "{}, stage train-{}".format(trained_by, stage),
               stage_run["seconds"],
               meta_test_metrics(os.path.join(out_dir, "test"), stage),
               os.path.join(os.path.abspath(out_dir), "train", ""),
               "<all.sh output>/train/", out_dir)


def ship_train_dir(train_dir, name, description, dest_root, wall_time_s):
  """Ships the best model of a ``metarun.py`` run in ``train_dir`` (the
  folder given as --train_dir), trained by the command its run record
  holds; ``wall_time_s``: how long the run took."""
  subdir = optimizer_flags.checkpoint_subdir(
      training_config(["metarun.py"]).optimizer)
  with open(run_record.path(os.path.join(train_dir, subdir))) as f:
    argv = json.load(f)["command"].split()
  config = training_config(argv)
  source = os.path.join(train_dir, subdir, "model.ckpt-0")
  return _pack(argv, config, source, name, description, dest_root,
               "metarun.py, {}".format(" ".join(argv[1:2])), wall_time_s,
               {}, os.path.join(os.path.abspath(train_dir), ""),
               "<train dir>/", train_dir)


def _pack(argv, config, source, name, description, dest_root, trained_by,
          wall_time_s, meta_test, local_train, shown_train, out_dir):
  """Copies the meta-parameters of checkpoint ``source`` (trained by the
  metarun.py command ``argv``, whose configuration is ``config``) into the
  package with their card."""
  subdir = optimizer_flags.checkpoint_subdir(config.optimizer)
  dest = os.path.join(dest_root, name, subdir)
  os.makedirs(dest, exist_ok=True)
  optimizer = optimizer_flags.optimizer_spec(config.optimizer).build()
  checkpoints.restore_optimizer(source, optimizer)
  checkpoints.save_optimizer(os.path.join(dest, "model.ckpt-0"), optimizer)
  optimizer_values, training_values = metarun.record_sections(config)
  data = open(os.path.join(out_dir, "data.txt")).read().strip() if \
      os.path.exists(os.path.join(out_dir, "data.txt")) else None
  card = dict(
      name=name, description=description, trained_by=trained_by,
      data=data, training_seed=config.program.seed,
      meta_iterations=config.schedule.num_meta_iterations,
      wall_time_seconds=wall_time_s, meta_test=meta_test,
      **run_facts(os.path.dirname(source)))
  record = _without_local_paths(
      dict(optimizer_flags=optimizer_values, training_flags=training_values,
           command=" ".join(argv), card=card), local_train, shown_train,
      config.program.data_dir, dest_root, name)
  run_record.write(dest, config.optimizer.optimizer, **record)
  return dest


def long_run_card(rows, settings):
  """The card's ``long_runs`` section from a horizon check's rows: the
  settings, and per problem and horizon the test seeds, the mean final
  train loss and held-out accuracy (the learned optimizer's and Adam's at
  lr 1e-3) and how many seeds hold every rule."""
  results = {}
  for r in rows:
    entry = results.setdefault(r["problem"], {}).setdefault(
        str(r["horizon"]), {"test_seeds": [], "final": [], "accuracy": [],
                            "adam_final": [], "adam_accuracy": [],
                            "seeds_holding": 0})
    entry["test_seeds"].append(r["seed"])
    for key, who, metric in (("final", "learned", "final"),
                             ("accuracy", "learned", "accuracy"),
                             ("adam_final", "adam", "final"),
                             ("adam_accuracy", "adam", "accuracy")):
      entry[key].append(r[who][metric])
    entry["seeds_holding"] += not r["failures"]
  for by_horizon in results.values():
    for entry in by_horizon.values():
      for key in ("final", "accuracy", "adam_final", "adam_accuracy"):
        entry[key + "_mean"] = float(np.mean(entry.pop(key)))
  held = sum(not r["failures"] for r in rows)
  return {"settings": dict(settings),
          "summary": "{} of {} checks of the MNIST MLPs at 2,000 and 10,000 "
                     "steps hold every rule of "
                     "l2o_scale.tools.horizon_check".format(held, len(rows)),
          "horizon_check": results}


def report_settings(report_dir, rows):
  """The learned optimizer's --weight_decay/--step_schedule/
  --step_decay_start (and --hold_zero_gradients where it was on) in a
  horizon check, from its held-out records."""
  r = rows[-1]
  folder = horizon_check.learned_dir(report_dir, r["problem"], r["horizon"],
                                     None)
  found = set()
  for sub, _, files in os.walk(folder):
    for f in files:
      if f.startswith("seed") and "_heldout_record-" in f and \
          "Adam-lr" not in f:
        with open(os.path.join(sub, f)) as fh:
          record = json.load(fh)
        found.add((record.get("weight_decay", 0.),
                   record.get("step_schedule", "none"),
                   record.get("step_decay_start", 0.),
                   bool(record.get("hold_zero_gradients", False))))
  if len(found) != 1:
    raise ValueError("{} holds learned runs with {} sets of settings; check "
                     "one optimizer per folder".format(report_dir, len(found)))
  weight_decay, schedule, start, hold = found.pop()
  settings = {"weight_decay": weight_decay, "step_schedule": schedule,
              "step_decay_start": start}
  if hold:  # Only where on: the shipped cards' settings stay as they are.
    settings["hold_zero_gradients"] = True
  return settings


def ship_head(base, head_file, name, description, dest_root, wall_time_s,
              selection_file, head_command):
  """Ships ``name``: the shipped ``base``'s checkpoint and run record
  copied byte for byte, the schedule head ``head_file`` beside them
  (:data:`l2o_scale.pretrained.HEAD_FILE`), and a card of the
  head: its meta-training (the ``head_training.json`` beside
  ``head_file``), ``wall_time_s`` and its validation score in the
  selection ``selection_file``; ``head_command``: the command that
  meta-trained it. The base card's measurements describe the
  base with its hand-set settings and are not carried over."""
  estimate = _estimate(head_file)  # a head that is not kept: nothing written
  source, record = _shipped_record(dest_root, base)
  dest = os.path.join(dest_root, name, os.path.basename(source))
  os.makedirs(dest, exist_ok=True)
  for entry in sorted(os.listdir(source)):
    if entry.startswith(pretrained.CHECKPOINT_NAME + "."):
      shutil.copyfile(os.path.join(source, entry), os.path.join(dest, entry))
  shutil.copyfile(head_file, os.path.join(dest, pretrained.HEAD_FILE))
  with open(os.path.join(os.path.dirname(head_file),
                         head_training.SETTINGS_FILE)) as f:
    head_run = json.load(f)
  with open(selection_file) as f:
    selection = json.load(f)
  shown = os.path.relpath(os.path.abspath(head_file), ROOT)
  base_card = record["card"]
  record["card"] = dict(
      name=name, description=description, base=base,
      schedule_head=pretrained.HEAD_FILE, data=base_card.get("data"),
      trained_by=base_card.get("trained_by"),
      training_seed=base_card.get("training_seed"),
      meta_iterations=base_card.get("meta_iterations"),
      schedule_head_trained_by="{}, estimate {} ({})".format(
          head_command, estimate, shown),
      schedule_head_training=dict(
          head_run, wall_time_seconds=wall_time_s,
          validation_score=selection["scores"][shown],
          validation_tasks=selection["tasks"],
          selection=os.path.relpath(os.path.abspath(selection_file), ROOT)))
  _write_record(dest, record)
  return dest


def _estimate(head_file):
  """The estimate a kept head ``head-N.npz`` was saved at: N."""
  estimates = head_training.snapshot_estimates(os.path.basename(head_file))
  if estimates is None:
    raise ValueError("{} is not a kept head (head-<estimates>.npz of python "
                     "-m l2o_scale.head_training)".format(head_file))
  return estimates


def _shipped_record(dest_root, name):
  """(folder, run record) of the shipped ``name``."""
  folder = os.path.join(dest_root, name)
  subdirs = [d for d in os.listdir(folder)
             if os.path.exists(run_record.path(os.path.join(folder, d)))]
  if len(subdirs) != 1:
    raise ValueError("{} holds no single shipped checkpoint".format(folder))
  dest = os.path.join(folder, subdirs[0])
  with open(run_record.path(dest)) as f:
    return dest, json.load(f)


def _write_record(dest, record):
  with atomic_file.replace(run_record.path(dest)) as f:
    json.dump(record, f, indent=1, sort_keys=True)
    f.write("\n")


def update_benchmark(name, benchmark_dir, outside_training, dest_root,
                     add_budgets=False):
  """Writes the ``benchmark`` section of the shipped ``name``'s card from
  the task-suite benchmark's results.json in ``benchmark_dir``; with
  ``add_budgets``, the run's budgets join those already on the card
  (:func:`~l2o_scale.benchmark.readme_claims.merge_card_sections`) instead of
  replacing them. Why not by default: a card's budgets must all describe
  the checkpoint it ships, and a re-shipped checkpoint's card starts anew."""
  dest, record = _shipped_record(dest_root, name)
  with open(os.path.join(benchmark_dir, "results.json")) as f:
    results = json.load(f)
  if results["config"]["optimizer"] != name:
    raise ValueError("{} benchmarks {}, not {}".format(
        benchmark_dir, results["config"]["optimizer"], name))
  section = readme_claims.card_section(results, outside_training)
  if add_budgets and record["card"].get("benchmark"):
    section = readme_claims.merge_card_sections(record["card"]["benchmark"],
                                         section)
  record["card"]["benchmark"] = section
  _write_record(dest, record)
  return dest


def update_long_runs(name, report_dir, description, dest_root):
  """Writes the ``long_runs`` section (and a new description, if given) of
  the shipped ``name``'s card."""
  dest, record = _shipped_record(dest_root, name)
  with open(os.path.join(report_dir, "horizon_check.json")) as f:
    rows = json.load(f)
  card = record["card"]
  card["long_runs"] = long_run_card(rows, report_settings(report_dir, rows))
  if description:
    card["description"] = description
  card["name"] = name
  record["training_flags"]["train_dir"] = os.path.join(
      os.path.relpath(dest_root, ROOT), name)
  _write_record(dest, record)
  return dest


def _without_local_paths(record, local_train, shown_train, data_dir,
                         dest_root, name):
  """The card names no folder of the machine it was made on."""
  text = json.dumps(record)
  shipped = os.path.join(os.path.relpath(dest_root, ROOT), name)
  text = text.replace(local_train, shown_train)
  for form in (local_train.rstrip(os.sep), os.path.relpath(
      local_train.rstrip(os.sep))):
    text = text.replace("=" + form, "=" + shown_train.rstrip("/"))
  if data_dir:
    text = text.replace(os.path.abspath(data_dir), "<MNIST folder>")
  record = json.loads(text)
  record["training_flags"]["train_dir"] = shipped
  return record


# Subcommand -> the arguments it takes: (flag, required, help) or
# (flag, "store_true", help). The subcommand's name is also the flag that
# chose the mode before (``--out`` for ``stage``).
_NAME = ("--name", True, "shipped name")
_DESCRIPTION = ("--description", False, "the card's description")
SUBCOMMANDS = {
    "stage": ("a training stage of a reproduce/all.sh run", (
        ("--out", True, "the all.sh output folder"),
        ("--stage", True, "learned optimizer name in that run, e.g. "
         "l2o-scale.t1"), _NAME, _DESCRIPTION,
        ("--trained_by", False, "what produced --out (default: "
         "reproduce/all.sh (REPRO_MEDIUM=1))"))),
    "train_dir": ("the model.ckpt-0 of a metarun.py --train_dir", (
        ("--train_dir", True, "a metarun.py --train_dir"), _NAME,
        _DESCRIPTION, ("--wall_time_s", False, "the run's wall time"))),
    "long_runs": ("the card's settings for long runs, from a horizon check", (
        ("--long_runs", True, "a python -m l2o_scale.tools.horizon_check "
         "--out folder"), _NAME, _DESCRIPTION)),
    "benchmark": ("the card's benchmark section, from a benchmark run", (
        ("--benchmark", True, "a python -m l2o_scale.benchmark --out folder "
         "of the shipped --name"), _NAME,
        ("--outside_training", False, "comma-separated tasks whose models "
         "the optimizer never trained on"),
        ("--add_budgets", "store_true", "add the run's budgets to those on "
         "the card (the same checkpoint) instead of replacing the card's "
         "benchmark section"))),
    "schedule_head": ("a shipped optimizer with a learned schedule head", (
        ("--schedule_head", True, "a head-N.npz chosen by python -m "
         "l2o_scale.head_training.selection"), _NAME, _DESCRIPTION,
        ("--base", True, "the shipped optimizer the head was meta-trained "
         "on"),
        ("--selection", True, "the selection.json that chose it"),
        ("--head_command", True, "the command that meta-trained it"),
        ("--wall_time_s", False, "the head's meta-training time"))),
}
# The flags that chose the mode before the subcommands, by subcommand.
MODE_FLAGS = {"stage": "--out", "train_dir": "--train_dir",
              "long_runs": "--long_runs", "benchmark": "--benchmark",
              "schedule_head": "--schedule_head"}


def parser():
  """The command line: one subcommand per way of shipping, each with its
  own flags (those it needs required), plus ``--dest``."""
  top = entry_point.ArgumentParser(
      prog=PROG, description=__doc__.split("\n")[0])
  commands = top.add_subparsers(dest="command", metavar="SUBCOMMAND",
                                required=True)
  for command, (summary, arguments) in SUBCOMMANDS.items():
    sub = commands.add_parser(command, help=summary, description=summary)
    for name, required, text in arguments:
      if required == "store_true":
        sub.add_argument(name, action="store_true", help=text)
      elif name == "--wall_time_s":
        sub.add_argument(name, type=float, help=text)
      else:
        sub.add_argument(name, required=required, help=text)
    sub.add_argument("--dest", default=os.path.join(ROOT, "l2o_scale",
                                                    "pretrained"),
                     help="the folder of the shipped optimizers")
  return top


def earlier_form(argv):
  """The refusal of a command of the earlier form (a mode flag, no
  subcommand), naming the command in the subcommand form; None for any
  other."""
  if not argv or argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help"):
    return None
  given = [c for c, f in MODE_FLAGS.items()
           if any(a == f or a.startswith(f + "=") for a in argv)]
  if not given:
    return None
  command = given[0]
  return ("the mode is a subcommand now: {} {} {}".format(
      PROG, command, " ".join(shlex.quote(a) for a in argv)))


def main(argv=None):
  """Ships or updates one optimizer as its subcommand says; prints the
  folder written."""
  argv = sys.argv[1:] if argv is None else list(argv)
  refusal = earlier_form(argv)
  if refusal:
    raise ValueError(refusal)
  args = parser().parse_args(argv)
  print(RUN[args.command](args))


RUN = {
    "stage": lambda a: ship(a.out, a.stage, a.name, a.description or "",
                            a.dest, a.trained_by or
                            "reproduce/all.sh (REPRO_MEDIUM=1)"),
    "train_dir": lambda a: ship_train_dir(a.train_dir, a.name,
                                          a.description or "", a.dest,
                                          a.wall_time_s),
    "long_runs": lambda a: update_long_runs(a.name, a.long_runs,
                                            a.description or "", a.dest),
    "benchmark": lambda a: update_benchmark(
        a.name, a.benchmark,
        [t for t in (a.outside_training or "").split(",") if t], a.dest,
        a.add_budgets),
    "schedule_head": lambda a: ship_head(a.base, a.schedule_head, a.name,
                                         a.description or "", a.dest,
                                         a.wall_time_s, a.selection,
                                         a.head_command),
}


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
