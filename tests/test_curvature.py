"""Curvature estimators (problems/curvature.py) against closed forms.

Quadratic loss s * 0.5 ||W x - y||^2 with x split across two parameter
tensors of shapes (3, 2) and (4,): its Hessian is s W^T W (numpy). W is built
with a known, well separated spectrum so power iteration converges quickly.
A cubic loss sum(x^3)/6 (Hessian diag(x)) checks that third-order gradients
flow through ``params`` themselves.
"""

import numpy as np
import pytest
import tensorflow as tf

from problems import curvature as cv

SHAPES = [(3, 2), (4,)]
DIM = 10
EIGS = np.array([10., 4., 1.5, 1.25, 1., .9, .8, .7, .6, .5])
MODES = list(cv.HVP_MODES)


def _problem():
  rng = np.random.RandomState(1234)
  u, _ = np.linalg.qr(rng.randn(12, DIM))
  v, _ = np.linalg.qr(rng.randn(DIM, DIM))
  w = (u * np.sqrt(EIGS)) @ v.T  # W^T W = V diag(EIGS) V^T
  y = rng.randn(12)
  params = [rng.randn(*SHAPES[0]), rng.randn(*SHAPES[1])]
  return w, y, params


W, Y, P0 = _problem()
H = W.T @ W
PARAMS = [tf.constant(p, tf.float32) for p in P0]


def _flat(parts):
  return np.concatenate([np.reshape(np.asarray(p), [-1]) for p in parts])


def _split(vec):
  return [np.reshape(vec[:6], SHAPES[0]), np.reshape(vec[6:], SHAPES[1])]


def make_loss(s=1.0):
  w = tf.constant(W, tf.float32)
  y = tf.constant(Y, tf.float32)

  def loss_fn(params):
    x = tf.concat([tf.reshape(params[0], [-1]), params[1]], axis=0)
    r = tf.linalg.matvec(w, x) - y
    return s * 0.5 * tf.reduce_sum(tf.square(r))
  return loss_fn


def cubic_loss(params):
  return tf.add_n([tf.reduce_sum(p ** 3) / 6. for p in params])


@pytest.mark.parametrize("mode", MODES)
def test_hessian_from_hvps_has_the_designed_spectrum(mode):
  """The Hessian assembled column by column from the module's
  Hessian-vector products (e_i) is symmetric and has exactly the spectrum
  the problem was built with (EIGS, literals), scaled by s."""
  s = 2.
  columns = [_flat(cv.hessian_vector_product(make_loss(s), PARAMS,
                                             _split(np.eye(DIM)[i]),
                                             mode=mode))
             for i in range(DIM)]
  hessian = np.stack(columns, axis=1).astype(np.float64)
  np.testing.assert_allclose(hessian, hessian.T, atol=1e-4)
  np.testing.assert_allclose(np.linalg.eigvalsh(hessian)[::-1], s * EIGS,
                             rtol=1e-4, atol=1e-4)


