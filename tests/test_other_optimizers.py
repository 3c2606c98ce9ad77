"""Tests of TrainableAdam, GlobalLearningRate, LearningRateSchedule and
CoordinatewiseRNN against independent (numpy / closed-form) truths."""

import numpy as np
import pytest
import tensorflow as tf

from optimizer import coordinatewise_rnn
from optimizer import global_learning_rate
from optimizer import learning_rate_schedule
from optimizer import trainable_adam

A_DIAG = np.array([[0.5, 2.0], [1.5, 0.25], [3.0, 0.75]], np.float32)
X0 = np.array([[1.3, -0.7], [0.4, 2.1], [-1.1, 0.3]], np.float32)


def quad_grad(x):
  """Gradient of f(x) = 0.5 sum(A x^2): never exactly +-1 below."""
  return A_DIAG * x


def run_steps(optimizer, x0, num_steps, compiled=False):
  """Runs the pure per-tensor update on the quadratic, returns the iterates."""
  def step(x, state):
    new_x, new_state = optimizer._compute_update(x, quad_grad(x), state)
    return new_x, new_state
  if compiled:
    step = tf.function(step)
  x = tf.constant(x0)
  state = optimizer.initialize_state(x)
  xs = []
  for _ in range(num_steps):
    x, state = step(x, state)
    xs.append(x.numpy())
  return xs, state


# ------------------------------------------------------------ TrainableAdam
def numpy_adam(x0, lr, b1, b2, eps, num_steps):
  """Textbook Adam (Kingma & Ba, Algorithm 1)."""
  x = x0.astype(np.float64)
  m = np.zeros_like(x)
  v = np.zeros_like(x)
  xs = []
  for t in range(1, num_steps + 1):
    g = quad_grad(x)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    x = x - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    xs.append(x.copy())
  return xs


def numpy_original_adam(x0, lr, b1, b2, eps, num_steps):
  """The original's rule: v' = v / (1 - (g^2)^b2) (so v stays 0)."""
  x = x0.astype(np.float64)
  m = np.zeros_like(x)
  v = np.zeros_like(x)
  xs = []
  for t in range(1, num_steps + 1):
    g = quad_grad(x)
    m = b1 * m + (1 - b1) * g
    v = v / (1 - (g * g) ** b2)
    x = x - lr * (m / (1 - b1 ** t)) / (
        np.sqrt(v / (1 - b2 ** t) + 1e-10) + eps + 1e-10)
    xs.append(x.copy())
  return xs, v


class TextbookAdam(trainable_adam.TrainableAdam):
  _second_moment_update = trainable_adam.TrainableAdam._textbook_second_moment


def test_adam_variables():
  opt = trainable_adam.TrainableAdam(learning_rate=0.01, beta1=0.8,
                                     beta2=0.99, epsilon=1e-6)
  values = {k: float(v.numpy()) for k, v in opt.tf1_variables().items()}
  assert sorted(values) == ["LOL/beta1_logit", "LOL/beta2_logit",
                            "LOL/log_epsilon", "LOL/log_learning_rate"]
  np.testing.assert_allclose(values["LOL/log_learning_rate"], np.log(0.01),
                             rtol=1e-6)
  np.testing.assert_allclose(values["LOL/beta1_logit"], np.log(0.8 / 0.2),
                             rtol=1e-6)
  np.testing.assert_allclose(values["LOL/beta2_logit"], np.log(0.99 / 0.01),
                             rtol=1e-6)
  np.testing.assert_allclose(values["LOL/log_epsilon"], np.log(1e-6),
                             rtol=1e-6)
  assert opt.state_keys == ["m", "t", "v"]
  with pytest.raises(ValueError):
    trainable_adam.TrainableAdam(beta1=1.0)
  with pytest.raises(ValueError):
    trainable_adam.TrainableAdam(learning_rate=0.)


