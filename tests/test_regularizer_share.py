"""The regularizer's share of the meta-gradient: recorded where the
regularizer acts (events file and TensorBoard), nowhere else, linear in
alpha, and the calibration's alpha gives back the share it targets."""

import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import plugin_event_accumulator

from l2o_scale import metaopt
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import regularizer as regularizer_lib
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.tools import calibrate_regularizer
from optimizer import hierarchical_rnn
from problems import datasets
from problems import problem_generator as pg
from problems import problem_spec

SHARE_TAGS = ("RegularizerShareMean", "RegularizerShareMax")


def _mlp_problems(data_dir):
  """A 784-3-10 sigmoid MLP on 200 MNIST training rows."""
  mnist = datasets.mnist(train=True, data_dir=data_dir)
  data = datasets.Dataset(mnist.data[:200], mnist.labels[:200], 200)
  spec = problem_spec.Spec(pg.FullyConnected, (784, 10),
                           {"hidden_sizes": (3,),
                            "activation": tf.nn.sigmoid})
  return [(spec, data, 16)]


def _train(logdir, data_dir, regularize_time="always", reg_optimizer=True,
           iterations=2, unrolls=3):
  config = metaopt.TrainingConfig(
      reg_optimizer=reg_optimizer, regularize_time=regularize_time,
      reg_option="jacob", mini_batch_size=64)
  spec = problem_spec.Spec(hierarchical_rnn.HierarchicalRNN, ([4, 5, 5],),
                           {"init_lr_range": (1e-3, 1e-3)})
  out = io.StringIO()
  metaopt.train_optimizer(
      logdir, spec, _mlp_problems(data_dir), 1, iterations, lambda: unrolls,
      lambda: 4, learning_rate=1e-3, gradient_clip=1e4, fix_unroll=True,
      fix_unroll_length=4, fix_num_steps=4 * unrolls, fix_num_steps_eval=4,
      evaluation_epochs=1, out=out, config=config)
  return out.getvalue()


def _events(logdir):
  with open(os.path.join(logdir, reporting.EVENTS)) as f:
    return [json.loads(line) for line in f]


def _scalars(logdir):
  """The share summaries TensorBoard reads: tag -> [(step, value)]."""
  acc = plugin_event_accumulator.EventAccumulator(
      str(logdir), size_guidance={plugin_event_accumulator.TENSORS: 0})
  acc.Reload()
  return {tag: [(e.step, float(tf.make_ndarray(e.tensor_proto)))
                for e in acc.Tensors(tag)]
          for tag in acc.Tags()["tensors"] if tag in SHARE_TAGS}


def test_a_regularized_run_records_its_share(tmp_path, data_dir):
  logdir = str(tmp_path)
  log = _train(logdir, data_dir)
  shares = [e for e in _events(logdir) if e["event"] == "regularizer_share"]
  # Two meta-iterations of 3 unrolls, the regularizer on in each.
  assert [e["meta_iteration"] for e in shares] == [1, 2]
  for event in shares:
    assert event["unrolls"] == [1, 2, 3]
    values = np.array(event["shares"])
    assert np.all(np.isfinite(values)) and np.all(values > 0)
    assert event["mean"] == pytest.approx(values.mean())
    assert event["max"] == values.max()
  assert "regularizer share" in log
  scalars = _scalars(logdir)
  # At the step of each meta-iteration's last unroll (3 updates each).
  assert [s for s, _ in scalars["RegularizerShareMean"]] == [3, 6]
  assert [v for _, v in scalars["RegularizerShareMax"]] == pytest.approx(
      [e["max"] for e in shares])


def test_posterior_records_only_the_unrolls_it_regularizes(tmp_path,
                                                           data_dir):
  # 5 unrolls: 'posterior' acts after int(5 * 0.5 + 1) = 3, on the last.
  _train(str(tmp_path), data_dir, "posterior", iterations=1, unrolls=5)
  shares = [e for e in _events(str(tmp_path))
            if e["event"] == "regularizer_share"]
  assert [e["unrolls"] for e in shares] == [[5]]


