"""LearnedOptimizer on standard Keras applications: full-size nets build and
train in ``fit``, with and without XLA, and the learned step's graph does
not grow with (number of tensors) x (number of parameters)."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.keras_optimizer import LearnedOptimizer
from optimizer import hierarchical_rnn

NETS = {
    # name: (constructor, parameters of the 10-class net at 32x32x3)
    "MobileNetV2": (keras.applications.MobileNetV2, 2_270_794),
    "EfficientNetB0": (keras.applications.EfficientNetB0, 4_062_381),
}


# Without XLA only: XLA's compile of a full-size application's train step
# takes minutes per net on 2 cores, more than the suite can spend (run
# these with jit_compile=True by hand to check XLA); the graph-size test
# below covers the cause of the failure with and without XLA alike (the
# step's graph no longer holds a [tensors, parameters] constant).
#
# EfficientNetB0 runs where L2O_SCALE_LONG_TESTS=1: Keras' own tracing of
# its train step takes about a minute on 2 cores (as long with Adam), more
# than the suite's 15 minutes can spend; MobileNetV2 and the graph-size test
# below check the same code path.
LONG = pytest.mark.skipif(os.environ.get("L2O_SCALE_LONG_TESTS") != "1",
                          reason="long test: set L2O_SCALE_LONG_TESTS=1")


@pytest.mark.parametrize("jit_compile", [False])
@pytest.mark.parametrize("net", [
    "MobileNetV2", pytest.param("EfficientNetB0", marks=LONG)])
def test_fit_trains_a_full_size_application(net, jit_compile):
  build, num_params = NETS[net]
  keras.utils.set_random_seed(0)
  model = build(weights=None, input_shape=(32, 32, 3), classes=10)
  assert model.count_params() == num_params  # The full-size net.
  opt = LearnedOptimizer.pretrained("l2o-scale")
  model.compile(optimizer=opt, jit_compile=jit_compile,
                loss="sparse_categorical_crossentropy")
  rng = np.random.RandomState(0)
  x = rng.rand(4, 32, 32, 3).astype(np.float32)
  y = np.arange(4) % 10
  before = [w.copy() for w in model.get_weights()]
  history = model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))
  assert int(opt.iterations.numpy()) == 2
  after = model.get_weights()
  assert all(np.all(np.isfinite(w)) for w in after)
  trainable = {id(v) for v in model.trainable_variables}
  moved = [not np.array_equal(b, a) for b, a, v in
           zip(before, after, model.weights) if id(v) in trainable]
  assert all(moved)
  # The step runs in passes of at most 2**20 coordinates (or one
  # variable), each with a few packed blocks of state, not a set of slots
  # per variable.
  passes = opt._state.passes  # pylint: disable=protected-access
  assert len(passes) >= num_params / 2**20
  assert len(opt.variables) < 10 * len(passes) < len(
      model.trainable_variables)


def test_step_graph_does_not_grow_with_tensors_times_parameters():
  """40 tensors of 2,500 entries: a traced step holds no constant with
  one entry per (tensor, coordinate) pair (16 MB here, gigabytes on a
  real net), only what scales with the tensors or the coordinates."""
  opt = hierarchical_rnn.HierarchicalRNN([10, 20, 20])
  params = [tf.zeros([2500]) for _ in range(40)]
  packed = opt.initialize_packed_state(params)
  glob = opt.initialize_global_state()

  @tf.function
  def step(params, grads, packed, glob):
    return opt.compute_updates_packed(params, grads, packed, glob)[:3]

  graph = step.get_concrete_function(params, params, packed,
                                     glob).graph.as_graph_def()
  assert graph.ByteSize() < 400_000


def test_a_variable_without_gradient_keeps_its_state(fixtures_dir):
  """As the original's apply_gradients: a variable without a gradient is
  left out of the step (value and state unchanged, not in the per-tensor
  means), and the others step exactly as an optimizer of them alone."""
  import os  # pylint: disable=g-import-not-at-top
  ckpt = os.path.join(fixtures_dir, "mnist_mlp_sigmoid", "ckpt")
  kwargs = {"init_lr_range": (1e-3, 1e-3)}  # No random initial state.
  rng = np.random.RandomState(0)
  values = [rng.randn(*s).astype(np.float32) for s in ((5, 3), (3,), (4,))]
  grads = [[rng.randn(*v.shape).astype(np.float32) for v in values]
           for _ in range(3)]
  both = [keras.Variable(v) for v in values]
  alone = [keras.Variable(v) for v in values[:2]]
  opt_both = LearnedOptimizer.from_checkpoint(ckpt, optimizer_kwargs=kwargs)
  opt_alone = LearnedOptimizer.from_checkpoint(ckpt, optimizer_kwargs=kwargs)
  opt_both.build(both)
  state_before = [v.numpy() for v in opt_both._state.packed_slots]  # pylint: disable=protected-access
  for g in grads:
    opt_both.apply([g[0], g[1], None], both)
    opt_alone.apply(g[:2], alone)
  np.testing.assert_array_equal(both[2].numpy(), values[2])
  for b, a in zip(both[:2], alone):
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    assert not np.allclose(b.numpy(), values[0] if b is both[0] else
                           values[1])
  # The packed state's last 4 of 22 columns (the third variable) are
  # unchanged.
  for before, slot in zip(state_before, opt_both._state.packed_slots):
    after = slot.numpy()
    if after.ndim == 2 and after.shape[1] == 22:
      np.testing.assert_array_equal(after[:, 18:], before[:, 18:])


# With XLA where L2O_SCALE_LONG_TESTS=1: compiling MultiHeadAttention costs
# about 30 s of the suite's 15 minutes, and the shapeless gradients come
# from the traced step with and without XLA alike (both failed before).
@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=LONG)])
def test_fit_trains_a_transformer_block(jit_compile):
  """Dense layers applied to a sequence get gradients without a static
  shape (the gradient of a tensordot in a traced step); the learned step
  takes each gradient's shape from its variable."""
  keras.utils.set_random_seed(0)
  tokens = keras.Input((6,), dtype="int32")
  x = keras.layers.Embedding(20, 8)(tokens)
  x = keras.layers.LayerNormalization()(
      x + keras.layers.MultiHeadAttention(2, 4)(x, x))
  x = x + keras.layers.Dense(8)(keras.layers.Dense(16, activation="relu")(x))
  x = keras.layers.GlobalAveragePooling1D()(x)
  model = keras.Model(tokens, keras.layers.Dense(3)(x))
  opt = LearnedOptimizer.pretrained("l2o-scale")
  model.compile(optimizer=opt, jit_compile=jit_compile,
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  rng = np.random.RandomState(0)
  # 10 rows in batches of 4: the last batch is partial, so the traced step
  # has an unknown batch size.
  x = rng.randint(0, 20, size=(10, 6)).astype(np.int32)
  y = np.arange(10) % 3
  before = [v.numpy().copy() for v in model.trainable_variables]
  history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))
  assert int(opt.iterations.numpy()) == 3
  for b, v in zip(before, model.trainable_variables):
    assert np.all(np.isfinite(v.numpy())) and not np.array_equal(b, v.numpy())
