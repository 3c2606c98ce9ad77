"""The rules that combine meta-training settings
(l2o_scale/meta_training/validation.py), each tested once: through
metarun.py (its configuration, built from a command line as the program
builds it, and the program itself: exit 2, one line per refused flag,
nothing written) and through the library's entry points
(``metaopt.train_optimizer``, ``training.run_meta_training``,
``distributed.run_distributed_meta_training``: a ValueError naming the
rule, before any work)."""

import os
import re

import pytest

from l2o_scale import cluster as cluster_lib
from l2o_scale import metaopt
from l2o_scale.config import optimizer_flags
from l2o_scale.meta_training import training_config as config_lib
from l2o_scale.meta_training import distributed
from l2o_scale.meta_training import training
from l2o_scale.meta_training import validation
import metarun as program

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join("l2o_scale", "pretrained", "l2o-scale")

# A cluster of one chief, one worker and one ps (TF_CONFIG's "cluster").
CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
           "ps": ["127.0.0.1:3"]}
CHIEF = config_lib.ClusterTask("chief", 0, CLUSTER)


def _errors(*args, cluster=None):
  """The error lines metarun.py refuses the command ``args`` with."""
  return validation.validate(program.parse_config(["metarun.py"] + list(
      args), cluster))[0]


def _notes(*args):
  return validation.validate(program.parse_config(["metarun.py"] +
                                                  list(args)))[1]


# (command-line flags, Schedule fields, TrainingConfig fields, the line):
# rules on what the library's TrainerConfig holds, so both refuse them.
SHARED_RULES = [
    (["--fix_unroll=True", "--fix_unroll_length=20", "--fix_num_steps=10"],
     dict(fix_unroll=True, fix_unroll_length=20, fix_num_steps=10), {},
     "--fix_num_steps (10) must be at least --fix_unroll_length (20) or no "
     "unroll runs"),
    (["--fix_unroll_length=20", "--fix_num_steps_eval=10"],
     dict(fix_unroll_length=20, fix_num_steps_eval=10), {},
     "--fix_num_steps_eval (10) must be at least --fix_unroll_length (20)"),
    (["--selection_set=bogus"], {}, dict(selection_set="bogus"),
     "--selection_set='bogus' is not a training problem set; known: "),
    (["--mix_problems", "--selection=robust"], {},
     dict(mix_problems=True, selection="robust"),
     "--mix_problems with --selection=robust needs --selection_set"),
    (["--mix_problems", "--num_problems=2"], dict(num_problems=2),
     dict(mix_problems=True),
     "--mix_problems draws a problem per meta-iteration; --num_problems must "
     "stay 1"),
    (["--selection_objective=validation"], {},
     dict(selection_objective="validation"),
     "--selection_objective=validation scores the --selection=robust runs; "
     "it needs --selection=robust"),
    (["--fast_forward_init=problem"], {}, dict(fast_forward_init="problem"),
     "--fast_forward_init=problem needs --fast_forward_max_steps > 0"),
    (["--selection_seeds="], {}, dict(selection_seeds=()),
     "--selection_seeds is empty"),
]

# The same, for the modes a distributed chief does not run.
CHIEF_RULES = [
    (["--if_cl=True"], dict(if_cl=True), {},
     "--if_cl (curriculum) is not supported in distributed mode"),
    (["--if_mt=True"], {}, dict(if_mt=True),
     "--if_mt (imitation) is not supported in distributed mode"),
    (["--fix_unroll=False"], dict(fix_unroll=False), {},
     "distributed mode needs --fix_unroll=True"),
    (["--num_problems=2"], dict(num_problems=2), {},
     "distributed mode trains one problem (--num_problems=1)"),
    (["--selection_set=mnist_mlp_problems"], {},
     dict(selection_set="mnist_mlp_problems"),
     "distributed mode trains one problem (no --mix_problems or "
     "--selection_set)"),
    (["--jit_compile"], {}, dict(jit_compile=True),
     "--jit_compile is not supported in distributed mode"),
    (["--meta_optimizer=adam"], {}, dict(meta_optimizer="adam"),
     "--meta_optimizer=adam is single-process only for now"),
    (["--meta_batch_size=2"], {}, dict(meta_batch_size=2),
     "--meta_batch_size is single-process only for now"),
    (["--fast_forward_max_steps=100"], {}, dict(fast_forward_max_steps=100),
     "--fast_forward_max_steps is single-process only for now"),
    (["--objective_training_max_multiplier=5"],
     dict(obj_train_max_multiplier=5.), {},
     "--objective_training_max_multiplier is not supported in distributed "
     "mode"),
    (["--selection=robust"], {}, dict(selection="robust"),
     "--selection=robust is single-process only for now (distributed mode: "
     "--selection=original)"),
    (["--on_divergence=stop"], {}, dict(on_divergence="stop"),
     "--on_divergence=stop is single-process only for now"),
    (["--meta_objective=validation"], {}, dict(meta_objective="validation"),
     "--meta_objective=validation is single-process only for now"),
]


