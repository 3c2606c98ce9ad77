"""Meta-trains a learned optimizer (port of L2O-Entropy ``metarun.py``).

Same absl flags, meanings and defaults as the original (``metarun.py``
l.36-140, plus the flags the original defined in ``metaopt.py``,
``optimizer/trainable_optimizer.py``, ``optimizer/hierarchical_rnn.py`` and
``problems/problem_generator.py``), declared once in
``l2o_scale/config`` (the fields of its configuration dataclasses).
New flags:
NEW_FLAGS.

Example (the paper's regularized variant)::

  python metarun.py --train_dir=hess_cl_mt --reg_optimizer=True \\
      --reg_option=hessian-esd --data_dir=../shared/data/mnist

Checkpoints go to ``<train_dir>/<optimizer>_<cell_cls>_<cell_size>_<num_cells>/
model.ckpt-K`` (``model.ckpt-0`` is the best evaluated model).
"""

import os
import random
import re
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top
# What Ctrl-C's line adds; from the start on (TensorFlow loads for seconds).
INTERRUPTED = "resume with the same command."
if __name__ == "__main__":
  entry_point.interrupt_while_starting("metarun.py", INTERRUPTED)
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.config import recipes
from l2o_scale.meta_training import config as training_lib
from l2o_scale.meta_training import distributed
from l2o_scale.meta_training import training as training_run
from l2o_scale.runs import checkpoints
from l2o_scale.runs import dir_lock
from l2o_scale.runs import run_record
from problems import datasets
from problems import problem_sets as ps

# The classes whose fields are this program's flags.
CONFIG_CLASSES = (programs.MetarunConfig, training_lib.Schedule,
                  training_lib.TrainingConfig, optimizer_flags.OptimizerConfig)


def define_flags(module_name="metarun"):
  """A fresh ``FlagValues`` holding every metarun.py flag: the fields of
  :data:`CONFIG_CLASSES` and the training sets' include_* flags."""
  values = flags.FlagValues()
  for cls in CONFIG_CLASSES:
    config_flags.define_flags(cls, module_name, values)
  programs.define_training_set_flags(values, module_name)
  return values


# This program's own flags, in their own FlagValues: importing metatest.py
# too changes none of them.
FLAGS = define_flags()
__doc__ = __doc__.replace("NEW_FLAGS", programs.new_flags_line(
    FLAGS, programs.ORIGINAL_METARUN_FLAGS))

# include_* flag -> problem set (original metarun.py main(), in its order).
INCLUDE_FLAGS = ps.TRAINING_SET_FLAGS

DEFAULT_SET = "mnist_mlp_problems"


def selected_problems(flag_values, out=sys.stdout):
  """The training problems chosen by the include_* flags (original order)."""
  problems_and_data = []
  for flag_name, set_name, _ in INCLUDE_FLAGS:
    if getattr(flag_values, flag_name):
      problems_and_data.extend(ps.get(set_name, data_dir=flag_values.data_dir))
      if (flag_name == "include_sparse_gradient_problems" and
          flag_values.include_fully_connected_random_2_class_problems):
        problems_and_data.extend(ps.sparse_gradient_problems_mlp())
  if not problems_and_data:
    out.write("No --include_* flag given: training on the L2O-Entropy setting, "
              "{} (MNIST MLP 784-20-10, sigmoid, batch 128).\n".format(
                  DEFAULT_SET))
    problems_and_data = ps.get(DEFAULT_SET, data_dir=flag_values.data_dir)
  return problems_and_data


def stray_arguments(argv):
  """Error line for positional words absl left over, or None.

  ``--fix_unroll False`` parses as --fix_unroll (True) plus a stray "False":
  the message shows the ``--flag=False`` form.
  """
  stray = argv[1:]
  if not stray:
    return None
  for word in stray:
    if word.lower() in ("true", "false"):
      index = sys.argv.index(word) if word in sys.argv else 0
      flag = sys.argv[index - 1].lstrip("-") if index > 0 else "FLAG"
      return ("unexpected argument {!r}: boolean flags take their value "
              "after '=', e.g. --{}={}".format(word, flag, word))
  return "unexpected arguments: {} (flags are --name=value)".format(
      " ".join(stray))


