"""Benchmark: cost of the learned optimizer against Adam, and of meta-training.

Why: the point of L2O-Scale is an optimizer cheap enough to replace Adam,
and the L2O-Entropy regularizer adds curvature estimates to every step of
meta-training. Both costs are claims a reader can check here, in one run,
on the machine at hand:

(a) one optimizer step on the L2O-Entropy MNIST MLP (784-20-10, sigmoid,
    batch 128, ``problems.problem_sets.mnist_mlp_problems``), learned
    optimizer vs. Keras Adam, as a ratio. A "step" is the whole step (loss,
    gradients, update), each compiled in one ``tf.function`` that reads and
    updates ``tf.Variable``s, as a training loop would:

    * learned: ``problem.objective_and_gradients`` +
      ``HierarchicalRNN([10, 20, 20], use_problem_lr_mean=True,
      use_gradient_shortcut=True, use_grad_products=True)
      .compute_updates_packed`` (the optimizer metarun.py trains by default),
      parameters and the packed optimizer state in variables;
    * Adam: a ``keras.Sequential`` MLP of the same shape, sparse softmax
      cross-entropy, ``keras.optimizers.Adam().apply_gradients``.

    Both are timed with and without XLA (``jit_compile``), taking turns
    within each repeat. The headline ratio puts the learned step with XLA
    (as ``metatest.py --jit_compile`` runs it) against the *faster* of the
    two Adam steps. ``--no_xla`` times only the steps without XLA.
    With XLA it also times a lower bound (:func:`make_gru_core_step`): the
    MLP's loss and gradients plus the HRNN's per-parameter GRU alone.

(b) one 20-step meta-training unroll as the original's
    ``../shared/original-tf1/time_original.py`` times it: forward through 20
    optimizer steps, the meta-gradient back through them and the meta-update
    (``l2o_scale.meta_training.meta_step.make_meta_step`` on ``l2o_scale.meta_training.unroll``, then
    ``meta_learner.MetaLearner``: make finite, clip, RMSProp) with a
    10,000-sample mini dataset (the MNIST test split: the offline train split
    has only 5,000 rows), without a regularizer and with ``hessian-esd``
    active (switch on), each also with ``--jit_compile`` (the optimizer's
    step compiled by XLA inside the unroll), taking turns.

(c) the floor of (b): the same unroll with SGD (one meta-parameter) instead
    of the learned optimizer, what any optimizer's unroll costs here.

(d) one whole meta-iteration as metarun runs it
    (``MetaTrainer``'s ``LocalSeries.run``: 5 unrolls of 20 steps with their
    meta-updates and progress lines, no evaluation).

``--original PATH/time_original.py`` first runs the original TF1 code's
timing script (its README's venv) and reports the port's speed-up over it,
measured in the same run: the comparison the README's numbers come from.

Every number is the median over repeats after warm-up (compilation is timed
separately and reported). Usage::

  python -m l2o_scale.bench [--quick] [--json PATH] [--no_xla]
                            [--data_dir DIR] [--original SCRIPT]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
quiet_cuda.import_tensorflow()

import tensorflow as tf  # pylint: disable=g-import-not-at-top

from l2o_scale.meta_testing import inner_step  # pylint: disable=g-import-not-at-top
from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top
from problems import datasets  # pylint: disable=g-import-not-at-top

UNROLL_LENGTH = 20
MINI_DATASET_SIZE = 10000
HRNN_LEVEL_SIZES = optimizer_flags.HRNN_CELL_SIZES
HRNN_OPTIONS = dict(use_problem_lr_mean=True, use_gradient_shortcut=True,
                    use_grad_products=True)

# The steps bench_steps compiles with XLA; any of them may fail to compile,
# and the report then carries "<name>_error" instead of its timings.
XLA_STEPS = ("l2o_xla", "adam_xla", "gru_core_xla")

# (warm-up calls, repeats, steps per repeat) for the step benchmark and
# (repeats) for the unroll benchmark.
FULL = dict(step_warmup=20, step_repeats=30, step_inner=50, unroll_repeats=10)
QUICK = dict(step_warmup=10, step_repeats=10, step_inner=20, unroll_repeats=3)


# ------------------------------------------------------------------ timing
def measure(fn, warmup, repeats, inner=1, timer=time.perf_counter):
  """Times ``fn`` (which must block until its work is done).

  Calls ``fn`` ``warmup`` times untimed (the first call, which compiles, is
  timed separately), then ``repeats`` times ``inner`` calls; returns a dict
  with the per-call ``median``, ``min``, ``max`` (seconds), every sample and
  ``first_call_seconds``. ``timer`` is injectable for tests.
  """
  return measure_interleaved({"fn": fn}, warmup, repeats, inner, timer)["fn"]


def measure_interleaved(fns, warmup, repeats, inner=1,
                        timer=time.perf_counter):
  """:func:`measure` for several functions, taking turns.

  Each repeat times ``inner`` calls of every function in turn, so a change
  of machine speed during the run (this benchmark runs on shared VMs) hits
  all of them alike and their ratio stays meaningful. Returns a dict name ->
  the statistics of :func:`measure`.
  """
  first = {}
  for name, fn in fns.items():
    start = timer()
    fn()
    first[name] = timer() - start
    for _ in range(max(0, warmup - 1)):
      fn()
  samples = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      start = timer()
      for _ in range(inner):
        fn()
      samples[name].append((timer() - start) / inner)
  return {name: summarize(samples[name], first_call_seconds=first[name],
                          inner=inner) for name in fns}


def summarize(samples, **extra):
  """Median/min/max of per-call samples, plus ``extra`` fields."""
  if not samples:
    raise ValueError("no samples")
  out = dict(median=float(statistics.median(samples)),
             min=float(min(samples)), max=float(max(samples)),
             repeats=len(samples), samples=[float(s) for s in samples])
  out.update(extra)
  return out


# -------------------------------------------------------------------- data
def load_data(data_dir):
  """(train split, test split) of MNIST; the step uses a train batch, the
  unroll's 10,000-row mini dataset is the test split."""
  return (datasets.mnist(train=True, data_dir=data_dir),
          datasets.mnist(train=False, data_dir=data_dir))


