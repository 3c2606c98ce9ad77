"""Meta-testing: evaluates a learned (or hand-designed) optimizer.

Port of the evaluation script ``L2O-Scale/L2O-Scale-Evaluation/metatest.py``
(VITA-Group/Open-L2O; flags l.38-274, ``main`` l.290-400). Same flags, names
and defaults, same outputs: for every selected problem and every seed, the
optimizer runs ``--num_testing_itrs`` steps from a fresh start and the list of
per-step objectives is pickled to
``<save_dir>/seed<S>_eval_loss_record.pickle-<model_name>`` (readable by the
original plotting scripts).

Example::

  python metatest.py --train_dir=runs/mlp --restore_model_name=model.ckpt-0 \\
      --include_mnist_mlp_relu_problems --model_name=mnist-relu \\
      --num_testing_itrs=10000 --save_dir=results --data_dir=data/mnist

``--test_optimizer`` picks ``L2o`` (the learned optimizer restored from
``<train_dir>/<optimizer>_<cell_cls>_<cell_size>_<num_cells>/<restore_model_name>``,
a TF1 checkpoint of the original code or a TF2 one of this port's
``metarun.py``) or a baseline with the original's learning rate: ``SGD``
(1e-3), ``Adam`` (1e-4), ``Adagrad`` (1e-5).

New flags (not in the original):
NEW_FLAGS.
Among them ``--seeds`` (the
original hard-coded 6, 12, 18, 24, 30), ``--heldout_every``
(generalization of the optimizee: train on the train split, every N steps
measure loss and accuracy on the held-out test split, saved as
``<save_dir>/seed<S>_heldout_record-<model_name>.json``), ``--pretrained``
(a pretrained optimizer shipped with the package, by name) and
``--overwrite`` (result files of the same ``--model_name`` are otherwise
kept and the run refused).

Differences: the flags of meta-training that the original declared but never
used here (``task``, ``num_problems``, ``meta_learning_rate``...) are kept so
old command lines still parse. With more than one selected problem the
original wrote every problem to the same file names (later ones overwrote
earlier ones); here the file names then get ``-problem<k>`` after the model
name. Each run also writes ``metatest_record-<model_name>.json``, naming
its problems for ``python -m l2o_scale.results``
(:mod:`l2o_scale.meta_testing.result_files`).
"""

import dataclasses
import json
import os
import pickle
import time
import types
import typing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
# What Ctrl-C's line adds; from the start on (TensorFlow loads for seconds).
INTERRUPTED = ("the result files written so far are complete: run "
               "the same command with --overwrite to test everything.")
if __name__ == "__main__":
  entry_point.interrupt_while_starting("metatest.py", INTERRUPTED)
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from l2o_scale import pretrained
from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_testing import baselines
from l2o_scale.meta_testing import result_files
from l2o_scale.meta_training import config as training_lib
from l2o_scale.meta_testing import testing
from l2o_scale.runs import atomic_file
from l2o_scale.runs import checkpoints
from l2o_scale.runs import run_record
from l2o_scale.steps import settings as step_settings
from l2o_scale.steps import step_schedule
from optimizer import native_step
from problems import curvature
from problems import problem_sets as ps
from problems import registry

flag = config_flags.flag


