"""Time to a trained optimizer: wall time of meta-training from a cold start
until the optimizer is good, for several recipes in the same run.

Why: what a user of meta-training pays is the time until the optimizer is
trained, not the time of one unroll. This tool measures it the same way for
every recipe (a recipe: a set of ``metarun.py`` flags, e.g. an absl
flagfile):

* each training is its own ``metarun.py`` process, started cold (Python and
  TensorFlow start-up and tracing count), at ``nice`` 5, one at a time; for
  each training seed the recipes take turns (their order alternates from seed
  to seed) so that a change of machine speed hits all of them;
* after each meta-iteration the training writes ``model.ckpt-K``; the tool
  then pauses the process (SIGSTOP), scores the snapshot with one yardstick
  for every recipe -- the robust score of ``--selection=robust``
  (:mod:`l2o_scale.meta_training.selection`: 1,000 meta-test steps on seeds
  1001, 1002, 1003 of the training problem, default MNIST MLP 784-20-10
  sigmoid, batch 128) -- and resumes it (SIGCONT). The pauses are left out of
  the elapsed time;
* the elapsed time of snapshot K is the modification time of
  ``model.ckpt-K.index`` minus the process start, minus the pauses before;
  the **time to trained** is the elapsed time of the first snapshot whose
  yardstick score is <= ``--threshold`` (0.05), and the training stops there
  (``--run_to_end`` lets it finish its meta-iterations);
* reported per recipe and seed: time to trained, meta-iterations to it,
  seconds per meta-iteration (between the first and the last snapshot; the
  first snapshot's elapsed time includes start-up and tracing), the
  yardstick trajectory, the recipe's own selection scores and the machine
  load; per recipe the median over seeds, and the ratio of the first
  recipe's median to each other's.

Usage::

  python -m l2o_scale.bench --time_to_trained --data_dir=DIR \\
      --recipe stable --recipe fast=path/to/fast.flags [--seeds 1,2,3] \\
      [--json OUT.json] [--work_dir DIR]

``--recipe NAME`` takes a shipped recipe (:mod:`l2o_scale.config.recipes`),
``NAME=FILE``
an absl flagfile (one ``--flag=value`` per line).
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from l2o_scale.config import recipes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
METARUN = os.path.join(ROOT, "metarun.py")


THRESHOLD = 0.05
YARDSTICK_STEPS = 1000
YARDSTICK_SEEDS = (1001, 1002, 1003)
# The robust score's initial parameters are TF draws with op seeds 1001-1003,
# which also depend on TF's global seed (metarun --seed): the yardstick's are
# those of a training run with --seed=1.
YARDSTICK_GLOBAL_SEED = 1
YARDSTICK_PROBLEMS = "mnist_mlp_problems"
CHECKPOINT = re.compile(r'"model\.ckpt-(\d+)"')
META_ITERATION_LINE = re.compile(r"^\[meta-iteration (\d+)/\d+\]")
SELECTION_LINE = re.compile(r"robust score=(\S+)")


# ------------------------------------------------------------------ rules
def time_to_threshold(snapshots, threshold):
  """The first snapshot (in meta-iteration order) whose score is <=
  ``threshold``: ``(elapsed seconds, meta-iteration)``, or None."""
  for snap in sorted(snapshots, key=lambda s: s["meta_iteration"]):
    if snap["score"] is not None and snap["score"] <= threshold:
      return snap["elapsed"], snap["meta_iteration"]
  return None


def active_elapsed(moment, start, pauses):
  """Seconds from ``start`` to ``moment`` without the ``(stop, cont)``
  pauses that ended before ``moment`` (the paused process writes nothing,
  so no pause straddles a file's modification time)."""
  return moment - start - sum(cont - stop for stop, cont in pauses
                              if cont <= moment)


def seconds_per_meta_iteration(snapshots):
  """Mean seconds per meta-iteration between the first and the last
  snapshot (start-up and tracing, before the first, left out); None with
  fewer than two snapshots."""
  snaps = sorted(snapshots, key=lambda s: s["meta_iteration"])
  if len(snaps) < 2:
    return None
  first, last = snaps[0], snaps[-1]
  return ((last["elapsed"] - first["elapsed"]) /
          (last["meta_iteration"] - first["meta_iteration"]))


def _median(values):
  """Median with None (never reached) counted as +inf; None if the median
  itself is not reached."""
  if not values:
    return None
  value = statistics.median([float("inf") if v is None else v
                             for v in values])
  return None if value == float("inf") else value


def summarize(jobs, recipe_names):
  """Per recipe: medians over its seeds; ratios of the first recipe's median
  time to trained to each recipe's."""
  per_recipe = {}
  for name in recipe_names:
    mine = [j for j in jobs if j["recipe"] == name]
    per_recipe[name] = dict(
        seeds=[j["seed"] for j in mine],
        seconds_to_trained=[j["seconds_to_trained"] for j in mine],
        meta_iterations_to_trained=[j["meta_iterations_to_trained"]
                                    for j in mine],
        median_seconds_to_trained=_median(
            [j["seconds_to_trained"] for j in mine]),
        median_meta_iterations_to_trained=_median(
            [j["meta_iterations_to_trained"] for j in mine]),
        median_seconds_per_meta_iteration=_median(
            [j["seconds_per_meta_iteration"] for j in mine
             if j["seconds_per_meta_iteration"] is not None] or [None]),
        median_seconds_to_first_snapshot=_median(
            [j["snapshots"][0]["elapsed"] if j["snapshots"] else None
             for j in mine]))
  base = per_recipe[recipe_names[0]]["median_seconds_to_trained"]
  for name in recipe_names:
    other = per_recipe[name]["median_seconds_to_trained"]
    per_recipe[name]["speedup_vs_{}".format(recipe_names[0])] = (
        base / other if base is not None and other else None)
  return per_recipe


# ---------------------------------------------------------------- training
def _listed_checkpoints(logdir):
  """Numbers K of the ``model.ckpt-K`` the ``checkpoint`` state file lists
  (written after the checkpoint itself: a listed checkpoint is complete)."""
  try:
    with open(os.path.join(logdir, "checkpoint")) as f:
      return {int(k) for k in CHECKPOINT.findall(f.read())}
  except OSError:
    return set()


def _find_logdir(train_dir):
  """The folder metarun writes checkpoints to (``<train_dir>/<optimizer
  subdir>``), once it has a ``checkpoint`` state file."""
  try:
    names = sorted(os.listdir(train_dir))
  except OSError:
    return None
  for name in names:
    if os.path.exists(os.path.join(train_dir, name, "checkpoint")):
      return os.path.join(train_dir, name)
  return None


class _Output(object):
  """Reads the training's output in a thread: each line with its time,
  copied to a log file."""

  def __init__(self, stream, log_path):
    self.lines = []
    self._thread = threading.Thread(target=self._read,
                                    args=(stream, log_path), daemon=True)
    self._thread.start()

  def _read(self, stream, log_path):
    with open(log_path, "w") as log:
      for line in stream:
        self.lines.append((time.time(), line.rstrip("\n")))
        log.write(line)
        log.flush()

  def join(self):
    self._thread.join(timeout=30)


def own_selection_scores(lines):
  """meta-iteration -> the recipe's own robust score printed after it."""
  scores, k = {}, None
  for _, line in lines:
    m = META_ITERATION_LINE.match(line)
    if m:
      k = int(m.group(1))
    m = SELECTION_LINE.search(line)
    if m and k is not None:
      scores[k] = float(m.group(1))
  return scores


def run_job(command, train_dir, score, threshold=THRESHOLD,
            stop_at_threshold=True, poll_seconds=0.05, log_path=None,
            env=None):
  """Runs one training ``command`` (which writes checkpoints under
  ``train_dir``), scoring each new ``model.ckpt-K`` (K >= 1) with
  ``score(path) -> float`` while the process is paused.

  Returns a dict: ``snapshots`` ([{meta_iteration, elapsed, score,
  score_seconds}]), ``seconds_to_trained`` / ``meta_iterations_to_trained``
  (None if never), ``seconds_per_meta_iteration``, ``stopped_at_threshold``,
  ``returncode``, ``total_active_seconds``, ``first_progress_line_elapsed``
  (start-up plus tracing of the first unroll) and the recipe's own selection
  scores.
  """
  log_path = log_path or os.path.join(train_dir + ".log")
  os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
  pauses, snapshots, seen = [], [], set()
  start = time.time()
  proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env,
                          start_new_session=True)
  output = _Output(proc.stdout, log_path)
  stopped_at_threshold = False
  logdir = None
  while True:
    running = proc.poll() is None
    logdir = logdir or _find_logdir(train_dir)
    new = (sorted(_listed_checkpoints(logdir) - seen - {0}) if logdir
           else [])
    if new and running:
      stop = time.time()
      os.killpg(proc.pid, signal.SIGSTOP)
    for k in new:
      seen.add(k)
      prefix = os.path.join(logdir, "model.ckpt-{}".format(k))
      written = os.stat(prefix + ".index").st_mtime
      scored = time.time()
      value = score(prefix)
      snapshots.append(dict(meta_iteration=k,
                            elapsed=active_elapsed(written, start, pauses),
                            score=value,
                            score_seconds=time.time() - scored))
      if value is not None and value <= threshold and stop_at_threshold:
        stopped_at_threshold = True
        break
    if new and running:
      if stopped_at_threshold:
        os.killpg(proc.pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGCONT)
      else:
        os.killpg(proc.pid, signal.SIGCONT)
        pauses.append((stop, time.time()))
    if stopped_at_threshold or (not running and not new):
      break
    time.sleep(poll_seconds)
  end = time.time()
  proc.wait()
  output.join()
  reached = time_to_threshold(snapshots, threshold)
  first_line = next((t for t, line in output.lines
                     if META_ITERATION_LINE.match(line) and "unroll" in line),
                    None)
  return dict(
      command=command, log=log_path, returncode=proc.returncode,
      stopped_at_threshold=stopped_at_threshold,
      snapshots=sorted(snapshots, key=lambda s: s["meta_iteration"]),
      seconds_to_trained=reached[0] if reached else None,
      meta_iterations_to_trained=reached[1] if reached else None,
      seconds_per_meta_iteration=seconds_per_meta_iteration(snapshots),
      total_active_seconds=active_elapsed(end, start, pauses),
      paused_seconds=sum(c - s for s, c in pauses),
      first_progress_line_elapsed=(
          active_elapsed(first_line, start, pauses) if first_line else None),
      own_selection_scores=own_selection_scores(output.lines),
      output_tail=[line for _, line in output.lines[-5:]])


