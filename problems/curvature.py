"""Hessian-based regularizers of L2O-Entropy (curvature estimators).

TF2 port of the curvature estimators that the L2O-Entropy extension added to
``Problem`` in ``Model_Free_L2O/L2O-Scale /L2O-Scale-Training/problems/
problem_generator.py`` of VITA-Group/Open-L2O (line numbers below refer to
commit 3299561a). There, ``Problem.gradients`` (l.329-368) computes
``grads = tf.gradients(objective, params)`` once and, depending on
``FLAGS.reg_option``, returns as regularizer

  * ``'hessian'``     -> ``hessain_trace(params, grads, max_iter=FLAGS.hessian_itrs)``
  * ``'hessian-ev'``  -> ``hessian_eigenvalues(params, grads, max_iter=FLAGS.hessian_itrs)``
                         (``top_n`` left at its default 1)
  * ``'hessian-esd'`` -> ``density(params, grads, max_iter=FLAGS.hessian_itrs)``
                         (``n_v`` left at its default 1)
  * ``'jacob'``       -> ``jacob_trace(grads)`` (the noise-free gradients)

with ``FLAGS.hessian_itrs`` defaulting to 10. Every Hessian-vector product
there is ``tf.gradients(grads, params, grad_ys=v)``.

Conventions of this port
------------------------
``loss_fn`` is a callable taking the list of parameter tensors and returning
the scalar objective; ``params`` is a list of tensors (or variables) with
fully defined ranks. All estimators return a scalar tensor that is
differentiable with respect to anything ``loss_fn`` and ``params`` depend on
(e.g. the meta-parameters of a learned optimizer whose unrolled updates
produced ``params``): every operation is recorded by any enclosing
``tf.GradientTape``, exactly as the TF1 graph let ``tf.gradients`` of the
meta-loss flow through the regularizer. The functions are plain Python that
only build TF ops, with loops over static Python integers (``num_samples``,
``num_iters``, ``top_n``, ``num_runs``), so they trace fine inside
``tf.function``; ``*_tf`` variants below are ready-made ``tf.function``s.

Hessian-vector products
-----------------------
Two implementations are provided (``mode`` keyword):

  * ``'reverse'`` (reverse-over-reverse, the default): the objective and its
    gradient are computed ONCE under a persistent outer ``GradientTape`` and
    every Hessian-vector product is one more backward pass through the
    gradient computation, ``outer.gradient(grads, params,
    output_gradients=v)``. This is the exact analogue of the original, which
    builds ``grads`` once and calls ``tf.gradients(grads, params, grad_ys=v)``
    for every probe / iteration.
  * ``'forward'`` (forward-over-back): each product re-runs objective and
    gradient under a ``tf.autodiff.ForwardAccumulator`` with tangent ``v``.

Reverse-over-reverse is the default because it is never slower on CPU and
often much faster: the estimators need 10+ products with the SAME gradient
(and for power iteration / Lanczos the tangents are only known sequentially,
so a forward accumulator cannot batch them); forward-over-back has to repeat
the forward and first backward pass (plus their tangents) for every product,
whereas reverse-over-reverse pays for them once and then needs one extra
backward pass per product. Eagerly that makes reverse-over-reverse several
times faster; inside ``tf.function`` Grappler's common-subexpression
elimination merges most of the repeated forward work of forward-over-back,
and the two cost about the same (``python -m
l2o_scale.speed.curvature_timing`` times both on an MLP 784-20-10).
Forward-over-back uses less memory, which does not matter at L2O problem
sizes.

Randomness
----------
The original draws the Rademacher probes of ``hessain_trace`` / ``density``
with ``np.random`` while BUILDING the graph, i.e. once per run: every
``session.run`` reuses the same probes. Here probes are a deterministic
function of ``seed`` (``tf.random.stateless_uniform``): the same seed always
gives the same probes, on every call and inside or outside ``tf.function``.
``hessian_eigenvalues`` used an unseeded ``tf.random_normal`` start vector,
i.e. a fresh one for every ``session.run``; here it is likewise a function of
``seed`` (``tf.random.stateless_normal``) -- pass a different seed each call
to recover the original's fresh draws. ``seed`` may be a Python int or an
integer scalar tensor (a tensor seed does not retrace a ``tf.function``).

Why long: the original's curvature regularizers share their Hessian-vector
products, probes and Lanczos steps; one module keeps them beside the original's
line numbers.
"""

