"""Tests of l2o_scale.steps: the step transforms against closed forms, their
composition by chain, their Keras forms, and a new transform plugged into
test_optimizer without touching it."""

import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.meta_testing import baselines
from l2o_scale.meta_testing import testing
from l2o_scale.steps import settings
from l2o_scale.steps import step_schedule
from l2o_scale.steps import transform
from l2o_scale.steps import weight_decay
from problems import problem_generator as pg

OLD = [np.array([1., -2.], np.float32), np.array([[4.]], np.float32)]
PROPOSED = [np.array([0.5, -1.], np.float32), np.array([[3.]], np.float32)]


def _apply(chain, inputs=None):
  out = chain.apply([tf.constant(v) for v in OLD],
                    [tf.constant(v) for v in PROPOSED], inputs or {})
  return [np.asarray(v) for v in out]


def test_chain_applies_in_order_each_to_the_proposal_before():
  """Schedule then decay: old + s (proposed - old) - s wd old; the other
  order decays first, then scales the decayed proposal (another number)."""
  s, wd = 0.5, 0.1
  scale_then_decay = transform.chain(step_schedule.ScaleStep(),
                                     weight_decay.decoupled_weight_decay(wd))
  got = _apply(scale_then_decay, {transform.SCALE: tf.constant(s)})
  for g, o, p in zip(got, OLD, PROPOSED):
    np.testing.assert_allclose(g, o + s * (p - o) - s * wd * o, rtol=1e-6)
  decay_then_scale = transform.chain(weight_decay.decoupled_weight_decay(wd),
                                     step_schedule.ScaleStep())
  got = _apply(decay_then_scale, {transform.SCALE: tf.constant(s)})
  for g, o, p in zip(got, OLD, PROPOSED):
    np.testing.assert_allclose(g, o + s * (p - s * wd * o - o), rtol=1e-6)
  nested = transform.chain(transform.chain(step_schedule.ScaleStep()),
                           weight_decay.decoupled_weight_decay(wd))
  assert nested.key() == scale_then_decay.key()


def test_transforms_that_are_off_add_no_op():
  """Weight decay 0 and the schedule none are the identity: the chain
  drops them, returns the proposal bit for bit and traces no op."""
  off = settings.step_transforms_from()
  assert off.is_identity and off.step_inputs(10) == {}
  assert settings.step_transforms_from(weight_decay=0.,
                                       step_schedule="none").is_identity
  for got, p in zip(_apply(off), PROPOSED):
    np.testing.assert_array_equal(got, p)
  graph = tf.function(lambda o, p: off.apply([o], [p], {})).get_concrete_function(
      tf.TensorSpec([2]), tf.TensorSpec([2])).graph
  assert {op.type for op in graph.get_operations()} <= {"Placeholder",
                                                        "Identity", "NoOp"}
  on = settings.step_transforms_from(weight_decay=0.1)
  graph = tf.function(lambda o, p: on.apply([o], [p], {})).get_concrete_function(
      tf.TensorSpec([2]), tf.TensorSpec([2])).graph
  assert "Sub" in {op.type for op in graph.get_operations()}


def test_weight_decay_closed_form_with_a_mask_and_without_a_scale():
  wd = 0.25
  got = _apply(transform.chain(weight_decay.decoupled_weight_decay(
      wd, mask=[True, False])))
  np.testing.assert_allclose(got[0], PROPOSED[0] - wd * OLD[0], rtol=1e-6)
  np.testing.assert_array_equal(got[1], PROPOSED[1])
  for bad in (-1e-4, float("nan"), float("inf")):
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
      weight_decay.decoupled_weight_decay(bad)


def test_settings_build_the_chain_and_check_their_values_now():
  chain = settings.step_transforms_from(weight_decay=1e-3,
                                        step_schedule="cosine",
                                        step_decay_start=0.8)
  assert [type(t).__name__ for t in chain.transforms] == [
      "ScaleBySchedule", "DecoupledWeightDecay"]
  np.testing.assert_array_equal(chain.step_inputs(50)[transform.SCALE],
                                step_schedule.step_scales("cosine", 50, 0.8))
  with pytest.raises(ValueError, match="unknown step schedule 'cosin'"):
    settings.step_transforms_from(step_schedule="cosin")
  with pytest.raises(ValueError, match="decay_start in"):
    settings.step_transforms_from(step_schedule="linear",
                                  step_decay_start=1.)
  with pytest.raises(ValueError, match="two step transforms give"):
    transform.chain(step_schedule.scale_by_schedule("linear"),
                    step_schedule.scale_by_schedule("cosine")).step_inputs(5)


