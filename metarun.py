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
from l2o_scale.meta_training import distributed
from l2o_scale.meta_training import run_end
from l2o_scale.meta_training import training as training_run
from l2o_scale.meta_training import validation
from l2o_scale.runs import checkpoints
from l2o_scale.runs import dir_lock
from l2o_scale.runs import run_record
from l2o_scale.tools import metarun_command as command
from problems import datasets

# This program's flags and the one RunConfig they give are declared in
# l2o_scale.tools.metarun_command, which tools that run what a metarun.py
# command describes share (they never import this script).
CONFIG_CLASSES = command.CONFIG_CLASSES
define_flags = command.define_flags
# This program's own flags, in their own FlagValues: importing metatest.py
# too changes none of them.
FLAGS = define_flags()
__doc__ = __doc__.replace("NEW_FLAGS", programs.new_flags_line(
    FLAGS, programs.ORIGINAL_METARUN_FLAGS))
INCLUDE_FLAGS = command.INCLUDE_FLAGS
DEFAULT_SET = command.DEFAULT_SET
run_config = command.run_config
selected_problems = command.selected_problems


def parse_config(argv, cluster=None):
  """The :class:`~l2o_scale.meta_training.training_config.RunConfig` of the
  metarun.py command line ``argv`` (program name first; a ``--recipe``
  expands first, as when metarun.py runs), parsed into flags of its own:
  this module's ``FLAGS`` stay as they are. ``cluster``: as for
  :func:`run_config`."""
  values = define_flags()
  values(recipes.expand(argv))
  return run_config(values, cluster)


def check_flags(flag_values):
  """Error lines of the parsed flags ``flag_values``: those of
  :func:`~l2o_scale.meta_training.validation.validate` for their
  :func:`run_config` in a single process."""
  return command.errors(run_config(flag_values))


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


def record_sections(config):
  """(optimizer flags, training flags) of the run record of ``config`` (a
  RunConfig): name -> value as the flag holds it (every flag but the
  optimizer's and those that say how to treat the train dir)."""
  own = dict(config_flags.flag_items(config.program) +
             config_flags.flag_items(config.schedule) +
             config_flags.flag_items(config.training))
  own.update((name, name in config.problem_sets)
             for name, _, _ in INCLUDE_FLAGS)
  return (dict(config_flags.flag_items(config.optimizer)),
          {n: own[n] for n in sorted(own) if n not in programs.NOT_RECORDED})


def prepare_logdir(logdir, config, optimizer=None):
  """Checks the log dir against this run (``config``: its RunConfig) and
  writes the run record.

  Returns an error line, or None. ``--resume=False`` on a dir with
  checkpoints needs ``--overwrite`` (which deletes the old run first), so two
  runs never mix; a run whose flags differ from the record is refused with
  every differing flag named (``--data_dir`` too, unless
  ``--allow_data_change``). A resumed run first checks the ``checkpoint``
  state file (checkpoints.latest_checkpoint) and that the latest checkpoint
  reads and fits ``optimizer`` (built from ``run`` when None): a dir
  without a record gets one only then, so a wrong command writes nothing.
  """
  problem = _clear_for_fresh_run(logdir, config.program)
  if problem:
    return problem
  record = run_record.read(logdir)
  optimizer_values, training_values = record_sections(config)
  if record is not None:
    problem = record_mismatch(record, config.program,
                              dict(training_values, **optimizer_values))
    if problem:
      return problem
  latest = (checkpoints.latest_checkpoint(logdir) if config.program.resume
            else None)
  if latest is not None:
    optimizer = optimizer or optimizer_flags.optimizer_spec(
        config.optimizer).build()
    checkpoints.read_meta_parameters(latest, optimizer)
  if record is not None:
    return None
  if latest is not None:
    print("Note: {} has no {}; its checkpoint {} fits this command's "
          "optimizer flags (variable shapes; values such as --max_log_lr "
          "cannot be checked), which are now recorded.".format(
              logdir, run_record.FILENAME, os.path.basename(latest)))
  run_record.write(logdir, config.optimizer.optimizer, optimizer_values,
                   training_values, " ".join(sys.argv))
  return None