import tensorflow as tf

# Epsilon of the original ``normalization`` (l.162-170): v / (||v|| + 1e-6).
NORMALIZATION_EPSILON = 1e-6

HVP_MODES = ("reverse", "forward")
DEFAULT_HVP_MODE = "reverse"

# Offsets that keep the random streams of the different estimators apart
# (the second component of the stateless seed pair).
_HUTCHINSON_STREAM = 0
_POWER_STREAM = 1 << 40
_LANCZOS_STREAM = 2 << 40


# ---------------------------------------------------------------------------
# List-of-tensor helpers (original group_product / group_add / normalization /
# orthnormal, l.142-179).
# ---------------------------------------------------------------------------


def _group_product(xs, ys):
  """<xs, ys> summed over all tensors of the two lists (``group_product``)."""
  return tf.add_n([tf.reduce_sum(x * y) for x, y in zip(xs, ys)])


def _group_add(xs, ys, alpha):
  """xs + alpha * ys, as a NEW list.

  The original ``group_add`` (l.142-151) assigns into its first list argument
  and returns it. The port never mutates; each call site below documents
  which vectors the original's in-place update ends up using.
  """
  return [x + alpha * y for x, y in zip(xs, ys)]


def _normalization(v):
  """v / (||v|| + 1e-6) (original ``normalization``, l.162-170).

  Note the resulting vector has norm slightly below 1; the original's
  Rayleigh quotients <Hv, v> are NOT divided by ||v||^2 and neither are ours.
  """
  s = tf.sqrt(_group_product(v, v))
  return [vi / (s + NORMALIZATION_EPSILON) for vi in v]


def _orthnormal(w, v_list):
  """Modified Gram-Schmidt of w against v_list, then normalization.

  Original ``orthnormal`` (l.172-179): ``w = group_add(w, v,
  alpha=-group_product(w, v))`` for each v in turn. Since each projection
  coefficient is taken with the ALREADY UPDATED w, this is modified (not
  classical) Gram-Schmidt; the v's are not assumed exactly unit-norm (the
  coefficient is <w, v>, not <w, v>/<v, v>). The in-place update also
  overwrites the caller's list ``w``; no caller of the original reads that
  list afterwards except through ``w_list`` in ``density``, which is never
  read, so the aliasing has no effect on the results.
  """
  for v in v_list:
    w = _group_add(w, v, -_group_product(w, v))
  return _normalization(w)


def _as_param_list(params):
  params = list(params)
  if not params:
    raise ValueError("params must be a non-empty list of tensors")
  return [p if isinstance(p, tf.Variable) else tf.convert_to_tensor(p)
          for p in params]


def _check_mode(mode):
  mode = DEFAULT_HVP_MODE if mode is None else mode
  if mode not in HVP_MODES:
    raise ValueError("mode must be one of {}, got {!r}".format(HVP_MODES, mode))
  return mode


def _zeros_for_none(values, params):
  return [tf.zeros_like(p) if v is None else tf.convert_to_tensor(v)
          for v, p in zip(values, params)]


# ---------------------------------------------------------------------------
# Hessian-vector products.
# ---------------------------------------------------------------------------


def _make_hvp(loss_fn, params, mode=None):
  """Returns ``hvp(vectors) -> list`` for the Hessian of ``loss_fn`` at params.

  In ``'reverse'`` mode the objective and its gradient are evaluated once,
  here, under a persistent tape, and every call of the returned function is a
  single extra backward pass (the analogue of the original's repeated
  ``tf.gradients(grads, params, grad_ys=v)`` on one ``grads`` tensor). In
  ``'forward'`` mode every call re-evaluates objective and gradient under a
  ``ForwardAccumulator``.
  """
  mode = _check_mode(mode)
  params = _as_param_list(params)
  zero = tf.UnconnectedGradients.ZERO

  if mode == "reverse":
    outer = tf.GradientTape(persistent=True, watch_accessed_variables=False)
    with outer:
      outer.watch(params)
      with tf.GradientTape(watch_accessed_variables=False) as inner:
        inner.watch(params)
        loss = loss_fn(params)
      grads = inner.gradient(loss, params, unconnected_gradients=zero)

    def hvp(vectors):
      vectors = [tf.convert_to_tensor(v, dtype=p.dtype)
                 for v, p in zip(vectors, params)]
      return _zeros_for_none(
          outer.gradient(grads, params, output_gradients=vectors,
                         unconnected_gradients=zero), params)
    return hvp

  def hvp(vectors):  # forward-over-back
    vectors = [tf.convert_to_tensor(v, dtype=p.dtype)
               for v, p in zip(vectors, params)]
    with tf.autodiff.ForwardAccumulator(params, vectors) as acc:
      with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(params)
        loss = loss_fn(params)
      grads = tape.gradient(loss, params, unconnected_gradients=zero)
    return _zeros_for_none(acc.jvp(grads, unconnected_gradients=zero), params)
  return hvp


