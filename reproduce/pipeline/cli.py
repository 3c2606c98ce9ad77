"""Reproduces the L2O-Entropy loss curves with one command.

Why: the paper claims that a flatness (Hessian) regularizer, curriculum
learning and imitation make L2O-Scale generalize better. This meta-trains
the variants needed to check that claim, meta-tests each of them and the
hand-designed baselines on the MNIST test problems, and draws the loss
curves and the results tables, so anyone can check the claim on their own
machine. It is resumable: every stage leaves a marker file when it
finishes and is skipped on the next run (delete the marker, or the output
folder, to redo it); meta-training itself also resumes from its last
checkpoint if it was interrupted.

Usage:
  bash reproduce/all.sh [--data_dir=DIR] [--out=DIR]
Sizes (environment; docs/reproduction.md, "Sizes", has each one's
definition, from reproduce/pipeline/sizes.py):
  (default)        full: this project's protocol (10,000 steps, 5 seeds,
                   the four MNIST problems, held-out accuracy, flatness) of
                   13 learned optimizers: L2O-Scale, the Hessian-ESD
                   regularizer at alpha 1e-4 and 1e-2 and reg.+CL+MT, 3
                   training seeds each, meta-trained with the long recipe
                   (docs/meta-training.md), and the paper's command (its
                   regularizer off) as one more arm; about 4 h on 2 cores
  REPRO_MEDIUM=1   the medium result in docs/reproduction.md (about 3 h on
                   2 cores): meta-trains with the stable recipe (30
                   meta-iterations) L2O-Scale, the Hessian-ESD and Jacobian
                   regularizers at alpha 1e-4, 1e-3 and 1e-2 and
                   reg.+CL+MT, 3 training seeds each (24 optimizers);
                   meta-tests them (2,000 steps, 3 seeds, held-out accuracy,
                   flatness) against the original's and tuned baselines
  REPRO_STUDY=1    the flatness study (docs/flatness-study.md): 6 arms x
                   training seeds 1-8, seed by seed, into
                   reproduce/results/study/runs/ (committed: resumable per
                   arm and seed over sittings and fresh clones); about 7 h
  REPRO_PRETRAINED=1  minutes: meta-tests only the shipped pretrained
                   optimizers (l2o_scale/pretrained/) against the baselines
  REPRO_QUICK=1    a few minutes: few meta-iterations, a few hundred test
                   steps (checks the pipeline; nothing is learned)
  REPRO_TINY=1     smoke test (tests/test_reproduce_pipeline.py): one
                   learned variant, 1 meta-iteration, 1 seed, 20 test steps,
                   one problem
Other environment variables:
  L2O_SCALE_DATA_DIR  offline MNIST folder (same as --data_dir); unset and
                      no --data_dir: tensorflow-datasets provides full MNIST
  REPRO_OUT           output folder (default reproduce/out/<size>; the
                      study: reproduce/results/study/runs)
  REPRO_JOBS          stages run in parallel (default 2 = the 2 CPU cores)
  REPRO_VARIANTS      space-separated learned optimizers to train and test
                      now, in this order (default: the size's list; run
                      again without it to do the rest: finished stages are
                      skipped). Any variant of reproduce/pipeline/variants.py
                      with an optional .t<seed>, e.g. hess-1e-3.t2
                      jacob-1e-4.t1
  REPRO_PROBLEMS      space-separated test problems to meta-test on now
                      (default: the size's list, e.g. mnist-mlp-sigmoid
                      mnist-mlp-relu mnist-mlp-deeper mnist-conv); with
                      REPRO_VARIANTS it runs a part of a size that takes
                      too long whole
  REPRO_RECIPE        the metarun recipe of the medium and study sizes
                      (default stable) and of the full size (default long:
                      the recipe of the shipped optimizers)
  REPRO_META_LR       meta learning rate (quick/tiny 1e-3; medium, study
                      and full: the recipe's)
  REPRO_META_ITERS    meta-iterations of every meta-training (tiny 1, quick
                      3, medium, study and full 30; the full size's paper
                      command keeps its own 100); at least the recipe's
                      evaluation period (stable 2, long 5)
  REPRO_HEARTBEAT     seconds between the lines that say a stage is still
                      running (default 15)
  PYTHON              python interpreter (default python)
Progress: a line when a stage starts and ends, the latter with the count
of finished stages and an estimate of the time left (from the mean time of
finished stages of the same kind); a line every REPRO_HEARTBEAT seconds
while a stage runs, with the last line of its log. Ctrl-C stops the
running stages too; finished ones are kept. The last line names every
figure and table written.
"""

