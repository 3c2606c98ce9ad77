"""A meta-test run, as ``metatest.py`` does it: :func:`run` of a
:class:`~l2o_scale.meta_testing.metatest_config.MetatestConfig`.

Port of ``main`` of the evaluation script (Evaluation metatest.py
l.290-400): for every selected problem and every seed, the optimizer runs
``num_testing_itrs`` steps from a fresh start
(:func:`l2o_scale.meta_testing.testing.test_optimizer`) and the list of
per-step objectives is pickled to
``<save_dir>/seed<S>_eval_loss_record.pickle-<model_name>``; with
``heldout_every`` also a JSON record of the held-out split
(:mod:`l2o_scale.meta_testing.result_files` names the files).
"""

import collections
import contextlib
import json
import os
import pickle
import time

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import metatest_config
from l2o_scale.meta_testing import result_files
from l2o_scale.meta_testing import tested_optimizer
from l2o_scale.meta_testing import testing
from l2o_scale.runs import atomic_file
from problems import curvature
from problems import problem_sets as ps
from problems import registry

FLATNESS_POWER_ITERATIONS = 20
RESULT_PATTERNS = result_files.RESULT_PATTERNS

# The optimizer under test and what is attached to its step
# (:class:`metatest_config.StepPlan`), built once per command.
Tested = collections.namedtuple("Tested", "optimizer plan")


class SaveDirError(OSError):
  """Writing under ``--save_dir`` failed (a full or read-only disk):
  ``filename`` the file or folder, ``strerror`` the system's reason. Only
  the run's own writes raise it, so that no other file error (a missing
  checkpoint) reads as the disk's."""


@contextlib.contextmanager
def writing(path):
  """Around a write of ``path`` under ``--save_dir``: its OSError becomes a
  :class:`SaveDirError` naming the file."""
  try:
    yield
  except SaveDirError:
    raise
  except OSError as e:
    raise SaveDirError(e.errno, e.strerror or str(e),
                       e.filename or path) from e


def run(config):
  """Runs every selected problem with every seed; returns the written
  paths. Refuses a config that :func:`metatest_config.validate` refuses,
  and result files of the same model name (without ``overwrite``), before
  any work (ValueError)."""
  seeds, problems, tested = _prepare(config)
  with writing(config.save_dir):
    os.makedirs(config.save_dir, exist_ok=True)
  written = []
  for k, entry in enumerate(problems):
    run_cache = testing.RunCache()  # The seeds share one compiled loop.
    problem = entry[1].build()
    for seed in seeds:
      # The run record goes with the first result file, not before: a run
      # stopped before any result leaves --save_dir as it was.
      record = None if written else (
          lambda: write_run_record(config, problems))
      written.extend(_run_seed(config, tested, k, len(problems), entry,
                               problem, seed, run_cache, record))
  return written


def _prepare(config):
  """Validates the config, builds the problems and the optimizer; returns
  (seeds, problems, optimizer)."""
  notes = metatest_config.validate(config)
  seeds = config.seed_list()
  problems = build_problems(config)
  for entry in problems:
    try:
      testing.check_batch_schedule(config.num_testing_itrs, entry[2],
                                   entry[3])
    except ValueError as e:
      raise ValueError("--num_testing_itrs={}: {}".format(
          config.num_testing_itrs, e)) from None
  existing = existing_results_problem(config, problems, seeds)
  if existing:
    raise ValueError(existing)
  opt, _ = tested_optimizer.build(config)
  for note in notes:
    print(note, flush=True)
  # The head (given, or the --pretrained optimizer's) is read here, once
  # for every problem and seed.
  plan = metatest_config.step_plan(config)
  plan.transforms.check(opt)
  return seeds, problems, Tested(opt, plan)


def build_problems(config):
  """List of (flag, spec, dataset, batch_size, heldout dataset or None,
  label): the label names the problem in output and result files
  (result_files.problem_label).

  A problem of a dataset with a held-out split (problems/registry.py)
  trains on its train split whether or not ``heldout_every`` measures the
  held-out one, so that measuring changes nothing of the run it measures;
  ``optimizee_split="test"`` keeps the original evaluation's problem sets
  as they are, training on the test split."""
  out = []
  for flag_name, fn in metatest_config.selected_problem_sets(config):
    entries = ps.get(fn, data_dir=config.data_dir)
    train_split = heldout = None
    registered = registry.by_flag().get(flag_name)
    if registered is not None and config.optimizee_split == "train":
      train_split, test_split = registered.splits(config.data_dir)
    if config.heldout_every > 0:
      # validate() accepts --heldout_every with registered problems only.
      heldout = test_split
      same = same_rows_note(flag_name, train_split, heldout)
      if same:
        print(same, flush=True)
    for i, (spec, dataset, batch_size) in enumerate(entries):
      if train_split is not None:
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


def _result_path(config, pattern, seed, k, num_problems):
  return os.path.join(config.save_dir, result_files.result_name(
      pattern, seed, config.model_name, k, num_problems))