def _mlp_problem(data_dir):
  from problems import problem_sets  # pylint: disable=g-import-not-at-top
  [(spec, dataset, batch_size)] = problem_sets.mnist_mlp_problems(data_dir)
  return spec, dataset, batch_size


def _hrnn():
  from optimizer import hierarchical_rnn  # pylint: disable=g-import-not-at-top
  return hierarchical_rnn.HierarchicalRNN(HRNN_LEVEL_SIZES, **HRNN_OPTIONS)


# ---------------------------------------------------------------- (a) steps
def make_l2o_step(problem, optimizer, jit_compile=False, seed=0):
  """The learned step (:func:`l2o_scale.meta_testing.inner_step.inner_step` on the packed
  state) as one tf.function over variables; returns a callable
  ``step(x, y) -> loss``."""
  tf.random.set_seed(seed)
  params = [tf.Variable(t) for t in problem.init_tensors(seed)]
  state = tf.nest.map_structure(
      tf.Variable, optimizer.initialize_packed_state(params))
  global_state = [tf.Variable(g) for g in optimizer.initialize_global_state()]

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    obj, new_params, new_state, new_global = inner_step.inner_step(
        problem, optimizer, [p.read_value() for p in params],
        tf.nest.map_structure(tf.convert_to_tensor, state),
        [g.read_value() for g in global_state], x, y, packed=True)
    for var, value in zip(tf.nest.flatten(params + [state] + global_state),
                          tf.nest.flatten(new_params + [new_state] +
                                          new_global)):
      var.assign(value)
    return obj

  return step