@pytest.mark.parametrize("name,start", [("cosine", 0.8), ("cosine", 0.),
                                        ("linear", 0.)])
def test_keras_form_of_the_schedule_gives_the_same_scales(name, start):
  chain = settings.step_transforms_from(weight_decay=2e-3,
                                        step_schedule=name,
                                        step_decay_start=start)
  kwargs = chain.keras_kwargs(100)
  assert kwargs["weight_decay"] == 2e-3
  np.testing.assert_allclose(
      [float(kwargs["learning_rate"](t)) for t in range(100)],
      step_schedule.step_scales(name, 100, start), atol=1e-6)
  with pytest.raises(ValueError, match="Keras has no form"):
    settings.step_transforms_from(step_schedule="linear",
                                  step_decay_start=0.5).keras_kwargs(100)


class _HalveEveryOtherStep(transform.StepTransform):
  """A new transform, written only here: every other step moves half way
  (its own per-step input)."""

  def apply(self, old, proposed, inputs):
    h = inputs["half"]
    return [o + (1. - 0.5 * h) * (p - o) for o, p in zip(old, proposed)]

  def step_inputs(self, num_steps):
    return {"half": (np.arange(num_steps) % 2).astype(np.float32)}


def test_a_new_transform_runs_in_test_optimizer_unchanged():
  """SGD under the new transform chained with a weight decay follows the
  closed form step by step; the attention refusal holds for it too."""
  steps, lr, wd = 6, 0.05, 0.1
  problem = pg.Quadratic(5, random_seed=3)
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  w, y = problem.w.astype(np.float64), problem.y.astype(np.float64)
  chain = transform.chain(_HalveEveryOtherStep(),
                          weight_decay.decoupled_weight_decay(wd))
  _, params, _ = testing.test_optimizer(baselines.build("SGD", lr), problem,
                                        steps, seed=init, progress=False,
                                        step_transforms=chain)
  x = init[0].astype(np.float64)
  for t in range(steps):
    x = x - (1. - 0.5 * (t % 2)) * lr * (w.T @ (w @ x - y)) - wd * x
  np.testing.assert_allclose(params[0], x, rtol=2e-5, atol=1e-6)
  with pytest.raises(ValueError, match="not both"):
    testing.test_optimizer(baselines.build("SGD", lr), problem, steps,
                           seed=init, progress=False, step_transforms=chain,
                           weight_decay=0.1)

  class _Attends(object):
    use_attention = True
  with pytest.raises(ValueError, match="use_attention"):
    chain.check(_Attends())
  transform.chain().check(_Attends())  # the identity goes with anything


def test_keras_weight_decay_is_the_transform_and_honours_exclusions():
  """Keras' weight_decay decays by weight_decay * learning_rate of the
  values before the step, except the variables Keras is told to exclude;
  with an optimizer that attends it is refused as in metatest."""
  import keras  # pylint: disable=g-import-not-at-top
  from l2o_scale import keras_optimizer  # pylint: disable=g-import-not-at-top
  init = [np.full((3,), 2., np.float32), np.full((2,), -3., np.float32)]
  grads = [np.linspace(-1., 1., 3).astype(np.float32),
           np.ones(2, np.float32)]

  def one_step(**kwargs):
    tf.random.set_seed(0)
    opt = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale", **kwargs)
    variables = [keras.Variable(v, name=n)
                 for v, n in zip(init, ("kernel", "bias"))]
    opt.exclude_from_weight_decay(var_names=["bias"])
    opt.apply(grads, variables)
    return [v.numpy() for v in variables]

  plain, decayed = one_step(), one_step(weight_decay=0.1, learning_rate=0.5)
  halved = one_step(learning_rate=0.5)
  assert np.abs(plain[0] - init[0]).max() > 1e-5  # the learned step moves
  np.testing.assert_allclose(decayed[0], halved[0] - 0.5 * 0.1 * init[0],
                             rtol=1e-6)
  np.testing.assert_array_equal(decayed[1], halved[1])
  learned = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale")
  learned.learned_optimizer.use_attention = True
  with pytest.raises(ValueError, match="use_attention"):
    keras_optimizer.LearnedOptimizer(learned.learned_optimizer,
                                     weight_decay=1e-3)


