"""The learned step's per-coordinate part as one native kernel
(optimizer/native_step.py): the TensorFlow step's numbers, in Keras ``fit``
and in the compiled meta-test loop; TensorFlow's ops wherever it cannot run.
Its agreement with the original's outputs is tested with the TF1 fixture in
test_keras_optimizer.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from l2o_scale.keras_optimizer import LearnedOptimizer
from l2o_scale.meta_testing import testing
from optimizer import hierarchical_rnn
from optimizer import native_step
from problems import problem_generator as pg


@pytest.fixture
def kernel_calls(monkeypatch):
  """Counts the kernel's uses in traced steps; skips where it cannot run."""
  why = native_step.unavailable_reason()
  if why:
    pytest.skip(why)
  calls = []
  original = native_step.per_coordinate_step
  monkeypatch.setattr(native_step, "per_coordinate_step",
                      lambda *a: calls.append(1) or original(*a))
  return calls


def _fit(native, jit_compile=True, poison=False):
  keras.utils.set_random_seed(0)
  # 71,287 coordinates: tensors whose boundaries fall inside the kernel's
  # vectors and tiles, a tensor of 10, enough work items for its threads.
  model = keras.Sequential([keras.Input((784,)),
                            keras.layers.Dense(90, activation="tanh"),
                            keras.layers.Dense(7)])
  model.compile(optimizer=LearnedOptimizer.pretrained("l2o-scale",
                                                      native_step=native),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True), jit_compile=jit_compile)
  rng = np.random.RandomState(0)
  x = rng.rand(64, 784).astype(np.float32)
  if poison:  # A NaN input in the second batch (rows 16 to 31).
    x[20, 3] = np.nan
  initial = model.get_weights()
  history = model.fit(x, rng.randint(0, 7, 64), batch_size=16, epochs=1,
                      shuffle=False, verbose=0)
  state = [v.numpy() for v in model.optimizer.variables if v.ndim == 2]
  _fit.initial = initial
  _fit.skipped = model.optimizer.skipped_steps
  return model.get_weights(), history.history["loss"], state


def test_native_step_gives_the_tensorflow_step(kernel_calls):
  plain, plain_loss, plain_state = _fit(False)
  assert not kernel_calls
  fused, fused_loss, fused_state = _fit(True)
  assert kernel_calls  # Traced into the step.
  assert sum(w.size for w in fused) == 71_287
  np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-5)
  for a, b, start in zip(fused, plain, _fit.initial):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
    # The steps moved every tensor by far more than that tolerance.
    assert np.max(np.abs(b - start)) > 100 * (1e-4 * np.max(np.abs(b)) + 1e-7)
  # Every state block (accumulators, mean squares, decays, learning rates,
  # RNN states) after 4 steps, to float rounding of their own scale.
  assert len(fused_state) == len(plain_state) >= 6
  for a, b in zip(fused_state, plain_state):
    assert np.max(np.abs(a - b)) <= 1e-5 * np.max(np.abs(b)) + 1e-12


def test_native_step_keeps_a_divergence_visible(kernel_calls):
  # A NaN input in the second of four batches: that step's gradients are
  # NaN; the optimizer skips the step and counts it (docs/keras.md), with
  # the kernel as with TensorFlow's ops. The epoch's loss shows the NaN;
  # the weights stay finite, moved by the three other steps.
  weights, losses, _ = _fit(True, poison=True)
  assert kernel_calls and not np.isfinite(losses[-1]) and _fit.skipped == 1
  plain, _, _ = _fit(False, poison=True)
  assert _fit.skipped == 1
  for a, b, start in zip(weights, plain, _fit.initial):
    assert np.all(np.isfinite(a)) and not np.array_equal(a, start)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_without_xla_the_tensorflow_ops_run(kernel_calls):
  """jit_compile=False: the kernel (an XLA custom call) cannot run; one
  warning says so, and TensorFlow's ops train the model."""
  with pytest.warns(UserWarning) as caught:
    fused, _, _ = _fit(True, jit_compile=False)
  assert [str(w.message) for w in caught
          if "native_step" in str(w.message)] == [
              "native_step=True: the step is not compiled by XLA "
              "(jit_compile=False); TensorFlow's ops run instead."]
  plain, _, _ = _fit(False, jit_compile=False)
  assert not kernel_calls
  for a, b in zip(fused, plain):
    np.testing.assert_array_equal(a, b)