# --- Hessian-vector product -------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_hvp_matches_wtw(mode):
  v = np.random.RandomState(0).randn(DIM)
  hv = cv.hessian_vector_product(make_loss(), PARAMS, _split(v), mode=mode)
  assert [tuple(t.shape) for t in hv] == SHAPES
  np.testing.assert_allclose(_flat(hv), H @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_hvp_with_variables_and_tf_function(mode):
  variables = [tf.Variable(p) for p in PARAMS]
  v = np.random.RandomState(1).randn(DIM)
  vec = [tf.constant(t, tf.float32) for t in _split(v)]
  fn = tf.function(
      lambda: cv.hessian_vector_product(make_loss(), variables, vec,
                                        mode=mode))
  np.testing.assert_allclose(_flat(fn()), H @ v, rtol=1e-4, atol=1e-4)


# --- Hutchinson ---------------------------------------------------------------


def _numpy_hutchinson(num_samples, seed, h):
  """The estimator's formula in numpy, on the module's own probes."""
  vals = []
  for k in range(num_samples):
    v = _flat(cv._rademacher(PARAMS, seed, cv._HUTCHINSON_STREAM + 2 * k))
    assert set(np.unique(v)) <= {-1., 1.}
    vals.append(v @ h @ v)
  return np.mean(vals)


@pytest.mark.parametrize("mode,n", [("reverse", 200), ("forward", 40)])
def test_hutchinson_within_sampling_error(mode, n):
  est = cv.hutchinson_trace(make_loss(), PARAMS, n, seed=7, mode=mode)
  assert est.dtype == tf.float32 and est.shape == ()
  # Var(v^T H v) for Rademacher v is 2 * sum_{i != j} H_ij^2.
  std_err = np.sqrt(2 * (np.sum(H ** 2) - np.sum(np.diag(H) ** 2)) / n)
  assert abs(float(est) - np.trace(H)) < 4 * std_err
  np.testing.assert_allclose(float(est), _numpy_hutchinson(n, 7, H),
                             rtol=1e-4)


def test_hutchinson_seed_determinism():
  loss = make_loss()
  a = cv.hutchinson_trace(loss, PARAMS, 5, seed=3)
  b = cv.hutchinson_trace(loss, PARAMS, 5, seed=3)
  c = cv.hutchinson_trace(loss, PARAMS, 5, seed=4)
  assert float(a) == float(b)
  assert float(a) != float(c)
  # Same probes under tf.function, with an int or a tensor seed.
  d = cv.hutchinson_trace_tf(loss, PARAMS, 5, 3)
  fn = tf.function(lambda s: cv.hutchinson_trace(loss, PARAMS, 5, s))
  e = fn(tf.constant(3))
  f = fn(tf.constant(4))
  np.testing.assert_allclose([float(d), float(e), float(f)],
                             [float(a), float(a), float(c)], rtol=1e-5)


def test_hutchinson_exact_for_diagonal_hessian():
  # v^T diag(x) v = sum(x) for every Rademacher v.
  est = cv.hutchinson_trace(cubic_loss, PARAMS, 3, seed=0)
  np.testing.assert_allclose(float(est), _flat(P0).sum(), rtol=1e-5)


# --- Power iteration ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_power_iteration_top1_and_top2(mode):
  top1 = cv.power_iteration_eigenvalues(make_loss(), PARAMS, 20, 1, seed=0,
                                        mode=mode)
  np.testing.assert_allclose(float(top1), EIGS[0], rtol=1e-4)
  top2 = cv.power_iteration_eigenvalues(make_loss(), PARAMS, 20, 2, seed=0,
                                        mode=mode)
  np.testing.assert_allclose(float(top2), EIGS[0] + EIGS[1], rtol=1e-4)


def test_power_iteration_few_iterations_underestimates():
  # Shows the test above can fail: 1 iteration is a Rayleigh quotient.
  one = cv.power_iteration_eigenvalues(make_loss(), PARAMS, 1, 1, seed=0)
  assert float(one) < EIGS[0] * 0.99


# --- Lanczos -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_lanczos_full_dimension_gives_trace(mode):
  est = cv.lanczos_density(make_loss(), PARAMS, DIM, 1, seed=0, mode=mode)
  assert est.dtype == tf.float32 and est.shape == ()
  np.testing.assert_allclose(float(est), np.trace(H), rtol=1e-4)
  runs = cv.lanczos_density(make_loss(), PARAMS, DIM, 3, seed=0, mode=mode)
  np.testing.assert_allclose(float(runs), 3 * np.trace(H), rtol=1e-4)


def test_lanczos_ritz_values_and_tridiagonal():
  hvp = cv._make_hvp(make_loss(), PARAMS)
  start = cv._rademacher(PARAMS, 0, cv._LANCZOS_STREAM)
  t = cv._lanczos_tridiagonal(hvp, PARAMS, DIM, start).numpy()
  np.testing.assert_allclose(t, t.T)
  assert np.count_nonzero(np.triu(t, 2)) == 0
  np.testing.assert_allclose(np.linalg.eigvalsh(t), np.sort(EIGS),
                             rtol=1e-3, atol=1e-4)
  # Fewer steps: a Krylov estimate, no longer the trace.
  short = cv.lanczos_density(make_loss(), PARAMS, 3, 1, seed=0)
  assert abs(float(short) - np.trace(H)) > 1e-2


def test_lanczos_one_step_is_rayleigh_quotient():
  v = _flat(cv._rademacher(PARAMS, 5, cv._LANCZOS_STREAM))
  v = v / (np.linalg.norm(v) + 1e-6)
  est = cv.lanczos_density(make_loss(), PARAMS, 1, 1, seed=5)
  np.testing.assert_allclose(float(est), v @ H @ v, rtol=1e-5)


# --- Jacobian trace ----------------------------------------------------------


def _numpy_grads(s=1.0):
  x = _flat(P0)
  return s * W.T @ (W @ x - Y)


def test_jacobian_trace_is_mean_squared_gradient():
  g = _split(_numpy_grads())
  got = cv.jacobian_trace([tf.constant(t, tf.float32) for t in g])
  np.testing.assert_allclose(float(got), np.mean(_numpy_grads() ** 2),
                             rtol=1e-5)
  # Mean over entries, not over tensors' means.
  assert not np.isclose(float(got), np.mean([np.mean(t ** 2) for t in g]))
  np.testing.assert_allclose(
      float(cv.jacobian_trace_tf([tf.constant(t, tf.float32) for t in g])),
      float(got), rtol=1e-6)


# --- Differentiability (meta-training) ----------------------------------------


def _grad_wrt_scale(estimator, s0=2.0, use_tf_function=False):
  def run(s):
    with tf.GradientTape() as tape:
      tape.watch(s)
      value = estimator(make_loss(s))
    return value, tape.gradient(value, s)
  if use_tf_function:
    run = tf.function(run)
  value, grad = run(tf.constant(s0))
  assert grad is not None
  return float(value), float(grad)


@pytest.mark.parametrize("mode,use_tf_function",
                         [("reverse", False), ("reverse", True),
                          ("forward", False)])
def test_gradients_wrt_loss_scale(mode, use_tf_function):
  kw = dict(use_tf_function=use_tf_function)
  s0 = 2.0
  # Lanczos: value s tr(W^T W), d/ds = tr(W^T W).
  val, grad = _grad_wrt_scale(
      lambda f: cv.lanczos_density(f, PARAMS, DIM, 1, 0, mode=mode), **kw)
  np.testing.assert_allclose(val, s0 * np.trace(H), rtol=1e-4)
  np.testing.assert_allclose(grad, np.trace(H), rtol=1e-3)
  # Power iteration: s lambda_max, d/ds = lambda_max.
  val, grad = _grad_wrt_scale(
      lambda f: cv.power_iteration_eigenvalues(f, PARAMS, 10, 1, 0,
                                               mode=mode), **kw)
  np.testing.assert_allclose(val, s0 * EIGS[0], rtol=1e-4)
  np.testing.assert_allclose(grad, EIGS[0], rtol=1e-3)
  # Hutchinson: linear in s with fixed probes, d/ds = value / s.
  val, grad = _grad_wrt_scale(
      lambda f: cv.hutchinson_trace(f, PARAMS, 20, 1, mode=mode), **kw)
  np.testing.assert_allclose(val, s0 * _numpy_hutchinson(20, 1, H),
                             rtol=1e-4)
  np.testing.assert_allclose(grad, val / s0, rtol=1e-4)


@pytest.mark.parametrize("use_tf_function", [False, True])
def test_jacobian_trace_gradient_wrt_scale(use_tf_function):
  def run(s):
    with tf.GradientTape() as tape:
      tape.watch(s)
      loss_fn = make_loss(s)
      with tf.GradientTape() as inner:
        inner.watch(PARAMS)
        loss = loss_fn(PARAMS)
      value = cv.jacobian_trace(inner.gradient(loss, PARAMS))
    return value, tape.gradient(value, s)
  if use_tf_function:
    run = tf.function(run)
  value, grad = run(tf.constant(2.0))
  g1 = _numpy_grads(1.0)
  np.testing.assert_allclose(float(value), 4 * np.mean(g1 ** 2), rtol=1e-4)
  np.testing.assert_allclose(float(grad), 4 * np.mean(g1 ** 2), rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_flow_through_params(mode):
  # Hessian diag(x): trace = sum(x) => d/dx = 1; power iteration converges
  # to the eigenvalue of largest magnitude, x_k with k = argmax |x| =>
  # d/dx = one-hot at k (|x_k| is 2.2 times the next largest |x_i| of P0:
  # 30 iterations converge to float32 precision).
  x0 = _flat(P0)
  k = int(np.argmax(np.abs(x0)))

  @tf.function
  def run(params):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(params)
      lz = cv.lanczos_density(cubic_loss, params, DIM, 1, 0, mode=mode)
      hu = cv.hutchinson_trace(cubic_loss, params, 2, 0, mode=mode)
      pw = cv.power_iteration_eigenvalues(cubic_loss, params, 30, 1, 0,
                                          mode=mode)
    return ([lz, hu, pw], tape.gradient(lz, params),
            tape.gradient(hu, params), tape.gradient(pw, params))

  (lz, hu, pw), g_lz, g_hu, g_pw = run(PARAMS)
  np.testing.assert_allclose(float(lz), x0.sum(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(_flat(g_lz), np.ones(DIM), rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(float(hu), x0.sum(), rtol=1e-5)
  np.testing.assert_allclose(_flat(g_hu), np.ones(DIM), rtol=1e-5)
  np.testing.assert_allclose(float(pw), x0[k], rtol=1e-5)
  np.testing.assert_allclose(_flat(g_pw), np.eye(DIM)[k], atol=1e-3)


# --- tf.function ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_estimators_inside_tf_function_match_eager(mode):
  loss = make_loss()
  cases = [
      (cv.hutchinson_trace, (4, 2)),
      (cv.power_iteration_eigenvalues, (3, 2, 2)),
      (cv.lanczos_density, (4, 2, 2)),
  ]
  for fn, args in cases:
    eager = fn(loss, PARAMS, *args, mode=mode)
    graph = tf.function(
        lambda p, fn=fn, args=args: fn(loss, p, *args, mode=mode))(PARAMS)
    np.testing.assert_allclose(float(graph), float(eager), rtol=1e-5)
  np.testing.assert_allclose(
      float(cv.lanczos_density_tf(loss, PARAMS, DIM, 1, 0, mode=mode)),
      np.trace(H), rtol=1e-4)
  np.testing.assert_allclose(
      float(cv.power_iteration_eigenvalues_tf(loss, PARAMS, 15, 1, 0,
                                              mode=mode)),
      EIGS[0], rtol=1e-4)


def test_rejects_bad_arguments():
  with pytest.raises(ValueError):
    cv.hutchinson_trace(make_loss(), PARAMS, 0, 0)
  with pytest.raises(ValueError):
    cv.lanczos_density(make_loss(), PARAMS, 5, 1, 0, mode="bogus")


def test_explicit_probes_reproduce_a_numpy_computation():
  """Probes drawn with numpy (as the original did) give v^T H v exactly."""
  rng = np.random.RandomState(5)
  probes = []
  for _ in range(3):
    probe = []
    for p in PARAMS:
      v = rng.randint(0, 2, tuple(p.shape))
      v[v == 0] = -1
      probe.append(v.astype(np.float32))
    probes.append(probe)
  est = cv.hutchinson_trace(make_loss(), PARAMS, 3, seed=0, probes=probes)
  flat = [np.concatenate([v.ravel() for v in probe]) for probe in probes]
  expected = np.mean([f @ H @ f for f in flat])
  np.testing.assert_allclose(float(est), expected, rtol=1e-4)
  with pytest.raises(ValueError, match="needs 4 probes"):
    cv.hutchinson_trace(make_loss(), PARAMS, 4, seed=0, probes=probes)
  one = cv.lanczos_density(make_loss(), PARAMS, 1, 1, seed=0,
                           probes=probes[:1])
  f = flat[0] / (np.linalg.norm(flat[0]) + 1e-6)
  np.testing.assert_allclose(float(one), f @ H @ f, rtol=1e-4)


def test_solution_flatness_of_a_diagonal_quadratic():
  """0.5 x^T A x with A = diag(1..5): Rademacher probes give v^T A v = tr(A)
  exactly; power iteration converges to the largest eigenvalue, 5."""
  diag = tf.constant([1., 2., 3., 4., 5.])
  loss = lambda p: 0.5 * tf.reduce_sum(diag * tf.square(p[0]))
  values = cv.solution_flatness(loss, [tf.ones([5])], num_samples=3,
                                       num_iters=200, seed=4)
  assert values["hessian_trace"] == pytest.approx(15., rel=1e-6)
  assert values["hessian_top_eigenvalue"] == pytest.approx(5., rel=1e-4)


# --- metatest.py --flatness_probes ---------------------------------------------


class _DiagonalQuadratic(object):
  """0.5 * sum(d * x^2), data ignored: Hessian diag(d)."""

  def __init__(self, d):
    self.d = tf.constant(d, tf.float32)

  def objective(self, params, data=None, labels=None):
    del data, labels
    return 0.5 * tf.reduce_sum(self.d * tf.square(params[0]))


def test_metatest_flatness_is_the_closed_form_on_a_diagonal_hessian():
  """What metatest writes as hessian_trace / hessian_top_eigenvalue: for a
  diagonal Hessian every Rademacher probe gives z^T H z = trace exactly, and
  power iteration converges to the largest eigenvalue (ratio 0.3 here)."""
  import collections  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import metatest_run  # pylint: disable=g-import-not-at-top
  d = np.array([1., 2., 3., 10., 0.5], np.float32)
  dataset = collections.namedtuple("Data", ["data", "labels"])(
      np.zeros((4, 2), np.float32), np.zeros(4, np.int64))
  values = metatest_run.flatness(_DiagonalQuadratic(d),
                                 [tf.constant(np.ones(5, np.float32))],
                                 dataset, num_probes=3)
  assert values["hessian_trace"] == pytest.approx(d.sum(), rel=1e-6)
  assert values["hessian_top_eigenvalue"] == pytest.approx(10., rel=1e-4)
  assert values["flatness_probes"] == 3