def _clear_for_fresh_run(logdir, program):
  """Removes what an interrupted save left; with ``--resume=False`` the
  earlier run too if ``--overwrite`` (else the error line). ``program``:
  the run's MetarunConfig."""
  for name in os.listdir(logdir):  # Left by a save that was interrupted.
    if name.endswith("_temp") and name.startswith(
        checkpoints.CHECKPOINT_BASENAME):
      shutil.rmtree(os.path.join(logdir, name), ignore_errors=True)
  existing = checkpoints.list_checkpoints(logdir)
  if program.resume or not (existing or os.path.exists(
      run_record.path(logdir))):
    return None
  if not program.overwrite:
    return ("{} holds a run ({}); --resume=False would mix two runs. Add "
            "--overwrite to delete it first, or use another "
            "--train_dir.".format(logdir, ", ".join(existing) or
                                  run_record.FILENAME))
  shutil.rmtree(logdir)
  os.makedirs(logdir)
  return None


def _data_source(data_dir):
  return None if data_dir is None else os.path.realpath(data_dir)


def record_mismatch(record, program, given):
  """The error line for a run whose flags differ from the train dir's run
  record (``given``: this run's recorded flags; ``program``: its
  MetarunConfig), or None. ``--data_dir`` counts (the data the run trains
  on) unless ``--allow_data_change``."""
  differ = run_record.mismatches(record, given)
  recorded_data = record.get("training_flags", {}).get("data_dir")
  if (_data_source(recorded_data) != _data_source(program.data_dir) and
      not program.allow_data_change):
    differ.append(("data_dir", recorded_data, program.data_dir))
  if not differ:
    return None
  return ("{} was trained with {}; this run gives {}. Use the same "
          "flags, another --train_dir, or --resume=False --overwrite to "
          "start over{}.".format(
              program.train_dir,
              ", ".join(run_record.format_flag(n, r) for n, r, _ in differ),
              ", ".join(run_record.format_flag(n, g) for n, _, g in differ),
              " (--allow_data_change=True: train on the other data)"
              if any(n == "data_dir" for n, _, _ in differ) else ""))


def main(argv):
  """The program's work, under absl's flags: they become one RunConfig
  (:func:`run_config`), which is validated and then trained. Ctrl-C
  (SIGINT) ends it with one line and status 130
  (:func:`l2o_scale.runs.entry_point.run_main`; the lock is released on the
  way out; the checkpoints written so far resume exactly)."""
  logging.set_verbosity(logging.WARNING)
  FLAGS.mark_as_parsed()
  stray = stray_arguments(argv)
  if stray:
    sys.stderr.write("metarun.py: {}\n".format(stray))
    return 2
  try:
    cluster, cluster_error = distributed.cluster_task(), None  # None: one
  except ValueError as e:                                      # process.
    cluster, cluster_error = None, str(e)
  config = run_config(FLAGS, cluster)
  errors, notes = validation.validate(config)
  errors += [cluster_error] if cluster_error else []
  if errors:  # One line per refused flag, before any work.
    sys.stderr.write("metarun.py: invalid flag: {}\n".format(errors[0])
                     if len(errors) == 1 else
                     "metarun.py: invalid flags:\n  " + "\n  ".join(errors) +
                     "\n")
    return 2
  if cluster is not None and not config.is_chief:
    return distributed.serve(cluster)
  for note in notes:
    print("Note: " + note)
  if config.program.seed is not None:
    np.random.seed(config.program.seed)
    random.seed(config.program.seed)
    tf.random.set_seed(config.program.seed)
  return _build_and_train(config)


