"""The long-horizon check's rules on synthetic runs (closed forms)."""

import numpy as np

# metatest first: the check's rules import beside metatest.py's flags
# (a test process holds both).
import metatest  # pylint: disable=unused-import
from l2o_scale.tools import horizon_check


def _heldout(acc_at):
  its = sorted(acc_at)
  return {"iteration": its, "heldout_accuracy": [acc_at[i] for i in its],
          "train_loss": [1. / i for i in its]}


def test_metrics_read_the_prefix_of_a_run():
  losses = np.concatenate([np.full(500, 2.), np.full(500, 1.)])
  m = horizon_check.seed_metrics(losses, _heldout({500: .5, 1000: .9}), 500)
  assert m == {"finite": True, "final": 2., "best": 2., "accuracy": .5,
               "split_loss": 1. / 500}
  m = horizon_check.seed_metrics(losses, _heldout({500: .5, 1000: .9}), 1000)
  assert m["final"] == 1. and m["best"] == 1. and m["accuracy"] == .9


def test_rules():
  adam = {"finite": True, "final": .01, "best": .01, "accuracy": .90}
  good = {"finite": True, "final": .005, "best": .004, "accuracy": .896}
  assert horizon_check.verdict(good, adam, 1.5, .005) == []
  drift = dict(good, best=.003)  # .005 > 1.5 * .003
  assert "late drift" in horizon_check.verdict(drift, adam, 1.5, .005)[0]
  worse = dict(good, final=.02, best=.02)
  assert "not below Adam" in horizon_check.verdict(worse, adam, 1.5, .005)[0]
  overfit = dict(good, accuracy=.894)
  assert "held-out" in horizon_check.verdict(overfit, adam, 1.5, .005)[0]
  nan = dict(good, finite=False)
  assert horizon_check.verdict(nan, adam, 1.5, .005) == ["non-finite loss"]


def test_a_step_schedule_runs_each_horizon_alone():
  """A decay depends on the run's length: a scheduled horizon is a run of
  its own, a constant-step one the prefix of the longest run."""
  assert horizon_check.learned_dir("o", "p", 2000, "none") == "o/p"
  assert horizon_check.learned_dir("o", "p", 2000, "cosine") == \
      "o/p/cosine2000"
  assert horizon_check.learned_dir("o", "p", 10000, "cosine") == \
      "o/p/cosine10000"
  assert horizon_check.learned_dir("o", "p", 10000, "cosine", 0.8) == \
      "o/p/cosine-from0.8-10000"


def test_the_learned_runs_get_the_step_transforms_of_the_check():
  flag_values = horizon_check.define_flags("horizon_check_test")
  flag_values(["horizon_check", "--pretrained=l2o-scale"])
  assert horizon_check.learned_source(flag_values) == [
      "--pretrained=l2o-scale"]
  flag_values(["horizon_check", "--pretrained=l2o-scale",
               "--weight_decay=1e-3", "--hold_zero_gradients"])
  assert horizon_check.learned_source(flag_values) == [
      "--pretrained=l2o-scale", "--weight_decay=0.001",
      "--hold_zero_gradients"]
