"""The rules that combine a meta-training run's settings, in one place.

:func:`validate` takes a :class:`~l2o_scale.meta_training.training_config.RunConfig`
and returns its errors (one line each, naming the flags: a setting out of
its declared bounds or non-finite, a combination the original would crash
on or silently misuse, a mode the distributed chief does not run) and its
notes (legal but surprising combinations, whose behaviour is the
original's). ``metarun.py`` refuses the errors before any work and prints
the notes; the library's entry points (``l2o_scale.metaopt.
train_optimizer``, :func:`l2o_scale.meta_training.training.
run_meta_training`, :func:`l2o_scale.meta_training.distributed.
run_distributed_meta_training`) run the same rules on the part of a run
they are given (:func:`require_valid`) and raise ValueError. A rule about a
part the caller does not give (the optimizer's flags, metarun.py's own,
the cluster) applies only where that part is known.
"""

from l2o_scale.config import config_flags
from l2o_scale.config import optimizer_flags
from l2o_scale.config import programs
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.runs import run_record
from problems import problem_sets

JOBS = ("chief", "worker", "ps")

# The regularizer's flags and which switch makes each take effect.
REGULARIZER_FLAGS = (("reg_option", ("reg_optimizer", "reg_optimizee")),
                     ("hessian_itrs", ("reg_optimizer", "reg_optimizee")),
                     ("alpha", ("reg_optimizer",)),
                     ("regularize_time", ("reg_optimizer",)),
                     ("reg_scale", ("reg_optimizer",)),
                     ("beta", ("reg_optimizee",)))

# Settings the distributed chief runs at their defaults only:
# (TrainingConfig field, the value it needs).
SINGLE_PROCESS_CHOICES = (("on_divergence", "continue"),
                          ("selection", "original"),
                          ("optimizee_init", "normal"),
                          ("meta_objective", "train"),
                          ("selection_objective", "same"))


def validate(run, bounds=True):
  """``(errors, notes)`` of ``run`` (a :class:`~l2o_scale.meta_training.
  config.RunConfig`): lists of lines, empty when the run is valid and
  unsurprising. ``bounds``: also each setting's declared bounds (its flag's
  valid range, :func:`bound_errors`)."""
  errors = bound_errors(run) if bounds else []
  errors += schedule_errors(run.schedule)
  errors += training_errors(run.training, run.schedule)
  if run.optimizer is not None:
    errors += optimizer_errors(run.optimizer)
  if run.program is not None:
    shipped = programs.shipped_folder_problem(run.program.train_dir,
                                              "train_dir")
    errors += [shipped] if shipped else []
  errors = list(dict.fromkeys(errors))  # The optimizer's bounds come twice.
  if run.cluster is not None and run.program is not None:
    errors += cluster_mismatches(run)
  if run.is_chief:
    errors += distributed_unsupported(run.schedule, run.training)
  return errors, notes(run)


def require_valid(config, chief=False):
  """Raises ValueError naming every combination rule that ``config`` (a
  :class:`~l2o_scale.meta_training.training_config.TrainerConfig`, as the library's
  entry points get it) breaks; ``chief``: it is run by a distributed
  chief.

  The single settings' flag bounds are the command line's: a library
  caller may give values outside them on purpose (a NaN meta learning rate
  drives a run into divergence, to test what follows).
  """
  cluster = config_lib.ClusterTask("chief") if chief else None
  errors, _ = validate(config_lib.RunConfig.of_trainer(config, cluster),
                       bounds=False)
  if errors:
    raise ValueError("; ".join(errors))


def bound_errors(run):
  """One line per setting of ``run`` out of its declared bounds or
  non-finite, or empty where it may not be (the fields' ``flag`` bounds)."""
  parts = [(programs.MetarunConfig, run.program),
           (config_lib.Schedule, run.schedule),
           (config_lib.TrainingConfig, run.training),
           (optimizer_flags.OptimizerConfig, run.optimizer)]
  errors = []
  for cls, value in parts:
    if value is not None:
      errors += config_flags.validate(cls, value)
  return errors


