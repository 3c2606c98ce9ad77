"""Times the curvature estimators' Hessian-vector-product modes.

``python -m l2o_scale.speed.curvature_timing`` times one 10-probe Hutchinson
and one 10-step Lanczos call (:mod:`problems.curvature`) on an MLP
784-20-10, softmax cross-entropy, batch 128, inside ``tf.function``, for
both HVP modes, without ("plain") and with ("meta-grad") an enclosing tape
differentiating the estimate with respect to a scale on the inputs (as in
meta-training). Configurations are interleaved over ``rounds`` rounds of
``repeats`` calls and the best round is reported (robust to other load on
the machine): the measurement behind the choice of the default mode there.
"""

import time

import tensorflow as tf

from l2o_scale.runs import entry_point
from problems import curvature


def _problem():
  rng = tf.random.Generator.from_seed(0)
  x = rng.normal([128, 784])
  y = tf.one_hot(rng.uniform([128], maxval=10, dtype=tf.int32), 10)
  params = [rng.normal([784, 20]) * 0.05, tf.zeros([20]),
            rng.normal([20, 10]) * 0.2, tf.zeros([10])]

  def make_loss(s):
    def loss_fn(p):
      h = tf.nn.relu(tf.matmul(x * s, p[0]) + p[1])
      logits = tf.matmul(h, p[2]) + p[3]
      return tf.reduce_mean(
          tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return loss_fn
  return params, make_loss


ESTIMATORS = {
    "hutchinson": lambda f, p, m: curvature.hutchinson_trace(f, p, 10, 0,
                                                             mode=m),
    "lanczos": lambda f, p, m: curvature.lanczos_density(f, p, 10, 1, 0,
                                                         mode=m),
}


def _functions(estimator, mode, make_loss):
  """The estimate alone, and with its gradient by an enclosing tape."""
  @tf.function
  def plain(p, s):
    return estimator(make_loss(s), p, mode)

  @tf.function
  def meta(p, s):
    with tf.GradientTape() as tape:
      tape.watch(s)
      value = estimator(make_loss(s), p, mode)
    return value, tape.gradient(value, s)
  return (("plain", plain), ("meta-grad", meta))


def measure(repeats=20, rounds=5):
  """Milliseconds per call of every (estimator, mode, kind); prints them."""
  params, make_loss = _problem()
  scale = tf.constant(1.0)
  fns = {}
  for name, estimator in ESTIMATORS.items():
    for mode in curvature.HVP_MODES:
      for kind, fn in _functions(estimator, mode, make_loss):
        fn(params, scale)  # trace + warm up
        fns[(name, mode, kind)] = fn
  results = {key: float("inf") for key in fns}
  for _ in range(rounds):
    for key, fn in fns.items():
      start = time.perf_counter()
      for _ in range(repeats):
        out = fn(params, scale)
      tf.nest.map_structure(lambda t: t.numpy(), out)
      ms = 1e3 * (time.perf_counter() - start) / repeats
      results[key] = min(results[key], ms)
  for (name, mode, kind), ms in results.items():
    print("{:10s} {:8s} {:9s} {:8.2f} ms/call".format(name, mode, kind, ms))
  return results


def main():
  """Prints the timings (status 0)."""
  measure()


if __name__ == "__main__":
  entry_point.run_main("python -m l2o_scale.speed.curvature_timing", main)