def test_compiled_meta_test_loop_uses_it(kernel_calls):
  def run(native):
    opt = LearnedOptimizer.pretrained("l2o-scale",
                                      native_step=native).learned_optimizer
    problem = pg.Quadratic(ndim=37, random_seed=3)
    objectives, params = testing.test_optimizer(
        opt, problem, num_iter=12, seed=0, jit_compile=True,
        progress=False)[:2]
    return np.asarray(objectives), params

  plain_objectives, plain_params = run(False)
  assert not kernel_calls
  objectives, params = run(True)
  assert kernel_calls
  np.testing.assert_allclose(objectives, plain_objectives, rtol=1e-4)
  for a, b in zip(params, plain_params):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_bad_values_and_unsupported_options():
  with pytest.raises(ValueError, match="native_step must be True or False"):
    LearnedOptimizer.pretrained("l2o-scale", native_step="yes")
  other = hierarchical_rnn.HierarchicalRNN([10, 20], num_gradient_scales=2)
  with pytest.warns(UserWarning, match="num_gradient_scales=2.*TensorFlow's "
                    "ops run instead"):
    LearnedOptimizer(other, native_step=True)
  assert "num_gradient_scales=2" in " ".join(
      native_step.unsupported_options(other))
  assert not native_step.unsupported_options(
      LearnedOptimizer.pretrained("l2o-scale").learned_optimizer)


@pytest.fixture
def reloaded():
  """The kernel looked for afresh in the test (and after it)."""
  native_step._load.cache_clear()  # pylint: disable=protected-access
  yield
  native_step._load.cache_clear()  # pylint: disable=protected-access


def test_a_cache_folder_that_cannot_be_written(tmp_path, monkeypatch,
                                               kernel_calls, reloaded):
  """Where the kernel cannot be built (the cache folder cannot be created
  or written), one line names the folder and TensorFlow's ops run; a
  read-only folder that holds a kernel built before serves it."""
  del kernel_calls, reloaded
  blocker = tmp_path / "file"
  blocker.write_text("")
  monkeypatch.setenv("L2O_SCALE_CACHE", str(blocker / "cache"))
  why = native_step.unavailable_reason()
  assert str(blocker / "cache") in why and "\n" not in why
  native_step._load.cache_clear()  # pylint: disable=protected-access
  with pytest.warns(UserWarning) as caught:
    LearnedOptimizer.pretrained("l2o-scale", native_step=True)
  assert [str(w.message) for w in caught] == [
      "native_step=True: {}; TensorFlow's ops run instead.".format(why)]

  cache = tmp_path / "read-only"
  monkeypatch.setenv("L2O_SCALE_CACHE", str(cache))
  cache.mkdir()
  library = native_step.library_path()
  open(library, "wb").close()  # Built there before (not loaded: see below).
  real_open = open

  def read_only_open(path, mode="r", *args, **kwargs):
    if str(path).startswith(str(cache)) and set(mode) & set("wax+"):
      raise OSError(30, "Read-only file system", str(path))
    return real_open(path, mode, *args, **kwargs)

  loaded = []
  monkeypatch.setattr(native_step, "open", read_only_open, raising=False)
  monkeypatch.setattr(native_step.ctypes, "CDLL",
                      lambda path, mode: loaded.append(path))
  native_step._load.cache_clear()  # pylint: disable=protected-access
  assert native_step.unavailable_reason() is None
  assert loaded == [library]



def test_metatest_falls_back_where_the_kernel_cannot_be_built(
    tmp_path, monkeypatch, capsys, kernel_calls, reloaded):
  """metatest.py --jit_compile --native_step with a cache folder that
  cannot be created: one line says why, TensorFlow's ops run (no refusal
  naming --save_dir)."""
  del kernel_calls, reloaded
  from absl.testing import flagsaver  # pylint: disable=g-import-not-at-top
  import metatest  # pylint: disable=g-import-not-at-top
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import tested_optimizer  # pylint: disable=g-import-not-at-top
  blocker = tmp_path / "file"
  blocker.write_text("")
  monkeypatch.setenv("L2O_SCALE_CACHE", str(blocker / "cache"))
  flags = metatest.FLAGS
  was_parsed, saved = flags.is_parsed(), flagsaver.save_flag_values(flags)
  try:
    flags.unparse_flags()
    flags(["metatest.py", "--pretrained=l2o-scale", "--jit_compile",
           "--native_step", "--include_mnist_mlp_problems"])
    opt, _ = tested_optimizer.restored(
        metatest.build_config(flags), pretrained.checkpoint("l2o-scale"))
  finally:
    flagsaver.restore_flag_values(saved, flags)
    if not was_parsed:
      flags.unparse_flags()
  out = capsys.readouterr().out.splitlines()
  assert ("--native_step: the native step cannot be built in {} (Not a "
          "directory; L2O_SCALE_CACHE names another folder); TensorFlow's "
          "ops run instead.".format(blocker / "cache")) in out, out
  assert opt.native_step and native_step.unavailable_reason()


def test_a_damaged_kernel_file_is_named(tmp_path, monkeypatch, kernel_calls,
                                        reloaded):
  """A kernel file that does not load (truncated): one line naming it and
  what to do; TensorFlow's ops run."""
  del kernel_calls, reloaded
  monkeypatch.setenv("L2O_SCALE_CACHE", str(tmp_path))
  library = native_step.library_path()
  with open(library, "wb") as f:
    f.write(b"\x7fELF")
  why = native_step.unavailable_reason()
  assert "delete {} to build it again".format(library) in why, why
  assert "\n" not in why
