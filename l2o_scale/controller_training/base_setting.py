"""The best single base setting of the controlled AdamW (the zero
controller: AdamW with a cosine decay to zero) on the validation tasks of
the protocol (:mod:`l2o_scale.controller_training.protocol`).

Every setting of the grid (base learning rate x weight decay) runs on every
validation task at the protocol's budget and selection seeds, with the
benchmark's runs (:class:`l2o_scale.benchmark.suite.TaskRunner`: the same
initial weights and minibatches per seed for every setting; each finished
run stored, so an interrupted sweep resumes). A setting's score on a task is
the mean over seeds of the log final validation loss; its regret the score
minus the best setting's on that task; the chosen setting has the lowest
mean regret over the tasks, no task looked at but the validation ones.
"""

import itertools
import json
import os

import numpy as np

from l2o_scale.benchmark import config as bench_config
from l2o_scale.benchmark import suite
from l2o_scale.benchmark import tasks as registry
from l2o_scale.controller_training import protocol
from l2o_scale.runs import atomic_file

RESULT_FILE = "base_setting.json"


def spec(lr, wd):
  return "learned_adamw-zero:lr={:g},wd={:g}".format(lr, wd)


def factory(lr, wd):
  from l2o_scale import learned_adamw  # pylint: disable=g-import-not-at-top
  return lambda total_steps: learned_adamw.LearnedAdamW(
      total_steps, learning_rate=lr, weight_decay=wd)


def choose(scores):
  """The setting of lowest mean regret: ``scores`` maps (lr, wd) to {task:
  mean log validation loss}; returns (setting, {setting: mean regret})."""
  tasks = sorted(next(iter(scores.values())))
  best = {t: min(s[t] for s in scores.values()) for t in tasks}
  regret = {k: float(np.mean([s[t] - best[t] for t in tasks]))
            for k, s in scores.items()}
  return min(sorted(regret), key=regret.get), regret


def run(out, data_dir=None, log=print):
  """Runs (or resumes) the sweep into ``out``; returns the result."""
  config = bench_config.Config.for_size(
      "full", tasks=protocol.VALIDATION, budgets=(protocol.BUDGET,),
      seeds=len(protocol.SELECTION_SEEDS), eval_points=25, baselines=("adam",),
      data_dir=data_dir, out=out, optimizer="adam")
  bench_config.check_out(out)
  store = suite.RunStore(os.path.join(out, "runs"), log)
  grid = list(itertools.product(protocol.BASE_LEARNING_RATES,
                                protocol.BASE_WEIGHT_DECAYS))
  scores, runs = {}, {}
  for name in protocol.VALIDATION:
    task = registry.get(name)
    runner = suite.TaskRunner(task, protocol.BUDGET, config, store, log)
    for lr, wd in grid:
      log("{}: lr {:g}, weight decay {:g}".format(name, lr, wd))
      records = runner.under_test(factory(lr, wd), spec(lr, wd),
                                  spec(lr, wd))
      losses = [r["validation_loss"] for r in records]
      finite = all(l is not None and np.isfinite(l) for l in losses)
      scores.setdefault((lr, wd), {})[name] = (
          float(np.mean(np.log(losses))) if finite else float("inf"))
      runs.setdefault(spec(lr, wd), {})[name] = dict(
          validation_loss=losses,
          validation_metric=[r["validation_metric"] for r in records],
          final_train_loss=[r["final_train_loss"] for r in records])
  chosen, regret = choose(scores)
  result = dict(tasks=list(protocol.VALIDATION), budget=protocol.BUDGET,
                seeds=list(protocol.SELECTION_SEEDS),
                chosen=dict(learning_rate=chosen[0], weight_decay=chosen[1]),
                regret={spec(*k): v for k, v in regret.items()},
                scores={spec(*k): v for k, v in scores.items()}, runs=runs,
                peak_memory_mib=suite.peak_memory_mib())
  with atomic_file.replace(os.path.join(out, RESULT_FILE)) as f:
    json.dump(result, f, indent=1)
  return result
