"""Sets the L2O-Entropy regularizer's weight from the share it should have.

``alpha`` (``--alpha``) scales the optimizer regularizer in the
meta-objective, but what it means depends on the problem, the regularizer
and the unrolls: the same alpha is a rounding error on one problem and the
whole meta-gradient on another. This command measures, for a metarun.py
setting, the ratio of the regularizer's meta-gradient to the rest's,
``||d(regularizer)|| / ||d(meta-objective without it)||`` over the
meta-parameters, and gives the alpha at which the regularizer's share of
the meta-gradient (``alpha`` times that ratio) is each ``--target_share``.

It runs the first ``--calibration_iterations`` meta-iterations of the
metarun.py command its flags describe (every metarun.py flag applies, recipe
included), once per ``--seeds`` seed, each as metarun.py would run them with
that ``--seed`` (the same draws, meta-updates, evaluations), with
``--record_regularizer_share`` on, in a temporary train dir. Every unroll
where the regularizer acts gives one ratio, its recorded share divided by
the alpha it ran with; the median over all of them sets
``alpha = target / median``. The ratio is that of the trajectory of the run
at the alpha given (by default the original's); the meta-parameters after
the first meta-update depend on alpha a little.

Prints the ratios' median, quartiles and range and the alpha of each
target; ``--out`` adds them to a JSON file (with the command, the date, the
machine and the wall time), next to the calibrations of other settings
already in it (one entry per setting).

  python -m l2o_scale.tools.calibrate_regularizer --target_share=0.05,0.25 \\
      --include_mnist_mlp_problems --recipe=stable --reg_optimizer=True \\
      --reg_option=hessian-esd --regularize_time=posterior --seeds=1,2,3 \\
      --data_dir=<MNIST folder> --out=calibration.json
"""

import dataclasses
import datetime
import io
import json
import os
import platform
import random
import sys
import tempfile
import time
import typing

# As metarun.py, whose runs this command makes: TensorFlow's info lines
# hidden, and its import and device probing without the CUDA-probing lines
# (before any module below imports it).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top,wrong-import-position
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from l2o_scale.config import config_flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.config import recipes
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import training as training_run
from l2o_scale.meta_training import training_config
from l2o_scale.runs import atomic_file
from l2o_scale.runs import entry_point
from l2o_scale.tools import metarun_command

PROG = "calibrate_regularizer"

flag = config_flags.flag


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
  """The command's own flags; the run's are metarun.py's."""
  target_share: tuple = flag(
      (0.05, 0.25), "The regularizer's shares of the meta-gradient to find "
      "alpha for (each > 0).")
  calibration_iterations: int = flag(
      4, "Meta-iterations run per seed (the first ones of the run).", ge=1)
  seeds: tuple = flag(
      (), "Seeds of the runs (metarun.py's --seed each). Empty: one run with "
      "--seed.")
  out: str = flag(
      "", "JSON file the calibration is added to (an entry of the same "
      "setting is replaced). Empty: printed only.")


# Flags that say where or how long a run goes, not what it measures.
NOT_SETTING = frozenset(["train_dir", "seed", "resume", "overwrite",
                         "summaries", "num_meta_iterations", "set_profiling",
                         "record_regularizer_share", "data_dir",
                         "allow_data_change"])


@dataclasses.dataclass(frozen=True)
class Calibration:
  """What a calibration command is told, read from its flags once
  (:func:`build`): ``run``, the metarun.py command the flags describe;
  ``own``, this command's flags; ``seeds``, the runs' seeds (``[None]``: one
  run unseeded); ``setting``, what the run measures (:func:`setting_of`)."""
  run: training_config.RunConfig
  own: CalibrationConfig
  seeds: typing.List[typing.Optional[int]]
  setting: typing.Dict[str, typing.Any]


def define_flags(module_name=__name__):
  """metarun.py's flags and this command's, in a fresh ``FlagValues``."""
  values = metarun_command.define_flags(module_name)
  config_flags.define_flags(CalibrationConfig, module_name, values)
  return values