def hessian_vector_product(loss_fn, params, vectors, *, mode=None):
  """H v for the Hessian H of ``loss_fn(params)`` w.r.t. ``params``.

  Args:
    loss_fn: callable mapping the list ``params`` to a scalar objective.
    params: list of parameter tensors (or variables).
    vectors: list of tensors shaped like ``params`` (the vector v).
    mode: ``'reverse'`` (default; nested GradientTapes, faster on CPU for the
      repeated products of the estimators, see the module docstring) or
      ``'forward'`` (ForwardAccumulator around a GradientTape).

  Returns:
    List of tensors shaped like ``params``: the blocks of H v. The original's
    ``tf.gradients(grads, params, grad_ys=v)``. Differentiable with respect to
    v and to anything ``loss_fn`` / ``params`` depend on.
  """
  params = _as_param_list(params)
  vectors = list(vectors)
  if len(vectors) != len(params):
    raise ValueError("need one vector block per parameter tensor")
  return _make_hvp(loss_fn, params, mode)(vectors)


# ---------------------------------------------------------------------------
# Random probes.
# ---------------------------------------------------------------------------


def _seed_pair(seed, stream):
  return tf.stack([tf.cast(seed, tf.int64),
                   tf.constant(stream, dtype=tf.int64)])


def _rademacher(params, seed, stream):
  """A +-1 vector shaped like params; deterministic in (seed, stream)."""
  out = []
  for j, p in enumerate(params):
    bits = tf.random.stateless_uniform(
        tf.shape(p), seed=_seed_pair(seed, stream + j), minval=0, maxval=2,
        dtype=tf.int32)
    out.append(tf.cast(2 * bits - 1, p.dtype))
  return out


def _normal(params, seed, stream):
  return [tf.random.stateless_normal(tf.shape(p),
                                     seed=_seed_pair(seed, stream + j),
                                     dtype=p.dtype)
          for j, p in enumerate(params)]


def _check_positive(name, value):
  if int(value) != value or value < 1:
    raise ValueError("{} must be a positive Python int, got {!r}".format(
        name, value))
  return int(value)


# ---------------------------------------------------------------------------
# Estimators.
# ---------------------------------------------------------------------------


def _explicit_probes(probes, count, params, what):
  """Probes given by the caller (e.g. drawn with numpy as the original did)."""
  if len(probes) != count:
    raise ValueError("{} needs {} probes, got {}".format(what, count,
                                                         len(probes)))
  out = []
  for probe in probes:
    if len(probe) != len(params):
      raise ValueError("a probe needs one array per parameter tensor "
                       "({}), got {}".format(len(params), len(probe)))
    out.append([tf.cast(tf.reshape(v, tf.shape(p)), p.dtype)
                for v, p in zip(probe, params)])
  return out


def _probe_vectors(probes, count, params, seed, stream, what):
  """``count`` probe vectors: the caller's ``probes`` if given (checked),
  else Rademacher vectors drawn from ``seed`` on ``stream``, one per index."""
  if probes is not None:
    return _explicit_probes(probes, count, params, what)
  return [_rademacher(params, seed, stream + k * len(params))
          for k in range(count)]


