"""Does a learned optimizer hold up at a long horizon? Checked against Adam.

Meta-tests a trained optimizer (a ``--train_dir``'s ``model.ckpt-0`` or a
shipped ``--pretrained`` one) and Adam (lr 1e-3) with ``metatest.py`` on the
MNIST MLPs (sigmoid, ReLU, deeper), the given test seeds, ``--steps`` steps
with the held-out accuracy recorded, and applies these rules per problem and
seed at every horizon of ``--horizons`` (a shorter horizon reads the prefix
of the same runs: a run's first N steps do not depend on its length):

* all training losses finite;
* no late drift: the final 100-step mean loss <= ``--drift_limit`` (1.5)
  times the best 100-step mean along the way;
* final train loss (mean of the last 100 steps) below Adam's;
* held-out accuracy (test split) at least Adam's minus ``--accuracy_margin``
  (0.005).

The table also gives the loss on the whole train split at the horizon (the
held-out record's ``train_loss``), which is not a rule: the learned
optimizers' minibatch losses have rare spikes (brief excursions of the
parameters, see docs/meta-testing.md) that dominate a 100-step mean, while
the whole split measures the solution reached.

``--step_schedule=cosine`` (or ``linear``) runs the learned optimizer with
metatest.py's decay of its steps; a decay depends on the run's length, so
each horizon is then a run of its own (``<out>/<problem>/<schedule><N>/``).
Adam stays the constant-step baseline of the rules.

``--weight_decay=L`` runs the learned optimizer with metatest.py's decoupled
weight decay (a constant one: the shorter horizons still read the prefix of
the 10,000-step runs); Adam stays the baseline without it.

Writes ``<out>/horizon_check.{md,json}`` and prints the table; exits 1 if a
rule fails. Adam's runs are reused from ``<out>`` when present.

  python -m l2o_scale.tools.horizon_check --pretrained=l2o-scale \\
      --out=/tmp/check --data_dir=<MNIST folder>
"""

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import typing

from l2o_scale.runs import entry_point

PROG = "python -m l2o_scale.tools.horizon_check"
if __name__ == "__main__":
  entry_point.interrupt_while_starting(PROG)
  # TensorFlow (step_schedule imports it) quietly, as in metarun.py.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
  quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order
from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order

from l2o_scale.config import config_flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.config import programs  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.steps import step_schedule as step_schedule_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from problems import registry  # pylint: disable=g-import-not-at-top,wrong-import-position

flag = config_flags.flag

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# (name, metatest flag) of every registered test problem.
PROBLEMS = tuple((p.name, p.flag) for p in registry.PROBLEMS)
ADAM = "Adam-lr1e-3"
WINDOW = 100


@dataclasses.dataclass(frozen=True)
class HorizonCheckConfig:
  """The check's flags (its own set: importing the rules next to
  metatest.py, which has --train_dir too, clashes with nothing)."""
  train_dir: typing.Optional[str] = flag(
      None, "A metarun.py --train_dir to check (its model.ckpt-0).", kind=str)
  pretrained: typing.Optional[str] = flag(
      None, "A shipped optimizer to check.", kind=str)
  name: str = flag("learned", "Name of the optimizer in the table.")
  out: typing.Optional[str] = flag(
      None, "Folder for the runs and the report.", kind=str)
  data_dir: typing.Optional[str] = flag(
      None, "MNIST folder (metatest.py's).", kind=str)
  steps: int = flag(10000, "Steps of each run.", ge=1)
  horizons: tuple = flag(
      ("2000", "10000"), "Horizons the rules are applied at (each <= "
      "--steps, a multiple of --heldout_every).")
  heldout_every: int = flag(500, "Held-out accuracy every N steps.", ge=1)
  seeds: tuple = flag(("6", "12", "18"), "Test seeds.")
  problems: tuple = flag(
      tuple(p.name for p in registry.PROBLEMS if p.long_horizon),
      "Problems to check (names of problems.registry: {}).".format(
          ", ".join(registry.names())))
  drift_limit: float = flag(1.5, "Largest final / best 100-step mean.", gt=0)
  accuracy_margin: float = flag(
      0.005, "Held-out accuracy may be this much below Adam's.", ge=0)
  step_schedule: str = flag(
      "none", "metatest.py's --step_schedule for the learned optimizer (a "
      "run per horizon when not none).", step_schedule_lib.SCHEDULES)
  step_decay_start: float = flag(
      0., "metatest.py's --step_decay_start, with --step_schedule.", ge=0,
      lt=1)
  weight_decay: float = flag(
      0., "metatest.py's --weight_decay for the learned optimizer (Adam "
      "runs without).", ge=0)
  hold_zero_gradients: bool = flag(
      False, "metatest.py's --hold_zero_gradients for the learned optimizer "
      "(Adam runs without).")


