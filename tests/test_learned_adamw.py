"""LearnedAdamW (l2o_scale/learned_adamw.py) and its rule
(l2o_scale/steps/controlled_adamw.py): with no controller it is Keras's
AdamW with a cosine decay, bit for bit; a controller moves each tensor's
learning rate and decay within their bounds; the optimizer's config and
variables keep it whole through ``model.save``; bad controllers are refused
in one line."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.learned_adamw import LearnedAdamW
from l2o_scale.learned_adamw import load_controller
from l2o_scale.steps import controlled_adamw as rule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _model():
  keras.utils.set_random_seed(3)
  return keras.Sequential([keras.Input((12,)),
                           keras.layers.Dense(8, activation="tanh"),
                           keras.layers.LayerNormalization(),
                           keras.layers.Dense(3)])


def _data():
  rng = np.random.default_rng(0)
  return (rng.standard_normal((64, 12)).astype(np.float32),
          rng.integers(0, 3, 64))


def _train(optimizer, epochs=4, jit_compile=False, model=None):
  model = model or _model()
  model.compile(optimizer=optimizer, jit_compile=jit_compile,
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  x, y = _data()
  model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=False)
  return model


def _controller(seed=0, scale=1.):
  theta = rule.initial_theta(seed)
  hidden = rule.NUM_INPUTS * rule.HIDDEN_UNITS + rule.HIDDEN_UNITS
  theta[hidden:] = scale * np.random.default_rng(seed).standard_normal(
      rule.NUM_PARAMETERS - hidden)
  return theta


@pytest.mark.parametrize("jit_compile", [False, True])
def test_without_a_controller_it_is_keras_adamw_with_a_cosine_decay(
    jit_compile):
  total = 12  # 16 steps: also past the end of the decay
  mine = LearnedAdamW(total, learning_rate=3e-3, weight_decay=0.05)
  mine.exclude_from_weight_decay(var_names=["gamma"])
  mine = _train(mine, jit_compile=jit_compile)
  reference = keras.optimizers.AdamW(
      keras.optimizers.schedules.CosineDecay(3e-3, total),
      weight_decay=0.05)
  reference.exclude_from_weight_decay(var_names=["gamma"])
  theirs = _train(reference, jit_compile=jit_compile)
  for a, b in zip(mine.get_weights(), theirs.get_weights()):
    np.testing.assert_array_equal(a, b)
  # A random hidden layer with a zero output layer is still the base rule.
  hidden_only = LearnedAdamW(total, controller=rule.initial_theta(5),
                             learning_rate=3e-3, weight_decay=0.05)
  hidden_only.exclude_from_weight_decay(var_names=["gamma"])
  hidden_only = _train(hidden_only, jit_compile=jit_compile)
  for a, b in zip(hidden_only.get_weights(), theirs.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_the_rules_cosine_is_keras_cosine_decay():
  for total in (7, 100, 5000):
    schedule = keras.optimizers.schedules.CosineDecay(3e-3, total)
    for step in sorted({0, 1, total // 3, total - 1, total, total + 5}):
      assert float(schedule(step)) == float(
          rule.cosine_learning_rate(3e-3, step, total))


def test_a_controller_changes_each_tensors_step_within_its_bounds():
  rng = np.random.default_rng(1)
  params = [tf.constant(rng.standard_normal((4, 3)), tf.float32),
            tf.zeros([3])]
  grads = [tf.constant(rng.standard_normal((4, 3)), tf.float32),
           tf.ones([3])]
  zeros = [tf.zeros_like(p) for p in params]
  settings = rule.Settings(1e-3, 0.004)
  base = rule.step(rule.initial_theta(0), settings, params, grads, zeros,
                   zeros, rule.initial_state(2), 0, 10)
  for scale in (1., 100.):
    out = rule.step(_controller(0, scale), settings, params, grads, zeros,
                    zeros, rule.initial_state(2), 0, 10)
    lr_mult, decay_mult = (m.numpy() for m in out[4])
    assert np.all(lr_mult >= 1. / rule.MAX_LR_MULTIPLIER * (1 - 1e-6))
    assert np.all(lr_mult <= rule.MAX_LR_MULTIPLIER * (1 + 1e-6))
    assert np.all(decay_mult >= 1. / rule.MAX_DECAY_MULTIPLIER * (1 - 1e-6))
    assert np.all(decay_mult <= rule.MAX_DECAY_MULTIPLIER * (1 + 1e-6))
    assert not np.allclose(lr_mult, 1.)
    # The moments are Adam's whatever the controller says.
    for a, b in zip(out[1] + out[2], base[1] + base[2]):
      np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The matrix's step is the base step times its multiplier (no decay
    # from a zero start of the moments aside, which the bias term carries).
    step = params[0].numpy() - out[0][0].numpy()
    base_step = params[0].numpy() - base[0][0].numpy()
    decay = params[0].numpy() * 0.004 * 1e-3
    np.testing.assert_allclose(
        step - decay * decay_mult[0] * lr_mult[0],
        (base_step - decay) * lr_mult[0], rtol=2e-4, atol=1e-9)


def test_the_controller_reads_scale_free_inputs():
  """The inputs do not change when the loss is scaled (every gradient
  times c): the loss-scale augmentation of meta-training cannot be read."""
  rng = np.random.default_rng(2)
  params = [tf.constant(rng.standard_normal((5, 4)), tf.float32)]
  g = rng.standard_normal((3, 5, 4)).astype(np.float32)

  def inputs(scale):
    ms, vs = [tf.zeros([5, 4])], [tf.zeros([5, 4])]
    state = rule.initial_state(1)
    p = params
    for k in range(3):
      grads = [tf.constant(g[k] * scale)]
      # The features the controller reads at this step.
      feats, _ = rule.tensor_inputs(p, grads, ms, [
          rule.direction(*rule.moments(grads[0], ms[0], vs[0], 0.9, 0.999),
                         1e-3, 1e-7)], state[1], tf.equal(state[0][0], 0.))
      p, ms, vs, state, _ = rule.step(_controller(1), rule.Settings(
          1e-3, 0.), p, grads, ms, vs, state, k, 10)
    return feats.numpy()
  np.testing.assert_allclose(inputs(1.), inputs(1000.), atol=2e-3)


def test_config_round_trips_every_argument():
  optimizer = LearnedAdamW(500, controller=_controller(2), learning_rate=2e-3,
                           weight_decay=0.1, beta_1=0.8, beta_2=0.99,
                           epsilon=1e-6, clipnorm=1.5)
  config = optimizer.get_config()
  again = LearnedAdamW.from_config(config)
  assert again.get_config() == config
  np.testing.assert_array_equal(again.controller, _controller(2))
  assert (again.total_steps, again.beta_1, again.clipnorm) == (500, 0.8, 1.5)


def test_a_saved_model_continues_bit_for_bit_in_another_process(tmp_path):
  x, y = _data()
  optimizer = LearnedAdamW(20, controller=_controller(3))
  model = _train(optimizer, epochs=2)
  path = str(tmp_path / "model.keras")
  model.save(path)
  _train(optimizer, epochs=2, model=model)
  expected = str(tmp_path / "expected.npz")
  np.savez(expected, *model.get_weights())
  np.savez(str(tmp_path / "data.npz"), x=x, y=y)
  script = (
      "import keras, numpy as np, sys\n"
      "import l2o_scale\n"
      "m = keras.models.load_model(sys.argv[1])\n"
      "d = np.load(sys.argv[2])\n"
      "assert type(m.optimizer).__name__ == 'LearnedAdamW'\n"
      "m.fit(d['x'], d['y'], batch_size=16, epochs=2, verbose=0, "
      "shuffle=False)\n"
      "e = np.load(sys.argv[3])\n"
      "same = all(np.array_equal(a, e['arr_%d' % i]) for i, a in "
      "enumerate(m.get_weights()))\n"
      "print('SAME' if same else 'DIFFERENT', int(m.optimizer.iterations))\n")
  done = subprocess.run([sys.executable, "-c", script, path,
                         str(tmp_path / "data.npz"), expected], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.split()[-2:] == ["SAME", "16"], done.stdout


def test_bad_settings_and_controllers_are_refused_in_one_line(tmp_path):
  with pytest.raises(ValueError, match="needs total_steps"):
    LearnedAdamW(None)
  with pytest.raises(ValueError, match="learning_rate must be a positive"):
    LearnedAdamW(10, learning_rate=-1.)
  with pytest.raises(ValueError, match="322 parameters, got shape"):
    LearnedAdamW(10, controller=np.zeros(5))
  bad = np.zeros(rule.NUM_PARAMETERS, np.float32)
  bad[7] = np.nan
  with pytest.raises(ValueError, match="not all finite"):
    LearnedAdamW(10, controller=bad)
  good = str(tmp_path / "c.npz")
  np.savez(good, theta=_controller(4))
  np.testing.assert_array_equal(load_controller(good), _controller(4))
  truncated = str(tmp_path / "t.npz")
  with open(good, "rb") as f, open(truncated, "wb") as g:
    g.write(f.read()[:200])
  text = str(tmp_path / "text.npz")
  with open(text, "w") as f:
    f.write("not a controller\n")
  for path in (truncated, text):
    with pytest.raises(ValueError, match="is not a saved controller") as e:
      LearnedAdamW(10, controller=path)
    assert path in str(e.value) and "\n" not in str(e.value)
  with pytest.raises(FileNotFoundError, match="no controller file"):
    LearnedAdamW(10, controller=str(tmp_path / "missing.npz"))


def test_a_shipped_learned_adamw_runs_by_name_in_keras_and_the_benchmark(
    tmp_path, monkeypatch):
  """A controller shipped by controller_training.ship is found by name:
  LearnedOptimizer.pretrained gives LearnedAdamW with its controller and
  base settings, the benchmark builds the same optimizer and names it by
  the controller file's digest."""
  from l2o_scale import keras_optimizer
  from l2o_scale import pretrained
  from l2o_scale.benchmark import optimizers
  from l2o_scale.controller_training import ship
  from l2o_scale.controller_training import training
  train_dir = str(tmp_path / "run")
  os.makedirs(train_dir)
  config = training.ControllerTrainingConfig(base_learning_rate=3e-3,
                                             base_weight_decay=0.05)
  with open(os.path.join(train_dir, training.SETTINGS_FILE), "w") as f:
    json.dump(config.settings(), f)
  with open(os.path.join(train_dir, training.LOG_FILE), "w") as f:
    f.write(json.dumps(dict(estimate=1, seconds=2.)) + "\n")
  np.savez(str(tmp_path / "c.npz"), theta=_controller(5))
  root = str(tmp_path / "shipped")
  ship.ship("l2o-test-adamw", str(tmp_path / "c.npz"), train_dir,
            dict(validation_score=-0.1), "a command", root=root)
  monkeypatch.setattr(pretrained, "ROOT", root)
  assert pretrained.names() == ["l2o-test-adamw"]
  optimizer = keras_optimizer.LearnedOptimizer.pretrained("l2o-test-adamw",
                                                          total_steps=40)
  assert isinstance(optimizer, LearnedAdamW)
  np.testing.assert_array_equal(optimizer.controller, _controller(5))
  assert optimizer.settings.as_dict() == config.base().as_dict()
  assert optimizer.total_steps == 40
  make, name = optimizers.factory("l2o-test-adamw")
  assert isinstance(make(50), LearnedAdamW) and make(50).total_steps == 50
  assert name.startswith("l2o-test-adamw@")
  assert optimizers.bare_variant("l2o-test-adamw") is None
  with pytest.raises(ValueError, match="no hand-set settings"):
    optimizers.parse("l2o-test-adamw+bare")
  with pytest.raises(ValueError, match="controller without a checkpoint"):
    pretrained.checkpoint("l2o-test-adamw")
  os.remove(os.path.join(root, "l2o-test-adamw", ship.SUBDIR,
                         "controller.npz"))
  with pytest.raises(pretrained.DamagedError, match="controller.npz is "
                     "missing"):
    LearnedAdamW.pretrained("l2o-test-adamw", total_steps=10)