def _ids(rules):
  return [" ".join(args) or "default" for args, _, _, _ in rules]


@pytest.mark.parametrize("args,schedule,settings,line", SHARED_RULES,
                         ids=_ids(SHARED_RULES))
def test_a_rule_refuses_the_command_and_every_library_entry_point(
    tmp_path, args, schedule, settings, line):
  assert [e for e in _errors(*args) if e.startswith(line)], _errors(*args)
  assert not any(e.startswith(line) for e in _errors())
  config = _trainer_config(tmp_path, schedule, settings)
  spec = optimizer_flags.optimizer_spec(optimizer_flags.OptimizerConfig())
  for entry_point in (
      lambda: training.run_meta_training(config, spec, []),
      lambda: distributed.run_distributed_meta_training(config, spec, []),
      lambda: metaopt.train_optimizer(
          str(tmp_path), spec, [], num_meta_iterations=1,
          num_unroll_func=lambda: 1, num_partial_unroll_itrs_func=lambda: 2,
          config=config.training, **dict(dict(
              num_problems=1, fix_unroll=True, fix_unroll_length=2,
              fix_num_steps=2, fix_num_steps_eval=2), **schedule))):
    with pytest.raises(ValueError, match=re.escape(line)):
      entry_point()
  assert not os.listdir(tmp_path)  # Refused before any work.


@pytest.mark.parametrize("args,schedule,settings,line", CHIEF_RULES,
                         ids=_ids(CHIEF_RULES))
def test_a_distributed_rule_refuses_the_chief_only(tmp_path, args, schedule,
                                                   settings, line):
  flags = ["--fix_unroll=True"] + args
  assert [e for e in _errors(*flags, cluster=CHIEF) if e.startswith(line)]
  assert not any(e.startswith(line) for e in _errors(*flags))
  worker = config_lib.ClusterTask("worker", 0, CLUSTER)
  assert not any(e.startswith(line)
                 for e in _errors(*flags, cluster=worker))
  config = _trainer_config(tmp_path, schedule, settings)
  spec = optimizer_flags.optimizer_spec(optimizer_flags.OptimizerConfig())
  with pytest.raises(ValueError, match=re.escape(line)):
    distributed.run_distributed_meta_training(config, spec, [])
  assert not os.listdir(tmp_path)


def _trainer_config(logdir, schedule, settings):
  """A TrainerConfig whose settings break nothing but ``schedule`` and
  ``settings`` (fields of Schedule and TrainingConfig)."""
  return config_lib.TrainerConfig(
      logdir=str(logdir), schedule=config_lib.Schedule(**dict(
          dict(fix_unroll=True, fix_unroll_length=2, fix_num_steps=2,
               fix_num_steps_eval=2), **schedule)),
      training=config_lib.TrainingConfig(**settings))


def test_a_valid_configuration_passes_every_entry_point_check():
  config = config_lib.TrainerConfig(
      logdir="unused", schedule=config_lib.Schedule(fix_unroll=True))
  validation.require_valid(config)
  validation.require_valid(config, chief=True)
  # The flags' bounds bind the command line, not a library caller (a NaN
  # meta learning rate drives a run into divergence on purpose).
  wild = config_lib.TrainerConfig(
      logdir="unused", schedule=config_lib.Schedule(
          fix_unroll=True, learning_rate=float("nan")),
      training=config_lib.TrainingConfig(rms_decay=2.))
  validation.require_valid(wild)
  assert validation.validate(config_lib.RunConfig.of_trainer(wild))[0] == [
      "--meta_learning_rate must be a finite number (got nan)",
      "--rms_decay must be in [0, 1) (got 2)"]
  assert validation.validate(program.parse_config(
      ["metarun.py", "--fix_unroll", "--meta_learning_rate=1e-3"],
      CHIEF)) == ([], [])