@dataclasses.dataclass(frozen=True)
class MetatestConfig:
  """``metatest.py``'s own flags: the original's (Evaluation metatest.py
  l.38-274) and the port's new ones."""
  save_dir: str = flag("opt/", "Directory to testing results.", nonempty=True)
  test_optimizer: str = flag(
      "L2o", "Optimizer to test: " + ", ".join(programs.TEST_OPTIMIZERS) +
      ".")
  num_testing_itrs: int = flag(100, "Number testing iterations.", ge=1)
  model_name: str = flag(
      "mt", "Suffix of the result files (seed<S>_eval_loss_record.pickle-"
      "<model_name>): letters, digits and . _ - + = , @, not ending in "
      "-problem<digits>.")
  restore_model_name: str = flag(
      "", "Checkpoint to restore in <train_dir>/<optimizer subdir>, e.g. "
      "model.ckpt-0. Empty: the latest checkpoint.")
  pretrained: typing.Optional[str] = flag(
      None, "Test a pretrained optimizer shipped with the package, by name "
      "(python -m l2o_scale.pretrained lists them): sets the checkpoint "
      "(instead of --train_dir/--restore_model_name) and its recorded "
      "optimizer flags.", kind=str)
  # New flags.
  data_dir: typing.Optional[str] = flag(
      None, "Folder with the datasets (MNIST IDX files / CIFAR-10 batches). "
      "Default: $L2O_SCALE_DATA_DIR, else tensorflow-datasets.", kind=str)
  seeds: tuple = flag(
      programs.DEFAULT_SEEDS, "Seeds of the test runs (one run and one "
      "result file per seed).")
  heldout_every: int = flag(
      0, "If > 0: train the optimizee on the train split and every N steps "
      "record loss and accuracy on the held-out test split (and on the "
      "whole train split); saved as seed<S>_heldout_record-<model_name>"
      ".json. 0: off (the original evaluation).", ge=0)
  baseline_learning_rate: typing.Optional[float] = flag(
      None, "Learning rate of the --test_optimizer=SGD/Adam/Adagrad "
      "baseline. Default: the original evaluation's (SGD 1e-3, Adam 1e-4, "
      "Adagrad 1e-5), which are small; tuned baselines (e.g. Adam 1e-3, "
      "SGD 0.1) are what a reader compares a learned optimizer with.",
      kind=float, gt=0)
  flatness_probes: int = flag(
      0, "With --heldout_every: also measure the flatness of the solution "
      "reached, the Hessian trace (Hutchinson, this many probes) and the "
      "top Hessian eigenvalue (20 power iterations) of the objective on "
      "the whole train split at the final parameters, saved in the "
      "held-out record. 0: off.", ge=0)
  assume_optimizer_flags: bool = flag(
      False, "For a checkpoint of this port without its run_record.json: "
      "build the optimizer from this command's optimizer flags (defaults "
      "where not given) instead of refusing. Without it such a checkpoint "
      "is refused, as flags other than those it was trained with run "
      "silently wrong.")
  step_schedule: str = flag(
      "none", "Scale every update of the tested optimizer (learned or "
      "baseline) by a decay over the --num_testing_itrs steps: cosine "
      "(1 + cos(pi t / T)) / 2 or linear 1 - t / T. none: constant steps "
      "(the original). The learned optimizers' steps never shrink by "
      "themselves; a decay removes their late excursions in long runs "
      "(docs/meta-testing.md).", step_schedule.SCHEDULES)
  step_decay_start: float = flag(
      0., "With --step_schedule: the share of the run (in [0, 1)) during "
      "which the steps stay whole; the decay spans the rest. 0: the decay "
      "spans the whole run.", ge=0, lt=1)
  weight_decay: float = flag(
      0., "Decoupled weight decay of every update of the tested optimizer "
      "(learned or baseline; Adam becomes AdamW): new = proposed - s * "
      "weight_decay * old, s the --step_schedule's scale (else 1), as "
      "Keras' weight_decay. 0: none (the original). With their fixed step "
      "size the learned optimizers keep growing the weights once the data "
      "is fit and lose held-out accuracy in long runs; the shipped "
      "optimizers' cards give a value for long runs (docs/meta-testing.md).",
      ge=0)
  hold_zero_gradients: bool = flag(
      False, "Leave every coordinate whose gradient in a step is exactly zero "
      "where it is (learned or baseline). False: every coordinate takes the "
      "optimizer's step (the original). The learned step goes on moving "
      "parameters the data no longer reaches (weights of always-zero "
      "inputs, of dead ReLU units), which held-out data can then excite "
      "(docs/meta-testing.md).")
  progress_every: int = flag(500, "Print progress every N steps (0: never).",
                             ge=0)
  jit_compile: bool = flag(
      False, "Compile the optimization loop with XLA: on a CPU about twice "
      "as fast per step for the learned optimizer on the MLP problems, but "
      "several times slower on the conv nets (XLA's CPU convolutions); same "
      "numbers up to float rounding. If XLA cannot compile a problem, the "
      "run says so and continues without it.")
  native_step: bool = flag(
      False, "With --jit_compile, run the per-coordinate part of the "
      "learned step (the hierarchical RNN with the shipped optimizers' "
      "options) as one native kernel, built once per machine with its C++ "
      "compiler: the same numbers up to float rounding, in less time on "
      "large problems (docs/performance.md). Where it cannot run, "
      "TensorFlow's ops do and the run says why. Not in the original.")
  overwrite: bool = flag(
      False, "Replace result files of the same --model_name already in "
      "--save_dir (without it such a run is refused before any work).")