def check_flags(flag_values):
  """Error lines for flags out of their declared bounds or non-finite
  (l2o_scale.config: the fields' bounds), and for combinations the original
  would crash on or silently misuse."""
  errors = programs.validate(CONFIG_CLASSES, flag_values)
  if flag_values.fix_unroll and (
      flag_values.fix_num_steps < flag_values.fix_unroll_length):
    errors.append("--fix_num_steps ({}) must be at least --fix_unroll_length "
                  "({}) or no unroll runs".format(flag_values.fix_num_steps,
                                                  flag_values.fix_unroll_length))
  if flag_values.fix_num_steps_eval < flag_values.fix_unroll_length:
    errors.append("--fix_num_steps_eval ({}) must be at least "
                  "--fix_unroll_length ({})".format(
                      flag_values.fix_num_steps_eval,
                      flag_values.fix_unroll_length))
  if flag_values.selection_set and (
      flag_values.selection_set not in ps.TRAINING_SETS):
    errors.append("--selection_set={!r} is not a training problem set; "
                  "known: {}".format(flag_values.selection_set,
                                     ", ".join(ps.TRAINING_SETS)))
  if (flag_values.mix_problems and flag_values.selection == "robust" and
      not flag_values.selection_set):
    errors.append("--mix_problems with --selection=robust needs "
                  "--selection_set (scores on the problem of the moment are "
                  "not comparable)")
  if flag_values.mix_problems and flag_values.num_problems != 1:
    errors.append("--mix_problems draws a problem per meta-iteration; "
                  "--num_problems must stay 1")
  if (flag_values.selection_objective != "same" and
      flag_values.selection != "robust"):
    errors.append("--selection_objective={} scores the --selection=robust "
                  "runs; it needs --selection=robust".format(
                      flag_values.selection_objective))
  if (flag_values.fast_forward_init != "same" and
      flag_values.fast_forward_max_steps <= 0):
    errors.append("--fast_forward_init={} needs --fast_forward_max_steps > 0"
                  .format(flag_values.fast_forward_init))
  try:
    seeds = [int(s) for s in flag_values.selection_seeds]
    if not seeds:
      errors.append("--selection_seeds is empty")
  except ValueError:
    errors.append("--selection_seeds must be integers, got {}".format(
        ",".join(flag_values.selection_seeds)))
  errors.extend(optimizer_flags.check_optimizer_flags(flag_values))
  if ((flag_values.use_relative_lr or flag_values.use_extreme_indicator) and
      not flag_values.dynamic_output_scale):
    errors.append("--use_relative_lr / --use_extreme_indicator need "
                  "--dynamic_output_scale=True")
  shipped = programs.shipped_folder_problem(flag_values.train_dir,
                                           "train_dir")
  if shipped:
    errors.append(shipped)
  return list(dict.fromkeys(errors))  # The optimizer's bounds come twice.


# The regularizer's flags and which switch makes each take effect.
REGULARIZER_FLAGS = (("reg_option", ("reg_optimizer", "reg_optimizee")),
                     ("hessian_itrs", ("reg_optimizer", "reg_optimizee")),
                     ("alpha", ("reg_optimizer",)),
                     ("regularize_time", ("reg_optimizer",)),
                     ("reg_scale", ("reg_optimizer",)),
                     ("beta", ("reg_optimizee",)))