def hutchinson_trace(loss_fn, params, num_samples, seed, *, mode=None,
                     probes=None):
  """Hutchinson estimate of tr(H): mean over Rademacher probes v of v^T H v.

  Port of ``Problem.hessain_trace`` (sic; l.181-209), the ``'hessian'``
  regularizer, called with ``max_iter=FLAGS.hessian_itrs`` probes.

  Quirks reproduced:
    * The original draws its probes with ``np.random.randint`` at graph
      construction, so ONE fixed set of ``max_iter`` probes is reused by
      every ``session.run``. Here the probes are a deterministic function of
      ``seed`` (stateless RNG): same seed => same probes => same value.
    * No early stopping: the ``tol`` argument of the original is unused (its
      convergence test is commented out), so exactly ``num_samples`` probes
      are averaged.
    * Probes are constants (no gradient flows into them); the gradient flows
      through H v into whatever the loss depends on.

  Args:
    loss_fn: callable mapping the list ``params`` to a scalar objective.
    params: list of parameter tensors.
    num_samples: number of probes (Python int >= 1; the original's max_iter).
    seed: int or integer scalar tensor selecting the probes.
    mode: Hessian-vector product implementation, see
      ``hessian_vector_product``.
    probes: optional ``num_samples`` probes (each a list of arrays shaped
      like ``params``) used instead of drawing them from ``seed``; meta-
      training passes the probes drawn with numpy as the original did.

  Returns:
    Scalar tensor (float32 for float32 params).
  """
  num_samples = _check_positive("num_samples", num_samples)
  params = _as_param_list(params)
  hvp = _make_hvp(loss_fn, params, mode)
  values = []
  for v in _probe_vectors(probes, num_samples, params, seed,
                          _HUTCHINSON_STREAM, "hutchinson_trace"):
    values.append(_group_product(hvp(v), v))
  return tf.reduce_mean(tf.stack(values))


def power_iteration_eigenvalues(loss_fn, params, num_iters, top_n, seed, *,
                                mode=None):
  """Sum of the top_n Hessian eigenvalue estimates from power iteration.

  Port of ``Problem.hessian_eigenvalues`` (l.211-246), the ``'hessian-ev'``
  regularizer (called there with ``max_iter=FLAGS.hessian_itrs`` and the
  default ``top_n=1``). For each of ``top_n`` eigenpairs: v = normalization
  of a standard-normal vector; then ``num_iters`` times: v = orthnormal(v,
  previous eigenvectors), Hv, eigenvalue = <Hv, v>, v = normalization(Hv).

  Quirks reproduced:
    * The returned value is the SUM of the top_n estimates (not a list).
    * The eigenvalue is the last <Hv, v> with v of norm ||.||/(||.||+1e-6),
      not divided by <v, v>.
    * The start vector is normalised, and normalised AGAIN by ``orthnormal``
      in the first iteration (even for the first eigenpair, where the
      orthogonalisation set is empty).
    * The stored eigenvector is normalization(Hv) of the last iteration,
      which is not re-orthogonalised against the previous eigenvectors.
    * Power iteration converges to the eigenvalue of largest MAGNITUDE; for
      an indefinite Hessian that may be a negative one (as in the original).
    * No early stopping (the original's ``tol`` is unused).
    * Start vectors: the original's unseeded ``tf.random_normal`` gave a
      fresh start each ``session.run``; here they are a deterministic
      function of ``seed`` (pass varying seeds for fresh draws).

  Args:
    loss_fn: callable mapping the list ``params`` to a scalar objective.
    params: list of parameter tensors.
    num_iters: power iterations per eigenpair (Python int >= 1).
    top_n: number of eigenpairs (Python int >= 1).
    seed: int or integer scalar tensor selecting the start vectors.
    mode: Hessian-vector product implementation.

  Returns:
    Scalar tensor: sum of the top_n eigenvalue estimates.

  Why long: the original's algorithm as one loop, its quirks in place.
  """
  num_iters = _check_positive("num_iters", num_iters)
  top_n = _check_positive("top_n", top_n)
  params = _as_param_list(params)
  hvp = _make_hvp(loss_fn, params, mode)
  eigenvalues, eigenvectors = [], []
  for n in range(top_n):
    v = _normalization(_normal(params, seed, _POWER_STREAM + n * len(params)))
    eigenvalue = None
    for _ in range(num_iters):
      v = _orthnormal(v, eigenvectors)
      hv = hvp(v)
      eigenvalue = _group_product(hv, v)
      v = _normalization(hv)
    eigenvalues.append(eigenvalue)
    eigenvectors.append(v)
  return tf.reduce_sum(tf.stack(eigenvalues))