CONFIG_CLASSES = (MetatestConfig, training_lib.Schedule,
                  optimizer_flags.OptimizerConfig, programs.MetarunConfig)


def define_flags(module_name="metatest"):
  """A fresh ``FlagValues`` holding every metatest.py flag: the fields of
  MetatestConfig, metarun's --train_dir, the unused metarun flags the
  original declared (with its own defaults), the optimizer's flags and the
  problem flags."""
  values = flags.FlagValues()
  config_flags.define_flags(MetatestConfig, module_name, values)
  config_flags.define_flags(programs.MetarunConfig, module_name, values,
                            only=("train_dir",))
  config_flags.define_flags(programs.MetarunConfig, module_name, values,
                            only=("task", "worker_tasks"),
                            help_suffix=" (unused by meta-testing)")
  config_flags.define_flags(training_lib.Schedule, module_name, values,
                            overrides=programs.METATEST_DEFAULTS,
                            only=programs.METATEST_UNUSED,
                            help_suffix=" (unused by meta-testing)")
  optimizer_flags.define_optimizer_flags(values, module_name)
  programs.define_metatest_problem_flags(values, module_name)
  return values


# This program's own flags, in their own FlagValues: importing metarun.py
# too changes none of them.
FLAGS = define_flags()
__doc__ = __doc__.replace("NEW_FLAGS", programs.new_flags_line(
    FLAGS, programs.ORIGINAL_METATEST_FLAGS))

# (flag name, problem_sets function) in the order the original's main()
# extended its list (metatest.py l.300-395): the registered test problems
# (problems.registry), then the training sets, whose flags the original
# declared (with the calls commented out).
EVALUATION_PROBLEM_FLAGS = [(p.flag, p.problem_set) for p in registry.PROBLEMS]
TRAINING_PROBLEM_FLAGS = programs.metatest_training_sets()
UNAVAILABLE_PROBLEM_FLAGS = list(programs.UNAVAILABLE_PROBLEM_FLAGS)

DEFAULT_SEEDS = list(programs.DEFAULT_SEEDS)
FLATNESS_POWER_ITERATIONS = 20
TEST_OPTIMIZERS = list(programs.TEST_OPTIMIZERS)
RESULT_PATTERNS = result_files.RESULT_PATTERNS


def selected_problem_sets(flag_values):
  """Names of the problem_sets functions selected by the include flags."""
  for name in UNAVAILABLE_PROBLEM_FLAGS:
    if getattr(flag_values, name):
      raise ValueError(
          "--{} was declared by the original metatest.py but has no problem "
          "set (its code was commented out there). Choose one of: {}".format(
              name, ", ".join("--" + n for n, _ in EVALUATION_PROBLEM_FLAGS)))
  chosen = []
  for name, fn in EVALUATION_PROBLEM_FLAGS + TRAINING_PROBLEM_FLAGS:
    if getattr(flag_values, name):
      chosen.append((name, fn))
      if (fn == "sparse_gradient_problems" and
          flag_values.include_fully_connected_random_2_class_problems):
        chosen.append((name, "sparse_gradient_problems_mlp"))
  return chosen