def regularizer_note(flag_values):
  """The note for regularizer flags given while the regularizer they set is
  off (e.g. the paper's ``--reg_option=hessian-esd`` alone), or None."""
  idle = [name for name, switches in REGULARIZER_FLAGS
          if flag_values[name].value != flag_values[name].default and
          not any(flag_values[s].value for s in switches)]
  if not idle:
    return None
  return ("{} {} no effect: the regularizer is off (original behaviour). "
          "--reg_optimizer=True regularizes the optimizer (L2O-Entropy's "
          "setting; alpha, regularize_time, reg_scale), --reg_optimizee=True "
          "the optimizee (beta).".format(
              ", ".join(run_record.format_flag(n, flag_values[n].value)
                        for n in idle), "has" if len(idle) == 1 else "have"))


def warnings_for(flag_values):
  """Legal but surprising combinations, reported (behaviour is the original's)."""
  notes = [note for note in [regularizer_note(flag_values)] if note]
  if flag_values.reg_optimizer and flag_values.regularize_time == "none":
    notes.append("--regularize_time=none switches the optimizer regularizer "
                 "off in every unroll: with --reg_optimizer=True the "
                 "accumulated regularizer stays 0 (original behaviour; use "
                 "--regularize_time=always to apply it).")
  if (flag_values.recipe is None and
      flag_values.meta_learning_rate == flag_values["meta_learning_rate"].default):
    notes.append("the original's meta learning rate ({:g}) learns nothing "
                 "visible in hours on this problem; --recipe=fast (or "
                 "--recipe=stable) trains a useful optimizer (python "
                 "metarun.py --helpfull: recipe).".format(
                     flag_values.meta_learning_rate))
  if flag_values.if_cl and not flag_values.fix_unroll:
    notes.append("--if_cl uses --fix_unroll_length unrolls regardless of "
                 "--fix_unroll (original behaviour).")
  return notes


def training_config(flag_values):
  """The :class:`TrainingConfig` of the parsed flags."""
  return config_flags.from_flags(training_lib.TrainingConfig, flag_values)


def schedule(flag_values):
  """The :class:`Schedule` of the parsed flags (metarun.py l.405-436): the
  draws of the unrolls are the original's (``sample_numiter`` of the
  scale/minimum flags), the problems are drawn at random unless this task
  is the chief of several workers."""
  return config_flags.from_flags(
      training_lib.Schedule, flag_values,
      obj_train_max_multiplier=flag_values.objective_training_max_multiplier,
      select_random_problems=(flag_values.worker_tasks == 1 or
                              flag_values.task != 0))


def trainer_config(flag_values, logdir):
  """Everything the run is told: :class:`TrainerConfig` of the flags."""
  return training_lib.TrainerConfig(
      logdir=logdir, schedule=schedule(flag_values),
      training=training_config(flag_values), resume=flag_values.resume,
      summaries=flag_values.summaries)


def record_sections(flag_values):
  """(optimizer flags, training flags) of the run record: name -> value
  (every flag but the optimizer's and those that say how to treat the
  train dir)."""
  names = optimizer_flags.optimizer_flag_names()
  own = [n for n, f in flag_values._flags().items()  # pylint: disable=protected-access
         if n == f.name and n not in names and
         n not in programs.NOT_RECORDED]
  return ({n: flag_values[n].value for n in names},
          {n: flag_values[n].value for n in sorted(own)})


