"""The memory bound of the time-parallel evaluation
(l2o_scale/meta_training/parallel_eval.py): its size estimate, the chunked
pass against per-step truth and against the all-at-once pass, and a short
meta-training run of the MNIST conv problem within a small budget. The
memory bound of the optimizer's step in the meta-gradient
(l2o_scale/meta_training/recompute.py chooses, fused_step.py recomputes):
the recomputed step's meta-gradient against the kept one's, and the choice between them."""

import glob
import io
import os

import numpy as np
import pytest
import tensorflow as tf

from tensorboard.backend.event_processing import plugin_event_accumulator

from l2o_scale import metaopt
from l2o_scale.meta_training import fused_step
from l2o_scale.meta_training import meta_step as meta_step_lib
from l2o_scale.meta_training import parallel_eval
from l2o_scale.meta_training import recompute
from l2o_scale.meta_training import reporting
from l2o_scale.meta_training import step_update
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.meta_training import unroll_method
from optimizer import hierarchical_rnn
from problems import problem_generator as pg
from problems import problem_sets
from problems import problem_spec

STEPS, ROWS = 5, 24


def _conv_setup():
  """A small convnet (8x8x1 images, two 3x3x4 layers), its data, and a
  random parameter stack of STEPS steps."""
  problem = pg.ConvNet((1, 8, 8), 10, [(3, 3, 4), (3, 3, 4)],
                       activation=tf.nn.relu)
  rng = np.random.RandomState(0)
  data = tf.constant(rng.normal(size=(ROWS, 8, 8, 1)).astype(np.float32))
  labels = tf.constant(np.eye(10, dtype=np.float32)[rng.randint(0, 10, ROWS)])
  stack = [tf.constant(0.3 * rng.normal(size=(STEPS,) + s).astype(np.float32))
           for s in problem.param_shapes]
  return problem, data, labels, stack


def test_row_bytes_counts_the_activations_and_chunks_follow_the_budget():
  problem, data, labels, stack = _conv_setup()
  per_row = parallel_eval.row_bytes(problem, problem.param_shapes, data,
                                    labels)
  # Per layer: conv, bias_add and relu outputs of 8 x 8 x 4 floats.
  activations = 2 * 3 * 8 * 8 * 4 * 4
  assert activations <= per_row <= 2 * activations
  per_step = ROWS * per_row * 2
  chunk = lambda budget: parallel_eval.steps_per_chunk(  # pylint: disable=g-long-lambda
      problem, stack, data, labels, budget)
  assert chunk(None) == chunk(0) == chunk(STEPS * per_step) == STEPS
  assert chunk(STEPS * per_step - 1) == STEPS - 1
  assert chunk(2 * per_step) == 2
  assert chunk(1) == 1
  # Problems without data need no bound.
  assert parallel_eval.row_bytes(pg.Quadratic(5), [(5, 1)], tf.zeros([0]),
                                 tf.zeros([0])) == 0


@pytest.mark.parametrize("chunk", [1, 2])
def test_chunked_objectives_and_gradients_are_the_per_step_ones(chunk):
  """Values and the gradient of a weighted sum, against each step's
  objective and gradient computed on its own; without gradients too."""
  problem, data, labels, stack = _conv_setup()
  weights = tf.constant([0.5, -1., 2., 0.25, 1.5])

  @tf.function(autograph=False)
  def chunked(stack):
    with tf.GradientTape() as tape:
      tape.watch(stack)
      values = parallel_eval.objectives_at(problem, stack, data, labels,
                                           chunk=chunk)
      total = tf.reduce_sum(weights * values)
    return values, tape.gradient(total, stack)

  values, grads = chunked(stack)
  for t in range(STEPS):
    params = [s[t] for s in stack]
    want, want_grads = problem.objective_and_clean_gradients(params, data,
                                                             labels)
    np.testing.assert_allclose(values[t], want, rtol=1e-6)
    for g, w in zip(grads, want_grads):
      np.testing.assert_allclose(g[t], weights[t] * w, rtol=1e-4,
                                 atol=1e-6 * float(tf.reduce_max(tf.abs(w))))
  plain = tf.function(lambda s: parallel_eval.objectives_at(
      problem, s, data, labels, chunk=chunk, differentiable=False),
                      autograph=False)(stack)
  np.testing.assert_allclose(plain, values, rtol=1e-6)