def _split_datasets(flag_name, data_dir):
  """(train split, held-out split) of the data a test problem uses (its
  registry entry's dataset)."""
  problem = registry.by_flag().get(flag_name)
  if problem is not None:
    return problem.splits(data_dir)
  raise ValueError("--heldout_every needs a problem trained on a dataset with "
                   "a held-out split (MNIST or CIFAR-10 problem sets); {} has "
                   "none.".format(flag_name))


def build_problems(flag_values):
  """List of (flag, spec, dataset, batch_size, heldout dataset or None,
  label): the label names the problem in output and result files
  (result_files.problem_label)."""
  out = []
  for flag_name, fn in selected_problem_sets(flag_values):
    entries = ps.get(fn, data_dir=flag_values.data_dir)
    heldout = None
    if flag_values.heldout_every > 0:
      train_split, heldout = _split_datasets(flag_name, flag_values.data_dir)
      same = same_rows_note(flag_name, train_split, heldout)
      if same:
        print(same, flush=True)
    for i, (spec, dataset, batch_size) in enumerate(entries):
      if heldout is not None:
        dataset = train_split
      out.append((flag_name, spec, dataset, batch_size, heldout,
                  result_files.problem_label(flag_name, spec, i,
                                             len(entries))))
  return out


def same_rows_note(flag_name, train, heldout):
  """A warning line when the train and held-out splits hold the same rows
  (e.g. a --data_dir whose test files are copies of the train files), or
  None: the held-out numbers would then be measured on training data."""
  if len(train.data) != len(heldout.data) or not (
      np.array_equal(np.asarray(train.data), np.asarray(heldout.data))):
    return None
  return ("Warning: the train and held-out splits of {} hold the same {} "
          "rows: the held-out loss and accuracy are measured on training "
          "data. Check the test files in --data_dir.".format(
              flag_name, len(train.data)))


def checkpoint_dir(flag_values):
  """``<train_dir>/<optimizer>_<cell_cls>_<cell_size>_<num_cells>``."""
  return os.path.join(flag_values.train_dir,
                      optimizer_flags.checkpoint_subdir(flag_values))


def build_optimizer(flag_values):
  """The optimizer to test, restored if learned. Returns (optimizer, path)."""
  name = flag_values.test_optimizer
  if flag_values.pretrained is not None and name != "L2o":
    raise ValueError("--pretrained tests a learned optimizer; it does not go "
                     "with --test_optimizer={}".format(name))
  lr = flag_values.baseline_learning_rate
  if lr is not None and not (lr > 0 and np.isfinite(lr)):
    raise ValueError("--baseline_learning_rate must be > 0, got {}".format(lr))
  if name in baselines.BASELINES:
    opt = baselines.build(name, flag_values.baseline_learning_rate)
    print("using optimizer {} (learning rate {:g}{})".format(
        name, opt.learning_rate,
        "" if flag_values.baseline_learning_rate is None
        else ", --baseline_learning_rate"))
    return opt, None
  if flag_values.baseline_learning_rate is not None:
    raise ValueError("--baseline_learning_rate sets the learning rate of the "
                     "SGD/Adam/Adagrad baselines; --test_optimizer={} has "
                     "none.".format(name))
  if name != "L2o":
    raise ValueError("Unknown --test_optimizer={!r}; choose one of {}".format(
        name, ", ".join(TEST_OPTIMIZERS)))
  if flag_values.pretrained is not None:
    return _pretrained_optimizer(flag_values)
  logdir = checkpoint_dir(flag_values)
  misplaced = checkpoints.checkpoint_folder_given(
      flag_values.train_dir, optimizer_flags.checkpoint_subdir(flag_values))
  if misplaced:
    raise FileNotFoundError(misplaced)
  if not os.path.isdir(logdir):
    raise FileNotFoundError(
        "No checkpoint folder {}: --train_dir must hold the {} folder that "
        "metarun.py writes (optimizer flags --optimizer/--cell_cls/"
        "--cell_size/--num_cells choose its name).{}".format(
            logdir, optimizer_flags.checkpoint_subdir(flag_values),
            " For the shipped optimizer, pass --pretrained={}.".format(
                flag_values.train_dir)
            if flag_values.train_dir in pretrained.names() else ""))
  return _restored(flag_values, checkpoints.checkpoint_in(
      logdir, flag_values.restore_model_name))