def prepare_logdir(logdir, flag_values, optimizer=None):
  """Checks the log dir against this run and writes the run record.

  Returns an error line, or None. ``--resume=False`` on a dir with
  checkpoints needs ``--overwrite`` (which deletes the old run first), so two
  runs never mix; a run whose flags differ from the record is refused with
  every differing flag named (``--data_dir`` too, unless
  ``--allow_data_change``). A resumed run first checks the ``checkpoint``
  state file (checkpoints.latest_checkpoint) and that the latest checkpoint
  reads and fits ``optimizer`` (built from the flags when None): a dir
  without a record gets one only then, so a wrong command writes nothing.
  """
  problem = _clear_for_fresh_run(logdir, flag_values)
  if problem:
    return problem
  record = run_record.read(logdir)
  optimizer_values, training_values = record_sections(flag_values)
  if record is not None:
    problem = record_mismatch(record, flag_values,
                              dict(training_values, **optimizer_values))
    if problem:
      return problem
  latest = (checkpoints.latest_checkpoint(logdir) if flag_values.resume
            else None)
  if latest is not None:
    optimizer = optimizer or optimizer_flags.optimizer_spec(flag_values).build()
    checkpoints.read_meta_parameters(latest, optimizer)
  if record is not None:
    return None
  if latest is not None:
    print("Note: {} has no {}; its checkpoint {} fits this command's "
          "optimizer flags (variable shapes; values such as --max_log_lr "
          "cannot be checked), which are now recorded.".format(
              logdir, run_record.FILENAME, os.path.basename(latest)))
  run_record.write(logdir, flag_values.optimizer, optimizer_values,
                   training_values, " ".join(sys.argv))
  return None


def _clear_for_fresh_run(logdir, flag_values):
  """Removes what an interrupted save left; with ``--resume=False`` the
  earlier run too if ``--overwrite`` (else the error line)."""
  for name in os.listdir(logdir):  # Left by a save that was interrupted.
    if name.endswith("_temp") and name.startswith(
        checkpoints.CHECKPOINT_BASENAME):
      shutil.rmtree(os.path.join(logdir, name), ignore_errors=True)
  existing = checkpoints.list_checkpoints(logdir)
  if flag_values.resume or not (existing or os.path.exists(
      run_record.path(logdir))):
    return None
  if not flag_values.overwrite:
    return ("{} holds a run ({}); --resume=False would mix two runs. Add "
            "--overwrite to delete it first, or use another "
            "--train_dir.".format(logdir, ", ".join(existing) or
                                  run_record.FILENAME))
  shutil.rmtree(logdir)
  os.makedirs(logdir)
  return None


def _data_source(data_dir):
  return None if data_dir is None else os.path.realpath(data_dir)


def record_mismatch(record, flag_values, given):
  """The error line for a run whose flags differ from the train dir's run
  record (``given``: this run's recorded flags), or None. ``--data_dir``
  counts (the data the run trains on) unless ``--allow_data_change``."""
  differ = run_record.mismatches(record, given)
  recorded_data = record.get("training_flags", {}).get("data_dir")
  if (_data_source(recorded_data) != _data_source(flag_values.data_dir) and
      not flag_values.allow_data_change):
    differ.append(("data_dir", recorded_data, flag_values.data_dir))
  if not differ:
    return None
  return ("{} was trained with {}; this run gives {}. Use the same "
          "flags, another --train_dir, or --resume=False --overwrite to "
          "start over{}.".format(
              flag_values.train_dir,
              ", ".join(run_record.format_flag(n, r) for n, r, _ in differ),
              ", ".join(run_record.format_flag(n, g) for n, _, g in differ),
              " (--allow_data_change=True: train on the other data)"
              if any(n == "data_dir" for n, _, _ in differ) else ""))


def main(argv):
  """The program's work, under absl's flags. Ctrl-C (SIGINT) ends it with
  one line and status 130 (:func:`l2o_scale.runs.entry_point.run_main`;
  the lock is released on the way out; the checkpoints written so far
  resume exactly)."""
  logging.set_verbosity(logging.WARNING)
  FLAGS.mark_as_parsed()
  stray = stray_arguments(argv)
  if stray:
    sys.stderr.write("metarun.py: {}\n".format(stray))
    return 2
  errors = check_flags(FLAGS)
  try:
    task = distributed.cluster_task()  # None: single process, as always.
  except ValueError as e:
    task, errors = None, errors + [str(e)]
  if task is not None:
    errors += distributed.flag_mismatches(FLAGS, *task)
    if task[0] == "chief":
      errors += distributed.unsupported(FLAGS)
  if errors:  # One line per refused flag, before any work.
    sys.stderr.write("metarun.py: invalid flag: {}\n".format(errors[0])
                     if len(errors) == 1 else
                     "metarun.py: invalid flags:\n  " + "\n  ".join(errors) +
                     "\n")
    return 2
  if task is not None and task[0] != "chief":
    return distributed.serve(*task)
  for note in warnings_for(FLAGS):
    print("Note: " + note)
  if FLAGS.seed is not None:
    np.random.seed(FLAGS.seed)
    random.seed(FLAGS.seed)
    tf.random.set_seed(FLAGS.seed)
  return _build_and_train(task)


