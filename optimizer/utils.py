"""Numerical helpers shared by the learned optimizers.

Port of ``optimizer/utils.py`` of the original code (lines 1-200: make_finite,
asinh, affine, project, new_mean_squared, rms_scaling). The TF1 ``affine``
created its variables through ``tf.get_variable`` scopes; here the variables
live in an :class:`Affine` module that records the TF1 name of each variable so
that original checkpoints restore one to one.
"""

import numpy as np
import tensorflow as tf


def make_finite(t, replacement):
  """Replaces non-finite values of ``t`` by ``replacement`` (utils.py l.27-29)."""
  return tf.where(tf.math.is_finite(t), t, replacement)


def asinh(x):
  """Inverse hyperbolic sine, with the original's formula (utils.py l.32-34).

  ``tf.math.asinh`` is accurate for large |x| where this formula is not;
  the original formula is kept so the numbers match the TF1 code.
  """
  return tf.math.log(x + tf.sqrt(1. + tf.square(x)))


def affine_initial_matrix(input_size, output_size, scale, vec_mean=0., seed=None):
  """Initial value of an ``affine`` matrix: N(vec_mean, scale/sqrt(input))."""
  sigma = scale / np.sqrt(input_size)
  return tf.random.normal([input_size, output_size], mean=vec_mean,
                          stddev=sigma, seed=seed)


def project(inputs, weights, bias=0., activation=tf.identity):
  """``activation(inputs @ weights + bias)`` (utils.py l.93-108)."""
  return activation(tf.matmul(inputs, weights) + bias)


_MS_EPSILON = 1e-12


def _blended_mean_squared(grad, decay, ms):
  """``(1 - decay) * (grad^2 + 1e-12) + decay * ms``: the running mean square
  with ``decay`` already settled (the first-step rule applied or not)."""
  return (1. - decay) * (tf.square(grad) + _MS_EPSILON) + decay * ms


def _rms_scaled(grad, ms):
  """``asinh(grad / sqrt(ms + 1e-16))``: the gradient over its running RMS."""
  return asinh(grad / tf.sqrt(ms + 1e-16))


def new_mean_squared(grad_vec, decay, ms):
  """Running mean of squared gradients (utils.py l.111-136).

  On the first step (``ms`` all zero) the decay is ignored and the squared
  gradient is returned as it is: the original's first-step rule. The TF1
  range assertions on ``decay`` are not ported: ``decay`` is a sigmoid output.
  """
  first_step = tf.reduce_all(tf.equal(ms, 0.))
  decay = tf.where(first_step, tf.zeros_like(decay), decay)
  return _blended_mean_squared(grad_vec, decay, ms)


def rms_scaling(gradient, decay, ms, update_ms=True):
  """Scales a gradient by its running RMS, squashed by asinh (utils.py l.139-162).

  Returns the scaled gradient as a column vector and the (new) mean square.
  """
  grad_vec = tf.reshape(gradient, [-1, 1])
  if update_ms:
    ms = new_mean_squared(grad_vec, decay, ms)
  return _rms_scaled(grad_vec, ms), ms


def rms_scaling_rows(gradients, decay, ms):
  """:func:`rms_scaling` of several gradient vectors stored as rows.

  ``gradients`` and ``ms`` are [k, N] (row i is one gradient vector and its
  mean square), ``decay`` is [k, N] or [1, N] and must already be 0 where
  the first-step rule of :func:`new_mean_squared` applies (the caller knows
  which coordinates belong to which tensor). Same numbers as k calls of
  :func:`rms_scaling`, in a handful of ops on one tensor instead of k times
  as many on [N, 1] columns. Returns (scaled, new ms), both [k, N].
  """
  ms = _blended_mean_squared(gradients, decay, ms)
  return _rms_scaled(gradients, ms), ms


class Affine(tf.Module):
  """``affine(inputs, output_size, scope, ...)`` of utils.py l.37-90 as a module.

  Holds ``Matrix`` [input_size, output_size] and, if ``include_bias``,
  ``Bias`` [output_size]; ``tf1_scope`` is the full TF1 variable scope (e.g.
  ``LOL/PerTensor/GradsToDelta``) so the TF1 names are ``<scope>/Matrix`` and
  ``<scope>/Bias``.
  """

  def __init__(self, tf1_scope, input_size, output_size, scale=0.1, vec_mean=0.,
               include_bias=True, bias_init=0., random_seed=None):
    super().__init__(name=tf1_scope.replace("/", "_"))
    self.tf1_scope = tf1_scope
    self.matrix = tf.Variable(
        affine_initial_matrix(input_size, output_size, scale, vec_mean,
                              random_seed), name="Matrix")
    self.bias = (tf.Variable(tf.fill([output_size], float(bias_init)),
                             name="Bias") if include_bias else None)

  def tf1_variables(self):
    """Maps TF1 variable names to this module's variables."""
    named = {self.tf1_scope + "/Matrix": self.matrix}
    if self.bias is not None:
      named[self.tf1_scope + "/Bias"] = self.bias
    return named

  def __call__(self, inputs):
    x = tf.concat(inputs, 1) if isinstance(inputs, (list, tuple)) else inputs
    out = tf.matmul(x, self.matrix)
    if self.bias is not None:
      out = out + self.bias
    return out
