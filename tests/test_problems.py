"""Closed forms, shapes and finite-difference checks for every problem."""

import types

import numpy as np
import pytest
import tensorflow as tf

from problems import datasets
from problems import model_adapter
from problems import problem_generator as pg
from problems import problem_spec

Spec = problem_spec.Spec


def _grads(problem, params, data=None, labels=None):
  return problem.objective_and_gradients(params, data, labels)


class _Float64TF(types.ModuleType):
  """``tf`` as the problem modules see it, with float32 meaning float64.

  Problems hard-code float32 (constants, casts, one-hot encodings); built and
  evaluated through this proxy, the same code computes its objective in
  float64, so central differences are accurate to ~1e-10 and the float32
  tape gradient can be held to a tight tolerance.
  """

  def __init__(self):
    super().__init__("tf_float64")
    self.math = _Float64Math("tf_float64.math")

  def __getattr__(self, name):
    if name == "float32":
      return tf.float64
    if name in ("constant", "exp", "one_hot"):
      return getattr(self, "_" + name)
    return getattr(tf, name)

  @staticmethod
  def _constant(value, dtype=None, *args, **kwargs):
    if dtype is None and np.asarray(value).dtype.kind == "f":
      dtype = tf.float64
    return tf.constant(value, dtype, *args, **kwargs)

  @staticmethod
  def _exp(x, *args, **kwargs):
    return tf.exp(tf.cast(x, tf.float64) if isinstance(x, float) else x,
                  *args, **kwargs)

  @staticmethod
  def _one_hot(*args, **kwargs):
    kwargs.setdefault("dtype", tf.float64)
    return tf.one_hot(*args, **kwargs)


class _Float64Math(types.ModuleType):

  def __getattr__(self, name):
    fn = getattr(tf.math, name)
    if name != "log":
      return fn
    return lambda x, *a, **k: fn(
        tf.constant(x, tf.float64) if isinstance(x, float) else x, *a, **k)


def _as_float64(obj, seen=None):
  """Casts the float32 numpy arrays a problem (and the problems it wraps)
  keeps to float64, in place."""
  seen = set() if seen is None else seen
  if id(obj) in seen or not hasattr(obj, "__dict__"):
    return obj
  seen.add(id(obj))
  for key, value in list(vars(obj).items()):
    if isinstance(value, np.ndarray) and value.dtype == np.float32:
      setattr(obj, key, value.astype(np.float64))
    elif isinstance(value, (list, tuple)):
      for item in value:
        _as_float64(item, seen)
    elif hasattr(value, "objective"):
      _as_float64(value, seen)
  return obj


def _float64_problems(monkeypatch):
  """``_all_problems()`` built and evaluated in float64 (same seeds, so the
  same problem data)."""
  proxy = _Float64TF()
  monkeypatch.setattr(pg, "tf", proxy)
  problems = _all_problems()
  return {name: (_as_float64(prob), data, labels)
          for name, (prob, data, labels) in problems.items()}


def _fd_check(grads, problem64, params, data=None, labels=None, eps=1e-6,
              rtol=2e-4):
  """Each coordinate (64 at most per tensor) of the float32 tape gradient against float64 central
  differences of the same objective at the same point.

  ``rtol`` is relative to the gradient's largest entry: float32 rounding in
  the forward and backward pass stays below ~1e-5 of it on these sizes.
  ``grads``: the float32 tape gradient at ``params``, taken before the
  proxy is in place.
  """
  data64 = data
  if data is not None and tf.as_dtype(data.dtype).is_floating:
    data64 = tf.cast(data, tf.float64)
  params64 = [p.numpy().astype(np.float64) for p in params]
  scale = max(1e-3, max(float(np.max(np.abs(g.numpy()))) for g in grads))
  for i, p in enumerate(params64):
    flat = p.ravel()
    # Every coordinate, or 64 drawn ones of a large tensor.
    coords = np.random.RandomState(0).permutation(flat.size)[:64]
    fd = np.empty(coords.size)
    for k, j in enumerate(coords):
      vals = []
      for sign in (1., -1.):
        shifted = flat.copy()
        shifted[j] += sign * eps
        new = [tf.constant(q) for q in params64]
        new[i] = tf.constant(shifted.reshape(p.shape))
        value = problem64.objective(new, data64, labels)
        assert value.dtype == tf.float64, type(problem64)
        vals.append(float(value))
      fd[k] = (vals[0] - vals[1]) / (2 * eps)
    an = grads[i].numpy().ravel().astype(np.float64)[coords]
    err = np.max(np.abs(fd - an))
    assert err <= rtol * scale, (type(problem64).__name__, i, err / scale)