def _build_and_train(task):
  """Builds the optimizer and the problems, takes the train dir's lock and
  trains; every refusal is one line and exit status 2."""
  try:
    spec = optimizer_flags.optimizer_spec(FLAGS)
    optimizer = spec.build()  # Fails fast on inconsistent optimizer options.
    problems_and_data = selected_problems(FLAGS)
    selection_problems = (
        ps.get_training_triples(FLAGS.selection_set, data_dir=FLAGS.data_dir)
        if FLAGS.selection_set else None)
  except (ValueError, TypeError, datasets.DataNotFoundError) as e:
    sys.stderr.write("metarun.py: {}\n".format(e))
    return 2
  logdir = os.path.join(FLAGS.train_dir,
                        optimizer_flags.checkpoint_subdir(FLAGS))
  problem = _train_dir_problem()
  if problem:
    sys.stderr.write("metarun.py: {}\n".format(problem))
    return 2
  try:
    os.makedirs(logdir, exist_ok=True)
    lock = dir_lock.acquire(FLAGS.train_dir, " ".join(sys.argv))
  except dir_lock.LockedError as e:
    sys.stderr.write("metarun.py: {}\n".format(e))
    return 2
  except OSError as e:
    sys.stderr.write("metarun.py: {}\n".format(_file_error(e, logdir)))
    return 2
  try:
    return _train_locked(logdir, spec, optimizer, problems_and_data, task,
                         selection_problems)
  finally:
    dir_lock.release(lock)


def _train_dir_problem():
  """The error line for a --train_dir that is a file or the checkpoint
  folder itself, or None."""
  if os.path.exists(FLAGS.train_dir) and not os.path.isdir(FLAGS.train_dir):
    return ("--train_dir={} is a file, not a folder; give a folder.".format(
        FLAGS.train_dir))
  return checkpoints.checkpoint_folder_given(
      FLAGS.train_dir, optimizer_flags.checkpoint_subdir(FLAGS))


def _file_error(e, logdir):
  """One line for a failed read or write in the train dir: the file (when
  the error names it), the reason and what to do."""
  if isinstance(e, OSError) and e.filename:
    what, reason = e.filename, e.strerror or str(e)
  else:
    what = logdir
    reason = (getattr(e, "message", None) or str(e)).strip().splitlines()[0]
    # TF's file errors read "{{function_node ...}} <path>; <reason> [Op:X]".
    named = (re.search(r"(\S+); ([^\[]+)", reason)
             if isinstance(e, tf.errors.OpError) else None)
    if named:
      what, reason = named.group(1), named.group(2).strip()
  return ("reading or writing {} failed: {}. If the disk is full or "
          "read-only, free space or give another --train_dir; if a checkpoint "
          "is damaged (truncated .data, empty .index), restore it, name an "
          "earlier one in the 'checkpoint' file, or start over with "
          "--resume=False --overwrite."
          .format(what, reason))


def names_logdir(error, logdir):
  """Whether a TensorFlow error came from a file in ``logdir`` (the run's
  folder inside --train_dir, where every file the run writes lives).

  TF's file systems name the file they failed on ("<path>; No space left on
  device", as the checkpoint and summary writers report it). An error of the
  computation itself (incompatible shapes, an out-of-memory
  ResourceExhaustedError, a bug) names no such file: metarun lets it through
  with its traceback instead of calling it a disk problem.
  """
  message = getattr(error, "message", None) or str(error)
  return any(path in message
             for path in (logdir, os.path.abspath(logdir)))