@pytest.mark.parametrize("compiled", [False, True])
def test_adam_with_textbook_rule_is_numpy_adam(compiled):
  """With the textbook second moment, every other piece is exactly Adam."""
  lr, b1, b2, eps = 0.05, 0.8, 0.95, 1e-3
  opt = TextbookAdam(learning_rate=lr, beta1=b1, beta2=b2, epsilon=eps)
  xs, _ = run_steps(opt, X0, 5, compiled=compiled)
  expected = numpy_adam(X0, lr, b1, b2, eps, 5)
  for got, want in zip(xs, expected):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_adam_reproduces_original_second_moment_quirk(compiled):
  lr, b1, b2, eps = 1e-6, 0.8, 0.95, 1e-6
  opt = trainable_adam.TrainableAdam(learning_rate=lr, beta1=b1, beta2=b2,
                                     epsilon=eps)
  xs, state = run_steps(opt, X0, 5, compiled=compiled)
  expected, v = numpy_original_adam(X0, lr, b1, b2, eps, 5)
  for got, want in zip(xs, expected):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
  assert np.all(state["v"].numpy() == 0) and np.all(v == 0)
  np.testing.assert_array_equal(state["t"].numpy(), 5 * np.ones([6, 1]))
  # ... which is far from what textbook Adam would do.
  textbook = numpy_adam(X0, lr, b1, b2, eps, 5)
  assert np.max(np.abs(xs[-1] - textbook[-1])) > 1e-2
  # A gradient coordinate of exactly 1 gives v = 0 / 0 = NaN.
  _, s = opt._compute_update(tf.zeros([2]), tf.constant([1., 0.5]),
                             opt.initialize_state(tf.zeros([2])))
  assert np.isnan(s["v"].numpy()[0, 0]) and s["v"].numpy()[1, 0] == 0


def test_adam_sparse_gradient_only_touches_indexed_rows():
  opt = TextbookAdam(learning_rate=0.1, beta1=0.7, beta2=0.9, epsilon=1e-3)
  param = tf.constant(X0)
  state = opt.initialize_state(param)
  values = tf.constant([[0.3, -0.2], [0.5, 0.1], [0.2, 0.4]])
  sparse = tf.IndexedSlices(values, tf.constant([2, 0, 2]),
                            tf.constant([3, 2]))
  new_param, new_state = opt._compute_update(param, sparse, state)
  dense = tf.convert_to_tensor(sparse)  # repeated rows are summed
  dense_param, dense_state = opt._compute_update(param, dense, state)
  for row in (0, 2):
    np.testing.assert_allclose(new_param[row], dense_param[row], rtol=1e-6)
  np.testing.assert_array_equal(new_param[1], X0[1])
  t = new_state["t"].numpy().reshape(3, 2)
  np.testing.assert_array_equal(t, [[1, 1], [0, 0], [1, 1]])
  np.testing.assert_allclose(new_state["m"].numpy().reshape(3, 2)[2],
                             dense_state["m"].numpy().reshape(3, 2)[2])


# --------------------------------------------------- GlobalLearningRate
def test_global_learning_rate_is_sgd():
  opt = global_learning_rate.GlobalLearningRate(initial_rate=0.1)
  assert list(opt.tf1_variables()) == ["LOL/global_learning_rate"]
  assert opt.tf1_variables()["LOL/global_learning_rate"].shape == ()
  assert opt.state_keys == []
  xs, _ = run_steps(opt, X0, 5, compiled=True)
  for k, x in enumerate(xs, 1):  # x_k = (1 - lr a)^k x_0 on the quadratic
    np.testing.assert_allclose(x, (1 - 0.1 * A_DIAG) ** k * X0, rtol=1e-5)
  # The rate is used as is (no exp): a negative rate ascends.
  opt.learning_rate.assign(-0.1)
  xs, _ = run_steps(opt, X0, 1)
  np.testing.assert_allclose(xs[0], (1 + 0.1 * A_DIAG) * X0, rtol=1e-6)