def _restored(flag_values, path):
  """The learned optimizer of checkpoint ``path``, built with the flags of
  its run record (:func:`recorded_flags`). Returns (optimizer, path)."""
  values = recorded_flags(flag_values, path,
                          checkpoints.checkpoint_format(path))
  opt = optimizer_flags.optimizer_spec(values).build()
  checkpoints.restore_optimizer(path, opt)
  if flag_values.native_step:
    # Without XLA the kernel would never run: it is not built for nothing.
    why = (native_step.enable(opt) if flag_values.jit_compile else
           "it runs in steps compiled by XLA only (--jit_compile)")
    if why:
      print("--native_step: {}; TensorFlow's ops run instead.".format(why))
  print("using optimizer L2o ({}) restored from {}".format(
      values.optimizer, path))
  return opt, path


def long_run_note(flag_values):
  """A note line when ``--pretrained``'s card gives settings for long runs
  that this command does not use (None otherwise): without them the
  learned steps never shrink and held-out accuracy falls in long runs."""
  if flag_values.pretrained is None:
    return None
  settings = pretrained.long_run_settings(flag_values.pretrained)
  if not settings or all(flag_values[k].value == v
                         for k, v in settings.items()):
    return None
  return ("Note: the card of {} gives settings for runs of thousands of "
          "steps: {} (docs/meta-testing.md); this run uses {}.".format(
              flag_values.pretrained,
              " ".join(pretrained.long_run_flags(settings)),
              " ".join(pretrained.long_run_flags(
                  {k: flag_values[k].value for k in settings}))))


def _pretrained_optimizer(flag_values):
  """``--pretrained=NAME``: the shipped checkpoint, which the flags that name
  another checkpoint would contradict."""
  given = [name for name in ("train_dir", "restore_model_name")
           if flag_values[name].present]
  if given:
    raise ValueError("--pretrained={} names the checkpoint; drop {}".format(
        flag_values.pretrained, " and ".join("--" + n for n in given)))
  return _restored(flag_values, pretrained.checkpoint(flag_values.pretrained))


def recorded_flags(flag_values, checkpoint_path, checkpoint_format):
  """The optimizer flags to rebuild the trained optimizer with: the run
  record's (``run_record.json`` next to the checkpoint), except those given
  on the command line. Without a record: a TF1 checkpoint of the original
  takes the flags (noted); a TF2 one is refused unless
  ``--assume_optimizer_flags`` (run_record.record_for_checkpoint)."""
  names = optimizer_flags.optimizer_flag_names()
  given = {name: flag_values[name].value for name in names}
  record, note = run_record.record_for_checkpoint(
      checkpoint_path, checkpoint_format, flag_values.assume_optimizer_flags,
      "give the optimizer flags it was trained with and "
      "--assume_optimizer_flags")
  if note:
    print(note)
  if record is None:
    return types.SimpleNamespace(**given)
  values, notes = run_record.merge_optimizer_flags(
      record, given, {name for name in names if flag_values[name].present})
  for note in notes:
    print(note)
  return types.SimpleNamespace(**values)


_result_name = result_files.result_name