def cannot_resume(error, logdir):
  """One line for a checkpoint a run cannot resume from (it does not fit,
  it is damaged, or the ``checkpoint`` state file is wrong)."""
  start_over = "or start over with --resume=False --overwrite"
  if isinstance(error, checkpoints.DamagedCheckpointError):
    return ("cannot resume: {}. Restore the file from a copy, name an earlier "
            "checkpoint in {} (model_checkpoint_path: \"{}\"; there: {}), "
            "{}.".format(
                error.damage, os.path.join(logdir, checkpoints.STATE_FILENAME),
                (error.others or ["model.ckpt-K"])[-1],
                ", ".join(error.others) or "none", start_over))
  if isinstance(error, checkpoints.CheckpointStateError):
    return "cannot resume: {} ({}).".format(error, start_over)
  return "cannot resume: {} Use another --train_dir, {}.".format(error,
                                                                  start_over)


RESUME_ERRORS = (checkpoints.CheckpointMismatchError,
                 checkpoints.DamagedCheckpointError,
                 checkpoints.CheckpointStateError)


def _train_locked(logdir, spec, optimizer, problems_and_data, task,
                  selection_problems=None):
  """The run itself, while this process holds the train dir's lock."""
  try:
    problem = prepare_logdir(logdir, FLAGS, optimizer)
  except RESUME_ERRORS as e:
    problem = cannot_resume(e, logdir)
  except OSError as e:
    problem = _file_error(e, logdir)
  except ValueError as e:
    problem = str(e)
  if problem:
    sys.stderr.write("metarun.py: {}\n".format(problem))
    return 2
  print("Meta-training {} into {}".format(FLAGS.optimizer, logdir), flush=True)
  if FLAGS.set_profiling:
    tf.profiler.experimental.start(logdir)
  try:
    result = train(trainer_config(FLAGS, logdir), spec, problems_and_data,
                   task, selection_problems)
  except RESUME_ERRORS as e:
    sys.stderr.write("metarun.py: {}\n".format(cannot_resume(e, logdir)))
    return 2
  except (tf.errors.OpError, OSError) as e:
    if isinstance(e, tf.errors.OpError) and not names_logdir(e, logdir):
      raise  # The computation failed, not the disk: keep TF's traceback.
    sys.stderr.write("metarun.py: {}\n".format(_file_error(e, logdir)))
    return 2
  except distributed.ClusterLostError as e:
    sys.stderr.write("metarun.py: lost the parameter server or every "
                     "worker; restart the cluster: the chief resumes from the "
                     "last checkpoint. ({})\n".format(str(e).splitlines()[0]))
    return 1
  finally:
    if FLAGS.set_profiling:
      tf.profiler.experimental.stop()
  if result.get("stopped_by_divergence"):
    print("Done (stopped: --on_divergence=stop). Latest checkpoint: "
          "{}".format(result["last_checkpoint"]))
    return 3
  return report_end(result, logdir)


def train(config, spec, problems_and_data, task, selection_problems=None):
  """Meta-trains in this process (``task`` None) or as the chief of a
  cluster; returns the run's result dict."""
  if task is None:
    return training_run.run_meta_training(
        config, spec, problems_and_data,
        selection_problems=selection_problems)
  return distributed.run_distributed_meta_training(config, spec,
                                                   problems_and_data)