# --------------------------------------------------------------- yardstick
class Yardstick(object):
  """The robust score of ``--selection=robust`` with fixed settings, for
  checkpoints of any recipe (the optimizer is rebuilt from the run record
  next to the checkpoint; one per configuration, compiled once)."""

  def __init__(self, data_dir, steps=YARDSTICK_STEPS, seeds=YARDSTICK_SEEDS,
               problems=YARDSTICK_PROBLEMS, growth_limit=100.):
    # Imported here: the timing rules above and their tests need no
    # TensorFlow.
    from problems import problem_sets  # pylint: disable=g-import-not-at-top
    spec, self.dataset, self.batch_size = problem_sets.get(
        problems, data_dir=data_dir)[0]
    self.problem = spec.build()
    self.steps, self.seeds, self.growth_limit = steps, tuple(seeds), growth_limit
    self._optimizers = {}

  def _optimizer(self, logdir):
    from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top
    from l2o_scale.meta_testing import testing  # pylint: disable=g-import-not-at-top
    from l2o_scale.meta_training import selection  # pylint: disable=g-import-not-at-top
    from l2o_scale.runs import run_record  # pylint: disable=g-import-not-at-top
    from optimizer import hierarchical_rnn  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    kwargs = optimizer_flags.optimizer_kwargs_from_values(
        run_record.optimizer_flag_values(run_record.read(logdir)))
    key = json.dumps(kwargs, sort_keys=True, default=str)
    if key not in self._optimizers:
      opt = hierarchical_rnn.HierarchicalRNN(
          list(optimizer_flags.HRNN_CELL_SIZES), **kwargs)
      # TF's draws with an op seed depend on the global seed and on the
      # draws before: reset, every configuration gets the runs that a
      # training run with --seed=YARDSTICK_GLOBAL_SEED scores.
      tf.random.set_seed(YARDSTICK_GLOBAL_SEED)
      runs = selection.make_runs(self.problem, opt, len(self.dataset.data),
                                 self.batch_size, self.steps, self.seeds)
      self._optimizers[key] = (opt, runs, testing.RunCache())
    return self._optimizers[key]

  def __call__(self, checkpoint):
    from l2o_scale.meta_training import selection  # pylint: disable=g-import-not-at-top
    from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
    opt, runs, cache = self._optimizer(os.path.dirname(checkpoint))
    checkpoints.restore_optimizer(checkpoint, opt)
    return selection.robust_score(opt, self.problem, self.dataset,
                                  self.batch_size, runs, self.growth_limit,
                                  run_cache=cache).score