@pytest.mark.parametrize("reg_optimizer,regularize_time",
                         [(False, "always"), (True, "none")])
def test_an_unregularized_run_records_no_share(tmp_path, data_dir,
                                               reg_optimizer,
                                               regularize_time):
  log = _train(str(tmp_path), data_dir, regularize_time, reg_optimizer,
               iterations=1)
  assert not [e for e in _events(str(tmp_path))
              if e["event"] == "regularizer_share"]
  assert "regularizer share" not in log
  assert not _scalars(str(tmp_path))


def _meta_step(share=True):
  """``(share(alpha), meta-gradient)`` of one fixed unroll of a small MLP
  with the Hutchinson regularizer, alpha a variable (one trace for all)."""
  np.random.seed(3)
  tf.random.set_seed(0)
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,),
                              activation=tf.nn.sigmoid)
  alpha = tf.Variable(0.)
  reg = regularizer_lib.make_regularizer_config(
      problem, reg_optimizer=True, reg_option="hessian", hessian_itrs=2)
  reg = reg._replace(alpha=alpha)
  rng = np.random.RandomState(0)
  steps = 4
  inputs = unroll_lib.UnrollInputs(
      obj_weights=tf.ones([steps]) / steps,
      batches=tf.constant(rng.randint(0, 40, (steps, 8)), tf.int32),
      mini_data=tf.constant(rng.normal(size=(40, 6)).astype(np.float32)),
      mini_labels=tf.constant(
          np.eye(3, dtype=np.float32)[rng.randint(0, 3, 40)]),
      init_tensors=[tf.constant(rng.normal(size=s).astype(np.float32))
                    for s in problem.param_shapes],
      jacob_switch=True,
      mt_labels=unroll_lib.zero_mt_labels(problem.param_shapes, steps),
      first_unroll=True, reset_state=True,
      state_seed=tf.constant([1, 2], tf.int64))
  optimizer = hierarchical_rnn.HierarchicalRNN(
      [4, 5, 5], init_lr_range=(1e-2, 1e-2), random_seed=5)
  step = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                      regularizer_share=share)

  def run(value):
    alpha.assign(value)
    out, grads = step(inputs, None, False)
    share = out.regularizer_share
    return None if share is None else float(share), grads
  return run


def test_the_share_is_linear_in_alpha_and_the_calibration_inverts_it():
  run = _meta_step()
  share, grads = run(0.1)
  assert share > 0
  # alpha enters only the meta-objective: twice alpha, twice the share.
  assert run(0.2)[0] == pytest.approx(2 * share, rel=1e-5)
  # The calibration's alpha gives back the target share on the same unroll.
  alphas = calibrate_regularizer.summary([share / 0.1], (0.05, 0.25))
  for target, alpha in alphas["alphas"].items():
    assert run(alpha)[0] == pytest.approx(float(target), rel=1e-5)
  # Without the measurement the meta-gradient is the same up to rounding.
  off, plain = _meta_step(share=False)(0.1)
  assert off is None
  for a, b in zip(grads, plain):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-9)


def _calibrate(tmp_path, data_dir, alpha, out):
  values = calibrate_regularizer.define_flags("test_calibration")
  values(["calibrate_regularizer", "--include_mnist_mlp_problems",
          "--data_dir={}".format(data_dir), "--reg_optimizer=True",
          "--reg_option=jacob", "--regularize_time=always",
          "--alpha={!r}".format(alpha), "--fix_unroll=True",
          "--fix_unroll_length=5", "--fix_num_steps=5",
          "--fix_num_steps_eval=5", "--evaluation_period=10",
          "--mini_batch_size=100", "--num_cells=1", "--cell_size=4",
          "--calibration_iterations=1", "--seeds=1",
          "--target_share=0.05,0.25", "--out={}".format(out)])
  return calibrate_regularizer.calibrate(calibrate_regularizer.build(values),
                                         io.StringIO())


