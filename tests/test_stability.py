"""Divergence detection, rollback, robust best-model selection and the
optimizee initialisation of meta-training (l2o_scale/meta_training/stability.py,
selection.py; the opt-in flags of metarun.py)."""

import io
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.runs import checkpoints
from l2o_scale import metaopt
from l2o_scale.config import optimizer_flags
from l2o_scale.meta_training import selection
from l2o_scale.meta_training import stability
from l2o_scale.steps import tf1_optimizers
from l2o_scale.meta_training import training_config as training_config
from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import train_state
from l2o_scale.meta_training import plan as plan_lib
from l2o_scale.meta_training import reporting
from optimizer import hierarchical_rnn
from problems import problem_sets
from problems import problem_spec


def _optimizer_spec():
  """metarun.py's default optimizer (HierarchicalRNN [10, 20, 20])."""
  return problem_spec.Spec(hierarchical_rnn.HierarchicalRNN,
                           (list(optimizer_flags.HRNN_CELL_SIZES),),
                           optimizer_flags.default_optimizer_kwargs())


def _train(logdir, spec, iterations, learning_rate, data_dir, **config):
  """A short real meta-training run on the MNIST MLP (500-row mini data)."""
  config.setdefault("mini_batch_size", 500)
  np.random.seed(1)
  random.seed(1)
  tf.random.set_seed(1)
  out = io.StringIO()
  problems = problem_sets.get("mnist_mlp_problems", data_dir=data_dir)
  result = metaopt.train_optimizer(
      str(logdir), spec, problems, 1, iterations, lambda: 1,
      lambda: 2, learning_rate=learning_rate, fix_unroll=True,
      fix_unroll_length=20, fix_num_steps=40, fix_num_steps_eval=20,
      evaluation_epochs=1, out=out, summaries=False,
      config=metaopt.TrainingConfig(**config))
  return result, out.getvalue()


def _meta_values(spec, path=None):
  opt = spec.build()
  if path is not None:
    checkpoints.restore_optimizer(path, opt)
  return {n: v.numpy() for n, v in opt.tf1_variables().items()}


def test_divergence_reason():
  grads = [np.ones(3)]
  assert stability.divergence_reason([5., 4.], -1., grads, 100.) is None
  assert "not finite" in stability.divergence_reason([5., np.nan], -1., grads,
                                                     100.)
  assert "grew from 5 to 600" in stability.divergence_reason(
      [5., 600.], -1., grads, 100.)
  # The growth test is off with a limit <= 0; 499x growth is under 500x.
  assert stability.divergence_reason([5., 600.], -1., grads, 0.) is None
  assert stability.divergence_reason([5., 2495.], -1., grads, 500.) is None
  assert stability.divergence_reason([5., 4.], np.inf, grads,
                                     100.) == "the meta-objective is not finite"
  assert stability.divergence_reason(
      [5., 4.], -1., [np.array([1., np.nan, np.inf])], 100.) == (
          "2 meta-gradient entries are not finite")


def test_rmsprop_learning_rate_change_takes_effect():
  var = tf.Variable([1.])
  opt = tf1_optimizers.RMSProp([var], 0.1, decay=0.)
  opt.apply_gradients([tf.constant([1.])])  # ms = 1: step = lr.
  opt.set_learning_rate(0.01)
  opt.apply_gradients([tf.constant([1.])])
  np.testing.assert_allclose(var.numpy(), [1. - 0.1 - 0.01], rtol=1e-6)


NAN = float("nan")


def test_a_diverged_meta_iteration_is_rolled_back_exactly(tmp_path, data_dir):
  """A meta-step at meta learning rate NaN makes every meta-parameter NaN, so
  the next unroll's optimizee objective is not finite on every machine: each
  meta-iteration diverges at its second unroll and is undone (meta-parameters
  back to their start, exactly); nothing is kept as best."""
  spec = _optimizer_spec()
  tf.random.set_seed(1)  # as _train: the same initial meta-parameters
  initial = _meta_values(spec)
  result, log = _train(tmp_path, spec, 3, NAN, data_dir,
                       on_divergence="rollback")
  assert result["divergences"] == 3
  assert log.count("warning: [meta-iteration") == 3
  for k in (1, 2, 3):
    assert ("warning: [meta-iteration {}/3] unroll 2/2 diverged: the "
            "optimizee objective is not finite; rolling back.".format(k)
            in log)
  assert not os.path.exists(str(tmp_path / "model.ckpt-0.index"))
  final = _meta_values(spec, str(tmp_path / "model.ckpt-3"))
  for name, value in initial.items():
    np.testing.assert_array_equal(final[name], value, err_msg=name)


def _inject_divergence(monkeypatch, unroll_index):
  """In series of two unrolls, unroll ``unroll_index`` (0-based) of every
  series is reported diverged."""
  real = stability.divergence_reason
  calls = []

  def reason(*args):
    calls.append(None)
    if (len(calls) - 1) % 2 == unroll_index:
      return "injected fault"
    return real(*args)

  monkeypatch.setattr(stability, "divergence_reason", reason)