def result_paths(config, problems, seeds):
  """Every result file the run writes, in order."""
  patterns = RESULT_PATTERNS if config.heldout_every > 0 else (
      RESULT_PATTERNS[:1])
  return [_result_path(config, pattern, seed, k, len(problems))
          for k in range(len(problems)) for seed in seeds
          for pattern in patterns]


def existing_results_problem(config, problems, seeds):
  """The error line when result files of this run are in --save_dir
  already (without --overwrite), or None."""
  if config.overwrite:
    return None
  there = [p for p in result_paths(config, problems, seeds)
           if os.path.exists(p)]
  if not there:
    return None
  return ("{} result file(s) of --model_name={} are in --save_dir={} already "
          "(e.g. {}); add --overwrite to replace them, or give another "
          "--model_name or --save_dir.".format(
              len(there), config.model_name, config.save_dir,
              os.path.basename(there[0])))


def write_run_record(config, problems):
  """``metatest_record-<model_name>.json``: the problems of the run by
  label, in the order of their -problem<k> suffix, for the results command
  (result_files.run_record)."""
  path = os.path.join(config.save_dir, result_files.RUN_RECORD.format(
      model_name=config.model_name))
  with writing(path), atomic_file.replace(path) as f:
    json.dump(result_files.run_record(
        config.model_name, config.test_optimizer,
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


def _test_seed(config, tested, problem, dataset, batch_size, heldout, seed,
               run_cache):
  """One test run (with XLA when jit_compile, without it if XLA cannot
  compile the problem): (objective values, final parameters, records)."""

  def test(jit_compile):
    return testing.test_optimizer(
        tested.optimizer, problem, num_iter=config.num_testing_itrs,
        dataset=dataset, batch_size=batch_size, seed=seed, logdir=None,
        record_every=None, heldout_dataset=heldout,
        heldout_every=config.heldout_every or None,
        progress=_progress_printer(seed),
        progress_every=config.progress_every, jit_compile=jit_compile,
        run_cache=run_cache, step_transforms=tested.plan.transforms)

  if config.jit_compile:
    try:
      return test(True)
    except (tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError) as e:
      print("  XLA cannot compile this problem ({}); continuing without "
            "XLA.".format(str(e).strip().splitlines()[0][:200]), flush=True)
  return test(False)


def _run_seed(config, tested, k, num_problems, entry, problem, seed,
              run_cache, write_record=None):
  """Tests seed ``seed`` on problem ``k``; writes its result files (after
  calling ``write_record``, if given) and returns their paths."""
  flag_name, _, dataset, batch_size, heldout, label = entry
  print("testing {} ({}) with {} using seed {}".format(
      flag_name, label, config.test_optimizer, seed), flush=True)
  start = time.time()
  objective_values, final_params, records = _test_seed(
      config, tested, problem, dataset, batch_size, heldout, seed, run_cache)
  elapsed = time.time() - start
  path = _result_path(config, RESULT_PATTERNS[0], seed, k, num_problems)
  if write_record is not None:
    write_record()
  with writing(path), atomic_file.replace(path, "wb") as f:
    pickle.dump(objective_values, f)
  print("  wrote {} (final objective {:.5g}, {:.1f} s)".format(
      path, float(objective_values[-1]), elapsed), flush=True)
  if heldout is None:
    return [path]
  return [path, _write_heldout(config, tested.plan.head_file, k,
                               num_problems, entry, problem, seed,
                               final_params, records)]


def _write_heldout(config, head_file, k, num_problems, entry, problem, seed,
                   final_params, records):
  """Writes the held-out record of one run (with the flatness at the final
  parameters when flatness_probes); returns its path."""
  flag_name, spec, dataset, _, heldout, label = entry
  path = _result_path(config, RESULT_PATTERNS[1], seed, k, num_problems)
  report = heldout_report(records, flag_name, spec, seed, config, dataset,
                          heldout, head_file)
  report["problem_label"] = label
  if config.flatness_probes > 0:
    report.update(flatness(problem, final_params, dataset,
                           config.flatness_probes))
    print("  flatness at the final parameters: Hessian trace {:.5g}, "
          "top eigenvalue {:.5g}".format(
              report["hessian_trace"], report["hessian_top_eigenvalue"]),
          flush=True)
  with writing(path), atomic_file.replace(path) as f:
    json.dump(report, f, indent=1)
  print("  wrote {} (held-out loss {:.5g}, accuracy {:.4f})".format(
      path, records["heldout_loss"][-1], records["heldout_accuracy"][-1]),
        flush=True)
  return path


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


def heldout_report(records, flag_name, spec, seed, config, train, heldout,
                   head_file=None):
  """The JSON-serialisable generalization record of one run
  (``head_file``: the schedule head it ran with, if any)."""
  return {
      "problem_set": flag_name,
      "problem": repr(spec),
      "test_optimizer": config.test_optimizer,
      "restore_model_name": config.restore_model_name,
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
      "step_schedule": config.step_schedule,
      "step_decay_start": config.step_decay_start,
      "weight_decay": config.weight_decay,
      "hold_zero_gradients": config.hold_zero_gradients,
      **({"schedule_head": head_file} if head_file else {}),
  }