# ------------------------------------------------- LearningRateSchedule
def test_learning_rate_schedule_follows_schedule():
  opt = learning_rate_schedule.LearningRateSchedule(n_steps=3)
  var = opt.tf1_variables()["LOL/learning_rates"]
  assert list(opt.tf1_variables()) == ["LOL/learning_rates"]
  assert var.shape == (3,)
  xs, state = run_steps(opt, X0, 2)  # default initial_rate 0: no motion
  np.testing.assert_array_equal(xs[-1], X0)
  assert int(state["itr"]) == 2
  rates = [0.1, 0.2, 0.3]
  var.assign(rates)
  xs, state = run_steps(opt, X0, 5, compiled=True)
  expected = X0.astype(np.float64)
  for k in range(5):  # past the end the last rate is reused
    expected = (1 - rates[min(k, 2)] * A_DIAG) * expected
    np.testing.assert_allclose(xs[k], expected, rtol=1e-5)
  assert int(state["itr"]) == 5 and state["itr"].dtype == tf.int32


# --------------------------------------------------- CoordinatewiseRNN
def expected_crnn_names(cell_name, sizes):
  names = {"LOL/update_weights": (sizes[-1], 1),
           "LOL/decay_weights": (sizes[-1], 1), "LOL/decay_bias": (1,),
           "LOL/learning_rate_weights": (sizes[-1], 1),
           "LOL/learning_rate_bias": (1,),
           "LOL/init_vector": (1, 2 * sum(sizes))}
  in_size = 1
  for i, s in enumerate(sizes):
    prefix = "LOL/multi_rnn_cell/cell_{}/{}/".format(i, cell_name)
    names[prefix + "kernel"] = (in_size + s, 4 * s)
    names[prefix + "bias"] = (4 * s,)
    in_size = s
  return names


@pytest.mark.parametrize("cell_cls,cell_name", [
    ("BasicLSTMCell", "basic_lstm_cell"),
    (coordinatewise_rnn.LSTMCell, "lstm_cell")])
def test_crnn_variable_names_and_shapes(cell_cls, cell_name):
  opt = coordinatewise_rnn.CoordinatewiseRNN([4, 6], cell_cls)
  got = {k: tuple(v.shape) for k, v in opt.tf1_variables().items()}
  assert got == expected_crnn_names(cell_name, [4, 6])
  assert opt.state_keys == ["decay", "learning_rate", "rms", "rnn"]
  values = {k: v.numpy() for k, v in opt.tf1_variables().items()}
  np.testing.assert_allclose(values["LOL/decay_bias"], [2.2])
  np.testing.assert_array_equal(values["LOL/learning_rate_bias"], [0.])
  assert np.all(np.abs(values["LOL/init_vector"]) <= 1.)
  np.testing.assert_array_equal(
      values["LOL/multi_rnn_cell/cell_1/{}/bias".format(cell_name)], 0.)


def test_crnn_options_and_bad_cells():
  opt = coordinatewise_rnn.CoordinatewiseRNN(
      [3], "LSTMCell", learnable_decay=False, dynamic_output_scale=False)
  assert sorted(opt.tf1_variables()) == [
      "LOL/init_vector", "LOL/multi_rnn_cell/cell_0/lstm_cell/bias",
      "LOL/multi_rnn_cell/cell_0/lstm_cell/kernel", "LOL/update_weights"]
  _, state = run_steps(opt, X0, 1)
  # constant decay sigmoid(2.2), constant lr change 2 sigmoid(0) = 1
  np.testing.assert_allclose(state["decay"], 1 / (1 + np.exp(-2.2)) *
                             np.ones([6, 1]), rtol=1e-6)
  np.testing.assert_allclose(state["learning_rate"], np.ones([6, 1]))
  with pytest.raises(TypeError):
    coordinatewise_rnn.CoordinatewiseRNN([3], "GRUCell")
  with pytest.raises(ValueError):
    coordinatewise_rnn.CoordinatewiseRNN([3], "LSTMCell",
                                         init_lr_range=(2., 1.))


def _sigmoid(x):
  return 1. / (1. + np.exp(-x))