def make_gru_core_step(problem, optimizer, jit_compile=True, seed=0):
  """A lower bound of the learned step: the MLP's loss and gradients plus
  the per-parameter GRU of ``optimizer`` alone, nothing else of the HRNN.

  Why: it splits the learned step's cost into the part no rewrite of the
  surrounding code can remove and the rest. The GRU runs exactly as in
  :meth:`HierarchicalRNN.compute_updates_packed` (``call_feature_major`` on
  the inputs, the tensors' indicator rows and the packed state, state read
  from and written back to a variable), but its 12 input features are a
  fixed variable instead of being computed from the gradients (timescales,
  RMS scaling, asinh, log mean squares), and there are no readouts, learning
  rates, per-tensor means or layer/global RNNs; the parameters take a plain
  SGD step. Returns ``step(x, y) -> loss``.
  """
  params = [tf.Variable(t) for t in problem.init_tensors(seed)]
  seg = optimizer.segments([p.shape.num_elements() for p in params])
  rng = np.random.RandomState(seed)
  n = sum(seg.sizes)
  features = tf.Variable(rng.randn(optimizer.num_rnn_inputs, n).astype(
      np.float32))
  state = tf.Variable(optimizer.initialize_packed_state(params)["parameter"])
  cell = optimizer.cells[0]

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    values = [p.read_value() for p in params]
    obj, grads = problem.objective_and_gradients(values, x, y)
    rows = tf.concat([features.read_value(), seg.indicators,
                      state.read_value()], 0)
    state.assign(cell.call_feature_major(rows, num_bias_rows=seg.count))
    for param, grad in zip(params, grads):
      param.assign_sub(1e-3 * grad)
    return obj

  return step


def make_adam_step(hidden=20, n_classes=10, n_features=784, seed=0,
                   jit_compile=False):
  """A Keras Sequential MLP of the same shape and an Adam step over it."""
  import keras  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([
      keras.Input((n_features,)),
      keras.layers.Dense(hidden, activation="sigmoid"),
      keras.layers.Dense(n_classes),
  ])
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  opt = keras.optimizers.Adam()
  opt.build(model.trainable_variables)

  @tf.function(jit_compile=jit_compile)
  def step(x, y):
    x = tf.reshape(x, (-1, n_features))
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  return step


def bench_steps(data_dir, cfg, xla=True, timer=time.perf_counter):
  """Times the learned and the Adam step, without and (``xla``) with XLA."""
  spec, dataset, batch_size = _mlp_problem(data_dir)
  problem = spec.build()
  rng = np.random.RandomState(0)
  rows = rng.choice(len(dataset.data), batch_size, replace=False)
  x = tf.constant(np.asarray(dataset.data[rows], np.float32))
  y = tf.constant(np.asarray(dataset.labels[rows], np.int32))

  def blocking(step):
    return lambda: step(x, y).numpy()

  out = {"batch_size": int(batch_size), "problem": repr(spec)}
  steps = {"l2o": make_l2o_step(problem, _hrnn()), "adam": make_adam_step()}
  first_calls = {}
  if xla:
    # Compiled (and the first call timed) up front: if XLA cannot compile a
    # step, the error is reported and the other timings still run.
    for name, build in (
        ("l2o_xla", lambda: make_l2o_step(problem, _hrnn(), jit_compile=True)),
        ("adam_xla", lambda: make_adam_step(jit_compile=True)),
        ("gru_core_xla", lambda: make_gru_core_step(problem, _hrnn()))):
      try:
        steps[name] = build()
        start = timer()
        steps[name](x, y).numpy()
        first_calls[name] = timer() - start
      except Exception as e:  # pylint: disable=broad-except
        steps.pop(name, None)
        out[name] = {"error": "{}: {}".format(type(e).__name__, e)[:500]}
  out.update(measure_interleaved(
      {name: blocking(step) for name, step in steps.items()},
      cfg["step_warmup"], cfg["step_repeats"], cfg["step_inner"], timer))
  for name, seconds in first_calls.items():
    out[name]["first_call_seconds"] = seconds
  return out


def bench_loop_steps(data_dir, cfg):
  """Per-step time inside the compiled meta-test loop (no Python per step).

  ``testing.run_wall_clock_test`` (the original's ``run_wall_clock_test``)
  runs chunks of steps in one ``tf.while_loop``: what a 10,000-step
  ``metatest.py`` run costs per step. Learned optimizer without and with XLA,
  and the Adam baseline (TF1 rule, lr 1e-4) in the same loop, also without
  and with XLA: the XLA learned step is compared with both, since XLA speeds
  Adam's loop up too.
  """
  # Imported here: only this measurement needs the meta-test machinery.
  from l2o_scale.meta_testing import baselines  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_testing import testing  # pylint: disable=g-import-not-at-top
  spec, dataset, batch_size = _mlp_problem(data_dir)
  problem = spec.build()
  steps = cfg["step_repeats"] * cfg["step_inner"]
  out = {"steps": steps}
  for name, optimizer, jit in (("l2o", _hrnn(), False),
                               ("l2o_xla", _hrnn(), True),
                               ("adam", baselines.build("Adam"), False),
                               ("adam_xla", baselines.build("Adam"), True)):
    out[name] = testing.run_wall_clock_test(
        optimizer, problem, steps, dataset=dataset, batch_size=batch_size,
        seed=1, jit_compile=jit)
  return out