def test_hold_zero_gradients_keeps_exactly_the_coordinates_without_gradient():
  """Closed form: where the gradient is 0 the old value, elsewhere the
  proposal; a weight decay chained after it still decays a held coordinate;
  without the step's gradients it refuses; off, it is the identity."""
  grads = [tf.constant([0., -0.3]), tf.constant([[0.]])]
  hold = settings.step_transforms_from(hold_zero_gradients=True)
  got = _apply(hold, {transform.GRADIENTS: grads})
  np.testing.assert_array_equal(got[0], [OLD[0][0], PROPOSED[0][1]])
  np.testing.assert_array_equal(got[1], OLD[1])
  wd = 0.1
  got = _apply(settings.step_transforms_from(hold_zero_gradients=True,
                                             weight_decay=wd),
               {transform.GRADIENTS: grads})
  np.testing.assert_allclose(got[0], [OLD[0][0], PROPOSED[0][1]] -
                             wd * OLD[0], rtol=1e-6)
  np.testing.assert_allclose(got[1], OLD[1] - wd * OLD[1], rtol=1e-6)
  with pytest.raises(ValueError, match="needs this step's gradients"):
    _apply(hold)
  assert settings.step_transforms_from(hold_zero_gradients=False).is_identity
  assert hold.keras_kwargs(100) == {"hold_zero_gradients": True}
  with pytest.raises(ValueError, match="must be True or False"):
    settings.step_transforms_from(hold_zero_gradients="yes")


def _dead_quadratic():
  """A quadratic whose last two coordinates never get a gradient (their
  columns of W are zero), and its starting point."""
  problem = pg.Quadratic(5, random_seed=3)
  problem.w[:, 3:] = 0.
  init = [np.random.RandomState(0).randn(5, 1).astype(np.float32)]
  return problem, init


def test_meta_test_holds_the_learned_step_where_the_gradient_is_zero():
  """The shipped learned optimizer moves coordinates without a gradient;
  with hold_zero_gradients they stay where they started and the others
  follow the same trajectory (the optimizer's state never reads them)."""
  from l2o_scale import keras_optimizer  # pylint: disable=g-import-not-at-top
  learned = keras_optimizer.LearnedOptimizer.pretrained(
      "l2o-scale").learned_optimizer
  problem, init = _dead_quadratic()

  def run(hold):
    tf.random.set_seed(0)  # the initial learning rates are drawn
    return testing.test_optimizer(learned, problem, 20, seed=init,
                                  progress=False,
                                  hold_zero_gradients=hold)[1][0]
  plain, held = run(False), run(True)
  assert np.abs(plain[3:] - init[0][3:]).min() > 1e-6
  np.testing.assert_array_equal(held[3:], init[0][3:])
  np.testing.assert_allclose(held[:3], plain[:3], rtol=1e-5, atol=1e-7)


def test_keras_hold_zero_gradients_is_the_transform_and_in_the_config():
  import keras  # pylint: disable=g-import-not-at-top
  from l2o_scale import keras_optimizer  # pylint: disable=g-import-not-at-top
  init = np.linspace(-1., 1., 6).astype(np.float32)
  grads = [tf.constant([0.5, 0., -0.2, 0., 0.1, 1.])]

  def three_steps(**kwargs):
    tf.random.set_seed(0)  # the initial learning rates are drawn
    opt = keras_optimizer.LearnedOptimizer.pretrained("l2o-scale", **kwargs)
    variables = [keras.Variable(init)]
    for _ in range(3):
      opt.apply(grads, variables)
    return opt, variables[0].numpy()

  _, plain = three_steps()
  opt, held = three_steps(hold_zero_gradients=True)
  zero = np.array([False, True, False, True, False, False])
  assert np.abs(plain[zero] - init[zero]).min() > 1e-6
  np.testing.assert_array_equal(held[zero], init[zero])
  np.testing.assert_allclose(held[~zero], plain[~zero], rtol=1e-6)
  config = opt.get_config()
  assert config["hold_zero_gradients"] is True
  assert keras_optimizer.LearnedOptimizer.from_config(
      config).hold_zero_gradients is True
