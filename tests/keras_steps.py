"""A small Keras regression trained a few steps by an optimizer: the
weights it ends with, from the same start and data every time (to compare
optimizers step for step)."""

import keras
import numpy as np
import tensorflow as tf


def weights_after_steps(optimizer, steps=6):
  """The trainable weights of a 5-4-1 tanh MLP after ``steps`` steps of
  ``optimizer`` on one fixed batch of 16 (seeded start)."""
  keras.utils.set_random_seed(1)
  model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, "tanh"),
                            keras.layers.Dense(1)])
  x = tf.constant(np.random.default_rng(0).standard_normal((16, 5)),
                  tf.float32)
  y = tf.reduce_sum(x, 1, keepdims=True)
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
  return [v.numpy() for v in model.trainable_variables]