def check_flags(flag_values):
  """Error lines for flags that make no sense, found before any work:
  every numeric flag outside its declared bounds or non-finite
  (l2o_scale.config), and the combinations."""
  errors = programs.validate(CONFIG_CLASSES, flag_values)
  bad = [s for s in flag_values.seeds if not s.strip().lstrip("-").isdigit()]
  if bad or not flag_values.seeds:
    errors.append("--seeds must be a comma-separated list of integers (got "
                  "{!r})".format(",".join(flag_values.seeds)))
  model_name = result_files.model_name_problem(flag_values.model_name)
  if model_name:
    errors.append(model_name)
  if flag_values.test_optimizer == "L2o":
    errors.extend(optimizer_flags.check_optimizer_flags(flag_values))
  shipped = programs.shipped_folder_problem(flag_values.save_dir, "save_dir")
  if shipped:
    errors.append(shipped)
  return list(dict.fromkeys(errors))


def result_paths(flag_values, problems, seeds):
  """Every result file the run writes, in order."""
  patterns = RESULT_PATTERNS if flag_values.heldout_every > 0 else (
      RESULT_PATTERNS[:1])
  return [os.path.join(flag_values.save_dir, _result_name(
      pattern, seed, flag_values.model_name, k, len(problems)))
          for k in range(len(problems)) for seed in seeds
          for pattern in patterns]


def existing_results_problem(flag_values, problems, seeds):
  """The error line when result files of this run are in --save_dir
  already (without --overwrite), or None."""
  if flag_values.overwrite:
    return None
  there = [p for p in result_paths(flag_values, problems, seeds)
           if os.path.exists(p)]
  if not there:
    return None
  return ("{} result file(s) of --model_name={} are in --save_dir={} already "
          "(e.g. {}); add --overwrite to replace them, or give another "
          "--model_name or --save_dir.".format(
              len(there), flag_values.model_name, flag_values.save_dir,
              os.path.basename(there[0])))


def step_transforms(flag_values):
  """The step transforms (:mod:`l2o_scale.steps`) the flags ask for."""
  return step_settings.step_transforms_from(
      weight_decay=flag_values.weight_decay,
      step_schedule=flag_values.step_schedule,
      step_decay_start=flag_values.step_decay_start,
      hold_zero_gradients=flag_values.hold_zero_gradients)


def _prepare(flag_values):
  """Checks the flags, builds the problems and the optimizer; returns
  (seeds, problems, optimizer). ValueError for a refused command."""
  errors = check_flags(flag_values)
  if errors:
    raise ValueError("invalid flags: " + "; ".join(errors))
  seeds = [int(s) for s in flag_values.seeds]
  if flag_values.flatness_probes and flag_values.heldout_every <= 0:
    raise ValueError("--flatness_probes measures the solution of a "
                     "--heldout_every run; pass --heldout_every=N too.")
  save_dir = flag_values.save_dir
  if os.path.exists(save_dir) and not os.path.isdir(save_dir):
    raise ValueError("--save_dir={} is a file, not a folder; give a "
                     "folder.".format(save_dir))
  problems = build_problems(flag_values)
  if not problems:
    raise ValueError(
        "No test problem selected. Pass one of: {}".format(", ".join(
            "--" + n for n, _ in EVALUATION_PROBLEM_FLAGS)))
  existing = existing_results_problem(flag_values, problems, seeds)
  if existing:
    raise ValueError(existing)
  opt, _ = build_optimizer(flag_values)
  note = long_run_note(flag_values)
  if note:
    print(note, flush=True)
  step_transforms(flag_values).check(opt)
  return seeds, problems, opt