@pytest.mark.parametrize("args,line", [
    (["--selection_seeds=6,x"], "--selection_seeds must be integers, got 6,x"),
    (["--rms_decay=2"], "--rms_decay must be in [0, 1) (got 2)"),
    (["--gradient_clip_level=0"], "--gradient_clip_level must be > 0 (got 0)"),
    (["--fast_forward_fraction=2"],
     "--fast_forward_fraction must be in [0, 1] (got 2)"),
    (["--meta_learning_rate=inf"],
     "--meta_learning_rate must be a finite number (got inf)"),
    (["--max_log_lr=nan"], "--max_log_lr must be a finite number (got nan)"),
    (["--train_dir="], "--train_dir must not be empty"),
    (["--train_dir=  "], "--train_dir must not be empty"),
    (["--task=-1"], "--task must be >= 0 (got -1)"),
    (["--num_unroll_scale=-1"], "--num_unroll_scale must be >= 0 (got -1)"),
    (["--cell_size=0"], "--cell_size must be >= 1 (got 0)"),
    (["--cell_cls=LSTMFoo"], "--cell_cls='LSTMFoo' is not one of"),
    (["--optimizer=CoordinatewiseRNN"],
     "--optimizer=CoordinatewiseRNN cannot be built"),
    (["--min_lr=1e-2", "--max_lr=1e-3"],
     "--min_lr and --max_lr must satisfy min_lr <= max_lr"),
    (["--dynamic_output_scale=False"],
     "--use_relative_lr / --use_extreme_indicator need "
     "--dynamic_output_scale=True"),
    (["--overwrite", "--resume=False", "--train_dir=" + SHIPPED],
     "--train_dir={} is inside the package's shipped optimizers".format(
         SHIPPED)),
])
def test_the_command_line_only_rules_are_one_line_each(args, line):
  """Rules on what only metarun.py has: the flags' bounds (a library
  caller may pass a NaN learning rate on purpose, to drive a run into
  divergence), its own flags, the optimizer's (a library caller builds the
  optimizer, which checks its options), non-integer seeds as typed."""
  errors = _errors(*args)
  assert len([e for e in errors if e.startswith(line)]) == 1, errors


def test_every_bad_flag_of_one_command_is_named_once():
  errors = _errors("--gradient_clip_level=0", "--meta_learning_rate=-1",
                   "--rms_decay=2", "--cell_cls=LSTMFoo",
                   "--optimizer=CoordinatewiseRNN", "--meta_lr_warmup=-1",
                   "--validation_fraction=1", "--fast_forward_init=problem")
  for line in ("--gradient_clip_level must be > 0",
               "--meta_learning_rate must be > 0",
               "--rms_decay must be in [0, 1)",
               "--cell_cls='LSTMFoo' is not one of",
               "--optimizer=CoordinatewiseRNN cannot be built",
               "--meta_lr_warmup must be >= 0",
               "--validation_fraction must be in (0, 1)",
               "--fast_forward_init=problem needs --fast_forward_max_steps "
               "> 0"):
    assert sum(e.startswith(line) for e in errors) == 1, (line, errors)
  assert len(errors) == 8, errors


def test_only_cluster_flags_given_explicitly_must_agree_with_tf_config():
  """--task/--worker_tasks/--ps_tasks at their defaults defer to TF_CONFIG;
  given (here, a recipe-free command line), they must agree with it."""
  two_workers = dict(CLUSTER, worker=["127.0.0.1:2", "127.0.0.1:4"])
  worker = config_lib.ClusterTask("worker", 1, two_workers)
  assert _errors("--fix_unroll", cluster=worker) == []
  assert _errors("--fix_unroll", "--worker_tasks=3", "--task=0",
                 "--ps_tasks=1", cluster=worker) == [
                     "--worker_tasks=3 disagrees with TF_CONFIG (2)",
                     "--task=0 disagrees with TF_CONFIG (1)"]
  assert _errors("--fix_unroll", cluster=config_lib.ClusterTask(
      "evaluator", 0, {"chief": ["127.0.0.1:1"]})) == [
          "TF_CONFIG task type 'evaluator' is not one of chief, worker, ps",
          "TF_CONFIG cluster needs chief, worker and ps jobs"]