# --------------------------------------------------------------- (b) unroll
def _mini_dataset(data_dir):
  """The unroll's 10,000-row mini dataset: the MNIST test split."""
  test = datasets.mnist(train=False, data_dir=data_dir)
  n = min(MINI_DATASET_SIZE, len(test.data))
  return test, n


def _mini_tensors(data_dir):
  """The mini dataset as the unroll reads it: (data, one-hot labels, rows)."""
  test, n = _mini_dataset(data_dir)
  return (tf.constant(np.asarray(test.data[:n], np.float32)),
          tf.constant(datasets.one_hot_rows(test.labels[:n], 10)), n)


def bench_unrolls(data_dir, cfg, xla=True, timer=time.perf_counter):
  """Times one 20-step meta-training unroll, as the original's
  ``time_original.py`` (b)/(c) time it: forward through 20 optimizer steps,
  the meta-gradient back through them, make-finite, clip and the RMSProp
  meta-update (``meta_learner.MetaLearner``); without and with hessian-esd,
  each also with the optimizer's step compiled by XLA
  (``make_meta_step(jit_compile=True)``, metarun's ``--jit_compile``)."""
  # Imported here: only this measurement needs the meta-training machinery.
  from l2o_scale.meta_training import meta_learner  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import meta_step as meta_step_lib  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import tf1_optimizers  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import regularizer as regularizer_lib  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import unroll as unroll_lib  # pylint: disable=g-import-not-at-top

  spec, _, batch_size = _mlp_problem(data_dir)
  mini_data, mini_labels, n = _mini_tensors(data_dir)
  out = {"unroll_length": UNROLL_LENGTH, "mini_dataset_rows": int(n),
         "batch_size": int(batch_size)}
  # (regularizer, XLA step, time-parallel objective): the default engine,
  # the step-by-step one, and the default with XLA.
  engines = [(False, True), (False, False)] + ([(True, True)] if xla else [])
  variants = [(reg, jit, parallel) for reg in ("noreg", "hessian_esd")
              for jit, parallel in engines]
  calls = {}
  for reg_name, jit, parallel in variants:
    np.random.seed(0)
    problem = spec.build()
    optimizer = _hrnn()
    if reg_name == "noreg":
      reg = regularizer_lib.NO_REGULARIZER
    else:
      reg = regularizer_lib.make_regularizer_config(
          problem, reg_optimizer=True, reg_option="hessian-esd")
    meta_step = meta_step_lib.make_meta_step(problem, optimizer, reg,
                                             jit_compile=jit,
                                             time_parallel=parallel)
    learner = meta_learner.MetaLearner(
        tf1_optimizers.RMSProp(optimizer.meta_variables, 1e-6), 1e4)
    batches = tf.constant(datasets.batch_indices(n, UNROLL_LENGTH, batch_size))
    init_tensors = [tf.constant(np.random.normal(size=s).astype(np.float32))
                    for s in problem.param_shapes]
    carried = unroll_lib.zero_loop_state(problem, optimizer)
    inputs = unroll_lib.UnrollInputs(
        obj_weights=tf.constant(
            np.ones(UNROLL_LENGTH, np.float32) / UNROLL_LENGTH),
        batches=batches, mini_data=mini_data, mini_labels=mini_labels,
        init_tensors=init_tensors, jacob_switch=reg_name != "noreg",
        mt_labels=[tf.constant(m) for m in unroll_lib.zero_mt_labels(
            problem.param_shapes, UNROLL_LENGTH)],
        first_unroll=tf.constant(True), reset_state=tf.constant(True))

    def call(meta_step=meta_step, learner=learner, inputs=inputs,
             carried=carried):
      result, grads = meta_step(inputs, carried, False)
      learner.apply(grads)
      result.metaobj.numpy()

    calls[reg_name + ("_xla" if jit else "") +
          ("" if parallel else "_sequential")] = call
  out.update(measure_interleaved(calls, 1, cfg["unroll_repeats"], 1, timer))
  return out


