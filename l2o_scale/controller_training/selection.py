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


def validation_losses(theta, lr, wd, seeds, out, data_dir=None, log=print,
                      tasks=protocol.VALIDATION, budget=protocol.BUDGET):
  """{task: [final validation loss per seed]} of the controller ``theta``
  on ``tasks`` (the protocol's validation tasks) after ``budget`` steps
  (runs stored under ``out``)."""
  config = bench_config.Config.for_size(
      "full", tasks=tuple(tasks), budgets=(budget,),
      seeds=max(seeds) + 1, eval_points=25, baselines=("adam",),
      untuned=(), data_dir=data_dir, out=out, optimizer="adam")
  bench_config.check_out(out)
  store = suite.RunStore(os.path.join(out, "runs"), log)
  spec = _spec(theta, lr, wd)
  losses = {}
  for name in tasks:
    runner = suite.TaskRunner(registry.get(name), budget, config, store, log)
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


def score(losses, zero_losses):
  """A candidate's score: over the tasks, the mean of its mean log final
  validation loss minus the zero controller's (negative is better; inf
  where one of its runs diverged)."""
  if not np.isfinite(mean_log(losses)):
    return float("inf")
  return float(np.mean([np.mean(np.log(losses[t])) -
                        np.mean(np.log(zero_losses[t])) for t in losses]))


def choice(scored, threshold):
  """A seed's choice among its scored candidates (dicts with ``score``):
  the best, where it beats the zero controller by more than
  ``threshold`` (the score's noise), else None (the zero controller)."""
  best = min(scored, key=lambda c: c["score"]) if scored else None
  return best if best and best["score"] < -threshold else None


def shipped_choice(runs):
  """The shipped choice: the best of the seeds' choices (``runs``: the
  result's per-seed entries), or :data:`ZERO` where every seed kept the
  zero controller."""
  picks = [r for r in runs.values() if r["chosen"] != ZERO]
  return (min(picks, key=lambda r: r["chosen_score"])["chosen"]
          if picks else ZERO)


def _second_process(lr, wd, out, data_dir, tasks, budget):
  """The zero controller's mean log validation loss at the selection seeds,
  measured by a fresh process with its own store."""
  code = ("import json, sys\n"
          "from l2o_scale.controller_training import selection as s\n"
          "from l2o_scale.controller_training import protocol as p\n"
          "import numpy as np\n"
          "lr, wd, out, data = float(sys.argv[1]), float(sys.argv[2]), "
          "sys.argv[3], sys.argv[4] or None\n"
          "tasks, budget = sys.argv[5].split(','), int(sys.argv[6])\n"
          "losses = s.validation_losses(np.zeros(s.NUM_PARAMETERS, "
          "np.float32), lr, wd, p.SELECTION_SEEDS, out, data, "
          "log=lambda line: None, tasks=tasks, budget=budget)\n"
          "print('MEAN_LOG', json.dumps(s.mean_log(losses)))\n")
  done = subprocess.run([sys.executable, "-c", code, repr(lr), repr(wd), out,
                         data_dir or "", ",".join(tasks), str(budget)],
                        capture_output=True, text=True, check=True)
  line = [l for l in done.stdout.splitlines() if l.startswith("MEAN_LOG")][-1]
  return json.loads(line.split(" ", 1)[1])


def _base(train_dirs):
  """The base learning rate and weight decay the runs share."""
  settings = [training.saved_config(d) for d in train_dirs]
  lr, wd = settings[0].base_learning_rate, settings[0].base_weight_decay
  if any((c.base_learning_rate, c.base_weight_decay) != (lr, wd)
         for c in settings):
    raise ValueError("the runs have different base settings: select each "
                     "on its own")
  return settings, lr, wd


def _zero(lr, wd, out, data_dir, log, tasks, budget):
  """The zero controller's losses at the selection seeds and the score's
  noise (module doc)."""
  seeds = list(protocol.SELECTION_SEEDS)
  later = [s + len(seeds) for s in seeds]
  zero = np.zeros(NUM_PARAMETERS, np.float32)
  losses = validation_losses(zero, lr, wd, seeds, out, data_dir, log, tasks,
                             budget)
  at_later = validation_losses(zero, lr, wd, later, out, data_dir, log,
                               tasks, budget)
  other = _second_process(lr, wd, os.path.join(out, "second_process"),
                          data_dir, tasks, budget)
  noise = dict(seeds=abs(mean_log(at_later) - mean_log(losses)),
               process=abs(other - mean_log(losses)))
  return dict(validation_loss=losses, mean_log=mean_log(losses),
              mean_log_later_seeds=mean_log(at_later), later_seeds=later,
              mean_log_second_process=other), noise


def run(train_dirs, out, data_dir=None, log=print,
        tasks=protocol.VALIDATION, budget=protocol.BUDGET):
  """The selection (module doc) over the runs in ``train_dirs``; writes and
  returns ``OUT/selection.json``. ``tasks`` and ``budget`` are the
  protocol's unless a test makes them small."""
  settings, lr, wd = _base(train_dirs)
  zero, noise = _zero(lr, wd, out, data_dir, log, tasks, budget)
  threshold = max(noise.values())
  result = dict(tasks=list(tasks), budget=budget,
                seeds=list(protocol.SELECTION_SEEDS),
                base=dict(learning_rate=lr, weight_decay=wd), zero=zero,
                noise=noise, threshold=threshold, runs={})
  for train_dir, config in zip(train_dirs, settings):
    scored = []
    for estimates, path in candidates(train_dir):
      losses = validation_losses(learned_adamw.load_controller(path), lr, wd,
                                 protocol.SELECTION_SEEDS, out, data_dir, log,
                                 tasks, budget)
      scored.append(dict(estimates=estimates, path=path,
                         score=score(losses, zero["validation_loss"]),
                         validation_loss=losses))
      log("seed {} controller-{}: score {:+.4f}".format(
          config.seed, estimates, scored[-1]["score"]))
    chosen = choice(scored, threshold)
    result["runs"][train_dir] = dict(
        seed=config.seed, candidates=scored,
        chosen=chosen["path"] if chosen else ZERO,
        chosen_score=chosen["score"] if chosen else 0.)
  result["shipped"] = shipped_choice(result["runs"])
  with atomic_file.replace(os.path.join(out, RESULT_FILE)) as f:
    json.dump(result, f, indent=1)
  return result