def build(flag_values):
  """The :class:`Calibration` of the parsed ``flag_values`` (every flag read
  here, once); ValueError with the one line of a command that cannot
  calibrate."""
  run = metarun_command.run_config(flag_values)
  errors = metarun_command.errors(run)
  errors += config_flags.validate(CalibrationConfig, flag_values)
  if errors:
    raise ValueError(errors[0])
  own = config_flags.from_flags(CalibrationConfig, flag_values)
  training = run.training
  if not training.reg_optimizer:
    raise ValueError("--reg_optimizer=True is needed: the share is that of "
                     "the optimizer regularizer")
  if training.regularize_time == "none":
    raise ValueError("--regularize_time=none never applies the regularizer; "
                     "give posterior, prior or always")
  if not training.alpha > 0:
    raise ValueError("--alpha must be > 0 (got {:g}): the ratio is the share "
                     "divided by alpha".format(training.alpha))
  try:
    seeds = [int(s) for s in own.seeds] or [run.program.seed]
  except ValueError:
    raise ValueError("--seeds takes integers, e.g. 1,2,3 (got {})".format(
        ",".join(own.seeds))) from None
  if not own.target_share or any(not t > 0 for t in own.target_share):
    raise ValueError("--target_share takes shares > 0, e.g. 0.05,0.25")
  if training.if_mt:
    raise ValueError("--if_mt is not supported: imitation meta-iterations "
                     "have no regularizer")
  return Calibration(run=run, own=own, seeds=seeds,
                     setting=setting_of(flag_values))


def setting_of(flag_values):
  """The run's setting: every metarun.py flag that says what it measures,
  as given or defaulted in ``flag_values``."""
  return {n: flag_values[n].value for n in metarun_command.flag_names()
          if n not in NOT_SETTING and n not in programs.NOT_RECORDED}


def run_seed(run, seed, iterations, workdir, log):
  """The first ``iterations`` meta-iterations of the metarun.py command
  ``run`` (a RunConfig) with ``seed`` (as metarun.py's ``main`` seeds and
  builds it), in ``workdir``; returns its ``regularizer_share`` events."""
  if seed is not None:
    np.random.seed(seed)
    random.seed(seed)
    tf.random.set_seed(seed)
  spec = optimizer_flags.optimizer_spec(run.optimizer)
  spec.build()  # As metarun.py: its draws come before the problems'.
  problems_and_data = metarun_command.selected_problems(run, log)
  selection_problems = metarun_command.selection_problems(run)
  logdir = os.path.join(workdir, "seed{}".format(seed),
                        optimizer_flags.checkpoint_subdir(run.optimizer))
  os.makedirs(logdir)
  config = run.trainer_config(logdir)
  config = dataclasses.replace(
      config, resume=False, summaries=False,
      schedule=dataclasses.replace(config.schedule,
                                   num_meta_iterations=iterations),
      training=dataclasses.replace(config.training,
                                   record_regularizer_share=True))
  training_run.run_meta_training(config, spec, problems_and_data, out=log,
                                 selection_problems=selection_problems)
  with open(os.path.join(logdir, reporting.EVENTS)) as f:
    events = [json.loads(line) for line in f]
  return [e for e in events if e["event"] == "regularizer_share"]


def ratios_of(events, alpha):
  """``[(meta_iteration, unroll, ratio)]`` of ``regularizer_share`` events
  measured at ``alpha``: each finite share divided by alpha."""
  return [(e["meta_iteration"], u, s / alpha)
          for e in events for u, s in zip(e["unrolls"], e["shares"])
          if s is not None]


def summary(ratios, targets):
  """The ratios' median, quartiles and range, and ``alpha = target /
  median`` per target."""
  values = np.asarray(ratios, np.float64)
  median = float(np.median(values))
  return dict(
      unrolls=int(values.size), median_ratio=median,
      quartiles=[float(np.percentile(values, 25)),
                 float(np.percentile(values, 75))],
      range=[float(values.min()), float(values.max())],
      alphas={"{:g}".format(t): t / median for t in targets})


