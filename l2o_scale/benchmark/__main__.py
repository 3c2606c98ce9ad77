"""``python -m l2o_scale.benchmark``: the task-suite benchmark (training
quality across model families against tuned baselines). For the time per
optimizer step, see ``python -m l2o_scale.speed`` instead."""

import dataclasses
import os
import shutil
import sys
import textwrap

# TensorFlow's info lines (its CPU instructions, the oneDNN note) and, on a
# machine without CUDA, its probing of the GPU stay out of the progress
# lines, as in the other command-line programs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.install()

from absl import flags  # pylint: disable=g-import-not-at-top

from l2o_scale.benchmark import config as config_lib
from l2o_scale.benchmark import report
from l2o_scale.benchmark import tasks
from l2o_scale.config import config_flags
from l2o_scale.config.config_flags import flag
from problems import datasets

DESCRIPTION = (
    "Task-suite benchmark: training quality across model families against "
    "tuned baselines. Trains each task of the suite with --optimizer and with "
    "Adam, AdamW and SGD with momentum (each tuned per task on a validation "
    "split), and reports final training loss, held-out test metric and the "
    "speedup over tuned Adam. (For the time per optimizer step, see "
    "`python -m l2o_scale.speed`.)")
USAGE = "usage: python -m l2o_scale.benchmark [--flag=value ...]"
MODULE = "l2o_scale.benchmark"  # the flags' owner in --help
PROG = "python -m " + MODULE  # what its one-line refusals start with


@dataclasses.dataclass
class Actions:
  """What the command does besides running ``config.Config``."""
  list_tasks: bool = flag(False, "list the tasks and exit")
  no_report: bool = flag(False, "write results.json only (no table, "
                         "figures or page)")


def define_flags():
  """This program's own flag set: the fields of ``config.Config`` (where
  their help and defaults are declared) and of ``Actions``."""
  flag_values = flags.FlagValues()
  for cls in (config_lib.Config, Actions):
    config_flags.define_flags(cls, MODULE, flag_values)
  return flag_values


def parse_args(argv):
  """The parsed flags; ``--help`` prints them and exits, a bad flag exits
  with one line."""
  flag_values = define_flags()
  if any(a in ("-h", "--help", "--helpfull", "-?") for a in argv):
    print("\n\n".join([USAGE, DESCRIPTION,
                        flag_values.module_help(MODULE)]))
    raise SystemExit(0)
  try:
    rest = flag_values([MODULE] + list(argv))
  except flags.Error as e:
    print(PROG + ": error: {}".format(e), file=sys.stderr)
    raise SystemExit(2) from None
  if len(rest) > 1:
    print(PROG + ": error: unexpected arguments: {}".format(
        " ".join(rest[1:])), file=sys.stderr)
    raise SystemExit(2)
  return flag_values


def config_from_flags(args):
  """``config.Config`` from the parsed flags: the ``--size`` preset, with
  the flags given on the command line over it (``--data_dir`` defaults to
  ``$L2O_SCALE_DATA_DIR``)."""
  overrides = config_flags.given(config_lib.Config, args)
  overrides.setdefault("data_dir", datasets.resolve_data_dir())
  overrides.pop("size", None)
  return config_lib.Config.for_size(args.size, **overrides)


def task_lines(width=None):
  """``--list_tasks``: each task's name, family and description, wrapped to
  ``width`` columns (the terminal's, 80 when it has none)."""
  width = max(width or shutil.get_terminal_size((80, 24)).columns, 50)
  column = max(len(name) for name in tasks.REGISTRY) + 2
  lines = []
  for task in tasks.REGISTRY.values():
    lines += textwrap.wrap(
        "{}: {}{}".format(task.family, task.description,
                          " (held out, set {}: runs only when named)".format(
                              task.held_out) if task.held_out else ""), width,
        initial_indent=task.name.ljust(column),
        subsequent_indent=" " * column, break_on_hyphens=False)
  return lines


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.list_tasks:
    print("\n".join(task_lines()))
    return 0
  try:
    config = config_from_flags(args)
    # Imported here: the suite loads TensorFlow, which --help, --list_tasks
    # and a refused flag do without.
    from l2o_scale.benchmark import suite  # pylint: disable=g-import-not-at-top
    results = suite.run(config, log=lambda line: print(line, flush=True))
    if not args.no_report:
      written = report.write(results, config.out)
  except (ValueError, OSError, datasets.DataNotFoundError) as e:
    print(PROG + ": error: {}".format(e), file=sys.stderr)
    return 2
  print("results: {} ({:.0f} s, peak memory {:.0f} MiB)".format(
      os.path.join(config.out, "results.json"), results["wall_time_s"],
      results["peak_memory_mib"]))
  if not args.no_report:
    for path in written:
      print("wrote", path)
  return 0


if __name__ == "__main__":
  from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
  entry_point.run_main(PROG, main)