import dataclasses
import datetime
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time

from problems import datasets

from . import plan
from . import problem_list as problems
from . import progress
from . import runner
from . import sizes
from . import variants

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class Refused(Exception):
  """Bad input: one line for the user, and an exit status."""

  def __init__(self, message, status=2):
    super().__init__(message)
    self.status = status


def parse_args(argv, env):
  """``(data_dir, out)`` from the arguments and the environment."""
  data_dir, out = env.get("L2O_SCALE_DATA_DIR", ""), ""
  for arg in argv:
    if arg.startswith("--data_dir="):
      data_dir = arg.split("=", 1)[1]
    elif arg.startswith("--out="):
      out = arg.split("=", 1)[1]
    elif arg in ("-h", "--help"):
      print(__doc__.rstrip())
      raise SystemExit(0)
    else:
      raise Refused("unknown argument: {} (see --help)".format(arg))
  return data_dir, out


def positive_int(env, key, default):
  """``env[key]`` as a whole number of at least 1 (``default`` if unset)."""
  text = env.get(key, "") or str(default)
  if not text.isdigit() or int(text) < 1:
    raise Refused("{}={} is no whole number of at least 1".format(key, text))
  return int(text)


def shipped_names(python):
  """The shipped optimizers, as the package lists them."""
  names = subprocess.run(
      [python, "-c", "from l2o_scale import pretrained; "
       "print(' '.join(pretrained.names()))"], cwd=ROOT, check=True,
      capture_output=True, text=True).stdout.split()
  if not names:
    raise Refused("no shipped optimizer found in l2o_scale/pretrained/", 1)
  return names


def choose(size, env):
  """The size with REPRO_VARIANTS and REPRO_PROBLEMS applied (checked)."""
  chosen = env.get("REPRO_VARIANTS", "").split()
  for v in chosen:
    if size.pretrained_only and v not in size.variants:
      raise Refused("REPRO_VARIANTS names {}, which is not shipped "
                    "(shipped: {})".format(v, " ".join(size.variants)))
    if not size.pretrained_only and variants.lookup(v) is None:
      raise Refused("REPRO_VARIANTS names {}, which is no known variant "
                    "(known: {})".format(v, variants.known_text()))
  wanted = env.get("REPRO_PROBLEMS", "").split()
  for p in wanted:
    if p not in size.problems:
      raise Refused("REPRO_PROBLEMS names {}, which is not a problem of the "
                    "{} size (its problems: {})".format(
                        p, size.name, " ".join(size.problems)))
  return dataclasses.replace(size, variants=tuple(chosen or size.variants),
                             problems=tuple(wanted or size.problems))


def prepare_out(size, out, data_dir, env):
  """The output folder (made, absolute); refuses one holding results of
  other settings, else writes config.txt. ``data_dir``: as the stages get
  it."""
  out = out or env.get("REPRO_OUT") or os.path.join(
      ROOT, size.out or os.path.join("reproduce", "out", size.name))
  os.makedirs(out, exist_ok=True)
  out = os.path.abspath(out)
  config = size.config_line(data_dir)
  path = os.path.join(out, "config.txt")
  if os.path.exists(path):
    with open(path) as f:
      there = f.read().rstrip("\n")
    if there != config:
      raise Refused("{} holds results of other settings:\n  there: {}\n"
                    "  now:   {}\nUse another --out (or REPRO_OUT), or delete "
                    "that folder.".format(out, there, config), 1)
  with open(path, "w") as f:
    f.write(config + "\n")
  return out