def machine():
  """The CPU's model name (as ``lscpu`` gives it)."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def add_to(path, entry):
  """Adds ``entry`` to the calibrations of the JSON file ``path``,
  replacing one of the same setting (and seeds and meta-iterations)."""
  document = {"calibrations": []}
  if os.path.exists(path):
    with open(path) as f:
      try:
        document = json.load(f)
      except ValueError as e:
        raise ValueError("--out={} is not a calibration file (not JSON: {}); "
                         "give another path".format(path, e)) from None
    if not isinstance(document.get("calibrations"), list):
      raise ValueError("--out={} is not a calibration file (no "
                       "'calibrations' list); give another path".format(path))
  key = lambda e: (e["setting"], e["seeds"], e["calibration_iterations"])
  document["calibrations"] = [e for e in document["calibrations"]
                              if key(e) != key(entry)] + [entry]
  with atomic_file.replace(path) as f:
    json.dump(document, f, indent=1, sort_keys=True)
    f.write("\n")


def calibrate(calibration, out=sys.stdout, argv=None):
  """Runs ``calibration`` (a :class:`Calibration`); returns the entry (also
  added to ``--out``)."""
  config, training = calibration.own, calibration.run.training
  seeds = calibration.seeds
  start = time.time()
  per_seed, ratios = [], []
  with tempfile.TemporaryDirectory(prefix="calibrate_regularizer") as workdir:
    for seed in seeds:
      log = io.StringIO()
      seed_start = time.time()
      events = run_seed(calibration.run, seed,
                        config.calibration_iterations, workdir, log)
      found = ratios_of(events, training.alpha)
      out.write("seed {}: {} unroll(s) with the regularizer, ratio median "
                "{:.4g} ({:.0f} s)\n".format(
                    seed, len(found),
                    np.median([r for _, _, r in found]) if found else
                    float("nan"), time.time() - seed_start))
      out.flush()
      per_seed.append(dict(seed=seed, unrolls=[
          dict(meta_iteration=k, unroll=u, ratio=r) for k, u, r in found]))
      ratios += [r for _, _, r in found]
  if not ratios:
    raise ValueError(
        "no unroll of the first {} meta-iteration(s) applied the regularizer "
        "(--regularize_time={}, --reg_scale={:g}); give more "
        "--calibration_iterations or longer series".format(
            config.calibration_iterations, training.regularize_time,
            training.reg_scale))
  entry = dict(summary(ratios, config.target_share),
               setting=calibration.setting, alpha_run=training.alpha,
               seeds=seeds,
               calibration_iterations=config.calibration_iterations,
               per_seed=per_seed,
               command=command_line(argv or sys.argv),
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                   timespec="seconds"),
               machine=machine(), wall_seconds=round(time.time() - start, 1))
  out.write(report(entry))
  if config.out:
    add_to(config.out, entry)
    out.write("added to {}\n".format(config.out))
  return entry


def command_line(argv):
  """``argv`` as the command a user types (``python -m`` for this
  module)."""
  first = argv[0]
  if os.path.basename(first) == os.path.basename(__file__):
    first = "python -m l2o_scale.tools." + PROG
  return " ".join([first] + list(argv[1:]))


def report(entry):
  """The printed result."""
  lines = ["ratio ||d regularizer|| / ||d meta-objective without it|| over "
           "{} unroll(s): median {:.4g}, quartiles {:.4g} - {:.4g}, range "
           "{:.4g} - {:.4g}".format(entry["unrolls"], entry["median_ratio"],
                                    *entry["quartiles"], *entry["range"])]
  for target, alpha in entry["alphas"].items():
    lines.append("target share {}: --alpha={:.3g}".format(target, alpha))
  return "\n".join(lines) + "\n"


FLAGS = define_flags()


def main(argv):
  if argv[1:]:
    raise ValueError("unexpected arguments: {} (flags are --name=value)"
                     .format(" ".join(argv[1:])))
  logging.set_verbosity(logging.WARNING)
  FLAGS.mark_as_parsed()
  calibrate(build(FLAGS))
  return 0


def run():
  programs.install(FLAGS)
  app.run(main, argv=recipes.expand(sys.argv),
          flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.interrupt_while_starting(PROG)
  entry_point.run_main(PROG, run)