# --------------------------------------------------------------------- CLI
def recipe_flags(spec):
  """``(name, flags)`` of ``--recipe NAME`` (built-in) or ``NAME=FILE``."""
  if "=" in spec:
    name, path = spec.split("=", 1)
    if not os.path.isfile(path):
      raise ValueError("--recipe {}: no file {}".format(spec, path))
    return name, ["--flagfile={}".format(os.path.abspath(path))]
  if spec not in recipes.names():
    raise ValueError("--recipe {}: not a shipped recipe ({}); give "
                     "NAME=FLAGFILE".format(spec, ", ".join(recipes.names())))
  return spec, ["--recipe={}".format(spec)]


def schedule(recipe_names, seeds):
  """(seed, recipe) jobs: seed by seed, the recipes taking turns, in an
  order that alternates from one seed to the next."""
  jobs = []
  for i, seed in enumerate(seeds):
    names = recipe_names if i % 2 == 0 else recipe_names[::-1]
    jobs.extend((seed, name) for name in names)
  return jobs


def load_average():
  try:
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
  except OSError:
    return None


def build_parser():
  parser = argparse.ArgumentParser(
      prog="python -m l2o_scale.bench --time_to_trained",
      description="Wall time of meta-training from a cold start until the "
      "robust score first reaches --threshold, per recipe and training seed, "
      "recipes taking turns in one run.")
  parser.add_argument("--recipe", action="append", default=None,
                      help="NAME (built-in: {}) or NAME=FLAGFILE; repeat; "
                      "the first is the baseline of the ratios (default: "
                      "stable)".format(", ".join(recipes.names())))
  parser.add_argument("--seeds", default="1,2,3",
                      help="training seeds (metarun --seed)")
  parser.add_argument("--threshold", type=float, default=THRESHOLD)
  parser.add_argument("--data_dir", default=None,
                      help="MNIST folder (default: $L2O_SCALE_DATA_DIR)")
  parser.add_argument("--work_dir", default=None,
                      help="where the train dirs and logs go (default: a new "
                      "temporary folder); each job's train dir is replaced")
  parser.add_argument("--json", metavar="PATH", help="also write JSON here")
  parser.add_argument("--run_to_end", action="store_true",
                      help="let each training run all its meta-iterations")
  parser.add_argument("--max_meta_iterations", type=int, default=None,
                      help="cap: overrides the recipes' --num_meta_iterations")
  parser.add_argument("--nice", type=int, default=5,
                      help="niceness of the training processes")
  parser.add_argument("--extra", action="append", default=[],
                      help="a metarun flag added to every recipe")
  return parser