def test_the_calibration_command_gives_the_alpha_of_a_target_share(
    tmp_path, data_dir):
  out = str(tmp_path / "calibration.json")
  first = _calibrate(tmp_path, data_dir, 1e-3, out)
  # One meta-iteration of one unroll from the initial meta-parameters: the
  # ratio does not depend on alpha, so the alpha found gives the target.
  assert first["unrolls"] == 1
  again = _calibrate(tmp_path, data_dir, first["alphas"]["0.25"], out)
  assert again["median_ratio"] * first["alphas"]["0.25"] == pytest.approx(
      0.25, rel=1e-5)
  with open(out) as f:
    entries = json.load(f)["calibrations"]
  # Both entries kept (they differ in alpha), each with its provenance.
  assert len(entries) == 2
  assert all(e["command"] and e["machine"] and e["wall_seconds"] > 0
             for e in entries)


def test_the_calibration_refuses_an_unregularized_setting():
  values = calibrate_regularizer.define_flags("test_calibration_refusal")
  values(["calibrate_regularizer", "--reg_optimizer=True",
          "--regularize_time=none"])
  with pytest.raises(ValueError, match="never applies"):
    calibrate_regularizer.build(values)
  values(["calibrate_regularizer", "--reg_optimizer=False",
          "--regularize_time=always"])
  with pytest.raises(ValueError, match="--reg_optimizer=True"):
    calibrate_regularizer.build(values)


def test_the_calibration_reads_metarun_flags_as_metarun_does():
  """The calibration's metarun.py flags are metarun.py's (names, defaults),
  its setting holds each of them that says what a run measures, and the
  RunConfig it builds is the one metarun.py builds of the same command."""
  import metarun  # pylint: disable=g-import-not-at-top
  from l2o_scale.tools import metarun_command  # pylint: disable=g-import-not-at-top
  ours = metarun_command.define_flags("test_metarun_command")
  assert metarun_command.flag_names() == sorted(
      n for n in metarun.FLAGS if metarun.FLAGS[n].name == n)
  assert all(ours[n].default == metarun.FLAGS[n].default
             for n in metarun_command.flag_names())
  argv = ["metarun.py", "--include_mnist_mlp_problems", "--alpha=0.002",
          "--reg_optimizer=True", "--fix_unroll=True", "--seed=3"]
  ours(argv)
  # repr: the schedule's unroll samplers are partials, equal by identity.
  assert repr(metarun_command.run_config(ours)) == repr(
      metarun.parse_config(argv))
  values = calibrate_regularizer.define_flags("test_calibration_setting")
  values(["calibrate_regularizer", "--reg_optimizer=True", "--alpha=0.002",
          "--seeds=1,2"])
  calibration = calibrate_regularizer.build(values)
  assert calibration.seeds == [1, 2]
  assert calibration.setting["alpha"] == 0.002
  assert set(calibration.setting) == (
      set(metarun_command.flag_names()) - calibrate_regularizer.NOT_SETTING -
      {"allow_data_change"})


def test_the_hessian_fixture_replays_with_the_share_recorded(
    monkeypatch, fixtures_dir, data_dir):
  """The TF1 reference of a regularized meta-training replays within its
  tolerances with the share measured in every unroll where it acts."""
  from l2o_scale.fidelity import tf1_reference  # pylint: disable=g-import-not-at-top
  make, measured = meta_step_lib.make_meta_step, []
  share = regularizer_lib.gradient_share

  def recording(*args, **kwargs):
    return make(*args, regularizer_share=True, **kwargs)

  def counted(*args):
    measured.append(True)
    return share(*args)
  monkeypatch.setattr(meta_step_lib, "make_meta_step", recording)
  monkeypatch.setattr(regularizer_lib, "gradient_share", counted)
  status, _, message = tf1_reference.replay_fixture(
      os.path.join(fixtures_dir, "train_hessian_esd_on"), data_dir)
  assert status == "PASS", message
  assert measured