def describe_data(folder):
  """(the data line, the short name of the figures' title)."""
  try:
    where = os.path.join(ROOT, folder) if folder else None
    train, _ = datasets.load_mnist_arrays("train", where)
    test, _ = datasets.load_mnist_arrays("test", where)
  except datasets.DataNotFoundError as e:
    raise Refused(str(e), 1)
  if folder:
    kind = ("offline MNIST subset" if len(train) < 60000 else "offline MNIST")
    line = "{} from {} (train split {} images, test split {})".format(
        kind, folder, len(train), len(test))
  else:
    kind = "full MNIST via tensorflow-datasets"
    line = "{} (train split {} images, test split {})".format(
        kind, len(train), len(test))
  return line, "{}, {:,} train / {:,} test images".format(
      kind, len(train), len(test))


def plan_lines(size, settings, jobs):
  """The plan, as printed before the run."""
  lines = ["plan:"] + _training_plan_lines(size)
  conv = any(problems.PROBLEMS[p].conv for p in size.problems)
  lines += [
      "  2. meta-test with metatest.py on: " + " ".join(size.problems),
      "     optimizers: {} (restored from model.ckpt-0, the best evaluated) "
      "{}".format(" ".join(size.variants),
                  " ".join(size.baselines) or "(no baselines)"),
      "     seeds {s.seeds}; {s.test_steps} steps{c}; held-out accuracy "
      "every {s.heldout_every} steps".format(
          s=size, c=" ({} on the conv net)".format(size.test_steps_conv)
          if conv else "")]
  if size.conv_learned and "mnist-conv" in size.problems:
    lines.append("     conv net: learned optimizers " +
                 " ".join(size.conv_learned))
  if size.flatness:
    lines.append("     flatness of the solution on the MLPs (Hessian trace "
                 "with {} probes, top eigenvalue)".format(size.flatness))
  lines += ["  note: " + note for note in size.notes]
  if size.name == "study":
    lines.append("  3. reproduce/study_report.py -> results.md, endpoints.png "
                 "and flatness.png in {} (the protocol's analysis of the "
                 "optimizers finished so far)".format(
                     study_page_dir(size, settings)))
  else:
    lines.append("  3. reproduce/plot.py -> the figures (PNG, PDF) and "
                 "results.md in {}".format(
                     os.path.join(settings.out, "figures")))
  lines.append("  stages in parallel: {}".format(jobs))
  return lines


def _training_plan_lines(size):
  """The plan's first step: the meta-training of each optimizer (or the
  shipped ones, for a size that meta-tests those only)."""
  if size.pretrained_only:
    return ["  1. no meta-training: the shipped optimizers in "
            "l2o_scale/pretrained/ ({}; how each was trained: the card in "
            "its run_record.json)".format(" ".join(size.variants))]
  lines = ["  1. meta-train {} optimizer(s) with metarun.py (MNIST MLP "
           "784-20-10 sigmoid; training seed {}, or k for a name ending "
           ".tk):".format(len(size.variants), size.train_seed)]
  if size.recipe:
    lines.append("     {} meta-iteration(s) with the {r} recipe "
                 "(l2o_scale/config/recipes/{r}.flags){x}".format(
                     size.meta_iters, r=size.recipe, x="".join(
                         " " + f for f in size.extra_flags)))
  else:
    lines.append("     {s.meta_iters} meta-iteration(s) at meta learning "
                 "rate {s.meta_lr}; fixed 20-step unrolls, "
                 "{s.fix_num_steps} steps per meta-iteration, evaluation "
                 "every {s.eval_period}: {s.fix_num_steps_eval} steps x "
                 "{s.eval_epochs} run(s)".format(s=size))
  for v in size.variants:
    lines.append("     {:<24} {}".format(
        v, " ".join(variants.lookup(v).flags)).rstrip())
  return lines

def study_page_dir(size, settings):
  """Where the study's page goes: beside its committed runs, or, when the
  runs go elsewhere (REPRO_OUT), to figures/ as every size's plot."""
  return (os.path.dirname(size.out) if settings.path() == size.out
          else settings.path("figures"))


