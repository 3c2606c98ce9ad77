"""LearnedOptimizer(fused_cell=True): the per-parameter GRU cell as one
native kernel in XLA-compiled steps gives the TensorFlow ops' step."""

import keras
import numpy as np
import pytest

from l2o_scale.keras_optimizer import LearnedOptimizer
from optimizer import fused_cell


def _fit(fused, calls):
  keras.utils.set_random_seed(0)
  # Tensor boundaries off the kernel's 8-coordinate vectors, a last partial
  # vector (39,607 coordinates) and enough vectors for the kernel's threads.
  model = keras.Sequential([keras.Input((784,)),
                            keras.layers.Dense(50, activation="tanh"),
                            keras.layers.Dense(7)])
  model.compile(optimizer=LearnedOptimizer.pretrained("l2o-scale",
                                                      fused_cell=fused),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True), jit_compile=True)
  rng = np.random.RandomState(0)
  x = rng.rand(64, 784).astype(np.float32)
  y = rng.randint(0, 7, 64)
  before = len(calls)
  history = model.fit(x, y, batch_size=16, epochs=1, shuffle=False,
                      verbose=0)
  return model.get_weights(), history.history["loss"], len(calls) - before


def test_the_fused_cell_gives_the_tensorflow_step(monkeypatch):
  why = fused_cell.unavailable_reason()
  if why:
    pytest.skip(why)
  calls = []
  original = fused_cell.gru_cell
  monkeypatch.setattr(fused_cell, "gru_cell",
                      lambda *a: calls.append(1) or original(*a))
  plain, plain_loss, plain_calls = _fit(False, calls)
  fused, fused_loss, fused_calls = _fit(True, calls)
  assert plain_calls == 0 and fused_calls >= 1  # The kernel was traced in.
  assert sum(w.size for w in fused) == 39_607
  np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-5)
  for a, b in zip(fused, plain):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  moved = [not np.allclose(a, b) for a, b in zip(plain, _fit(False, [])[0])]
  assert not any(moved)  # Reproducible: the comparison is meaningful.


def test_fused_cell_is_a_bool_and_needs_the_hierarchical_rnn():
  with pytest.raises(ValueError, match="fused_cell must be True or False"):
    LearnedOptimizer.pretrained("l2o-scale", fused_cell="yes")