def bench_unroll_floor(data_dir, cfg, timer=time.perf_counter):
  """The floor of (b): the same 20-step unroll with the learned optimizer
  replaced by SGD with one meta-parameter (its log learning rate). What is
  left is what any optimizer's unroll computes: the objective on the
  10,000-row mini dataset at every step (the meta-objective), the batch
  gradients and the meta-gradient back through both."""
  spec, _, batch_size = _mlp_problem(data_dir)
  mini_data, mini_labels, n = _mini_tensors(data_dir)
  np.random.seed(0)
  problem = spec.build()
  log_lr = tf.Variable(-3.)
  params0 = [tf.constant(np.random.normal(size=s).astype(np.float32))
             for s in problem.param_shapes]
  batches = tf.constant(datasets.batch_indices(n, UNROLL_LENGTH, batch_size))

  def body(i, params, total):
    obj = problem.objective(params, mini_data, mini_labels)
    rows = tf.gather(batches, i)
    _, grads = problem.objective_and_gradients(
        params, tf.gather(mini_data, rows), tf.gather(mini_labels, rows))
    return (i + 1, [p - tf.exp(log_lr) * g for p, g in zip(params, grads)],
            total + obj / UNROLL_LENGTH)

  @tf.function(autograph=False)
  def unroll_and_meta_gradient():
    with tf.GradientTape() as tape:
      _, _, total = tf.while_loop(lambda i, *_: i < UNROLL_LENGTH, body,
                                  (tf.constant(0), params0, tf.constant(0.)))
    return total, tape.gradient(total, log_lr)

  return measure(lambda: [t.numpy() for t in unroll_and_meta_gradient()], 1,
                 cfg["unroll_repeats"], 1, timer)