def plot_argv(size, settings, data_short):
  if size.name == "study":
    # The study's page is its protocol's analysis (docs/flatness-study.md),
    # written beside its runs, where it is committed with them.
    return [plan.PYTHON, "-m", "reproduce.study_report", "--allow_empty",
            "--study_dir=" + settings.path(),
            "--out_dir=" + study_page_dir(size, settings)]
  steps = "{} test steps".format(size.test_steps)
  if size.test_steps_conv != size.test_steps and any(
      problems.PROBLEMS[p].conv for p in size.problems):
    steps += ", {} on the conv net".format(size.test_steps_conv)
  # The meta-training runs' own records (none for the shipped optimizers).
  train = ([] if size.pretrained_only else
           ["--train_dir=" + settings.path("train")])
  return [plan.PYTHON, "-m", "reproduce.plot",
          "--results_dir=" + settings.path("test"),
          "--out_dir=" + settings.path("figures")] + train + [
              "--run_dir=" + settings.path(),
              "--title=L2O-Entropy reproduction, {} size ({} meta-iteration"
              "(s), {}); {}".format(size.name, size.meta_iters, steps,
                                    data_short)]


def record_invocation(out, python, started, stages_run):
  """A line of invocations.tsv (date, wall seconds, stages run, machine),
  read by results.md's "The run"."""
  machine = subprocess.run([python, "-m", "reproduce.machine"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
  with open(os.path.join(out, "invocations.tsv"), "a") as f:
    f.write("{}\t{}\t{}\t{}\n".format(
        datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
        .strftime("%Y-%m-%d"), int(time.time() - started), stages_run,
        machine))


def plot_is_stale(run):
  """The plot is cheap: redone whenever a test stage is newer than it."""
  if not run.done(plan.PLOT):
    return False
  t = os.path.getmtime(run.marker(plan.PLOT))
  return any(os.path.getmtime(run.marker(n[:-len(".done")])) > t
             for n in os.listdir(run.marks)
             if n.startswith("test-") and n.endswith(".done"))


def summary_lines(run, figures_dir):
  """The end of a run: stage times in all, then (the last line) every
  figure and table the plot wrote."""
  secs = {}
  if os.path.exists(run.times):
    with open(run.times) as f:
      for line in f:
        name, _, s = line.rstrip("\n").partition("\t")
        secs[name] = float(s)
  lines = []
  for what, prefix in (("meta-training", "train-"), ("meta-testing", "test-")):
    mine = [s for n, s in secs.items() if n.startswith(prefix)]
    if mine:
      lines.append("{}: {} stage(s), {} in all".format(
          what, len(mine), progress.format_seconds(sum(mine))))
  lines.append("stage times: {}; logs: {}".format(
      run.times, run.logs))
  manifest = os.path.join(figures_dir, "outputs.json")
  if os.path.exists(manifest):
    with open(manifest) as f:
      names = json.load(f)
  else:  # a plot of an older version
    names = sorted(os.listdir(figures_dir)) if os.path.isdir(
        figures_dir) else ["none"]
  lines.append("outputs in {}: {}".format(figures_dir, ", ".join(names)))
  return lines


def carried_only(train_dir):
  """Whether ``train_dir`` (absolute) holds nothing but what the
  repository keeps of a meta-training (sizes.KEPT_TRAIN_FILES, in its
  checkpoint folders): what a commit carries of a run that was unfinished
  when committed. Such a run cannot resume (no state file, no
  intermediate checkpoint), and metarun refuses a folder holding a
  checkpoint without a state file."""
  if not os.path.isdir(train_dir):
    return False
  found = False
  for folder, _, names in os.walk(train_dir):
    for name in names:
      if folder == train_dir or not any(fnmatch.fnmatch(name, p) for p in
                                        sizes.KEPT_TRAIN_FILES):
        return False
      found = True
  return found


def start_over_carried(stages, run, say=print):
  """Deletes the folder of every meta-training not done that holds only
  what a commit carried (:func:`carried_only`): it starts over."""
  for stage in stages:
    if stage.name.startswith("train-") and not run.done(stage.name):
      train_dir = os.path.join(ROOT, [a for a in stage.argv if a.startswith(
          "--train_dir=")][0].split("=", 1)[1])
      if carried_only(train_dir):
        say("[new ] {}: {} holds only what a commit keeps of an unfinished "
            "run; it starts over".format(stage.name, train_dir))
        shutil.rmtree(train_dir)


def run_stages(size, settings, env, data_short):
  """Runs the plan; returns the exit status."""
  stages = plan.build(size, settings, plot_argv(size, settings, data_short))
  counted = [s for s in stages if s.name != plan.PLOT]
  kind_of = lambda name: plan.kind_of(name, size.problems, size.baselines)
  run = runner.Runner(settings.out, ROOT, counted, kind_of,
                      jobs=positive_int(env, "REPRO_JOBS", 2),
                      heartbeat=positive_int(env, "REPRO_HEARTBEAT", 15),
                      env=env, python=settings.python)
  for name in os.listdir(run.running_dir):
    os.remove(os.path.join(run.running_dir, name))
  start_over_carried(counted, run)
  started, done_at_start = time.time(), run.done_count()
  print("stages: {} ({} done earlier); a line every {} s while one runs"
        .format(len(counted), done_at_start, run.heartbeat), flush=True)
  if not run.run(counted):
    raise Refused("a stage failed (its log's last lines are above); the "
                  "finished ones are kept: run the same command again to "
                  "retry the rest", 1)
  ran = run.done_count() - done_at_start
  if ran > 0:
    record_invocation(settings.out, settings.python, started, ran)
  if (ran > 0 or plot_is_stale(run)) and run.done(plan.PLOT):
    os.remove(run.marker(plan.PLOT))
  if not run.run([stages[-1]]):
    raise Refused("the plot failed", 1)
  print()
  for line in summary_lines(run, os.path.join(settings.out, "figures")):
    print(line)
  return 0


def start(argv, env):
  """Everything before the first stage: checks, the header, the plan."""
  python = env.get("PYTHON", "python")
  data_dir, out = parse_args(argv, env)
  jobs = positive_int(env, "REPRO_JOBS", 2)
  positive_int(env, "REPRO_HEARTBEAT", 15)
  try:
    size = sizes.select(env, lambda: shipped_names(python))
  except ValueError as e:
    raise Refused(str(e))
  size = choose(size, env)
  if data_dir:
    if not os.path.isdir(data_dir):
      raise Refused("--data_dir {} is no folder".format(data_dir), 1)
    # Relative to the repository root, where every stage runs: the
    # commands, the markers and config.txt stay the same when the
    # repository and its data move together.
    data_dir = os.path.relpath(os.path.abspath(data_dir), ROOT)
  settings = plan.Settings(python=python, out=prepare_out(size, out, data_dir,
                                                          env),
                           root=ROOT, data_dir=data_dir)
  print("== L2O-Entropy reproduction, size: {} ==".format(size.name))
  print("output:  {} (logs in logs/, stage markers in .stages/: delete a "
        "marker to redo its stage)".format(settings.out))
  print("data:    ", end="", flush=True)
  try:
    line, short = describe_data(data_dir)
  except Refused:
    print(flush=True)
    raise
  print(line)
  with open(os.path.join(settings.out, "data.txt"), "w") as f:
    f.write(line + "\n")
  for text in plan_lines(size, settings, jobs):
    print(text)
  print(flush=True)
  return size, settings, short


def main(argv=None, env=None):
  env = dict(os.environ if env is None else env)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  runner.raise_on_sigterm()
  try:
    size, settings, short = start(sys.argv[1:] if argv is None else argv,
                                  env)
    return run_stages(size, settings, env, short)
  except Refused as e:
    print("all.sh: {}".format(e), file=sys.stderr)
    return e.status
  except (runner.Interrupted, KeyboardInterrupt):
    print("all.sh: interrupted; finished stages are kept: run the same "
          "command again to continue", file=sys.stderr)
    return 130