def learned_source(flag_values):
  """metatest.py's flags that give the learned optimizer of the check and
  its step transforms other than the step schedule (which is per
  horizon)."""
  if flag_values.pretrained:
    source = ["--pretrained=" + flag_values.pretrained]
  else:
    source = ["--test_optimizer=L2o", "--train_dir=" + flag_values.train_dir,
              "--restore_model_name=model.ckpt-0"]
  if flag_values.weight_decay:
    source.append("--weight_decay={}".format(flag_values.weight_decay))
  if flag_values.hold_zero_gradients:
    source.append("--hold_zero_gradients")
  return source


def define_flags(module_name="horizon_check"):
  """A fresh ``FlagValues`` with the check's flags."""
  values = flags.FlagValues()
  config_flags.define_flags(HorizonCheckConfig, module_name, values)
  return values


FLAGS = define_flags()


def learned_dir(out, problem, horizon, schedule, decay_start=0.):
  """Where the learned optimizer's runs for ``horizon`` are: the problem's
  folder (one run read up to each horizon), or with a step schedule the
  run of that length."""
  folder = os.path.join(out, problem)
  if schedule in (None, "none"):
    return folder
  if decay_start:
    schedule = "{}-from{:g}-".format(schedule, decay_start)
  return os.path.join(folder, "{}{}".format(schedule, horizon))


def _metatest(config, problem_flag, out_dir, model_name, extra, steps=None):
  command = [sys.executable, os.path.join(ROOT, "metatest.py"),
             "--" + problem_flag,
             "--num_testing_itrs={}".format(steps or config.steps),
             "--seeds=" + ",".join(config.seeds),
             "--heldout_every={}".format(config.heldout_every),
             "--overwrite",  # A check run again replaces its runs.
             "--jit_compile", "--model_name=" + model_name,
             "--save_dir=" + out_dir, "--progress_every=0"] + extra
  if config.data_dir:
    command.append("--data_dir=" + config.data_dir)
  done = subprocess.run(command, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True, check=False)
  if done.returncode:
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    raise SystemExit("horizon_check: metatest.py failed ({}): {}".format(
        model_name, lines[-1] if lines else "exit {}".format(
            done.returncode)))


def _load(out_dir, model_name, seed):
  with open(os.path.join(out_dir, "seed{}_eval_loss_record.pickle-{}".format(
      seed, model_name)), "rb") as f:
    losses = np.asarray(pickle.load(f), np.float64).reshape(-1)
  with open(os.path.join(out_dir, "seed{}_heldout_record-{}.json".format(
      seed, model_name))) as f:
    heldout = json.load(f)
  return losses, heldout


def seed_metrics(losses, heldout, horizon):
  """Final / best 100-step means, finiteness and held-out accuracy of one
  run's first ``horizon`` steps."""
  head = losses[:horizon]
  finite = bool(np.all(np.isfinite(head)))
  means = np.convolve(head, np.ones(WINDOW) / WINDOW, "valid")
  accuracy = dict(zip(heldout["iteration"], heldout["heldout_accuracy"]))
  split_loss = dict(zip(heldout["iteration"], heldout["train_loss"]))
  return {"finite": finite, "final": float(means[-1]),
          "best": float(np.min(means)) if finite else float("nan"),
          "accuracy": float(accuracy.get(horizon, float("nan"))),
          "split_loss": float(split_loss.get(horizon, float("nan")))}


def verdict(learned, adam, drift_limit, margin):
  """The rules' failures for one seed (an empty list: all hold)."""
  failures = []
  if not learned["finite"]:
    return ["non-finite loss"]
  if learned["final"] > drift_limit * learned["best"]:
    failures.append("late drift (final {:.3g} > {} x best {:.3g})".format(
        learned["final"], drift_limit, learned["best"]))
  if not learned["final"] < adam["final"]:
    failures.append("train loss {:.3g} not below Adam's {:.3g}".format(
        learned["final"], adam["final"]))
  if not learned["accuracy"] >= adam["accuracy"] - margin:
    failures.append("held-out accuracy {:.4f} below Adam's {:.4f} - "
                    "{}".format(learned["accuracy"], adam["accuracy"], margin))
  return failures