def numpy_crnn_step(values, sizes, cell_name, x, g, state):
  """Independent numpy version of one CoordinatewiseRNN step."""
  gv = g.reshape(-1, 1).astype(np.float64)
  decay, ms = state["decay"], state["rms"]
  if np.all(ms == 0):
    decay = np.zeros_like(decay)
  ms = (1 - decay) * (gv ** 2 + 1e-12) + decay * ms
  z = gv / np.sqrt(ms + 1e-16)
  inp = np.log(z + np.sqrt(1 + z ** 2))
  rnn = state["rnn"]
  new_rnn, pos = [], 0
  for i, s in enumerate(sizes):
    c, h = rnn[:, pos:pos + s], rnn[:, pos + s:pos + 2 * s]
    pos += 2 * s
    prefix = "LOL/multi_rnn_cell/cell_{}/{}/".format(i, cell_name)
    gates = np.concatenate([inp, h], 1) @ values[prefix + "kernel"] + values[
        prefix + "bias"]
    gi, gj, gf, go = np.split(gates, 4, axis=1)
    c = c * _sigmoid(gf + 1.) + _sigmoid(gi) * np.tanh(gj)
    h = np.tanh(c) * _sigmoid(go)
    new_rnn += [c, h]
    inp = h
  delta = inp @ values["LOL/update_weights"]
  new_decay = _sigmoid(inp @ values["LOL/decay_weights"] +
                       values["LOL/decay_bias"])
  lr = 2 * _sigmoid(inp @ values["LOL/learning_rate_weights"] +
                    values["LOL/learning_rate_bias"]) * state["learning_rate"]
  new_x = x - (lr * delta).reshape(x.shape)
  return new_x, {"rms": ms, "decay": new_decay, "learning_rate": lr,
                 "rnn": np.concatenate(new_rnn, 1)}


def test_crnn_matches_numpy_for_three_steps():
  sizes = [4, 5]
  opt = coordinatewise_rnn.CoordinatewiseRNN(sizes, "BasicLSTMCell",
                                             init_lr_range=(0.01, 0.1))
  values = {k: v.numpy().astype(np.float64)
            for k, v in opt.tf1_variables().items()}
  x = tf.constant(X0)
  state = opt.initialize_state(x)
  np_state = {k: v.numpy().astype(np.float64) for k, v in state.items()}
  np.testing.assert_array_equal(np_state["rms"], 1.)
  lrs = np_state["learning_rate"]
  assert np.all((lrs >= 0.01 - 1e-7) & (lrs <= 0.1 + 1e-7))
  np_x = X0.astype(np.float64)
  for _ in range(3):
    x, state = opt._compute_update(x, quad_grad(x), state)
    np_x, np_state = numpy_crnn_step(values, sizes, "basic_lstm_cell", np_x,
                                     quad_grad(np_x), np_state)
    np.testing.assert_allclose(x.numpy(), np_x, rtol=1e-4, atol=1e-6)
    for key in np_state:
      np.testing.assert_allclose(state[key].numpy(), np_state[key],
                                 rtol=1e-4, atol=1e-6)
  assert np.max(np.abs(np_x - X0)) > 1e-4  # it moved


def test_crnn_tf_function_equals_eager():
  opt = coordinatewise_rnn.CoordinatewiseRNN([4, 5], "LSTMCell")
  eager, s_eager = run_steps(opt, X0, 3)
  compiled, s_comp = run_steps(opt, X0, 3, compiled=True)
  for a, b in zip(eager, compiled):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  for key in s_eager:
    np.testing.assert_allclose(s_eager[key], s_comp[key], rtol=1e-6,
                               atol=1e-7)


def test_crnn_meta_gradients_finite_and_nonzero():
  opt = coordinatewise_rnn.CoordinatewiseRNN([4, 5], "BasicLSTMCell",
                                             init_lr_range=(0.05, 0.05))
  a = tf.constant(A_DIAG)

  @tf.function
  def meta_loss_and_grads():
    with tf.GradientTape() as tape:
      params = [tf.constant(X0), tf.constant([0.8, -0.6])]
      states = [opt.initialize_state(p) for p in params]
      global_state = opt.initialize_global_state()
      total = 0.
      for _ in range(3):
        grads = [a * params[0], 2. * params[1]]
        params, states, global_state, _, _ = opt.compute_updates(
            params, grads, states, global_state)
        total += (0.5 * tf.reduce_sum(a * params[0] ** 2) +
                  tf.reduce_sum(params[1] ** 2))
    return total, tape.gradient(total, opt.meta_variables)

  total, grads = meta_loss_and_grads()
  assert np.isfinite(total.numpy())
  names = list(opt.tf1_variables())
  assert len(names) == 10
  for name, grad in zip(names, grads):
    assert grad is not None, name
    grad = grad.numpy()
    assert np.all(np.isfinite(grad)), name
    assert np.max(np.abs(grad)) > 0, name