def _hrnn():
  # A fixed initial learning rate: the unroll is then deterministic.
  return hierarchical_rnn.HierarchicalRNN(
      [4, 5, 5], init_lr_range=(1e-2, 1e-2), random_seed=5,
      use_gradient_shortcut=True, use_grad_products=True)


def _spy_recomputed_steps(monkeypatch):
  """A list that gets an item each time a recomputed (fused) step is
  traced."""
  traced = []
  fused = fused_step._BoundUpdate._fused  # pylint: disable=protected-access
  monkeypatch.setattr(fused_step._BoundUpdate, "_fused",  # pylint: disable=protected-access
                      lambda *a: traced.append(1) or fused(*a))
  return traced


def test_a_meta_step_over_budget_gives_the_all_at_once_numbers(monkeypatch):
  """Budgets of one byte: every step its own chunk, and every step of the
  optimizer recomputed in the meta-gradient; the meta-objective, objectives
  and meta-gradient are those of the unbounded pass with the kept step."""
  problem, data, labels, _ = _conv_setup()
  rng = np.random.RandomState(1)
  inputs = unroll_lib.UnrollInputs(
      obj_weights=tf.ones([STEPS]) / STEPS,
      batches=tf.constant(rng.randint(0, ROWS, (STEPS, 8)), tf.int32),
      mini_data=data, mini_labels=labels,
      init_tensors=[tf.constant(0.3 * rng.normal(size=s).astype(np.float32))
                    for s in problem.param_shapes],
      jacob_switch=False,
      mt_labels=unroll_lib.zero_mt_labels(problem.param_shapes, STEPS),
      first_unroll=True, reset_state=True)
  optimizer = _hrnn()
  out_a, grads_a = meta_step_lib.make_meta_step(
      problem, optimizer, time_parallel=True)(inputs, None, False)
  recomputed = _spy_recomputed_steps(monkeypatch)
  out_b, grads_b = meta_step_lib.make_meta_step(
      problem, optimizer, time_parallel=True, memory_budget=1,
      recompute_budget=1)(inputs, None, False)
  assert not bool(out_b.early_stop)
  assert recomputed
  np.testing.assert_allclose(out_b.problem_objectives,
                             out_a.problem_objectives, rtol=1e-5)
  np.testing.assert_allclose(out_b.metaobj, out_a.metaobj, rtol=1e-5)
  scale = max(float(np.max(np.abs(g))) for g in grads_a)
  assert scale > 0
  for a, b in zip(grads_a, grads_b):
    np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5 * scale)


