"""The protocol's selection of a controller on the validation tasks
(docs/learned-adamw.md, "Protocol").

Candidates are the controllers each meta-training seed kept
(``controller-<N>.npz``). Every candidate and the zero controller (the base
rule, AdamW with the cosine decay at the protocol's base setting) run on
every validation task at the protocol's budget and selection seeds, with
the benchmark's runs (the same initial weights and minibatches for all;
every finished run stored under ``OUT/runs``, so an interrupted selection
resumes). A candidate's score is, over the tasks, the mean of its mean log
final validation loss minus the zero controller's (negative is better).

The score's noise is the larger of two changes of the zero controller's
mean log validation loss over the tasks: with the seeds after the
selection seeds instead of them, and between this process and a second
one at the selection seeds (on one machine a rerun gives the same floats;
across machines it need not). A seed's choice is its best candidate where
that beats the zero controller by more than the noise, else the zero
controller; the shipped choice is the best over the seeds.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np

from l2o_scale import learned_adamw
from l2o_scale.benchmark import config as bench_config
from l2o_scale.benchmark import suite
from l2o_scale.benchmark import tasks as registry
from l2o_scale.controller_training import base_setting
from l2o_scale.controller_training import protocol
from l2o_scale.controller_training import training
from l2o_scale.runs import atomic_file
from l2o_scale.steps.controlled_adamw import NUM_PARAMETERS

RESULT_FILE = "selection.json"
ZERO = "zero"
_SNAPSHOT = re.compile(r"^controller-(\d+)\.npz$")


def candidates(train_dir):
  """[(estimates, path)] of the controllers a run kept, in order."""
  found = []
  for path in glob.glob(os.path.join(train_dir, "controller-*.npz")):
    match = _SNAPSHOT.match(os.path.basename(path))
    if match:
      found.append((int(match.group(1)), path))
  return sorted(found)


def _theta_digest(theta):
  return hashlib.sha1(np.asarray(theta, np.float32).tobytes()).hexdigest()[
      :12]


def _spec(theta, lr, wd):
  """What names a controller's runs in the store (the zero controller's are
  the base-setting sweep's)."""
  if not np.any(theta):
    return base_setting.spec(lr, wd)
  return "learned_adamw:{}:lr={:g},wd={:g}".format(_theta_digest(theta), lr,
                                                   wd)


def _factory(theta, lr, wd):
  return lambda total_steps: learned_adamw.LearnedAdamW(
      total_steps, controller=theta, learning_rate=lr, weight_decay=wd)


def validation_losses(theta, lr, wd, seeds, out, data_dir=None, log=print):
  """{task: [final validation loss per seed]} of the controller ``theta``
  on the validation tasks (runs stored under ``out``)."""
  config = bench_config.Config.for_size(
      "full", tasks=protocol.VALIDATION, budgets=(protocol.BUDGET,),
      seeds=max(seeds) + 1, eval_points=25, baselines=("adam",),
      untuned=(), data_dir=data_dir, out=out, optimizer="adam")
  bench_config.check_out(out)
  store = suite.RunStore(os.path.join(out, "runs"), log)
  spec = _spec(theta, lr, wd)
  losses = {}
  for name in protocol.VALIDATION:
    runner = suite.TaskRunner(registry.get(name), protocol.BUDGET, config,
                              store, log)
    runner.seeds = list(seeds)
    records = runner.under_test(_factory(theta, lr, wd), spec, spec)
    losses[name] = [r["validation_loss"] for r in records]
  return losses


def mean_log(losses):
  """Mean over tasks of the mean log loss over seeds (inf where a run
  diverged)."""
  values = []
  for per_seed in losses.values():
    if any(l is None or not np.isfinite(l) for l in per_seed):
      return float("inf")
    values.append(np.mean(np.log(per_seed)))
  return float(np.mean(values))