def test_crnn_sparse_gradient_only_touches_indexed_rows():
  opt = coordinatewise_rnn.CoordinatewiseRNN([3], "LSTMCell")
  param = tf.constant(X0)
  state = opt.initialize_state(param)
  sparse = tf.IndexedSlices(tf.constant([[0.3, -0.2], [0.5, 0.1]]),
                            tf.constant([1, 2]), tf.constant([3, 2]))
  new_param, new_state = opt._compute_update(param, sparse, state)
  dense_param, dense_state = opt._compute_update(
      param, tf.convert_to_tensor(sparse), state)
  np.testing.assert_array_equal(new_param[0], X0[0])
  np.testing.assert_allclose(new_param[1:], dense_param[1:], rtol=1e-6)
  for key in new_state:
    got = new_state[key].numpy().reshape(3, 2, -1)
    np.testing.assert_array_equal(got[0], state[key].numpy().reshape(3, 2,
                                                                     -1)[0])
    np.testing.assert_allclose(
        got[1:], dense_state[key].numpy().reshape(3, 2, -1)[1:], rtol=1e-6)


# ------------------------------------------------------ apply_gradients
def _make(kind):
  if kind == "adam":
    return trainable_adam.TrainableAdam(learning_rate=0.05)
  if kind == "glr":
    return global_learning_rate.GlobalLearningRate(initial_rate=0.1)
  if kind == "lrs":
    opt = learning_rate_schedule.LearningRateSchedule(initial_rate=0.1,
                                                      n_steps=2)
    opt.learning_rates.assign([0.1, 0.05])
    return opt
  return coordinatewise_rnn.CoordinatewiseRNN([4, 3], "BasicLSTMCell",
                                              init_lr_range=(0.1, 0.1))


@pytest.mark.parametrize("kind", ["adam", "glr", "lrs", "crnn"])
def test_apply_gradients_equals_compute_updates(kind):
  opt = _make(kind)
  x0s = [X0, np.array([0.8, -0.6], np.float32)]
  variables = [tf.Variable(x) for x in x0s]
  params = [tf.constant(x) for x in x0s]
  states = [opt.initialize_state(p) for p in params]
  global_state = opt.initialize_global_state()

  def grads_of(xs):
    return [A_DIAG * xs[0], 2. * xs[1]]

  for _ in range(3):
    opt.apply_gradients(zip(grads_of([v.numpy() for v in variables]),
                            variables))
    params, states, global_state, _, _ = opt.compute_updates(
        params, grads_of(params), states, global_state)
    for var, param in zip(variables, params):
      np.testing.assert_allclose(var.numpy(), param.numpy(), rtol=1e-6,
                                 atol=1e-7)
    for var, state in zip(variables, states):
      for key in opt.state_keys:
        np.testing.assert_allclose(opt.get_slot(var, key).numpy(),
                                   state[key].numpy(), rtol=1e-6, atol=1e-7)
  assert np.max(np.abs(variables[0].numpy() - X0)) > 1e-4


def test_crnn_seeded_initial_learning_rates_depend_on_the_seed_alone():
  opt = coordinatewise_rnn.CoordinatewiseRNN([4], "LSTMCell",
                                             init_lr_range=(1e-6, 1e-2))
  params = [tf.zeros([500]), tf.zeros([500])]

  def rates():
    return [s["learning_rate"].numpy()
            for s in opt.initialize_packed_state(params, seed=[1, 2])]

  first = rates()
  tf.random.uniform([3])  # Moves TensorFlow's global stream.
  for got, want in zip(rates(), first):
    np.testing.assert_array_equal(got, want)
  assert np.mean(first[0] != first[1]) > 0.99  # Each tensor its own draw.
  for values in first:
    assert 1e-6 * (1 - 1e-5) <= values.min() and values.max() <= 1e-2 * (
        1 + 1e-5)