def test_rollback_lowers_the_meta_learning_rate_and_a_resume_keeps_it(
    tmp_path, data_dir, monkeypatch):
  """Each rollback multiplies the meta learning rate by
  --divergence_lr_decay; a run resumed for a 4th meta-iteration (same flags)
  goes on from the lowered rate, as the uninterrupted run would, not from
  the flag's."""
  _inject_divergence(monkeypatch, 1)
  spec = _optimizer_spec()
  result, log = _train(tmp_path, spec, 3, 1e-3, data_dir,
                       on_divergence="rollback")
  assert result["divergences"] == 3
  assert "unroll 2/2 diverged: injected fault; rolling back." in log
  assert "meta learning rate now 0.0005" in log
  assert "meta learning rate now 0.00025" in log
  assert "meta learning rate now 0.000125" in log
  assert result["meta_learning_rate"] == pytest.approx(1.25e-4)
  _, log = _train(tmp_path, spec, 4, 1e-3, data_dir, on_divergence="rollback")
  assert "Meta learning rate 0.000125 (as lowered by rollbacks" in log
  assert "meta learning rate now 6.25e-05" in log
  # The run's events file has each rollback at its meta-iteration, the
  # resumed run's after the first run's.
  with open(tmp_path / reporting.EVENTS) as f:
    events = [json.loads(line) for line in f]
  assert [e["meta_iteration"] for e in events
          if e["event"] == "rollback"] == [1, 2, 3, 4]


def test_default_keeps_the_original_behaviour_but_warns(tmp_path, data_dir):
  """--on_divergence=continue applies the diverging meta-steps (the original
  does) and says so; --selection=robust then never writes model.ckpt-0 for
  the diverged optimizer (its robust score is inf)."""
  spec = _optimizer_spec()
  tf.random.set_seed(1)
  initial = _meta_values(spec)
  _, log = _train(tmp_path, spec, 2, NAN, data_dir, selection="robust",
                  selection_steps=50, selection_seeds=(1, 2))
  assert ("diverged: the optimizee objective is not finite; its "
          "meta-gradients are applied as the original does" in log)
  final = _meta_values(spec, str(tmp_path / "model.ckpt-2"))
  assert all(np.all(np.isnan(final[n])) for n in initial)
  scores = [line for line in log.splitlines() if "robust score" in line]
  assert len(scores) == 2
  assert all("robust score=inf" in line for line in scores)
  assert not os.path.exists(str(tmp_path / "model.ckpt-0.index"))


def test_stop_on_divergence(tmp_path, data_dir):
  result, log = _train(tmp_path, _optimizer_spec(), 3, NAN, data_dir,
                       on_divergence="stop")
  assert result["stopped_by_divergence"] and result["divergences"] == 1
  assert ("[meta-iteration 1/3] meta-training stopped: the optimizee "
          "objective is not finite" in log)
  assert "No model was evaluated as best yet" in log
  assert "[meta-iteration 2/3]" not in log


def _mnist_mlp(data_dir):
  spec, dataset, batch_size = problem_sets.get("mnist_mlp_problems",
                                               data_dir=data_dir)[0]
  return spec.build(), dataset, batch_size


def test_robust_score_is_fixed_and_flags_a_diverging_optimizer(data_dir):
  problem, dataset, batch_size = _mnist_mlp(data_dir)
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20])
  runs = selection.make_runs(problem, opt, len(dataset.data), batch_size, 60,
                             [1, 2])
  # Initial learning rates: log-quantiles 1/4 and 3/4 of [1e-6, 1e-2].
  assert [r.learning_rate for r in runs] == pytest.approx([1e-5, 1e-3])
  # The problem's own initialisation (N(0, 0.01) for the MLP).
  assert 0.005 < np.std(runs[0].params[0]) < 0.02
  first = selection.robust_score(opt, problem, dataset, batch_size, runs)
  again = selection.robust_score(opt, problem, dataset, batch_size, runs)
  assert first == again and np.isfinite(first.score)
  assert opt.init_lr_range == (1e-6, 1e-2)  # restored after each run
  # The same meta-parameters with a NaN initial learning rate diverge (a
  # non-finite objective, on every machine).
  wild = selection.make_runs(problem, opt, len(dataset.data), batch_size, 60,
                             [1, 2])
  wild = [r._replace(learning_rate=NAN) for r in wild]
  result = selection.robust_score(opt, problem, dataset, batch_size, wild)
  assert result.score == float("inf") and result.diverged_runs == [1, 2]


def test_optimizee_init_problem_uses_the_problems_initialisation(data_dir):
  problem, dataset, batch_size = _mnist_mlp(data_dir)
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20])

  def planner(init):
    config = training_config.TrainingConfig(optimizee_init=init,
                                            mini_batch_size=500)
    return plan_lib.Planner(problem, len(dataset.data), batch_size, 500,
                            config)

  def draw(init):
    # What a run (or a resumed run) has: the same global TF seed, numpy state.
    tf.random.set_seed(1)
    np.random.seed(0)
    return planner(init).init_tensors()

  normal, small, small_again = draw("normal"), draw("problem"), draw("problem")
  assert 0.9 < np.std(normal[0]) < 1.1
  assert 0.009 < np.std(small[0]) < 0.011
  for a, b in zip(small, small_again):
    np.testing.assert_array_equal(a, b)


def test_the_train_state_owns_whether_the_next_series_restarts(tmp_path):
  """A rollback makes the next series start from a fresh optimizer state
  (the carried one is stale); a series that ran clears it; nothing else
  can set it."""
  optimizer = hierarchical_rnn.HierarchicalRNN([4, 5, 5])
  state = train_state.TrainState(
      str(tmp_path), optimizer, meta_learner.build_meta_optimizer(
          optimizer.meta_variables, 1e-3, training_config.TrainingConfig()))
  assert not state.reset_next_series
  state.take_snapshot()
  state.roll_back(0.5)
  assert state.reset_next_series
  state.series_ran()
  assert not state.reset_next_series
  state.restart_next_series()
  assert state.reset_next_series
  with pytest.raises(AttributeError):
    state.reset_next_series = False
