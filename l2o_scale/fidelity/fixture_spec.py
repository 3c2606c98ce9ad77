"""Builds problems, optimizers and data from a fixture's ``spec.json``.

The TF1 reference fixtures (``shared/fixtures/tf1_reference/README.md``)
describe a run by class names and constructor arguments as in the original
``problem_generator.py`` / ``optimizer/*.py``. This module turns that
description into objects of the port, for any problem class and any
optimizer option, so the fidelity replayer is not tied to the fixtures at hand.
"""

import json
import os

import numpy as np
import tensorflow as tf

from l2o_scale.config import optimizer_flags
from problems import datasets
from problems import problem_generator

_ACTIVATIONS = {
    "identity": tf.identity,
    "linear": tf.identity,
    None: tf.identity,
}


def activation_from_name(name):
  """tf.nn / tf.math activation called ``name`` (e.g. 'sigmoid', 'relu')."""
  if callable(name):
    return name
  if name in _ACTIVATIONS:
    return _ACTIVATIONS[name]
  for module in (tf.nn, tf.math, tf):
    fn = getattr(module, name, None)
    if callable(fn):
      return fn
  raise ValueError("Unknown activation {!r} in fixture spec".format(name))


def _tuplify(value):
  """JSON lists -> tuples, recursively (the original passes tuples)."""
  if isinstance(value, list):
    return tuple(_tuplify(v) for v in value)
  return value


def load_spec(folder):
  with open(os.path.join(folder, "spec.json")) as f:
    return json.load(f)


def problem_class(name, kwargs, kind=None):
  """The port's class for a problem named as in the original code.

  Both original folders define a ``ConvNet``, and they differ: the training
  code's has SAME convolutions and no pooling (the port's ``ConvNet``), the
  evaluation code's has VALID convolutions, batch norm and max-pooling, and
  a ``mode`` argument (the port's ``ConvNetEval``). A ``ConvNet`` with
  ``mode``, or in a ``meta_test`` fixture (the evaluation code's loop), is
  the evaluation one.
  """
  if name == "ConvNet" and ("mode" in kwargs or kind == "meta_test"):
    name = "ConvNetEval"
  cls = getattr(problem_generator, name, None)
  if cls is None or not isinstance(cls, type):
    raise ValueError("Unknown problem class {!r}".format(name))
  return cls


def build_problem(problem_spec, kind=None):
  """Problem instance from the spec's ``problem`` entry (``kind``: the
  fixture's, see :func:`problem_class`)."""
  args = [_tuplify(a) for a in problem_spec.get("args", [])]
  kwargs = {k: _tuplify(v) for k, v in problem_spec.get("kwargs", {}).items()}
  cls = problem_class(problem_spec["cls"], kwargs, kind)
  if "activation" in kwargs:
    kwargs["activation"] = activation_from_name(kwargs["activation"])
  return cls(*args, **kwargs)


def build_optimizer(optimizer_spec):
  """Optimizer instance from the spec's ``optimizer`` entry."""
  cls = optimizer_flags.optimizer_class(optimizer_spec["cls"])
  kwargs = {k: _tuplify(v) for k, v in optimizer_spec.get("kwargs", {}).items()}
  args = []
  if "level_sizes" in optimizer_spec:
    args.append([int(s) for s in optimizer_spec["level_sizes"]])
  return cls(*args, **kwargs)


def load_data(data_name, data_dir=None, one_hot=False):
  """(data, labels) arrays named by the spec's ``data`` entry, or (None, None)."""
  if data_name is None:
    return None, None
  sources = {
      "mnist_t10k": lambda: datasets.mnist(train=False, data_dir=data_dir,
                                           one_hot=one_hot),
      "mnist_train": lambda: datasets.mnist(train=True, data_dir=data_dir,
                                            one_hot=one_hot),
      "cifar10_test": lambda: _maybe_one_hot(
          datasets.cifar10(train=False, data_dir=data_dir), one_hot),
      "cifar10_train": lambda: _maybe_one_hot(
          datasets.cifar10(train=True, data_dir=data_dir), one_hot),
  }
  if data_name not in sources:
    raise ValueError("Unknown fixture data source {!r}; known: {}".format(
        data_name, ", ".join(sorted(sources))))
  dataset = sources[data_name]()
  return dataset.data, dataset.labels


def _maybe_one_hot(dataset, one_hot):
  """One-hot float labels, as the original training code fed them."""
  if not one_hot:
    return dataset
  labels = datasets.one_hot_rows(dataset.labels, 10)
  return dataset._replace(labels=labels)


def initial_params(arrays, problem):
  """``init{i}`` arrays of a fixture as float32 tensors, shape-checked."""
  params = []
  for i, shape in enumerate(problem.param_shapes):
    value = np.asarray(arrays["init{}".format(i)], dtype=np.float32)
    if tuple(value.shape) != tuple(shape):
      raise ValueError("init{} has shape {} but the problem expects {}".format(
          i, value.shape, shape))
    params.append(tf.constant(value))
  return params