def check(out, problems, seeds, horizons, name, drift_limit, margin,
          schedule=None, decay_start=0.):
  """Rows of the report from the runs in ``out``."""
  rows = []
  for problem in problems:
    for horizon in horizons:
      for seed in seeds:
        learned = seed_metrics(*_load(
            learned_dir(out, problem, horizon, schedule, decay_start), name,
            seed),
                               horizon)
        adam = seed_metrics(*_load(os.path.join(out, problem), ADAM, seed),
                            horizon)
        rows.append({"problem": problem, "horizon": horizon, "seed": seed,
                     "learned": learned, "adam": adam,
                     "failures": verdict(learned, adam, drift_limit, margin)})
  return rows


def markdown(rows, name):
  lines = ["| problem | steps | seed | train loss {0} / Adam | best 100-step "
           "mean {0} | whole train split loss {0} / Adam | held-out accuracy "
           "{0} / Adam | verdict |".format(name),
           "|---|---|---|---|---|---|---|---|"]
  for r in rows:
    l, a = r["learned"], r["adam"]
    lines.append("| {} | {} | {} | {:.4g} / {:.4g} | {:.4g} | {:.4g} / {:.4g} "
                 "| {:.4f} / {:.4f} | {} |".format(
                     r["problem"], r["horizon"], r["seed"], l["final"],
                     a["final"], l["best"], l["split_loss"],
                     a["split_loss"], l["accuracy"],
                     a["accuracy"], "; ".join(r["failures"]) or "holds"))
  return "\n".join(lines)


def build_config(flag_values):
  """The check's configuration from its parsed flags; a ValueError names
  the first flag (or combination) that cannot run."""
  errors = config_flags.validate(HorizonCheckConfig, flag_values)
  unknown = [p for p in flag_values.problems if p not in registry.names()]
  if unknown:
    errors.append("--problems: unknown {} (known: {})".format(
        ", ".join(unknown), ", ".join(registry.names())))
  if errors:
    raise ValueError("; ".join(errors))
  if bool(flag_values.train_dir) == bool(flag_values.pretrained):
    raise ValueError("give one of --train_dir and --pretrained")
  if not flag_values.out:
    raise ValueError("--out is required")
  horizons = [int(h) for h in flag_values.horizons]
  if any(h > flag_values.steps or h % flag_values.heldout_every
         for h in horizons):
    raise ValueError("each of --horizons must be <= --steps and a "
                         "multiple of --heldout_every")
  return config_flags.from_flags(HorizonCheckConfig, flag_values)


def main(argv):
  del argv
  FLAGS.mark_as_parsed()
  return run(build_config(FLAGS))


def run(config):
  """Runs the check's meta-tests (those not run yet) and writes its
  report into ``config.out``; 1 when a check fails."""
  horizons = [int(h) for h in config.horizons]
  source = learned_source(config)
  flag_of = dict(PROBLEMS)
  for problem in config.problems:
    out_dir = os.path.join(config.out, problem)
    if config.step_schedule == "none":
      _metatest(config, flag_of[problem], out_dir, config.name, source)
    else:
      for horizon in horizons:
        _metatest(config, flag_of[problem],
                  learned_dir(config.out, problem, horizon,
                              config.step_schedule, config.step_decay_start),
                  config.name, source + [
                      "--step_schedule=" + config.step_schedule,
                      "--step_decay_start={}".format(config.step_decay_start)],
                  steps=horizon)
    if not os.path.exists(os.path.join(out_dir, "seed{}_heldout_record-{}"
                                       ".json".format(config.seeds[-1], ADAM))):
      _metatest(config, flag_of[problem], out_dir, ADAM,
                ["--test_optimizer=Adam", "--baseline_learning_rate=1e-3"])
  rows = check(config.out, config.problems, [int(s) for s in config.seeds],
               horizons, config.name, config.drift_limit,
               config.accuracy_margin, config.step_schedule,
               config.step_decay_start)
  table = markdown(rows, config.name)
  with open(os.path.join(config.out, "horizon_check.md"), "w") as f:
    f.write(table + "\n")
  with open(os.path.join(config.out, "horizon_check.json"), "w") as f:
    json.dump(rows, f, indent=1)
  print(table)
  failed = sum(bool(r["failures"]) for r in rows)
  print("{}: {} of {} (problem, horizon, seed) checks fail".format(
      config.name, failed, len(rows)))
  return 1 if failed else 0


def run_program():
  programs.install(FLAGS)
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main(PROG, run_program)