def _second_process(lr, wd, out, data_dir):
  """The zero controller's mean log validation loss at the selection seeds,
  measured by a fresh process with its own store."""
  code = ("import json, sys\n"
          "from l2o_scale.controller_training import selection as s\n"
          "from l2o_scale.controller_training import protocol as p\n"
          "import numpy as np\n"
          "lr, wd, out, data = float(sys.argv[1]), float(sys.argv[2]), "
          "sys.argv[3], sys.argv[4] or None\n"
          "losses = s.validation_losses(np.zeros(s.NUM_PARAMETERS, "
          "np.float32), lr, wd, p.SELECTION_SEEDS, out, data, "
          "log=lambda line: None)\n"
          "print('MEAN_LOG', json.dumps(s.mean_log(losses)))\n")
  done = subprocess.run([sys.executable, "-c", code, repr(lr), repr(wd), out,
                         data_dir or ""], capture_output=True, text=True,
                        check=True)
  line = [l for l in done.stdout.splitlines() if l.startswith("MEAN_LOG")][-1]
  return json.loads(line.split(" ", 1)[1])


def run(train_dirs, out, data_dir=None, log=print):
  """The selection (module doc) over the runs in ``train_dirs``; writes and
  returns ``OUT/selection.json``."""
  settings = [training.saved_config(d) for d in train_dirs]
  lr, wd = settings[0].base_learning_rate, settings[0].base_weight_decay
  if any((c.base_learning_rate, c.base_weight_decay) != (lr, wd)
         for c in settings):
    raise ValueError("the runs have different base settings: select each "
                     "on its own")
  seeds = list(protocol.SELECTION_SEEDS)
  later = [s + len(seeds) for s in seeds]
  zero = np.zeros(NUM_PARAMETERS, np.float32)
  zero_losses = validation_losses(zero, lr, wd, seeds, out, data_dir, log)
  zero_later = validation_losses(zero, lr, wd, later, out, data_dir, log)
  other = _second_process(lr, wd, os.path.join(out, "second_process"),
                          data_dir)
  noise = dict(seeds=abs(mean_log(zero_later) - mean_log(zero_losses)),
               process=abs(other - mean_log(zero_losses)))
  threshold = max(noise.values())
  result = dict(tasks=list(protocol.VALIDATION), budget=protocol.BUDGET,
                seeds=seeds, base=dict(learning_rate=lr, weight_decay=wd),
                zero=dict(validation_loss=zero_losses,
                          mean_log=mean_log(zero_losses),
                          mean_log_later_seeds=mean_log(zero_later),
                          later_seeds=later,
                          mean_log_second_process=other),
                noise=noise, threshold=threshold, runs={})
  for train_dir, config in zip(train_dirs, settings):
    scored = []
    for estimates, path in candidates(train_dir):
      theta = learned_adamw.load_controller(path)
      losses = validation_losses(theta, lr, wd, seeds, out, data_dir, log)
      score = float(np.mean([
          np.mean(np.log(losses[t])) - np.mean(np.log(zero_losses[t]))
          for t in protocol.VALIDATION])) if np.isfinite(
              mean_log(losses)) else float("inf")
      scored.append(dict(estimates=estimates, path=path, score=score,
                         validation_loss=losses))
      log("seed {} controller-{}: score {:+.4f}".format(config.seed,
                                                        estimates, score))
    best = min(scored, key=lambda c: c["score"]) if scored else None
    chosen = best if best and best["score"] < -threshold else None
    result["runs"][train_dir] = dict(
        seed=config.seed, candidates=scored,
        chosen=chosen["path"] if chosen else ZERO,
        chosen_score=chosen["score"] if chosen else 0.)
  picks = [r for r in result["runs"].values() if r["chosen"] != ZERO]
  result["shipped"] = (min(picks, key=lambda r: r["chosen_score"])["chosen"]
                       if picks else ZERO)
  with atomic_file.replace(os.path.join(out, RESULT_FILE)) as f:
    json.dump(result, f, indent=1)
  return result
