"""``python -m l2o_scale.benchmark``: the task-suite benchmark (training
quality across model families against tuned baselines). For the time per
optimizer step, see ``python -m l2o_scale.bench`` instead."""

import argparse
import os
import sys

DESCRIPTION = (
    "Task-suite benchmark: training quality across model families against "
    "tuned baselines. Trains each task of the suite with --optimizer and with "
    "Adam, AdamW and SGD with momentum (each tuned per task on a validation "
    "split), and reports final training loss, held-out test metric and the "
    "speedup over tuned Adam. (For the time per optimizer step, see "
    "`python -m l2o_scale.bench`.)")


def _list(kind):
  return lambda text: tuple(kind(v) for v in text.split(",") if v)


def parse_args(argv):
  from l2o_scale.benchmark import suite  # pylint: disable=g-import-not-at-top
  p = argparse.ArgumentParser(prog="python -m l2o_scale.benchmark",
                              description=DESCRIPTION)
  p.add_argument("--optimizer", default="l2o-scale", help=(
      "optimizer under test: a shipped name (l2o-scale), checkpoint:PATH, a "
      "Keras optimizer NAME[:LR] (adam:1e-3) or import:module.attr"))
  p.add_argument("--size", default="medium", choices=sorted(suite.SIZES),
                 help="small: 2 tiny tasks, 50 steps, 2 learning rates, 1 "
                 "seed (CI); medium: all tasks, 2,000 steps, 1 seed; full: "
                 "all tasks, 2,000 and 10,000 steps, 3 seeds")
  p.add_argument("--out", default="benchmark_results",
                 help="folder for results.json, the stored runs (resume), "
                 "the table, figures and results page")
  p.add_argument("--tasks", type=_list(str), help="comma-separated task "
                 "names (default: the size's); --list_tasks lists them")
  p.add_argument("--budgets", type=_list(int), help="steps per run, e.g. "
                 "2000,10000")
  p.add_argument("--seeds", type=int, help="seeds per task (0..N-1)")
  p.add_argument("--baselines", type=_list(str),
                 help="subset of adam,adamw,sgd")
  p.add_argument("--select_on", choices=["metric", "loss"],
                 help="what picks each baseline's learning rate on the "
                 "validation split (default: metric; ties: lower loss)")
  p.add_argument("--grid_extension", type=int, help="half-decade steps the "
                 "grid may grow past an end where the best learning rate "
                 "lies (default 2; small: 0)")
  p.add_argument("--eval_points", type=int, help="training-loss "
                 "measurements per run (whole training split)")
  p.add_argument("--batch_size", type=int)
  p.add_argument("--jit_compile", type=lambda v: v.lower() in ("1", "true"),
                 help="XLA-compile the training steps of the tasks that "
                 "allow it (default: true, false for --size=small)")
  p.add_argument("--data_dir", default=os.environ.get("L2O_SCALE_DATA_DIR"),
                 help="MNIST IDX files (default $L2O_SCALE_DATA_DIR)")
  p.add_argument("--list_tasks", action="store_true",
                 help="list the tasks and exit")
  p.add_argument("--no_report", action="store_true",
                 help="write results.json only")
  return p.parse_args(argv)


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  from l2o_scale.benchmark import suite, tasks  # pylint: disable=g-import-not-at-top
  from problems import datasets  # pylint: disable=g-import-not-at-top
  if args.list_tasks:
    for task in tasks.REGISTRY.values():
      print("{:22s} {:34s} {}".format(task.name, task.family,
                                      task.description))
    return 0
  try:
    config = suite.Config.for_size(
        args.size, optimizer=args.optimizer, out=args.out, tasks=args.tasks,
        budgets=args.budgets, seeds=args.seeds, baselines=args.baselines,
        select_on=args.select_on, eval_points=args.eval_points,
        grid_extension=args.grid_extension,
        batch_size=args.batch_size, data_dir=args.data_dir,
        jit_compile=args.jit_compile)
    results = suite.run(config, log=lambda line: print(line, flush=True))
  except (ValueError, FileNotFoundError, datasets.DataNotFoundError) as e:
    print("error: {}".format(e), file=sys.stderr)
    return 2
  print("results: {} ({:.0f} s, peak memory {:.0f} MiB)".format(
      os.path.join(args.out, "results.json"), results["wall_time_s"],
      results["peak_memory_mib"]))
  if not args.no_report:
    from l2o_scale.benchmark import report  # pylint: disable=g-import-not-at-top
    for path in report.write(results, args.out):
      print("wrote", path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
