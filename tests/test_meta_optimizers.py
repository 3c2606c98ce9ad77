"""The meta-optimizers ``--meta_optimizer``/``--meta_lr_warmup`` choose:
each rule against its closed form computed by hand in numpy, the warm-up,
the learning-rate change of a rollback, the slots a rollback restores, the
checkpoint layout, and the TF1 kernels that compute the same update."""

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_training import meta_learner
from l2o_scale.meta_training import stability
from l2o_scale.steps import tf1_optimizers
from l2o_scale.meta_training import training_config as training

GRADS = [np.array([0.5, -2., 1e-3], np.float32),
         np.array([0.25, 1., -4.], np.float32),
         np.array([-1., 3., 2.], np.float32)]
START = np.array([1., -1., 0.5], np.float32)


def _build(name, learning_rate=0.1, warmup=0, variables=None, **config):
  variables = variables or [tf.Variable(START)]
  config = training.TrainingConfig(meta_optimizer=name, meta_lr_warmup=warmup,
                                   **config)
  return variables, meta_learner.build_meta_optimizer(variables,
                                                      learning_rate, config)


def _run(name, grads=GRADS, **kwargs):
  (var,), opt = _build(name, **kwargs)
  values = []
  for g in grads:
    opt.apply_gradients([tf.constant(g)])
    values.append(var.numpy().astype(np.float64))
  return values, opt


def test_rmsprop_ms0_matches_its_closed_form():
  values, opt = _run("rmsprop_ms0", rms_decay=0.9, rms_epsilon=1e-20)
  x, ms = START.astype(np.float64), np.zeros(3)
  for g, got in zip(GRADS, values):
    ms = 0.9 * ms + 0.1 * g.astype(np.float64) ** 2
    x = x - 0.1 * g / np.sqrt(ms + 1e-20)
    np.testing.assert_allclose(got, x, rtol=1e-6)
  # The first step is lr * g / sqrt(0.1 g^2): sqrt(10) lr in every entry,
  # however small the gradient (the original's ms = 1 gives lr * g).
  first = START - _run("rmsprop_ms0", GRADS[:1])[0][0]
  np.testing.assert_allclose(np.abs(first), 0.1 * np.sqrt(10.), rtol=1e-5)
  assert isinstance(opt, tf1_optimizers.RMSProp)
  assert int(opt.iterations.numpy()) == 3


def test_original_rmsprop_is_the_default_and_starts_ms_at_one():
  values, opt = _run(training.TrainingConfig().meta_optimizer,
                     rms_decay=0.9, rms_epsilon=1e-20)
  x, ms = START.astype(np.float64), np.ones(3)
  for g, got in zip(GRADS, values):
    ms = 0.9 * ms + 0.1 * g.astype(np.float64) ** 2
    x = x - 0.1 * g / np.sqrt(ms + 1e-20)
    np.testing.assert_allclose(got, x, rtol=1e-6)
  assert training.TrainingConfig().meta_lr_warmup == 0
  assert isinstance(opt, tf1_optimizers.RMSProp)