def test_the_mnist_conv_problem_meta_trains_in_chunks(tmp_path, data_dir,
                                                      monkeypatch):
  """One short meta-iteration of the original's MNIST conv problem (28x28,
  3x3x8 and 5x5x8 layers) with a budget below one step's evaluation: it
  completes, its unrolls and its evaluation take the chunked pass, and the
  run reports its peak memory."""
  taken = []
  chunked = parallel_eval._chunked_objectives  # pylint: disable=protected-access

  def spy(problem, params_stack, data, labels, chunk, differentiable):
    taken.append((chunk, differentiable))
    return chunked(problem, params_stack, data, labels, chunk, differentiable)

  monkeypatch.setattr(parallel_eval, "_chunked_objectives", spy)
  out = io.StringIO()
  spec = problem_spec.Spec(hierarchical_rnn.HierarchicalRNN, ([4, 5, 5],),
                           {"init_lr_range": (1e-3, 1e-3)})
  result = metaopt.train_optimizer(
      str(tmp_path), spec, problem_sets.mnist_conv_problems(data_dir), 1, 1,
      lambda: 1, lambda: 2, learning_rate=1e-4, fix_unroll=True,
      fix_unroll_length=2, fix_num_steps=2, fix_num_steps_eval=2,
      evaluation_epochs=1, out=out,
      config=metaopt.TrainingConfig(mini_batch_size=64,
                                    time_parallel_memory_gib=1e-3))
  text = out.getvalue()
  assert result["meta_iterations"] == 1 and result["last_checkpoint"]
  assert np.isfinite(result["best_evaluation"])
  # 64 rows x ~125 kB x 2 > 1 MiB: one step per chunk, with the
  # meta-gradient (the unroll) and without (the evaluation).
  assert (1, True) in taken and (1, False) in taken
  assert "peak memory" in text and "peak resident memory" in text
  # TensorBoard's PeakMemoryGiB: one value per unroll (here one), the
  # process's peak so far (not above its peak at the end).
  [events_dir] = {os.path.dirname(f) for f in glob.glob(
      str(tmp_path / "**" / "events.out.*"), recursive=True)}
  acc = plugin_event_accumulator.EventAccumulator(
      events_dir,
      size_guidance={plugin_event_accumulator.TENSORS: 0})
  acc.Reload()
  peaks = [float(tf.make_ndarray(e.tensor_proto))
           for e in acc.Tensors("PeakMemoryGiB")]
  assert len(peaks) == 1 and 0 < peaks[0] <= reporting.peak_memory_gib()


def _mlp_unroll_inputs(problem, steps, teacher_scale=0.):
  """Unroll inputs of a small MLP on 16 random rows, with teacher steps of
  ``teacher_scale`` (imitation)."""
  rng = np.random.RandomState(0)
  data = tf.constant(rng.normal(size=(16, 6)).astype(np.float32))
  labels = tf.constant(np.eye(3, dtype=np.float32)[rng.randint(0, 3, 16)])
  return unroll_lib.UnrollInputs(
      obj_weights=tf.ones([steps]) / steps,
      batches=tf.constant(rng.randint(0, 16, (steps, 4)), tf.int32),
      mini_data=data, mini_labels=labels,
      init_tensors=[tf.constant(0.3 * rng.normal(size=s).astype(np.float32))
                    for s in problem.param_shapes],
      jacob_switch=False,
      mt_labels=[tf.constant(teacher_scale * rng.normal(
          size=(steps,) + tuple(s)).astype(np.float32))
                 for s in problem.param_shapes],
      first_unroll=True, reset_state=True)


def test_the_recomputed_step_gives_the_kept_meta_gradient(monkeypatch):
  """A recompute budget of one byte, step by step, with attention and in
  imitation mode (teacher steps): every step is recomputed in the
  meta-gradient, and the objectives and the meta-gradient with respect to
  every meta-parameter are those of the kept step to float rounding."""
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,),
                              activation=tf.nn.sigmoid)
  inputs = _mlp_unroll_inputs(problem, 3, 0.01)
  # One level (the per-parameter RNN): fewer ops to trace; the three
  # levels are recomputed in the time-parallel test above.
  optimizer = hierarchical_rnn.HierarchicalRNN(
      [4], init_lr_range=(1e-2, 1e-2), random_seed=5,
      use_gradient_shortcut=True, use_grad_products=True, use_attention=True)
  recomputed = _spy_recomputed_steps(monkeypatch)
  out_a, grads_a = meta_step_lib.make_meta_step(problem, optimizer)(
      inputs, None, True)
  assert not recomputed
  out_b, grads_b = meta_step_lib.make_meta_step(
      problem, optimizer, recompute_budget=1)(inputs, None, True)
  assert recomputed
  for key in ("metaobj", "metaobjmt", "problem_objectives"):
    np.testing.assert_allclose(getattr(out_b, key), getattr(out_a, key),
                               rtol=1e-6)
  scale = max(float(np.max(np.abs(g))) for g in grads_a)
  assert scale > 0
  # All but one meta-parameter (unused in this configuration) get one.
  assert sum(bool(np.any(g != 0)) for g in grads_a) == len(grads_a) - 1
  for a, b in zip(grads_a, grads_b):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6 * scale)