def format_table(report):
  rows = ["{:<16} {:>5} {:>12} {:>9} {:>11} {:>10}  {}".format(
      "recipe", "seed", "s to trained", "meta-its", "s/meta-it",
      "1st snap s", "yardstick by meta-iteration")]
  for job in report["jobs"]:
    fmt = lambda v, f: "-" if v is None else f.format(v)  # pylint: disable=cell-var-from-loop
    rows.append("{:<16} {:>5} {:>12} {:>9} {:>11} {:>10}  {}".format(
        job["recipe"], job["seed"], fmt(job["seconds_to_trained"], "{:.1f}"),
        fmt(job["meta_iterations_to_trained"], "{}"),
        fmt(job["seconds_per_meta_iteration"], "{:.2f}"),
        fmt(job["snapshots"][0]["elapsed"] if job["snapshots"] else None,
            "{:.1f}"),
        " ".join("{}:{:.3g}".format(s["meta_iteration"], s["score"])
                 for s in job["snapshots"])))
  for name, s in report["summary"].items():
    rows.append("{}: median {} s to trained ({} meta-iterations, {} s per "
                "meta-iteration); speed-up vs {}: {}".format(
                    name, s["median_seconds_to_trained"],
                    s["median_meta_iterations_to_trained"],
                    s["median_seconds_per_meta_iteration"],
                    report["baseline"],
                    s["speedup_vs_{}".format(report["baseline"])]))
  return "\n".join(rows)