def _lanczos_tridiagonal(hvp, params, num_iters, start):
  """One Lanczos run of the original ``density`` (l.257-320); returns T.

  Exactly which vectors the original uses (working through its in-place
  ``group_add``): with v_0 the normalised Rademacher start vector,
    i = 0:  w' = H v_0, a_0 = <w', v_0>, w = w' - a_0 v_0
            (group_add overwrites the gradient list w' in place and w is
            that same list; also appended to the never-read ``w_list``).
    i >= 1: b_i = ||w||  (BEFORE re-orthogonalisation);
            v_i = orthnormal(w, [v_0 .. v_{i-1}])  (modified Gram-Schmidt
            against ALL previous Lanczos vectors, then normalization; this
            overwrites the list w -- and thereby the entry of ``w_list`` --
            but neither is read again);
            w' = H v_i, a_i = <w', v_i>;
            w = w' - a_i v_i - b_i v_{i-1}  (``v_list[-2]`` after appending
            v_i is v_{i-1}; the two group_adds again overwrite the fresh
            gradient list only).
  The Lanczos vectors in ``v_list`` are always fresh lists from
  ``normalization`` and are never modified, so the aliasing has no effect on
  the numbers: this is textbook Lanczos with full re-orthogonalisation.

  The original's ``if beta_list[-1] != 0.:`` compares a graph Tensor with a
  float. In TF1, ``Tensor.__ne__`` is Python object inequality, so the test
  is always True: the re-orthogonalisation branch is ALWAYS taken and the
  random-restart branch (``tf.random_normal`` start, l.291-295) is dead code.
  The port therefore always re-orthogonalises and never restarts (even if
  b_i is exactly 0, where normalization then yields the zero vector).

  T = diag(a) + diag(b, +1) + diag(b, -1), size num_iters.

  The vectors are kept as one flat block (a list of one tensor), not one
  tensor per parameter: the ~num_iters^2 / 2 products and updates of the
  re-orthogonalisation are then one op each instead of one per parameter
  tensor, in the meta-gradient as well (the meta-training unroll
  differentiates through all of it). Only the sum order of the dot products
  changes.
  """
  shapes = [p.shape for p in params]
  sizes = [int(s.num_elements()) for s in shapes]

  def flat(vectors):
    return [tf.concat([tf.reshape(x, [-1]) for x in vectors], 0)]

  def blocks(vector):
    return [tf.reshape(x, s) for x, s in
            zip(tf.split(vector[0], sizes), shapes)]

  flat_hvp = lambda vector: flat(hvp(blocks(vector)))
  return _lanczos_steps(flat_hvp, num_iters, flat(start))


def _lanczos_steps(hvp, num_iters, start):
  """The recurrence of :func:`_lanczos_tridiagonal` on vectors given as
  lists of tensors; returns T."""
  v = _normalization(start)
  v_list = [v]
  alphas, betas = [], []
  w = None
  for i in range(num_iters):
    if i > 0:
      beta = tf.sqrt(_group_product(w, w))
      betas.append(beta)
      v = _orthnormal(w, v_list)  # always: see the docstring
      v_list.append(v)
    hv = hvp(v)
    alpha = _group_product(hv, v)
    alphas.append(alpha)
    w = _group_add(hv, v, -alpha)
    if i > 0:
      w = _group_add(w, v_list[-2], -beta)
  t = tf.linalg.diag(tf.stack(alphas))
  if betas:
    b = tf.stack(betas)
    t = t + tf.linalg.diag(b, k=1) + tf.linalg.diag(b, k=-1)
  return t


