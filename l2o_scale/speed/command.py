"""Benchmark: cost of the learned optimizer against Adam, and of meta-training.

Why: the point of L2O-Scale is an optimizer cheap enough to replace Adam,
and the L2O-Entropy regularizer adds curvature estimates to every step of
meta-training. Both costs are claims a reader can check here, in one run,
on the machine at hand:

(a) one optimizer step on the L2O-Entropy MNIST MLP (784-20-10, sigmoid,
    batch 128, ``problems.problem_sets.mnist_mlp_problems``), learned
    optimizer vs. Keras Adam, as a ratio. A "step" is the whole step (loss,
    gradients, update), each compiled in one ``tf.function`` that reads and
    updates ``tf.Variable``s, as a training loop would:

    * learned: ``problem.objective_and_gradients`` +
      ``HierarchicalRNN([10, 20, 20], use_problem_lr_mean=True,
      use_gradient_shortcut=True, use_grad_products=True)
      .compute_updates_packed`` (the optimizer metarun.py trains by default),
      parameters and the packed optimizer state in variables;
    * Adam: a ``keras.Sequential`` MLP of the same shape, sparse softmax
      cross-entropy, ``keras.optimizers.Adam().apply_gradients``.

    Both are timed with and without XLA (``jit_compile``), taking turns
    within each repeat. The headline ratio puts the learned step with XLA
    (as ``metatest.py --jit_compile`` runs it) against the *faster* of the
    two Adam steps. ``--no_xla`` times only the steps without XLA.
    With XLA it also times a lower bound (:func:`make_gru_core_step`): the
    MLP's loss and gradients plus the HRNN's per-parameter GRU alone.

(b) one 20-step meta-training unroll as the original's
    ``../shared/original-tf1/time_original.py`` times it: forward through 20
    optimizer steps, the meta-gradient back through them and the meta-update
    (``l2o_scale.meta_training.meta_step.make_meta_step`` on ``l2o_scale.meta_training.unroll``, then
    ``meta_learner.MetaLearner``: make finite, clip, RMSProp) with a
    10,000-sample mini dataset (the MNIST test split: the offline train split
    has only 5,000 rows), without a regularizer and with ``hessian-esd``
    active (switch on), each also with ``--jit_compile`` (the optimizer's
    step compiled by XLA inside the unroll), taking turns.

(c) the floor of (b): the same unroll with SGD (one meta-parameter) instead
    of the learned optimizer, what any optimizer's unroll costs here.

(d) one whole meta-iteration as metarun runs it
    (``MetaTrainer``'s ``LocalSeries.run``: 5 unrolls of 20 steps with their
    meta-updates and progress lines, no evaluation).

(e) with ``--sizes [WIDTHS]`` instead: the learned step's cost across model
    sizes (:mod:`l2o_scale.speed.size_sweep`): Keras ``fit`` steps with
    XLA of MLPs 784-H-H-10, learned (``pretrained("l2o-scale")``) against
    Adam in the same run, per width the ratio and the nanoseconds per
    parameter; ``--markdown PATH`` also writes the results page.

``--original PATH/time_original.py`` first runs the original TF1 code's
timing script (its README's venv) and reports the port's speed-up over it,
measured in the same run: the comparison the README's numbers come from.

Every number is the median over repeats after warm-up (compilation is timed
separately and reported). Usage::

  python -m l2o_scale.speed [--quick] [--json PATH] [--no_xla]
                            [--data_dir DIR] [--original SCRIPT]
  python -m l2o_scale.speed --sizes [32,128,...] [--json PATH] [--markdown PATH]
  python -m l2o_scale.speed --time_to_trained ...   (l2o_scale.speed.time_to_trained)
"""


import os
import sys
import time

from l2o_scale.runs import entry_point
from l2o_scale.speed import timing as core
from l2o_scale.speed import unroll_timing
from l2o_scale.speed import speed_report
from l2o_scale.speed import size_sweep
from l2o_scale.speed import step_timing
from l2o_scale.speed import time_to_trained
from problems import datasets

PROG = "python -m l2o_scale.speed"