def schedule_errors(schedule):
  """Unroll lengths that leave nothing to run."""
  errors = []
  if schedule.fix_unroll and (
      schedule.fix_num_steps < schedule.fix_unroll_length):
    errors.append("--fix_num_steps ({}) must be at least --fix_unroll_length "
                  "({}) or no unroll runs".format(schedule.fix_num_steps,
                                                  schedule.fix_unroll_length))
  if schedule.fix_num_steps_eval < schedule.fix_unroll_length:
    errors.append("--fix_num_steps_eval ({}) must be at least "
                  "--fix_unroll_length ({})".format(
                      schedule.fix_num_steps_eval,
                      schedule.fix_unroll_length))
  return errors


def training_errors(training, schedule):
  """The meta-training settings' combinations (the problem mixture, the
  robust selection, fast-forwards)."""
  errors = []
  if training.selection_set and (
      training.selection_set not in problem_sets.TRAINING_SETS):
    errors.append("--selection_set={!r} is not a training problem set; "
                  "known: {}".format(training.selection_set,
                                     ", ".join(problem_sets.TRAINING_SETS)))
  if (training.mix_problems and training.selection == "robust" and
      not training.selection_set):
    errors.append("--mix_problems with --selection=robust needs "
                  "--selection_set (scores on the problem of the moment are "
                  "not comparable)")
  if training.mix_problems and schedule.num_problems != 1:
    errors.append("--mix_problems draws a problem per meta-iteration; "
                  "--num_problems must stay 1")
  if (training.selection_objective != "same" and
      training.selection != "robust"):
    errors.append("--selection_objective={} scores the --selection=robust "
                  "runs; it needs --selection=robust".format(
                      training.selection_objective))
  if (training.fast_forward_init != "same" and
      training.fast_forward_max_steps <= 0):
    errors.append("--fast_forward_init={} needs --fast_forward_max_steps > 0"
                  .format(training.fast_forward_init))
  seeds = training.selection_seeds
  if not all(isinstance(s, int) for s in seeds):
    errors.append("--selection_seeds must be integers, got {}".format(
        ",".join(str(s) for s in seeds)))
  elif not seeds:
    errors.append("--selection_seeds is empty")
  return errors


def optimizer_errors(optimizer):
  """The learned optimizer's flags (:func:`l2o_scale.config.
  optimizer_flags.check_optimizer_flags`, which metatest.py shares) and
  the inputs that need the dynamic output scale."""
  errors = optimizer_flags.check_optimizer_flags(optimizer)
  if ((optimizer.use_relative_lr or optimizer.use_extreme_indicator) and
      not optimizer.dynamic_output_scale):
    errors.append("--use_relative_lr / --use_extreme_indicator need "
                  "--dynamic_output_scale=True")
  return errors


def cluster_mismatches(run):
  """The original's --task/--worker_tasks/--ps_tasks, given explicitly, must
  agree with TF_CONFIG (which decides)."""
  task = run.cluster
  errors = []
  if task.job not in JOBS:
    errors.append("TF_CONFIG task type {!r} is not one of {}".format(
        task.job, ", ".join(JOBS)))
  if any(job not in task.cluster for job in ("chief", "ps", "worker")):
    errors.append("TF_CONFIG cluster needs chief, worker and ps jobs")
  expected = dict(worker_tasks=len(task.cluster.get("worker", [])),
                  ps_tasks=len(task.cluster.get("ps", [])))
  if task.job == "worker":
    expected["task"] = task.index
  for name, value in expected.items():
    given = getattr(run.program, name)
    if name in run.given and given != value:
      errors.append("--{}={} disagrees with TF_CONFIG ({})".format(
          name, given, value))
  return errors