def main(argv=None):
  args = build_parser().parse_args(argv)
  try:
    recipes = [recipe_flags(spec) for spec in (args.recipe or ["stable"])]
    seeds = [int(s) for s in args.seeds.split(",")]
  except ValueError as e:
    print("time_to_trained: {}".format(e), file=sys.stderr)
    return 2
  names = [name for name, _ in recipes]
  if len(set(names)) != len(names):
    print("time_to_trained: recipe names repeat: {}".format(names),
          file=sys.stderr)
    return 2
  flags_of = dict(recipes)
  data_dir = args.data_dir or os.environ.get("L2O_SCALE_DATA_DIR")
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="time_to_trained-")
  yardstick = Yardstick(data_dir)
  from l2o_scale.tools import bench_report  # pylint: disable=g-import-not-at-top
  report = dict(machine=bench_report.machine_info(), threshold=args.threshold,
                yardstick=dict(steps=YARDSTICK_STEPS,
                               seeds=list(YARDSTICK_SEEDS),
                               problems=YARDSTICK_PROBLEMS),
                baseline=names[0], recipes=flags_of, extra=args.extra,
                seeds=seeds, work_dir=work_dir, jobs=[],
                started=time.strftime("%Y-%m-%d %H:%M:%S"))
  for seed, name in schedule(names, seeds):
    train_dir = os.path.join(work_dir, name, "seed{}".format(seed))
    subprocess.run(["rm", "-rf", train_dir], check=True)
    command = (["nice", "-n", str(args.nice), sys.executable, METARUN,
                "--train_dir={}".format(train_dir), "--seed={}".format(seed)]
               + (["--data_dir={}".format(data_dir)] if data_dir else [])
               + flags_of[name] + list(args.extra)
               + (["--num_meta_iterations={}".format(args.max_meta_iterations)]
                  if args.max_meta_iterations else []))
    print("[{}] {} seed {} ...".format(time.strftime("%H:%M:%S"), name, seed),
          flush=True)
    load = load_average()
    job = run_job(command, train_dir, yardstick, args.threshold,
                  stop_at_threshold=not args.run_to_end,
                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    job.update(recipe=name, seed=seed, load_before=load,
               load_after=load_average())
    report["jobs"].append(job)
    print("  {} s to trained ({} meta-iterations); yardstick {}".format(
        job["seconds_to_trained"], job["meta_iterations_to_trained"],
        [round(s["score"], 4) for s in job["snapshots"]]), flush=True)
    if job["returncode"] not in (0, -signal.SIGKILL) or (
        job["returncode"] == -signal.SIGKILL and not job["stopped_at_threshold"]):
      print("  training failed (exit {}): {}".format(
          job["returncode"], " | ".join(job["output_tail"])), flush=True)
    if args.json:  # Written after every job: a long run loses nothing.
      report["summary"] = summarize(report["jobs"], names)
      _write_json(args.json, report)
  report["summary"] = summarize(report["jobs"], names)
  report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
  print(format_table(report))
  if args.json:
    _write_json(args.json, report)
    print("wrote", args.json)
  return 0


def _write_json(path, report):
  from l2o_scale.runs import atomic_file  # pylint: disable=g-import-not-at-top
  with atomic_file.replace(path) as f:
    json.dump(report, f, indent=1, default=str)
    f.write("\n")


if __name__ == "__main__":
  sys.exit(main())