def test_surprising_combinations_are_notes_not_errors():
  assert _notes("--recipe=fast") == []
  [note] = _notes("--recipe=fast", "--reg_option=hessian-esd", "--beta=0.5")
  assert note.startswith("--reg_option=hessian-esd, --beta=0.5 have no "
                         "effect: the regularizer is off")
  assert _notes("--recipe=fast", "--reg_option=hessian-esd",
                "--reg_optimizer=True") == []
  [note] = _notes("--recipe=fast", "--reg_optimizer=True",
                  "--regularize_time=none")
  assert note.startswith("--regularize_time=none switches the optimizer "
                         "regularizer off in every unroll")
  [note] = _notes()
  assert note.startswith("the original's meta learning rate (1e-06) learns "
                         "nothing visible")
  assert _notes("--meta_learning_rate=1e-3") == []
  [note] = _notes("--recipe=fast", "--if_cl", "--fix_unroll=False")
  assert note == ("--if_cl uses --fix_unroll_length unrolls regardless of "
                  "--fix_unroll (original behaviour).")


def test_refused_commands_exit_2_before_any_work(tmp_path, metarun):
  result = metarun("--train_dir={}".format(tmp_path), "--fix_unroll=True",
                   "--fix_unroll_length=20", "--fix_num_steps=10",
                   "--dynamic_output_scale=False")
  assert result.returncode == 2
  assert result.stderr.splitlines()[-3:] == [
      "metarun.py: invalid flags:",
      "  --fix_num_steps (10) must be at least --fix_unroll_length (20) or "
      "no unroll runs",
      "  --use_relative_lr / --use_extreme_indicator need "
      "--dynamic_output_scale=True"]
  assert not os.listdir(tmp_path)
  # A choice outside the flag's choices: absl refuses it while parsing.
  result = metarun("--train_dir={}".format(tmp_path), "--reg_option=bogus")
  assert result.returncode != 0
  assert ("--reg_option=bogus: value should be one of "
          "<hessian|hessian-ev|hessian-esd|jacob>" in result.stderr)
  assert not os.listdir(tmp_path)


def test_the_chief_refuses_what_the_cluster_does_not_run(tmp_path, metarun):
  env = {"TF_CONFIG": cluster_lib.tf_config(cluster_lib.cluster_spec(1, 1),
                                            "chief", 0)}
  result = metarun("--train_dir={}".format(tmp_path), "--if_cl=True",
                   "--worker_tasks=3", "--selection=robust", "--jit_compile",
                   "--meta_optimizer=adam", "--meta_lr_warmup=5",
                   "--meta_objective=validation", env=env)
  assert result.returncode == 2
  lines = result.stderr.splitlines()
  start = lines.index("metarun.py: invalid flags:")
  assert lines[start + 1:] == ["  " + line for line in [
      "--worker_tasks=3 disagrees with TF_CONFIG (1)",
      "--if_cl (curriculum) is not supported in distributed mode",
      "distributed mode needs --fix_unroll=True",
      "--jit_compile is not supported in distributed mode (XLA cannot read "
      "variables on the parameter servers)",
      "--meta_optimizer=adam is single-process only for now (distributed "
      "mode: rmsprop or rmsprop_ms0)",
      "--selection=robust is single-process only for now (distributed mode: "
      "--selection=original)",
      "--meta_objective=validation is single-process only for now "
      "(distributed mode: --meta_objective=train)"]]
  # The ps's locked RMSProp kernel serves the warm-up.
  assert not os.listdir(tmp_path)
  result = metarun("--train_dir={}".format(tmp_path), "--rms_decay=3",
                   env={"TF_CONFIG": "{bad"})
  assert result.returncode == 2
  assert result.stderr.splitlines()[-2:] == [
      "  --rms_decay must be in [0, 1) (got 3)",
      "  TF_CONFIG is not valid JSON (Expecting property name enclosed in "
      "double quotes: line 1 column 2 (char 1))"]