def _const(values):
  return [tf.constant(np.asarray(v, np.float32)) for v in values]


def test_quadratic_gradient_closed_form():
  prob = pg.Quadratic(7, random_seed=3)
  x = tf.constant(np.random.RandomState(1).randn(7, 1).astype(np.float32))
  _, (g,) = _grads(prob, [x])
  expected = prob.w.T.dot(prob.w.dot(x.numpy()) - prob.y)
  np.testing.assert_allclose(g.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_same_seed_same_problem_data():
  a, b, c = pg.Norm(5, random_seed=7), pg.Norm(5, random_seed=7), pg.Norm(
      5, random_seed=8)
  np.testing.assert_array_equal(a.w, b.w)
  assert not np.allclose(a.w, c.w)
  np.random.seed(7)
  np.testing.assert_array_equal(a.w, np.random.randn(5, 5).astype("float32"))
  las, ras = pg.Lasso(4, random_seed=11), pg.Rastrigin(4, random_seed=11)
  np.testing.assert_array_equal(las.w, ras.a)  # first draw after the seed
  np.testing.assert_array_equal(las.y, ras.b)


def test_rosenbrock_minimum():
  prob = pg.Rosenbrock(random_seed=0)
  obj, (g,) = _grads(prob, _const([[1., 1.]]))
  assert float(obj) == 0.
  np.testing.assert_allclose(g.numpy(), [0., 0.], atol=1e-6)
  assert float(prob.objective(_const([[0., 0.]]))) == pytest.approx(1.)


@pytest.mark.parametrize("cond,angle", [(5.0, 0.0), (5.0, np.pi / 4.),
                                        (0.1, 1.0)])
def test_bowl_hessian_eigenvalues(cond, angle):
  prob = pg.Bowl(cond, angle=angle, random_seed=0)
  x = tf.constant([[0.3], [-0.7]])
  with tf.GradientTape() as outer:
    outer.watch(x)
    with tf.GradientTape() as inner:
      inner.watch(x)
      obj = prob.objective([x])
    g = inner.gradient(obj, x)
  hess = outer.jacobian(g, x).numpy().reshape(2, 2)
  np.testing.assert_allclose(sorted(np.linalg.eigvalsh(hess)),
                             sorted([cond, 1.0]), rtol=1e-5)


def test_branin_three_minima():
  prob = pg.Branin(random_seed=0)
  for point in ([-np.pi, 12.275], [np.pi, 2.275], [9.42478, 2.475]):
    assert float(prob.objective(_const([point]))) == pytest.approx(
        0.397887, abs=1e-5)


@pytest.mark.parametrize("cls,point,value", [
    (pg.Ackley, [0., 0.], 0.), (pg.Beale, [3., 0.5], 0.),
    (pg.Booth, [1., 3.], 0.), (pg.Matyas, [0., 0.], 0.),
    (pg.Saddle, [2., 1.], 3.),
    (pg.StyblinskiTang, [-2.903534, -2.903534], 80. - 78.33233),
])
def test_2d_known_values(cls, point, value):
  assert float(cls(random_seed=0).objective(_const([point]))) == (
      pytest.approx(value, abs=1e-4))


def test_rastrigin_fixed_objective():
  prob = pg.Rastrigin(3, alpha=10, random_seed=5)
  x = np.random.RandomState(0).randn(3, 1).astype(np.float32)
  expected = (0.5 * np.sum((prob.a.dot(x) - prob.b)**2) -
              10 * prob.c.T.dot(np.cos(2 * np.pi * x)).item() + 10 * 3 * 3)
  assert float(prob.objective(_const([x]))) == pytest.approx(expected,
                                                              rel=1e-4)


def test_lasso_objective():
  prob = pg.Lasso(4, lambda_=0.5, random_seed=2)
  x = np.arange(4, dtype=np.float32).reshape(4, 1) - 1.5
  expected = 0.5 * np.sum((prob.w.dot(x) - prob.y)**2) + 0.5 * np.abs(x).sum()
  assert float(prob.objective(_const([x]))) == pytest.approx(expected,
                                                              rel=1e-5)


def test_matmul_algorithm_naive_solution_is_exact():
  prob = pg.MatMulAlgorithm(2, 8)
  # The naive algorithm: product k = (i, j, l) multiplies a_ij by b_jl.
  theta_a = np.zeros((4, 8), np.float32)
  theta_b = np.zeros((4, 8), np.float32)
  k = 0
  for i in range(2):
    for j in range(2):
      for l in range(2):
        theta_a[i * 2 + j, k] = 1.
        theta_b[j * 2 + l, k] = 1.
        k += 1
  assert float(prob.objective(_const([theta_a, theta_b]))) < 1e-6


def _image_batch(n, shape, seed=0):
  return tf.constant(np.random.RandomState(seed).rand(n, *shape), tf.float32)


def _labels(n, classes=10, seed=0):
  return tf.constant(np.random.RandomState(seed).randint(classes, size=n))


def _all_problems():
  """{name: (problem, data, labels)} for every class, small sizes."""
  return {name: entry for name, entry in zip(_NAMES, _problem_list())}


_NAMES = [
    "Quadratic", "SoftmaxRegression3", "SoftmaxRegression2",
    "SparseSoftmaxRegression", "OneHotSparseSoftmaxRegression",
    "FullyConnected", "ConvNet", "ConvNetOrig", "ConvNetEval",
    "ConvNetEvalTrain", "Bowl", "Rosenbrock", "Saddle", "LogSumExp",
    "Ackley", "Beale", "Booth", "StyblinskiTang", "Matyas", "Branin",
    "Michalewicz", "Rescale", "SumTask", "IsotropicQuadratic", "Norm",
    "LogObjective", "SparseProblem", "DependencyChain", "MinMaxWell",
    "OutwardSnake", "ProjectionQuadratic", "SumOfQuadratics",
    "MatMulAlgorithm", "Lasso", "Rastrigin", "ModelAdapter",
    "ConvNetSigmoid", "ConvNetEvalTrainSigmoid"]


def _problem_list():
  parity = datasets.noisy_parity_class(8, random_seed=1)
  binary = datasets.random_binary(6, 8, random_seed=1)
  sym = datasets.random_symmetric(6, 8, random_seed=1)
  mlp = datasets.random_mlp(5, 16, random_seed=1)
  quad = Spec(pg.Quadratic, (4,), {"random_seed": 1})
  return [
      (pg.Quadratic(4, random_seed=1), None, None),
      (pg.SoftmaxRegression(5, 3, random_seed=1), mlp.data, mlp.labels % 3),
      (pg.SoftmaxRegression(5, 2, random_seed=1), mlp.data, mlp.labels),
      (pg.SparseSoftmaxRegression(5, 2, random_seed=1), parity.data,
       parity.labels),
      (pg.OneHotSparseSoftmaxRegression(5, 2, random_seed=1), parity.data,
       parity.labels),
      (pg.FullyConnected(5, 3, hidden_sizes=(4,), random_seed=1), mlp.data,
       mlp.labels),
      (pg.ConvNet((1, 8, 8), 10, [(3, 3, 2), (3, 3, 2)], random_seed=1),
       _image_batch(4, (8, 8, 1)), _labels(4)),
      (pg.ConvNetOrig((1, 8, 8), 10, [(3, 3, 2)], random_seed=1),
       _image_batch(4, (8, 8, 1)), _labels(4)),
      (pg.ConvNetEval((1, 28, 28), 10, [(3, 3, 4, 1), (5, 5, 32, 1)],
                      random_seed=1), _image_batch(3, (28, 28, 1)),
       _labels(3)),
      (pg.ConvNetEval((1, 28, 28), 10, [(3, 3, 4, 1), (5, 5, 32, 1)],
                      random_seed=1, mode="train"),
       _image_batch(3, (28, 28, 1)), _labels(3)),
      (pg.Bowl(3.0, angle=0.3, random_seed=1), None, None),
  ] + [(cls(random_seed=1), None, None) for cls in (
      pg.Rosenbrock, pg.Saddle, pg.LogSumExp, pg.Ackley, pg.Beale, pg.Booth,
      pg.StyblinskiTang, pg.Matyas, pg.Branin, pg.Michalewicz)] + [
          (pg.Rescale(quad, scale=3.), None, None),
          (pg.SumTask([quad, Spec(pg.Rosenbrock, (), {})]), None, None),
          (pg.IsotropicQuadratic([(3,), (2, 2)], 1, 0.0), None, None),
          (pg.Norm(4, random_seed=1, norm_power=3.), None, None),
          (pg.LogObjective(quad), None, None),
          (pg.SparseProblem(quad, zero_probability=0.5), None, None),
          (pg.DependencyChain(5, random_seed=1), binary.data, binary.labels),
          (pg.MinMaxWell(5, random_seed=1), None, None),
          (pg.OutwardSnake(6, random_seed=1), binary.data, binary.labels),
          (pg.ProjectionQuadratic(6, random_seed=1), sym.data, sym.labels),
          (pg.SumOfQuadratics(6, random_seed=1), sym.data, sym.labels),
          (pg.MatMulAlgorithm(2, 7), None, None),
          (pg.Lasso(4, random_seed=1), None, None),
          (pg.Rastrigin(3, random_seed=1), None, None),
          (model_adapter.ModelAdapter(pg.make_rosenbrock_loss_and_init),
           None, None),
          (pg.ConvNet((1, 8, 8), 10, [(3, 3, 2), (3, 3, 2)],
                      activation=tf.nn.sigmoid, random_seed=1),
           _image_batch(4, (8, 8, 1)), _labels(4)),
          (pg.ConvNetEval((1, 12, 12), 10, [(3, 3, 3, 1)], affine_size=75,
                          activation=tf.nn.sigmoid, random_seed=1,
                          mode="train"), _image_batch(4, (12, 12, 1)),
           _labels(4)),
      ]


def test_every_problem_builds_finite_objective_and_gradient_shapes():
  problems = _all_problems()
  assert len(problems) == len(_NAMES)
  for prob, data, labels in problems.values():
    params = prob.init_tensors(seed=3)
    assert [tuple(p.shape) for p in params] == [tuple(s) for s in
                                                prob.param_shapes], prob
    obj, grads = _grads(prob, params, data, labels)
    assert obj.shape.rank == 0, type(prob)
    assert np.isfinite(float(obj)), type(prob)
    assert [g.shape for g in grads] == [p.shape for p in params], type(prob)


@pytest.mark.parametrize("name", [
    "Quadratic", "SoftmaxRegression3", "SoftmaxRegression2",
    "SparseSoftmaxRegression", "OneHotSparseSoftmaxRegression",
    "FullyConnected", "ConvNetSigmoid", "ConvNetOrig",
    "ConvNetEvalTrainSigmoid", "Bowl", "Rosenbrock", "Ackley", "Beale",
    "Michalewicz", "Branin", "Rescale", "SumTask", "Norm", "LogObjective",
    "DependencyChain", "OutwardSnake", "SumOfQuadratics", "MatMulAlgorithm",
    "Lasso", "Rastrigin", "ModelAdapter"])
def test_gradients_match_finite_differences(name, monkeypatch):
  prob, data, labels = _all_problems()[name]
  rng = np.random.RandomState(2)
  params = [tf.constant(rng.randn(*shape) * 0.3 + 0.2, tf.float32)
            for shape in prob.param_shapes]
  _, grads = _grads(prob, params, data, labels)
  prob64, _, _ = _float64_problems(monkeypatch)[name]
  _fd_check(grads, prob64, params, data, labels)


def test_sparse_problem_zeroes_most_gradients():
  prob = pg.SparseProblem(Spec(pg.Quadratic, (50,), {"random_seed": 1}),
                          zero_probability=0.9)
  x = tf.ones((50, 1))
  _, (g,) = _grads(prob, [x])
  _, (dense,) = pg.Quadratic(50, random_seed=1).objective_and_gradients([x])
  nonzero = g.numpy() != 0
  assert 0 < nonzero.sum() < 20
  np.testing.assert_allclose(g.numpy()[nonzero], dense.numpy()[nonzero])


def test_wrappers_forward():
  quad = Spec(pg.Quadratic, (4,), {"random_seed": 9})
  inner = pg.Quadratic(4, random_seed=9)
  x = tf.constant(np.arange(4, dtype=np.float32).reshape(4, 1))
  resc = pg.Rescale(quad, scale=4.)
  assert float(resc.objective([x * 4.])) == pytest.approx(
      float(inner.objective([x])), rel=1e-6)
  log = pg.LogObjective(quad)
  assert float(log.objective([x])) == pytest.approx(
      np.log(float(inner.objective([x])) + 1e-6) - np.log(1e-6), rel=1e-5)
  summed = pg.SumTask([quad, quad])
  assert float(summed.objective([x, x])) == pytest.approx(
      2 * float(inner.objective([x])), rel=1e-6)
  fc = Spec(pg.FullyConnected, (5, 2), {"hidden_sizes": (3,),
                                        "random_seed": 2})
  data = tf.ones((4, 5))
  labels = tf.constant([0, 1, 1, 0])
  wrapped = pg.SparseProblem(fc)
  params = wrapped.problem.init_tensors(seed=1)
  assert float(wrapped.objective(params, data, labels)) == pytest.approx(
      float(wrapped.problem.objective(params, data, labels)))


def test_convnet_eval_batch_norm_modes():
  prob_test = pg.ConvNetEval((1, 28, 28), 10, [(3, 3, 16, 1), (5, 5, 32, 1)],
                             random_seed=0)
  prob_train = pg.ConvNetEval((1, 28, 28), 10, [(3, 3, 16, 1), (5, 5, 32, 1)],
                              random_seed=0, mode="train")
  assert prob_test.param_shapes[-2] == (512, 10)
  params = prob_test.init_tensors(seed=0)
  images = _image_batch(5, (28, 28, 1))
  logits_test = prob_test.inference(params, images)
  logits_train = prob_train.inference(params, images)
  assert logits_test.shape == (5, 10)
  assert not np.allclose(logits_test.numpy(), logits_train.numpy())
  x = tf.constant(np.random.RandomState(0).randn(4, 3, 3, 2), tf.float32)
  normed = pg._batch_norm(x, training=True).numpy()
  np.testing.assert_allclose(normed.mean(axis=(0, 1, 2)), 0., atol=1e-5)
  np.testing.assert_allclose(pg._batch_norm(x, training=False).numpy(),
                             x.numpy() / np.sqrt(1.001), rtol=1e-6)


def test_convnet_eval_cifar_affine_size():
  prob = pg.ConvNetEval((3, 32, 32), 10, [(3, 3, 16, 2), (5, 5, 32, 2)],
                        affine_size=32, random_seed=0)
  logits = prob.inference(prob.init_tensors(seed=0), _image_batch(2, (32, 32,
                                                                      3)))
  assert logits.shape == (2, 10)


def test_problem_works_inside_tf_function():
  prob = pg.Rastrigin(3, random_seed=0)

  @tf.function
  def step(x):
    obj, grads = prob.objective_and_gradients([x])
    return obj, grads[0]

  obj, g = step(tf.ones((3, 1)))
  assert np.isfinite(float(obj)) and g.shape == (3, 1)


def test_surfaces():
  xm, ym, zm = pg.Rosenbrock(random_seed=0).surface(n=5)
  assert zm.shape == (5, 5)
  assert zm[0, 0] == pytest.approx((1 + 5)**2 + 100 * (-5 - 25)**2, rel=1e-5)
  _, _, zb = pg.Bowl(2.0, random_seed=0).surface(n=3)
  assert zb[1, 1] == 0.


def test_regularizer_options_against_closed_forms():
  """Each reg_option on 0.5||Wx - y||^2, whose Hessian is W^T W."""
  prob = pg.Quadratic(4, random_seed=0)
  x = [tf.ones((4, 1))]
  hess = prob.w.T.dot(prob.w).astype(np.float64)
  eigs = np.linalg.eigvalsh(hess)
  # Lanczos with as many steps as dimensions: the trace.
  esd = prob.regularizer(x, reg_option="hessian-esd", hessian_itrs=4, seed=1)
  assert float(esd) == pytest.approx(np.trace(hess), rel=1e-3)
  # Power iteration, enough iterations: the largest eigenvalue.
  ev = prob.regularizer(x, reg_option="hessian-ev", hessian_itrs=200, seed=1)
  assert float(ev) == pytest.approx(eigs[-1], rel=1e-3)
  # Hutchinson with given probes: their mean v^T H v exactly.
  probes = [[np.array([[1.], [-1.], [1.], [1.]], np.float32)],
            [np.array([[-1.], [-1.], [1.], [-1.]], np.float32)]]
  tr = prob.regularizer(x, reg_option="hessian", hessian_itrs=2,
                        probes=probes)
  expected = np.mean([p[0].ravel() @ hess @ p[0].ravel() for p in probes])
  assert float(tr) == pytest.approx(expected, rel=1e-4)
  grad = prob.w.T.dot(prob.w.dot(np.ones((4, 1))) - prob.y)
  assert float(prob.regularizer(x, reg_option="jacob")) == pytest.approx(
      np.mean(grad**2), rel=1e-4)


def test_regularizer_unknown_option_lists_valid_ones():
  with pytest.raises(ValueError, match="hessian-ev.*hessian-esd.*jacob"):
    pg.Quadratic(3, random_seed=0).regularizer([tf.ones((3, 1))],
                                               reg_option="bogus")


def test_spec_prints_callables_by_name():
  import tensorflow as tf_
  from problems.problem_spec import Spec
  text = repr(Spec(Spec, ([784, 20],), {"activation": tf_.nn.sigmoid}))
  assert text == "Spec(Spec, ([784, 20]), {'activation': sigmoid})"