def build_parser():
  """The command's options (``--time_to_trained`` hands over to
  :mod:`l2o_scale.speed.time_to_trained`, which has its own)."""
  parser = entry_point.ArgumentParser(
      prog=PROG,
      description="Times a learned-optimizer step against a Keras Adam step "
      "and a 20-step meta-training unroll with and without hessian-esd.")
  parser.add_argument("--quick", action="store_true",
                      help="fewer repeats (about a minute)")
  parser.add_argument("--json", metavar="PATH", help="also write JSON here")
  parser.add_argument("--no_xla", action="store_true",
                      help="time the steps without XLA only")
  parser.add_argument("--original", metavar="SCRIPT", default=None,
                      help="also run the original TF1 code's timing script "
                      "(../shared/original-tf1/time_original.py) first and "
                      "report the port's speed-up over it")
  parser.add_argument("--original_python", default=os.path.expanduser(
      "~/.cache/original-tf1-venv/bin/python"),
                      help="the Python that runs --original (its README's "
                      "venv)")
  datasets.add_data_dir_argument(parser)
  parser.add_argument("--sizes", nargs="?", const=",".join(
      str(w) for w in size_sweep.DEFAULT_WIDTHS), default=None,
                      metavar="WIDTHS",
                      help="instead: the learned step's cost across model "
                      "sizes, MLPs 784-H-H-10 for these comma-separated "
                      "widths H (default %(const)s), learned against Adam")
  parser.add_argument("--sizes_in", choices=sorted(size_sweep.SWEEPS),
                      default="fit",
                      help="with --sizes: time the steps of Keras fit (XLA) "
                      "or of the compiled meta-test loop (metatest.py "
                      "--jit_compile)")
  parser.add_argument("--native_step", action="store_true",
                      help="with --sizes: the learned step with its "
                      "per-coordinate part as one native kernel "
                      "(LearnedOptimizer(native_step=True), metatest.py "
                      "--native_step)")
  parser.add_argument("--markdown", metavar="PATH",
                      help="with --sizes: also write the results page here")
  parser.add_argument("--time_to_trained", action="store_true",
                      help="instead: wall time of meta-training from a cold "
                      "start to a trained optimizer, per recipe and training "
                      "seed (its options: python -m l2o_scale.speed "
                      "--time_to_trained --help)")
  return parser


def measure_all(data_dir, cfg, xla):
  """(a)-(d) in turn: ``(steps, unrolls, loop, meta_iteration)``."""
  print("timing optimizer steps ...", flush=True)
  steps = step_timing.bench_steps(data_dir, cfg, xla=xla)
  print("timing meta-training unrolls (the first call of each compiles) ...",
        flush=True)
  unrolls = unroll_timing.bench_unrolls(data_dir, cfg, xla=xla)
  print("timing a whole meta-iteration ...", flush=True)
  meta_iteration = unroll_timing.bench_meta_iteration(data_dir, cfg)
  unrolls["sgd_floor"] = unroll_timing.bench_unroll_floor(data_dir, cfg)
  print("timing steps inside the compiled meta-test loop ...", flush=True)
  loop = step_timing.bench_loop_steps(data_dir, cfg)
  return steps, unrolls, loop, meta_iteration


def main(argv=None):
  argv = sys.argv[1:] if argv is None else list(argv)
  if "--time_to_trained" in argv:
    return time_to_trained.main([a for a in argv if a != "--time_to_trained"])
  args = build_parser().parse_args(argv)
  if args.sizes is not None:
    return main_sizes(args)
  cfg = core.QUICK if args.quick else core.FULL
  info = speed_report.machine_info()
  start = time.time()
  original = None
  if args.original:
    print("timing the original TF1 code (about 5 minutes) ...", flush=True)
    original = speed_report.run_original(
        args.original, args.original_python,
        datasets.resolve_data_dir(args.data_dir))
  try:
    steps, unrolls, loop, meta_iteration = measure_all(
        args.data_dir, cfg, not args.no_xla)
  except core.datasets.DataNotFoundError as e:
    print("bench: {}".format(e), file=sys.stderr)
    return 2
  report = speed_report.make_report(steps, unrolls, info, args.quick, loop,
                                    meta_iteration, original)
  report["total_seconds"] = time.time() - start
  print(speed_report.format_table(report))
  if args.json:
    speed_report.write_json(args.json, report)
    print("wrote", args.json)
  return 0


def main_sizes(args):
  """``--sizes``: the size sweep (e), its table, JSON and results page."""
  try:
    widths = [int(w) for w in args.sizes.split(",") if w.strip()]
  except ValueError:
    print("bench: --sizes takes comma-separated integer widths, got {!r}"
          .format(args.sizes), file=sys.stderr)
    return 2
  if not widths or min(widths) < 1:
    print("bench: --sizes needs positive widths, got {!r}".format(args.sizes),
          file=sys.stderr)
    return 2
  info = speed_report.machine_info()
  load_before = list(os.getloadavg())
  print(size_sweep.TABLE_HEADER, flush=True)
  report = size_sweep.bench_sizes(
      widths, repeats=3 if args.quick else 7, warmup=1 if args.quick else 3,
      sweep=args.sizes_in, native_step=args.native_step,
      budget=size_sweep.QUICK_BUDGET if args.quick else 2e6)
  report.update(machine=info, date=info["date"], load_before=load_before,
                load_after=list(os.getloadavg()))
  if args.json:
    speed_report.write_json(args.json, report)
    print("wrote", args.json)
  if args.markdown:
    with open(args.markdown, "w") as f:
      f.write(size_sweep.format_markdown(report))
    print("wrote", args.markdown)
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
