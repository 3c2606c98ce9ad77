"""The exact-resume check shared by the meta-training tests: a run of three
meta-iterations straight against one stopped after two and resumed, from
the same seeds, must end with the same learned optimizer bit for bit."""

import os
import random

import numpy as np
import tensorflow as tf


def _seed():
  np.random.seed(0)
  random.seed(0)
  tf.random.set_seed(0)


def assert_resumes_exactly(train, folder, checkpoints=(3,)):
  """Runs ``train(logdir, 3)`` in ``folder/straight`` and ``train(logdir,
  2)`` then ``train(logdir, 3)`` in ``folder/split``, each after the same
  seeds, and asserts that the learned optimizer's variables (``optimizer/``)
  of ``model.ckpt-N`` for N in ``checkpoints`` are equal in both.

  Returns what the straight run and the resumed call returned.
  """
  _seed()
  straight_dir = os.path.join(str(folder), "straight")
  straight = train(straight_dir, 3)
  _seed()
  split_dir = os.path.join(str(folder), "split")
  train(split_dir, 2)
  resumed = train(split_dir, 3)
  for number in checkpoints:
    name = "model.ckpt-{}".format(number)
    a = tf.train.load_checkpoint(os.path.join(straight_dir, name))
    b = tf.train.load_checkpoint(os.path.join(split_dir, name))
    names = [n for n in a.get_variable_to_shape_map()
             if n.startswith("optimizer/")]
    assert names, name
    for variable in names:
      np.testing.assert_array_equal(a.get_tensor(variable),
                                    b.get_tensor(variable), err_msg=variable)
  return straight, resumed