def test_adam_matches_its_closed_form_with_bias_correction():
  values, opt = _run("adam")
  x, m, v = START.astype(np.float64), np.zeros(3), np.zeros(3)
  for t, (g, got) in enumerate(zip(GRADS, values), 1):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g.astype(np.float64) ** 2
    # TF1's form (tf.compat.v1.train.AdamOptimizer docs): the bias
    # correction folded into the step size, epsilon added to sqrt(v).
    lr_t = 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    x = x - lr_t * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, x, rtol=1e-5)
  # The first step is lr * sign(g), whatever the gradient's scale (up to
  # epsilon: 3e-4 relative for the gradient 1e-3).
  np.testing.assert_allclose(START - values[0], 0.1 * np.sign(GRADS[0]),
                             rtol=5e-4)
  assert int(opt.iterations.numpy()) == 3 and float(opt.step.numpy()) == 3.


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_ms0", "adam"])
def test_linear_warmup_scales_the_first_steps(name):
  # A constant gradient of 1: with RMSProp decay 0 (ms = g^2 = 1 from the
  # first update on, whatever it started at) and with Adam (m and v bias
  # corrected to 1) every full step is lr, so step n is lr * min(1, n / 4).
  grads = [np.ones(3, np.float32)] * 6
  values, opt = _run(name, grads=grads, warmup=4, rms_decay=0.)
  steps = -np.diff(np.concatenate([[START], values]), axis=0)[:, 0]
  # (Differences of float32 values near 1: absolute error ~1e-7.)
  np.testing.assert_allclose(steps, 0.1 * np.array([.25, .5, .75, 1., 1., 1.]),
                             rtol=0, atol=1e-6)
  assert opt.learning_rate == pytest.approx(0.1)  # the base rate


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_ms0", "adam"])
def test_set_learning_rate_changes_the_next_steps(name):
  (var,), opt = _build(name, warmup=2, rms_decay=0.)
  ones = tf.ones([3])
  opt.apply_gradients([ones])  # lr/2 (warm-up)
  opt.set_learning_rate(0.01)  # what a rollback does
  assert opt.learning_rate == pytest.approx(0.01)
  opt.apply_gradients([ones])  # 0.01, warm-up over
  opt.apply_gradients([ones])
  np.testing.assert_allclose(START - var.numpy(), [0.05 + 0.02] * 3,
                             rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_ms0", "adam"])
def test_rollback_snapshot_restores_the_whole_update_state(name):
  variables, opt = _build(name)
  snapshot = stability.MetaSnapshot(opt, variables)
  opt.apply_gradients([tf.constant(GRADS[0])])
  snapshot.take()
  opt.apply_gradients([tf.constant(GRADS[1])])
  after = [variables[0].numpy()] + [s.numpy() for s in opt.slot_variables()]
  opt.apply_gradients([tf.constant(GRADS[2])])
  snapshot.restore()
  opt.apply_gradients([tf.constant(GRADS[1])])
  for a, b in zip(after, [variables[0].numpy()] +
                  [s.numpy() for s in opt.slot_variables()]):
    np.testing.assert_array_equal(a, b)


def _saved_names(opt, path):
  tf.train.Checkpoint(meta_optimizer=opt).write(path)
  return sorted(n for n in tf.train.load_checkpoint(path)
                .get_variable_to_shape_map() if n.startswith("meta_optimizer"))


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_ms0", "adam"])
def test_checkpoint_round_trip_continues_exactly(name, tmp_path):
  variables, opt = _build(name, warmup=3)
  opt.apply_gradients([tf.constant(GRADS[0])])
  opt.apply_gradients([tf.constant(GRADS[1])])
  path = str(tmp_path / "ckpt")
  names = _saved_names(opt, path)
  twin_vars, twin = _build(name, warmup=3,
                           variables=[tf.Variable(variables[0].numpy())])
  tf.train.Checkpoint(meta_optimizer=twin).read(path).assert_consumed()
  for o, v in ((opt, variables), (twin, twin_vars)):
    o.apply_gradients([tf.constant(GRADS[2])])
  np.testing.assert_array_equal(variables[0].numpy(), twin_vars[0].numpy())
  # The learning rate lives in the resume state, not in the checkpoint; the
  # original's layout is unchanged (ms, mom, iterations).
  expected = {"rmsprop": ["iterations", "mom/0", "ms/0"],
              "rmsprop_ms0": ["iterations", "mom/0", "ms/0"],
              "adam": ["iterations", "m/0", "step", "v/0"]}[name]
  assert names == ["meta_optimizer/{}/.ATTRIBUTES/VARIABLE_VALUE".format(e)
                   for e in expected]


def test_tf1_kernels_compute_the_same_updates():
  """What a parameter server would run with locking: ``ResourceApplyRMSProp``
  (ms slot starting at 0) and ``ResourceApplyAdam`` (beta powers of the
  ``step`` slot), both fed ``learning_rate_tensor()`` (warm-up included)."""
  rng = np.random.RandomState(0)
  grads = [rng.normal(size=3).astype(np.float32) for _ in range(4)]
  for name in ("rmsprop_ms0", "adam"):
    (port_var,), port = _build(name, 1e-2, warmup=3, rms_epsilon=1e-20)
    (kernel_var,), kernel = _build(name, 1e-2, warmup=3, rms_epsilon=1e-20)

    @tf.function
    def kernel_step(grad, kernel=kernel, kernel_var=kernel_var):
      lr = kernel.learning_rate_tensor()
      if isinstance(kernel, tf1_optimizers.Adam):
        beta1_power, beta2_power = kernel.beta_powers()
        tf.raw_ops.ResourceApplyAdam(
            var=kernel_var.handle, m=kernel.m[0].handle,
            v=kernel.v[0].handle, beta1_power=beta1_power,
            beta2_power=beta2_power, lr=lr, beta1=kernel.beta1,
            beta2=kernel.beta2, epsilon=kernel.epsilon, grad=grad,
            use_locking=True)
        kernel.step.assign_add(1.)
      else:
        tf.raw_ops.ResourceApplyRMSProp(
            var=kernel_var.handle, ms=kernel.ms[0].handle,
            mom=kernel.mom[0].handle, lr=lr, rho=kernel.decay,
            momentum=kernel.momentum, epsilon=kernel.epsilon, grad=grad,
            use_locking=True)
      kernel.iterations.assign_add(1)

    for g in grads:
      port.apply_gradients([tf.constant(g)])
      kernel_step(tf.constant(g))
    for a, b in zip([port_var] + port.slot_variables(),
                    [kernel_var] + kernel.slot_variables()):
      np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=1e-7,
                                 err_msg=name)
    assert not np.allclose(port_var.numpy(), START)


def test_unknown_meta_optimizer_and_negative_warmup_are_refused():
  with pytest.raises(ValueError, match="not one of rmsprop, rmsprop_ms0"):
    _build("sgd")
  with pytest.raises(ValueError, match="meta_lr_warmup must be >= 0"):
    _build("adam", warmup=-1)