def distributed_unsupported(schedule, training):
  """The modes the distributed chief refuses, one line each: it runs fixed
  unrolls of one problem without a curriculum, imitation or the
  objective-growth stop (l2o_scale.meta_training.distributed)."""
  reasons = []
  if schedule.if_cl:
    reasons.append("--if_cl (curriculum) is not supported in distributed mode")
  if training.if_mt:
    reasons.append("--if_mt (imitation) is not supported in distributed mode")
  if not schedule.fix_unroll:
    reasons.append("distributed mode needs --fix_unroll=True")
  if training.mix_problems or training.selection_set:
    reasons.append("distributed mode trains one problem (no --mix_problems "
                   "or --selection_set)")
  if schedule.num_problems != 1:
    reasons.append("distributed mode trains one problem (--num_problems=1)")
  if training.jit_compile:
    # Measured: XLA refuses to read the meta-parameters that live on the
    # parameter servers ("Trying to access resource ... located in device
    # /job:ps").
    reasons.append("--jit_compile is not supported in distributed mode (XLA "
                   "cannot read variables on the parameter servers)")
  if training.meta_optimizer == "adam":
    # The parameter servers apply TF1's locked ApplyRMSProp kernel, which
    # serves both RMSProp rules and the warm-up (it reads the learning rate
    # the meta-optimizer gives).
    reasons.append("--meta_optimizer=adam is single-process only for now "
                   "(distributed mode: rmsprop or rmsprop_ms0)")
  if training.meta_batch_size != 1:
    reasons.append("--meta_batch_size is single-process only for now "
                   "(distributed mode: --meta_batch_size=1)")
  if training.fast_forward_max_steps > 0:
    reasons.append("--fast_forward_max_steps is single-process only for now "
                   "(distributed mode: 0)")
  if schedule.obj_train_max_multiplier > 0:
    reasons.append("--objective_training_max_multiplier is not supported in "
                   "distributed mode")
  for name, default in SINGLE_PROCESS_CHOICES:
    if getattr(training, name) != default:
      reasons.append("--{}={} is single-process only for now (distributed "
                     "mode: --{}={})".format(name, getattr(training, name),
                                             name, default))
  return reasons


def regularizer_note(training):
  """The note for regularizer settings away from their defaults while the
  regularizer they set is off (e.g. the paper's ``--reg_option=hessian-esd``
  alone), or None."""
  defaults = config_lib.TrainingConfig()
  idle = [name for name, switches in REGULARIZER_FLAGS
          if getattr(training, name) != getattr(defaults, name) and
          not any(getattr(training, s) for s in switches)]
  if not idle:
    return None
  return ("{} {} no effect: the regularizer is off (original behaviour). "
          "--reg_optimizer=True regularizes the optimizer (L2O-Entropy's "
          "setting; alpha, regularize_time, reg_scale), --reg_optimizee=True "
          "the optimizee (beta).".format(
              ", ".join(run_record.format_flag(n, getattr(training, n))
                        for n in idle), "has" if len(idle) == 1 else "have"))


def notes(run):
  """Legal but surprising combinations of ``run``, one line each (the
  behaviour is the original's)."""
  training, schedule = run.training, run.schedule
  found = [note for note in [regularizer_note(training)] if note]
  if training.reg_optimizer and training.regularize_time == "none":
    found.append("--regularize_time=none switches the optimizer regularizer "
                 "off in every unroll: with --reg_optimizer=True the "
                 "accumulated regularizer stays 0 (original behaviour; use "
                 "--regularize_time=always to apply it).")
  if (run.program is not None and run.program.recipe is None and
      schedule.learning_rate == config_lib.Schedule.learning_rate):
    found.append("the original's meta learning rate ({:g}) learns nothing "
                 "visible in hours on this problem; --recipe=fast (or "
                 "--recipe=stable) trains a useful optimizer (python "
                 "metarun.py --helpfull: recipe).".format(
                     schedule.learning_rate))
  if schedule.if_cl and not schedule.fix_unroll:
    found.append("--if_cl uses --fix_unroll_length unrolls regardless of "
                 "--fix_unroll (original behaviour).")
  return found

