"""No step where this step's gradient is exactly zero
(``--hold_zero_gradients``), as a step transform
(:mod:`l2o_scale.steps.transform`).

Not in the original, whose learned step moves every coordinate. Why it
exists: the hierarchical RNN's step has a fixed RMS per tensor
(``dynamic_output_scale``) and a direction read from its per-parameter
state, which goes on proposing a step after the gradient has vanished.
So parameters that the training data never reaches keep moving without a
signal: the weights of input pixels that are 0 in every training image,
and the incoming and outgoing weights of ReLU units that have stopped
firing. The training loss cannot see them; held-out data that reaches them
then meets weights that grew unchecked (an MNIST autoencoder trained by
``l2o-scale`` for 10,000 steps ended at a training loss of 0.07 and a test
MSE of 639; docs/benchmark.md). Adam's step there shrinks with its first
moment; this transform holds such a coordinate where it is.

The test is per coordinate and exact (``gradient == 0``), so a coordinate
whose gradient is merely small moves as the optimizer proposes. The weight
decay, chained after it, still shrinks a held coordinate, as Keras' and
AdamW's decay does.
"""

import tensorflow as tf

from l2o_scale.steps import transform


class HoldZeroGradients(transform.StepTransform):
  """Keeps the old value of every coordinate whose gradient in this step is
  exactly zero; needs the step's :data:`~l2o_scale.steps.transform.GRADIENTS`
  input. Built by :func:`hold_zero_gradients`."""

  def apply(self, old, proposed, inputs):
    grads = inputs.get(transform.GRADIENTS)
    if grads is None or len(grads) != len(proposed):
      raise ValueError("hold_zero_gradients needs this step's gradients, one "
                       "per variable, in the step's inputs")
    return [tf.where(tf.equal(tf.reshape(tf.cast(grad, new.dtype),
                                         tf.shape(new)), 0.), before, new)
            for before, new, grad in zip(old, proposed, grads)]

  def key(self):
    return ("hold_zero_gradients",)

  def keras_kwargs(self, total_steps):
    del total_steps
    return {"hold_zero_gradients": True}


def hold_zero_gradients(on):
  """The step transform of ``--hold_zero_gradients``: the identity (no op)
  when off."""
  if not isinstance(on, bool):
    raise ValueError("hold_zero_gradients must be True or False, got "
                     "{!r}".format(on))
  return HoldZeroGradients() if on else transform.identity()