def report_end(result, logdir):
  """The end-of-run line: which checkpoint is the best model; a run whose
  every evaluation was non-finite (diverged) exits 3 saying what to try."""
  if (not FLAGS.if_cl and result.get("evaluations") and
      not np.isfinite(result["best_evaluation"])):
    sys.stderr.write(
        "metarun.py: meta-training diverged: all {} evaluation(s) gave a "
        "non-finite cost, so no best model (model.ckpt-0) was written; the "
        "latest checkpoint {} holds diverged meta-parameters. Try a smaller "
        "--meta_learning_rate (now {}) or --gradient_clip_level (now {}), "
        "and --resume=False --overwrite.\n".format(
            result["evaluations"], result["last_checkpoint"],
            FLAGS.meta_learning_rate, FLAGS.gradient_clip_level))
    return 3
  best = os.path.join(logdir, checkpoints.CHECKPOINT_BASENAME + "-0")
  if result.get("best_model_idx") is not None and not FLAGS.if_cl:
    best_line = ("Best model: {} ({} {:.6g}, from meta-iteration {}); latest "
                 "checkpoint: {}".format(
                     best, "robust score" if FLAGS.selection == "robust"
                     else "evaluation cost", result["best_evaluation"],
                     result["best_model_idx"], result["last_checkpoint"]))
  elif result.get("best_model_idx") is not None:  # curriculum: no cost, as
    # its best cost is re-measured at each stage's horizon.
    best_line = ("Best model: {} (from meta-iteration {}); latest checkpoint: "
                 "{}".format(best, result["best_model_idx"],
                             result["last_checkpoint"]))
  else:
    best_line = "Best model: {}; latest checkpoint: {}".format(
        best, result["last_checkpoint"])
  print("{} {}".format(learning_verdict(result), best_line))
  return 0


def learning_verdict(result):
  """The start of the end-of-run line: whether the run learned, i.e. whether
  a later evaluation improved on the first one. Without a curriculum the
  best selection value is compared with the first evaluation's
  (``result["first_evaluation"]``); a curriculum's best cost changes horizon
  with its stage, so there the best model must come from a later
  meta-iteration than the first evaluation."""
  period = FLAGS.evaluation_period
  if result.get("meta_iterations", 0) // period < 2:
    return ("Done. One evaluation only, so whether it learned is not "
            "measured (one every --evaluation_period={} meta-iterations; "
            "more --num_meta_iterations tell).".format(period))
  first = result.get("first_evaluation")
  best_idx = result.get("best_model_idx")
  if not FLAGS.if_cl and first is not None:
    learned = result["best_evaluation"] < first
  elif best_idx is not None:
    learned = best_idx > period
  else:
    return "Done (whether it learned is not known for this run)."
  # The evaluation lines print the cost; with --selection=robust the best
  # model is chosen, and compared here, by the robust score instead.
  measure = ("robust selection score" if FLAGS.selection == "robust"
             else "evaluation cost")
  if learned:
    if not FLAGS.if_cl and first is not None:
      return ("Done. It learned: the best {} ({:.6g}) improved on the "
              "first ({:.6g}).".format(measure, result["best_evaluation"],
                                       first))
    return "Done. It learned: a later evaluation improved on the first."
  hint = "try another"
  if FLAGS.meta_learning_rate == FLAGS["meta_learning_rate"].default:
    hint = ("the original's default, which learns nothing visible in hours "
            "on this problem; --recipe=fast trains a useful optimizer")
  return ("Done, but it learned nothing: no evaluation improved on the first "
          "one{} in {} meta-iterations (--meta_learning_rate={:g}: {})."
          .format("" if first is None else " ({} {:.6g})".format(measure,
                                                                first),
                  result["meta_iterations"], FLAGS.meta_learning_rate, hint))


def run():
  """The program: its flags join absl's registry (for --help and parsing),
  a --recipe expands to its flagfile, then :func:`main`; refusals and
  Ctrl-C end as in every entry point (:mod:`l2o_scale.runs.entry_point`)."""
  programs.install(FLAGS)
  app.run(main, argv=recipes.expand(sys.argv),
          flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main("metarun.py", run, interrupted=INTERRUPTED)