def test_the_step_is_recomputed_where_its_estimate_exceeds_the_budget():
  """:func:`recompute.choose_update` keeps the step without a budget, and
  recomputes it where steps x the estimated kept bytes of one step exceed
  the budget; the estimate is above the bytes of the step's inputs (the
  step's values include its GRU's rows of every parameter)."""
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,))
  optimizer = hierarchical_rnn.HierarchicalRNN([4, 5, 5])
  state = unroll_lib.zero_loop_state(problem, optimizer)
  args = (state.params, state.params, state.states, state.global_state)
  per_step = recompute.step_bytes(optimizer, *args)
  inputs = sum(t.shape.num_elements() * 4 for t in tf.nest.flatten(args))
  assert per_step > inputs
  taken = []
  kept = lambda *a: taken.append("kept")
  recomputed = lambda *a: taken.append("recomputed")
  for budget, steps in ((None, 10), (0, 10), (10 * per_step + 1e3, 10),
                        (10 * per_step - 1e3, 10), (per_step, 2)):
    recompute.choose_update(kept, recomputed, optimizer, budget, steps)(
        *args, None, None)
  assert taken == ["kept"] * 3 + ["recomputed"] * 2


def test_one_place_picks_how_the_optimizers_step_runs():
  """unroll_method.optimizer_update: XLA gives the fused step, a recompute budget
  with a known number of steps the budgeted choice, else the optimizer's
  own step; only a fused step bound to an unroll fuses the batch
  gradients."""
  optimizer = _hrnn()
  plain = unroll_method.optimizer_update(optimizer)
  assert isinstance(plain, step_update.PlainUpdate)
  assert plain.bind() is plain and not plain.fuses_gradients
  fused = unroll_method.optimizer_update(optimizer, jit_compile=True)
  assert isinstance(fused, fused_step.FusedUpdate)
  assert fused.bind().fuses_gradients
  budgeted = unroll_method.optimizer_update(optimizer, recompute_budget=1,
                                         copies=10)
  assert isinstance(budgeted, recompute.BudgetedUpdate)
  assert not budgeted.bind().fuses_gradients
  for copies in (None, 0):
    assert isinstance(unroll_method.optimizer_update(
        optimizer, recompute_budget=1, copies=copies),
                      step_update.PlainUpdate)


def test_the_meta_slots_are_every_place_the_step_reads_a_meta_variable():
  """Traced with the meta-slots swapped for tensors, the optimizer's step
  reads no meta-variable; after the block the variables are back."""
  optimizer = _hrnn()
  problem = pg.FullyConnected(6, 3, hidden_sizes=(5,))
  state = unroll_lib.zero_loop_state(problem, optimizer)
  slots = fused_step.MetaSlots(optimizer)
  meta = optimizer.meta_variables
  assert sorted({i for _, _, i in slots.slots}) == list(range(len(meta)))

  def step(values):
    with slots.swapped(values):
      return optimizer.compute_updates_packed(
          state.params, state.params, state.states, state.global_state)

  graph = tf.function(step, autograph=False).get_concrete_function(
      [tf.TensorSpec(v.shape, v.dtype) for v in meta]).graph
  assert not {v.ref() for v in graph.variables} & {v.ref() for v in meta}
  for container, key, i in slots.slots:
    held = (container[key] if isinstance(key, int)
            else getattr(container, key))
    assert held is meta[i]