def _build_and_train(config):
  """Builds the optimizer and the problems of ``config`` (a RunConfig),
  takes the train dir's lock and trains; every refusal is one line and exit
  status 2."""
  train_dir = config.program.train_dir
  try:
    spec = optimizer_flags.optimizer_spec(config.optimizer)
    optimizer = spec.build()  # Fails fast on inconsistent optimizer options.
    problems_and_data = selected_problems(config)
    selection_problems = command.selection_problems(config)
  except (ValueError, TypeError, datasets.DataNotFoundError) as e:
    sys.stderr.write("metarun.py: {}\n".format(e))
    return 2
  logdir = os.path.join(train_dir,
                        optimizer_flags.checkpoint_subdir(config.optimizer))
  problem = _train_dir_problem(config)
  if problem:
    sys.stderr.write("metarun.py: {}\n".format(problem))
    return 2
  try:
    os.makedirs(logdir, exist_ok=True)
    lock = dir_lock.acquire(train_dir, " ".join(sys.argv))
  except dir_lock.LockedError as e:
    sys.stderr.write("metarun.py: {}\n".format(e))
    return 2
  except OSError as e:
    sys.stderr.write("metarun.py: {}\n".format(_file_error(e, logdir)))
    return 2
  try:
    return _train_locked(config, logdir, spec, optimizer, problems_and_data,
                         selection_problems)
  finally:
    dir_lock.release(lock)


def _train_dir_problem(config):
  """The error line for a --train_dir that is a file or the checkpoint
  folder itself, or None."""
  train_dir = config.program.train_dir
  if os.path.exists(train_dir) and not os.path.isdir(train_dir):
    return ("--train_dir={} is a file, not a folder; give a folder.".format(
        train_dir))
  return checkpoints.checkpoint_folder_given(
      train_dir, optimizer_flags.checkpoint_subdir(config.optimizer))


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


def _train_locked(config, logdir, spec, optimizer, problems_and_data,
                  selection_problems=None):
  """The run itself, while this process holds the train dir's lock."""
  try:
    problem = prepare_logdir(logdir, config, optimizer)
  except RESUME_ERRORS as e:
    problem = cannot_resume(e, logdir)
  except OSError as e:
    problem = _file_error(e, logdir)
  except ValueError as e:
    problem = str(e)
  if problem:
    sys.stderr.write("metarun.py: {}\n".format(problem))
    return 2
  print("Meta-training {} into {}".format(config.optimizer.optimizer, logdir),
        flush=True)
  if config.program.set_profiling:
    tf.profiler.experimental.start(logdir)
  try:
    result = train(config.trainer_config(logdir), spec, problems_and_data,
                   config.cluster, selection_problems)
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
    if config.program.set_profiling:
      tf.profiler.experimental.stop()
  if result.get("stopped_by_divergence"):
    print("Done (stopped: --on_divergence=stop). Latest checkpoint: "
          "{}".format(result["last_checkpoint"]))
    return 3
  return run_end.report_end(config, result, logdir)


def train(config, spec, problems_and_data, cluster, selection_problems=None):
  """Meta-trains in this process (``cluster`` None) or as the chief of a
  cluster; returns the run's result dict."""
  if cluster is None:
    return training_run.run_meta_training(
        config, spec, problems_and_data,
        selection_problems=selection_problems)
  return distributed.run_distributed_meta_training(config, spec,
                                                   problems_and_data)


# The end-of-run lines, for callers that drive metarun's stages.
report_end = run_end.report_end


def run():
  """The program: its flags join absl's registry (for --help and parsing),
  a --recipe expands to its flagfile, then :func:`main`; refusals and
  Ctrl-C end as in every entry point (:mod:`l2o_scale.runs.entry_point`)."""
  programs.install(FLAGS)
  app.run(main, argv=recipes.expand(sys.argv),
          flags_parser=entry_point.parse_absl_flags)


if __name__ == "__main__":
  entry_point.run_main("metarun.py", run, interrupted=INTERRUPTED)