def lanczos_density(loss_fn, params, num_iters, num_runs, seed, *,
                    mode=None, probes=None):
  """Stochastic Lanczos quadrature: sum over runs of the sum of Ritz values.

  Port of ``Problem.density`` (l.248-327), the ``'hessian-esd'`` regularizer
  (called with ``max_iter=FLAGS.hessian_itrs`` and the default ``n_v=1``).
  Each of ``num_runs`` runs does ``num_iters`` Lanczos steps with full
  re-orthogonalisation from a normalised Rademacher vector (see
  ``_lanczos_tridiagonal`` for the exact recurrence and the aliasing of the
  original's in-place ``group_add``), builds the tridiagonal T and takes its
  eigenvalues (Ritz values) with ``tf.linalg.eigvalsh`` (the original's
  ``tf.self_adjoint_eig``; its eigenvectors, i.e. the quadrature weights,
  are computed but unused, the weight line being commented out).

  Quirks reproduced:
    * Returns ``reduce_sum`` over the stacked Ritz values of all runs: the
      SUM over runs (not the mean) of the sum of Ritz values. The sum of the
      eigenvalues of T is trace(T) = sum of the alphas, which for
      num_iters == dim (exact arithmetic, full re-orthogonalisation) is
      tr(H), and in general is a Krylov-subspace estimate of it -- not a
      density. It still goes through ``eigvalsh`` as the original does, so
      switching to weighted densities later is easy; its gradient exists
      (it is V diag(dL/dlambda) V^T, no eigen-gap divisions for eigenvalue
      only gradients), so the regularizer stays differentiable.
    * ``if beta != 0.`` is always True in TF1 graph mode: always
      re-orthogonalise, never restart (see ``_lanczos_tridiagonal``).
    * Off-diagonals are ||w|| measured BEFORE re-orthogonalisation.
    * Probes: fixed per graph in the original (``np.random`` at graph
      construction); here a deterministic function of ``seed``.

  Args:
    loss_fn: callable mapping the list ``params`` to a scalar objective.
    params: list of parameter tensors.
    num_iters: Lanczos steps = size of T (Python int >= 1).
    num_runs: number of SLQ runs (Python int >= 1; the original's n_v).
    seed: int or integer scalar tensor selecting the start vectors.
    mode: Hessian-vector product implementation.
    probes: optional ``num_runs`` Rademacher start vectors (lists of arrays
      shaped like ``params``) used instead of drawing them from ``seed``.

  Returns:
    Scalar tensor.

  Why long: the original's algorithm as one loop over runs, its quirks in place.
  """
  num_iters = _check_positive("num_iters", num_iters)
  num_runs = _check_positive("num_runs", num_runs)
  params = _as_param_list(params)
  hvp = _make_hvp(loss_fn, params, mode)
  ritz = []
  for start in _probe_vectors(probes, num_runs, params, seed,
                              _LANCZOS_STREAM, "lanczos_density"):
    t = _lanczos_tridiagonal(hvp, params, num_iters, start)
    ritz.append(tf.linalg.eigvalsh(t))
  return tf.reduce_sum(tf.stack(ritz))


def jacobian_trace(grads):
  """Mean over all entries of all gradient tensors of grad**2.

  Port of ``Problem.jacob_trace`` (l.128-140), the ``'jacob'`` regularizer.
  The original is fed the noise-free ``tf.gradients`` (not the noisy ones
  handed to the optimizer). The mean is over the concatenation, i.e. every
  scalar entry weighs the same regardless of which tensor it is in.
  """
  grads = [tf.reshape(tf.square(tf.convert_to_tensor(g)), [-1])
           for g in grads]
  return tf.reduce_mean(tf.concat(grads, axis=0))


def solution_flatness(loss_fn, params, num_samples=10, num_iters=20, seed=0):
  """Flatness of a solution: Hessian trace and top eigenvalue at ``params``.

  What L2O-Entropy claims its regularizer changes: the optimizee should end
  in a flatter minimum. Measured here (new in the port, used by
  ``metatest.py --flatness_probes``) with the same estimators as the
  regularizers: the Hutchinson trace with ``num_samples`` Rademacher probes
  and one power iteration of ``num_iters`` steps (whose eigenvalue is that of
  largest magnitude). Deterministic for a given ``seed``.

  Returns a dict of Python floats: ``hessian_trace``,
  ``hessian_top_eigenvalue``.
  """
  params = [tf.convert_to_tensor(p) for p in params]

  @tf.function
  def measure(params):
    return (hutchinson_trace(loss_fn, params, num_samples, seed),
            power_iteration_eigenvalues(loss_fn, params, num_iters, 1, seed))

  trace, top = measure(params)
  return {"hessian_trace": float(trace),
          "hessian_top_eigenvalue": float(top)}


# ``tf.function``-compiled convenience variants. Python-valued arguments
# (loss_fn, num_samples, num_iters, top_n, num_runs, mode and int seeds) are
# part of the trace key; pass a tensor seed to avoid retracing per seed.
hessian_vector_product_tf = tf.function(hessian_vector_product)
hutchinson_trace_tf = tf.function(hutchinson_trace)
power_iteration_eigenvalues_tf = tf.function(power_iteration_eigenvalues)
lanczos_density_tf = tf.function(lanczos_density)
jacobian_trace_tf = tf.function(jacobian_trace)