def run(flag_values):
  """Runs every selected problem with every seed; returns written paths."""
  seeds, problems, opt = _prepare(flag_values)
  if not flag_values["save_dir"].present:
    print("results go to --save_dir={} (the original's default; pass "
          "--save_dir to choose)".format(flag_values.save_dir))
  os.makedirs(flag_values.save_dir, exist_ok=True)
  written = []
  for k, entry in enumerate(problems):
    run_cache = testing.RunCache()  # The seeds share one compiled loop.
    problem = entry[1].build()
    for seed in seeds:
      # The run record goes with the first result file, not before: a run
      # stopped before any result leaves --save_dir as it was.
      record = None if written else (
          lambda: write_run_record(flag_values, problems))
      written.extend(_run_seed(flag_values, opt, k, len(problems), entry,
                               problem, seed, run_cache, record))
  return written


def write_run_record(flag_values, problems):
  """``metatest_record-<model_name>.json``: the problems of the run by
  label, in the order of their -problem<k> suffix, for the results command
  (result_files.run_record)."""
  path = os.path.join(flag_values.save_dir, result_files.RUN_RECORD.format(
      model_name=flag_values.model_name))
  with atomic_file.replace(path) as f:
    json.dump(result_files.run_record(
        flag_values.model_name, flag_values.test_optimizer,
        [(entry[0], entry[-1]) for entry in problems]), f, indent=1)
  return path


def _progress_printer(seed):
  def progress(info):
    print("  seed {} step {}/{}: objective {:.5g}, {:.1f} steps/s".format(
        seed, info["iteration"], info["num_iter"], info["objective"],
        info["steps_per_second"]) + (
            " (first chunk: includes compiling)"
            if info["includes_compile"] else ""), flush=True)
  return progress


def _test_seed(flag_values, opt, problem, dataset, batch_size, heldout, seed,
               run_cache):
  """One test run (with XLA when --jit_compile, without it if XLA cannot
  compile the problem): (objective values, final parameters, records)."""

  def test(jit_compile):
    return testing.test_optimizer(
        opt, problem, num_iter=flag_values.num_testing_itrs,
        dataset=dataset, batch_size=batch_size, seed=seed, logdir=None,
        record_every=None, heldout_dataset=heldout,
        heldout_every=flag_values.heldout_every or None,
        progress=_progress_printer(seed),
        progress_every=flag_values.progress_every, jit_compile=jit_compile,
        run_cache=run_cache, step_transforms=step_transforms(flag_values))

  if flag_values.jit_compile:
    try:
      return test(True)
    except (tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError) as e:
      print("  XLA cannot compile this problem ({}); continuing without "
            "XLA.".format(str(e).strip().splitlines()[0][:200]), flush=True)
  return test(False)


def _run_seed(flag_values, opt, k, num_problems, entry, problem, seed,
              run_cache, write_record=None):
  """Tests seed ``seed`` on problem ``k``; writes its result files (after
  calling ``write_record``, if given) and returns their paths."""
  flag_name, spec, dataset, batch_size, heldout, label = entry
  print("testing {} ({}) with {} using seed {}".format(
      flag_name, label, flag_values.test_optimizer, seed), flush=True)
  start = time.time()
  objective_values, final_params, records = _test_seed(
      flag_values, opt, problem, dataset, batch_size, heldout, seed,
      run_cache)
  elapsed = time.time() - start
  path = os.path.join(flag_values.save_dir, _result_name(
      RESULT_PATTERNS[0], seed, flag_values.model_name, k, num_problems))
  if write_record is not None:
    write_record()
  with atomic_file.replace(path, "wb") as f:
    pickle.dump(objective_values, f)
  print("  wrote {} (final objective {:.5g}, {:.1f} s)".format(
      path, float(objective_values[-1]), elapsed), flush=True)
  if heldout is None:
    return [path]
  heldout_path = os.path.join(flag_values.save_dir, _result_name(
      RESULT_PATTERNS[1], seed, flag_values.model_name, k, num_problems))
  report = heldout_report(records, flag_name, spec, seed, flag_values,
                          dataset, heldout)
  report["problem_label"] = label
  if flag_values.flatness_probes > 0:
    report.update(flatness(problem, final_params, dataset,
                           flag_values.flatness_probes))
    print("  flatness at the final parameters: Hessian trace {:.5g}, "
          "top eigenvalue {:.5g}".format(
              report["hessian_trace"], report["hessian_top_eigenvalue"]),
          flush=True)
  with atomic_file.replace(heldout_path) as f:
    json.dump(report, f, indent=1)
  print("  wrote {} (held-out loss {:.5g}, accuracy {:.4f})".format(
      heldout_path, records["heldout_loss"][-1],
      records["heldout_accuracy"][-1]), flush=True)
  return [path, heldout_path]