def bench_meta_iteration(data_dir, cfg, jit_compile=False,
                         timer=time.perf_counter):
  """One whole meta-iteration's series as metarun runs it (``MetaTrainer``'s
  plan and ``LocalSeries.run``: sampling, 5 unrolls of 20 steps with their
  meta-updates, progress lines), on the MLP with the 10,000-row test split
  as its data, without the evaluation that follows every
  ``evaluation_period``."""
  import io  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import config as config_lib  # pylint: disable=g-import-not-at-top
  from l2o_scale.meta_training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  from problems import problem_spec  # pylint: disable=g-import-not-at-top
  spec, _, batch_size = _mlp_problem(data_dir)
  test, n = _mini_dataset(data_dir)
  np.random.seed(0)
  with tempfile.TemporaryDirectory() as logdir:
    trainer = trainer_lib.MetaTrainer(config_lib.TrainerConfig(
        logdir=logdir,
        schedule=config_lib.Schedule(
            num_meta_iterations=10**6, learning_rate=1e-6,
            gradient_clip=1e4, fix_unroll=True,
            fix_unroll_length=UNROLL_LENGTH,
            fix_num_steps=5 * UNROLL_LENGTH),
        training=config_lib.TrainingConfig(mini_batch_size=int(n),
                                           jit_compile=jit_compile),
        resume=False, summaries=False), problem_spec.Spec(_hrnn, (), {}), io.StringIO())
    trainer.start()
    trainer.set_task(spec, test, batch_size, 0)
    state = {"k": 0}

    def call():
      plan = trainer.plan(state["k"])
      trainer.series.run(plan, 0)
      state["k"] += 1

    result = measure(call, 1, max(2, cfg["unroll_repeats"] // 2), 1, timer)
  result["unrolls"] = 5
  return result


# ------------------------------------------------------------------ report
def machine_info():
  """What the numbers depend on: CPU, cores, TF, Python, commit."""
  cpu = platform.processor() or ""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  commit = None
  try:
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
        text=True, timeout=10, check=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", root, "status", "--porcelain"], capture_output=True,
        text=True, timeout=10, check=True).stdout.strip()
    if dirty:
      commit += " (with uncommitted changes)"
  except (OSError, subprocess.SubprocessError):
    pass
  try:
    load = os.getloadavg()[0]
  except OSError:
    load = None
  return {
      "cpu": cpu,
      "cpu_count": os.cpu_count(),
      "platform": platform.platform(),
      "python": platform.python_version(),
      "tensorflow": tf.__version__,
      "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
      "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
      "gpus": len(tf.config.list_physical_devices("GPU")),
      "load_average_1min_at_start": load,
      "git_commit": commit,
      "date": datetime.datetime.now().isoformat(timespec="seconds"),
  }


def _median(entry):
  return entry["median"] if entry and "median" in entry else None


def speedups(unrolls, l2o_step_no_xla, original):
  """Original seconds / port seconds for what both time the same way: the
  20-step unroll with its meta-update (plain and hessian-esd; the port also
  with ``--jit_compile``), the first call of each, and the per-call
  meta-test step (``sess.run`` with a feed dict vs. the compiled step
  without XLA)."""
  out = {}
  for ours, theirs in (("noreg", "meta_train_unroll_plain"),
                       ("hessian_esd", "meta_train_unroll_hessian_esd")):
    base = original.get(theirs) or {}
    if "median_s" not in base:
      continue
    for suffix in ("", "_xla"):
      entry = unrolls.get(ours + suffix)
      if entry and "median" in entry:
        out["unroll_" + ours + suffix] = base["median_s"] / entry["median"]
        out["first_call_" + ours + suffix] = (
            base["build_and_first_unroll_s"] / entry["first_call_seconds"])
  step = (original.get("meta_test_step") or {}).get("median_s")
  if step and l2o_step_no_xla:
    out["meta_test_step"] = step / l2o_step_no_xla
  return out


def run_original(script, python):
  """Runs the original's ``time_original.py`` (../shared/original-tf1) and
  returns its JSON, or {"error": ...}."""
  data_dir = os.environ.get("L2O_SCALE_DATA_DIR")
  cmd = [python, script] + (["--data_dir", data_dir] if data_dir else [])
  try:
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
  except (OSError, subprocess.CalledProcessError, ValueError) as e:
    return {"error": "{}: {}".format(type(e).__name__, str(e)[:300])}


def make_report(steps, unrolls, info, quick=False, loop=None,
                meta_iteration=None, original=None):
  """The JSON report: headline medians at the top, details below.

  Headline: the learned step with XLA (without it if XLA failed or was not
  timed) against the faster of the Keras Adam steps.
  """
  l2o_plain, l2o_xla = _median(steps.get("l2o")), _median(steps.get("l2o_xla"))
  adam_plain = _median(steps.get("adam"))
  adam_xla = _median(steps.get("adam_xla"))
  l2o = l2o_xla if l2o_xla is not None else l2o_plain
  adam = min(a for a in (adam_plain, adam_xla) if a is not None)
  report = {
      "l2o_step_seconds": l2o,
      "adam_step_seconds": adam,
      "l2o_over_adam_ratio": l2o / adam,
      "l2o_step_uses_xla": l2o_xla is not None,
      "l2o_step_seconds_no_xla": l2o_plain,
      "l2o_step_seconds_xla": l2o_xla,
      "adam_step_seconds_no_xla": adam_plain,
      "adam_step_seconds_xla": adam_xla,
      "l2o_no_xla_over_adam_ratio": l2o_plain / adam,
      "unroll_seconds_noreg": unrolls["noreg"]["median"],
      "unroll_seconds_hessian_esd": unrolls["hessian_esd"]["median"],
      "unroll_seconds_noreg_xla": _median(unrolls.get("noreg_xla")),
      "unroll_seconds_hessian_esd_xla": _median(unrolls.get("hessian_esd_xla")),
      "hessian_esd_over_noreg_ratio": (unrolls["hessian_esd"]["median"] /
                                       unrolls["noreg"]["median"]),
  }
  gru_core = _median(steps.get("gru_core_xla"))
  if gru_core is not None:
    report["gru_core_step_seconds_xla"] = gru_core
    report["gru_core_over_adam_ratio"] = gru_core / adam
  for name in XLA_STEPS:
    if steps.get(name) and "error" in steps[name]:
      report[name + "_error"] = steps[name]["error"]
  if loop is not None:
    report["loop_l2o_step_seconds"] = loop["l2o"]
    report["loop_l2o_step_seconds_xla"] = loop["l2o_xla"]
    report["loop_adam_step_seconds"] = loop["adam"]
    report["loop_l2o_over_adam_ratio"] = loop["l2o"] / loop["adam"]
    report["loop_l2o_xla_over_adam_ratio"] = loop["l2o_xla"] / loop["adam"]
    report["loop_adam_step_seconds_xla"] = loop["adam_xla"]
    report["loop_l2o_xla_over_adam_xla_ratio"] = (loop["l2o_xla"] /
                                                  loop["adam_xla"])
  if meta_iteration is not None:
    report["meta_iteration_seconds"] = meta_iteration["median"]
    report["meta_iteration"] = meta_iteration
  if original is not None:
    report["original"] = original
    if "error" not in original:
      report["speedup_over_original"] = speedups(unrolls, l2o_plain,
                                                 original)
  report.update({
      "target_ratio": 2.0,
      "quick": bool(quick),
      "statistic": "median over repeats after warm-up; seconds per call",
      "steps": steps,
      "unrolls": unrolls,
      "machine": info,
  })
  return report


def format_table(report):
  """Human-readable table of the headline numbers."""
  s, u = report["steps"], report["unrolls"]
  rows = []
  for name, label in (
      ("l2o_xla", "learned step, XLA (HRNN, MLP 784-20-10, batch {})"),
      ("l2o", "learned step, no XLA"),
      ("adam_xla", "Keras Adam step, XLA (same MLP)"),
      ("adam", "Keras Adam step, no XLA"),
      ("gru_core_xla", "lower bound, XLA: loss+gradients + the GRU alone")):
    entry = s.get(name)
    if entry and "median" in entry:
      rows.append((label.format(s["batch_size"]), entry["median"],
                   entry["min"], entry["first_call_seconds"]))
  for name, label in (
      ("sgd_floor", "unroll + meta-gradient, {} steps, SGD instead of the "
       "learned optimizer (floor)"),
      ("noreg", "unroll + meta-update, {} steps, no regularizer"),
      ("noreg_xla", "unroll + meta-update, {} steps, no regularizer, "
       "--jit_compile"),
      ("hessian_esd", "unroll + meta-update, {} steps, hessian-esd"),
      ("hessian_esd_xla", "unroll + meta-update, {} steps, hessian-esd, "
       "--jit_compile")):
    entry = u.get(name)
    if entry and "median" in entry:
      rows.append((label.format(u["unroll_length"]), entry["median"],
                   entry["min"], entry["first_call_seconds"]))
  width = max(len(r[0]) for r in rows)
  lines = ["{:<{w}}  {:>12}  {:>12}  {:>14}".format(
      "what", "median", "min", "first call", w=width)]
  lines.append("-" * len(lines[0]))
  for name, med, mn, first in rows:
    lines.append("{:<{w}}  {:>12}  {:>12}  {:>14}".format(
        name, _fmt_seconds(med), _fmt_seconds(mn), _fmt_seconds(first),
        w=width))
  lines.append("")
  lines.append(
      "learned{} / fastest Adam step: {:.2f}x (target <= {:.0f}x); learned "
      "without XLA: {:.2f}x".format(
          " (XLA)" if report["l2o_step_uses_xla"] else "",
          report["l2o_over_adam_ratio"], report["target_ratio"],
          report["l2o_no_xla_over_adam_ratio"]))
  if "gru_core_over_adam_ratio" in report:
    lines.append(
        "lower bound (the MLP's loss and gradients plus the per-parameter GRU "
        "alone, XLA) / fastest Adam step: {:.2f}x".format(
            report["gru_core_over_adam_ratio"]))
  for name in XLA_STEPS:
    if report.get(name + "_error"):
      lines.append("{} failed: {}".format(name, report[name + "_error"]))
  if "loop_l2o_step_seconds" in report:
    lines.append(
        "in the compiled meta-test loop (per step): learned {}, XLA {}; Adam "
        "{}, XLA {}; learned / Adam {:.2f}x, learned XLA / Adam {:.2f}x, "
        "both XLA {:.2f}x".format(
            _fmt_seconds(report["loop_l2o_step_seconds"]),
            _fmt_seconds(report["loop_l2o_step_seconds_xla"]),
            _fmt_seconds(report["loop_adam_step_seconds"]),
            _fmt_seconds(report["loop_adam_step_seconds_xla"]),
            report["loop_l2o_over_adam_ratio"],
            report["loop_l2o_xla_over_adam_ratio"],
            report["loop_l2o_xla_over_adam_xla_ratio"]))
  lines.append("hessian-esd / no regularizer unroll: {:.2f}x".format(
      report["hessian_esd_over_noreg_ratio"]))
  if "meta_iteration_seconds" in report:
    lines.append("one meta-iteration (5 unrolls of 20 steps with their "
                 "meta-updates, no evaluation): {}".format(
                     _fmt_seconds(report["meta_iteration_seconds"])))
  if report.get("speedup_over_original"):
    lines.append("original TF1 code, same run: " + ", ".join(
        "{} {:.2f}x".format(k, v)
        for k, v in sorted(report["speedup_over_original"].items())))
  elif report.get("original", {}).get("error"):
    lines.append("original TF1 code failed: " + report["original"]["error"])
  m = report["machine"]
  lines.append("machine: {} ({} cores), TF {}, Python {}, load {}".format(
      m["cpu"], m["cpu_count"], m["tensorflow"], m["python"],
      m["load_average_1min_at_start"]))
  return "\n".join(lines)


def _fmt_seconds(value):
  if value is None:
    return "-"
  if value < 1e-3:
    return "{:.1f} us".format(value * 1e6)
  if value < 1:
    return "{:.2f} ms".format(value * 1e3)
  return "{:.2f} s".format(value)


def write_json(path, report):
  """Writes the report (creating the folder)."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  with open(path, "w") as f:
    json.dump(report, f, indent=1)
    f.write("\n")


def main(argv=None):
  parser = argparse.ArgumentParser(
      prog="python -m l2o_scale.bench",
      description="Times a learned-optimizer step against a Keras Adam step "
      "and a 20-step meta-training unroll with and without hessian-esd.")
  parser.add_argument("--quick", action="store_true",
                      help="fewer repeats (about a minute)")
  parser.add_argument("--json", metavar="PATH", help="also write JSON here")
  parser.add_argument("--no_xla", action="store_true",
                      help="time the steps without XLA only")
  parser.add_argument("--original", metavar="SCRIPT", default=None,
                      help="also run the original TF1 code's timing script "
                      "(../shared/original-tf1/time_original.py) first and "
                      "report the port's speed-up over it")
  parser.add_argument("--original_python", default=os.path.expanduser(
      "~/.cache/original-tf1-venv/bin/python"),
                      help="the Python that runs --original (its README's "
                      "venv)")
  parser.add_argument("--data_dir", default=None,
                      help="MNIST folder (default: $L2O_SCALE_DATA_DIR, else "
                      "tensorflow-datasets)")
  args = parser.parse_args(argv)
  cfg = QUICK if args.quick else FULL
  info = machine_info()
  start = time.time()
  original = None
  if args.original:
    print("timing the original TF1 code (about 5 minutes) ...", flush=True)
    if args.data_dir:
      os.environ["L2O_SCALE_DATA_DIR"] = args.data_dir
    original = run_original(args.original, args.original_python)
  try:
    print("timing optimizer steps ...", flush=True)
    steps = bench_steps(args.data_dir, cfg, xla=not args.no_xla)
    print("timing meta-training unrolls (the first call of each compiles) ...",
          flush=True)
    unrolls = bench_unrolls(args.data_dir, cfg, xla=not args.no_xla)
    print("timing a whole meta-iteration ...", flush=True)
    meta_iteration = bench_meta_iteration(args.data_dir, cfg)
    unrolls["sgd_floor"] = bench_unroll_floor(args.data_dir, cfg)
    print("timing steps inside the compiled meta-test loop ...", flush=True)
    loop = bench_loop_steps(args.data_dir, cfg)
  except datasets.DataNotFoundError as e:
    print("bench: {}".format(e), file=sys.stderr)
    return 2
  report = make_report(steps, unrolls, info, args.quick, loop, meta_iteration,
                       original)
  report["total_seconds"] = time.time() - start
  print(format_table(report))
  if args.json:
    write_json(args.json, report)
    print("wrote", args.json)
  return 0


if __name__ == "__main__":
  sys.exit(main())
