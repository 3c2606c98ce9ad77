"""Robust choice of the best model (``--selection=robust``, new in the port).

The original keeps as ``model.ckpt-0`` the meta-iteration with the lowest
evaluation cost: the final objective of ``evaluation_epochs`` short runs
(``fix_num_steps_eval`` steps) from standard-normal parameters, with a random
initial learning rate per run (``metaopt.py`` l.395-430). That score is noisy
(the random initial learning rate spans four decades) and short: it picked
optimizers that diverge after 500-750 steps of meta-testing.

The robust score meta-tests the optimizer as ``metatest.py`` does -- the
problem's own initialisation, minibatches of the training data, the compiled
meta-test loop (:func:`l2o_scale.meta_testing.testing.test_optimizer`) -- on a fixed set
of runs, over a horizon long enough to expose a late divergence. Run ``i``
has fixed initial parameters and batch order (from seed ``i``) and a fixed
initial learning rate (the ``(2i+1)/(2n)`` log-quantile of the optimizer's
``init_lr_range``), the same at every evaluation. The score is the mean over
runs of the mean objective of the last 5% of steps (at least 10); a run whose
objective is not finite or rises above ``growth_limit`` times its start
scores ``inf``, so a diverging optimizer is never selected.

Nothing here calls ``tf.random.set_seed``: it clears TF's kernel cache and
the next meta-step call then spends seconds re-instantiating its graph.
"""

import collections
import contextlib

import numpy as np
import tensorflow as tf

from l2o_scale.meta_testing import testing
from problems import datasets

SELECTIONS = ("original", "robust")

SelectionResult = collections.namedtuple(
    "SelectionResult", ["score", "finals", "diverged_runs"])

SelectionRun = collections.namedtuple(
    "SelectionRun", ["seed", "params", "batches", "learning_rate"])


@contextlib.contextmanager
def fixed_initial_learning_rate(optimizer, learning_rate):
  """Makes ``optimizer`` start runs at ``learning_rate`` (if it draws one).

  Only eager state initialisation reads ``init_lr_range`` after this;
  compiled meta-training steps baked the range in when they were traced.
  """
  if learning_rate is None or not hasattr(optimizer, "init_lr_range"):
    yield
    return
  saved = optimizer.init_lr_range
  optimizer.init_lr_range = (learning_rate, learning_rate)
  try:
    yield
  finally:
    optimizer.init_lr_range = saved


def make_runs(problem, optimizer, data_size, batch_size, num_steps, seeds):
  """The fixed runs of the robust score (parameters drawn once, here)."""
  lr_range = getattr(optimizer, "init_lr_range", None)
  runs = []
  for i, seed in enumerate(seeds):
    # Drawn from the seed alone, the runs are the same whenever they are
    # made (a resumed run makes them later in its life than the run it
    # continues) and leave the run's own draws as they were: numpy's global
    # stream is set aside, and TF's seeded ops run in a graph of their own
    # (an eager op with the same seed gives a new draw at each call).
    saved = np.random.get_state()
    np.random.seed(int(seed))
    try:
      draw = tf.function(lambda s=int(seed): problem.init_tensors(seed=s),
                         autograph=False)
      params = [t.numpy() for t in draw()]
    finally:
      np.random.set_state(saved)
    if data_size:
      batches = datasets.batch_indices(data_size, num_steps, batch_size,
                                       np.random.RandomState(int(seed)))
    else:
      batches = np.zeros((num_steps, 0), np.int32)
    lr = None
    if lr_range is not None:
      lo, hi = np.log(lr_range[0]), np.log(lr_range[1])
      lr = float(np.exp(lo + (hi - lo) * (2 * i + 1) / (2 * len(seeds))))
    runs.append(SelectionRun(int(seed), params, batches, lr))
  return runs


def _objectives(optimizer, problem, dataset, batch_size, run, jit, run_cache):
  """The run's minibatch objectives and its final parameters."""
  with fixed_initial_learning_rate(optimizer, run.learning_rate):
    objectives, params, _ = testing.test_optimizer(
        optimizer, problem, len(run.batches), dataset=dataset,
        batch_size=batch_size, seed=run.params, batches=run.batches,
        progress=False, jit_compile=jit, run_cache=run_cache)
  return np.asarray(objectives, np.float64), params


def robust_score(optimizer, problem, dataset, batch_size, runs,
                 growth_limit=100., jit_compile=True, run_cache=None,
                 score_data=None):
  """Scores the optimizer's current meta-parameters; lower is better.

  ``jit_compile`` falls back to the plain loop when XLA cannot compile the
  problem (as ``metatest.py --jit_compile`` does). ``run_cache``
  (testing.RunCache): the caller's, to compile the meta-test loop once for
  all the scores of a training run. ``score_data``: (data, labels) that,
  if given, score a run by the objective on them at its final parameters
  (``--meta_objective=validation``: the held-back rows) instead of its last
  minibatch objectives; divergence is judged on the minibatches either way.
  """
  run_cache = run_cache or testing.RunCache()
  finals, diverged = [], []
  for run in runs:
    try:
      objectives, params = _objectives(optimizer, problem, dataset,
                                       batch_size, run, jit_compile,
                                       run_cache)
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
      if not jit_compile:
        raise
      jit_compile = False
      objectives, params = _objectives(optimizer, problem, dataset,
                                       batch_size, run, False, run_cache)
    tail = max(10, len(objectives) // 20)
    blew_up = growth_limit > 0 and (
        np.max(objectives) > growth_limit * max(abs(objectives[0]), 1e-12))
    if not np.all(np.isfinite(objectives)) or blew_up:
      diverged.append(run.seed)
      finals.append(float("inf"))
    elif score_data is not None:
      final = float(problem.objective(
          [tf.constant(p) for p in params], *score_data))
      finals.append(final if np.isfinite(final) else float("inf"))
    else:
      finals.append(float(np.mean(objectives[-tail:])))
  return SelectionResult(float(np.mean(finals)), finals, diverged)


def combine(results):
  """One score over several problems' :func:`robust_score` results
  (``--selection_set``): the geometric mean of their scores, so that each
  problem weighs by its relative change whatever its loss scale; ``inf``
  when any run diverged. ``finals`` and ``diverged_runs`` are those of all
  problems, one after the other."""
  scores = np.array([r.score for r in results], np.float64)
  if not np.all(np.isfinite(scores)):
    score = float("inf")
  elif np.any(scores <= 0):  # No geometric mean: the plain one.
    score = float(np.mean(scores))
  else:
    score = float(np.exp(np.mean(np.log(scores))))
  return SelectionResult(score, [f for r in results for f in r.finals],
                         [d for r in results for d in r.diverged_runs])