def flatness(problem, params, dataset, num_probes):
  """Hessian trace and top eigenvalue of the train-split objective at params."""
  data = tf.constant(np.asarray(dataset.data, np.float32))
  labels = tf.constant(np.asarray(dataset.labels).astype(np.int32))
  values = curvature.solution_flatness(
      lambda p: problem.objective(p, data, labels), params,
      num_samples=num_probes, num_iters=FLATNESS_POWER_ITERATIONS)
  values.update(flatness_split="train ({} rows)".format(len(dataset.data)),
                flatness_probes=num_probes,
                flatness_power_iterations=FLATNESS_POWER_ITERATIONS)
  return values


def heldout_report(records, flag_name, spec, seed, flag_values, train, heldout):
  """The JSON-serialisable generalization record of one run."""
  return {
      "problem_set": flag_name,
      "problem": repr(spec),
      "test_optimizer": flag_values.test_optimizer,
      "restore_model_name": flag_values.restore_model_name,
      "seed": seed,
      "train_split_size": int(len(train.data)),
      "heldout_split_size": int(len(heldout.data)),
      "note": ("iteration = number of optimizer updates done; train_* over "
               "the whole train split the optimizee is trained on, heldout_* "
               "over the held-out test split."),
      "iteration": [int(i) for i in records["heldout_iter"]],
      "train_loss": [float(v) for v in records["train_loss"]],
      "train_accuracy": [float(v) for v in records["train_accuracy"]],
      "heldout_loss": [float(v) for v in records["heldout_loss"]],
      "heldout_accuracy": [float(v) for v in records["heldout_accuracy"]],
      "step_schedule": flag_values.step_schedule,
      "step_decay_start": flag_values.step_decay_start,
      "weight_decay": flag_values.weight_decay,
      "hold_zero_gradients": flag_values.hold_zero_gradients,
  }


def main(argv):
  """The program's work, under absl's flags; its refusals and Ctrl-C end
  as in every entry point (:func:`l2o_scale.runs.entry_point.run_main`)."""
  FLAGS.mark_as_parsed()
  if len(argv) > 1:
    raise ValueError("unexpected arguments: {}".format(" ".join(argv[1:])))
  try:
    run(FLAGS)
  except OSError as e:
    if not _save_dir_error(e, FLAGS.save_dir):
      raise
    raise entry_point.Refusal(
        "writing {} failed: {}. Give another --save_dir (or free space if "
        "the disk is full).".format(e.filename or FLAGS.save_dir,
                                    e.strerror or e)) from None
  return 0


def _save_dir_error(error, save_dir):
  """Whether ``error`` is the system's, writing under ``save_dir`` (a full
  or read-only disk; a write error names no file), not a library's own
  (a damaged checkpoint) or another file's."""
  if type(error).__module__ != "builtins":
    return False
  if error.filename is None:
    return True
  inside = os.path.abspath(str(error.filename))
  folder = os.path.abspath(save_dir)
  return inside == folder or inside.startswith(folder + os.sep)


def run_program():
  """The program: its flags join absl's registry (for --help and
  parsing), then :func:`main`."""
  programs.install(FLAGS)
  app.run(main, flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main("metatest.py", run_program, interrupted=INTERRUPTED)
