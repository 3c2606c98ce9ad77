"""The state of a meta-training run, in one place, and the only way it
reaches disk.

What the original kept in TF1 variables of its graph (meta-parameters,
RMSProp slots, the local variables carrying the optimizee and optimizer
state between unrolls, ``L2O-Scale-Training/metaopt.py`` and
``optimizer/trainable_optimizer.py``) and what its Python loop kept in
locals (best evaluation, curriculum position, random streams) is one
:class:`TrainState` here. :meth:`TrainState.save` writes ``model.ckpt-K``
(variables, ``tf.train.Checkpoint``) with its ``model.ckpt-K.resume.npz``
sidecar (everything else the next meta-iteration depends on), and
:meth:`TrainState.restore` reads both back, so a run killed at any moment
and started again continues exactly as the uninterrupted one.
"""

import dataclasses
import json
import os
import random
import re
import zipfile

import numpy as np
import tensorflow as tf

from l2o_scale.meta_training import stability
from l2o_scale.meta_training import unroll as unroll_lib
from l2o_scale.runs import atomic_file
from l2o_scale.runs import checkpoints

RESUME_STATE_SUFFIX = ".resume.npz"
FINISHED_FILE = "curriculum_finished.json"
SAVE_COUNTER_KEY = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"


def random_streams():
  """numpy's and Python's global random states, as they are now."""
  return np.random.get_state(), random.getstate()


def set_random_streams(streams):
  """Sets numpy's and Python's global random states to ``streams``
  (from :func:`random_streams`)."""
  np_state, py_state = streams
  np.random.set_state(np_state)
  random.setstate(py_state)


def _saved_streams(streams, prefix):
  """``streams`` as the sidecar keeps them: (JSON-able meta entry, arrays)."""
  (name, keys, pos, has_gauss, cached), py_state = streams
  return ([[name, int(pos), int(has_gauss), float(cached)], py_state],
          {prefix + "numpy_keys": keys})


def _loaded_streams(entry, keys):
  """What :func:`_saved_streams` saved, as :func:`random_streams` gives it."""
  (name, pos, has_gauss, cached), (version, internal, gauss) = entry
  return (name, keys, pos, has_gauss, cached), (version, tuple(internal),
                                                 gauss)


class CarriedState(object):
  """The original's TF1 local variables that carry state between unrolls.

  They start at zero and are overwritten with an unroll's final values only
  when another unroll of the same series follows (``unroll_itr + 1 <
  num_unrolls``, training and validation alike). With the default
  ``reset_rnn_params=True`` the optimizer state is re-initialised only at the
  very first unroll of training, so later meta-iterations start from these
  variables, i.e. from the state at the start of the previous series' last
  unroll (or zeros if it had a single unroll). That is what the original
  does; it is reproduced.
  """

  def __init__(self, problem, optimizer):
    self.optimizer = optimizer
    self.value = unroll_lib.zero_loop_state(problem, optimizer)

  def update(self, final_state):
    self.value = final_state

  def to_arrays(self):
    """The carried tensors, flattened, for the resume state."""
    return [t.numpy() for t in tf.nest.flatten(self.value)]

  def load_arrays(self, arrays):
    """Restores what :meth:`to_arrays` saved (same problem and optimizer).

    Also reads the layout of earlier versions, which carried per-tensor
    state dicts instead of the packed state.
    """
    value = _fit_arrays(self.value, arrays)
    if value is None:
      per_tensor = self.value._replace(states=unroll_lib.per_tensor_states(
          self.optimizer, self.value))
      value = _fit_arrays(per_tensor, arrays)
      if value is not None:
        value = value._replace(states=self.optimizer.pack_state(value.states))
    if value is None:
      raise ValueError("saved carried state does not fit this problem")
    self.value = value


def _fit_arrays(template, arrays):
  """``arrays`` in the structure of ``template``, or None if they differ."""
  flat = tf.nest.flatten(template)
  if len(arrays) != len(flat) or any(
      tuple(a.shape) != tuple(f.shape) for a, f in zip(arrays, flat)):
    return None
  return tf.nest.pack_sequence_as(
      template, [tf.constant(a, dtype=f.dtype) for a, f in zip(arrays, flat)])


class TrainingProgress(tf.Module):
  """Counters saved in the checkpoint's variables (``progress/...``)."""

  def __init__(self):
    super().__init__(name="progress")
    self.meta_iteration = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.problem_itr = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.best_evaluation = tf.Variable(float("inf"), dtype=tf.float64,
                                       trainable=False)
    self.stage = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.num_eval = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.improved = tf.Variable(False, trainable=False)


@dataclasses.dataclass
class LoopValues:
  """The training loop's own values that a resumed run needs, saved in the
  sidecar: the best model's meta-iteration, the first evaluation's value
  (whether the run learned), the best robust score (``--selection=robust``
  with a curriculum) and what happened so far (for the end-of-run report)."""
  best_model_idx: int = None
  first_evaluation: float = None
  robust_best: float = float("inf")
  nonfinite: int = 0
  divergences: int = 0
  evaluations: int = 0


def _loop_values(meta):
  """The :class:`LoopValues` a sidecar's meta holds (those it lacks, from an
  older version, at their defaults)."""
  known = {f.name for f in dataclasses.fields(LoopValues)}
  return LoopValues(**{k: v for k, v in meta.items() if k in known
                       and v is not None})


def resume_state_path(checkpoint_path):
  """The sidecar of ``model.ckpt-K``."""
  return checkpoint_path + RESUME_STATE_SUFFIX


class TrainState(object):
  """Meta-parameters (the optimizer's variables), the meta-optimizer (slots,
  learning rate, update counter), the checkpointed progress counters, the
  carried optimizee/optimizer state, the random streams and the loop's
  :class:`LoopValues`.

  The meta-optimizer's learning rate is part of the state (a rollback lowers
  it, and a resumed run continues at the lowered rate).
  """

  def __init__(self, logdir, optimizer, meta_optimizer):
    self.logdir = logdir
    self.optimizer = optimizer
    self.meta_optimizer = meta_optimizer
    self.progress = TrainingProgress()
    self.values = LoopValues()
    self.carried = []  # A CarriedState per optimizee instance, once a
                       # problem is attached.
    self._reset_next_series = False
    # Where the run's random draws began, saved with every checkpoint so
    # that a resumed run redraws what the interrupted one drew before it
    # (whatever its own streams were when it started): the streams when
    # the run drew its problems (``run_start``) and when the current
    # sub-problem's task(s) were built (``problem_start``), and the drawn
    # order (indices into the ``num_given_problems`` problems).
    self.run_start = self.problem_start = None
    self.problem_order, self.num_given_problems = None, None
    self.reg_seeds = None  # The sub-problem's tasks' regularizer seeds.
    self._pending = None  # What restore read for attach_problem to apply.
    self._snapshot = stability.MetaSnapshot(meta_optimizer,
                                            optimizer.meta_variables)
    self._ckpt = checkpoints.tf2_checkpoint(
        optimizer, meta_optimizer=meta_optimizer, progress=self.progress)
    self._manager = tf.train.CheckpointManager(
        self._ckpt, logdir, max_to_keep=None,
        checkpoint_name=checkpoints.CHECKPOINT_BASENAME)

  # ---------------------------------------------------------------- disk
  def checkpoint_path(self, number):
    return os.path.join(self.logdir, "{}-{}".format(
        checkpoints.CHECKPOINT_BASENAME, number))

  def save(self, path):
    """Writes ``path`` (``<logdir>/model.ckpt-K``) and its sidecar (first,
    so a checkpoint the ``checkpoint`` file lists always has one)."""
    match = re.match(re.escape(self.checkpoint_path("")) + r"(\d+)$", path)
    if not match:
      raise ValueError("{} is not a model.ckpt-K of {}".format(path,
                                                               self.logdir))
    if self.carried:
      self._write_sidecar(resume_state_path(path))
    return self._manager.save(checkpoint_number=int(match.group(1)))

  def latest(self):
    return self._manager.latest_checkpoint

  def restore(self, path):
    """Restores a checkpoint written by :meth:`save` ("tf2": variables now,
    the sidecar once a problem is attached) or a TF1 one of the original
    ("tf1": meta-parameters only). The configuration check runs first
    (CheckpointMismatchError names the first variable that does not fit);
    nothing is assigned before it passes."""
    try:
      checkpoints.read_meta_parameters(path, self.optimizer)
      if checkpoints.checkpoint_format(path) == "tf1":
        checkpoints.restore_optimizer(path, self.optimizer)
        return "tf1"
      # The checkpoint's save counter is read below, not restored: without
      # expect_partial TensorFlow warns of it as an unrestored value.
      self._ckpt.read(path).assert_existing_objects_matched().expect_partial()
      reader = tf.train.load_checkpoint(path)
      counter = (int(reader.get_tensor(SAVE_COUNTER_KEY))
                 if reader.has_tensor(SAVE_COUNTER_KEY) else None)
    except (tf.errors.OpError, IndexError) as e:
      # The checkpoint reader's errors for a truncated .data / empty .index.
      message = (getattr(e, "message", None) or str(e)).strip()
      raise OSError("checkpoint {} is damaged ({})".format(
          path, message.splitlines()[0] if message else type(e).__name__))
    self._pending = self._read_sidecar(resume_state_path(path))
    if self._pending:
      # Now, not once a problem attaches: a run that has already finished
      # attaches none, and its end-of-run report needs them (its first
      # evaluation, its best model's meta-iteration).
      self.values = _loop_values(self._pending[0])
    saved = self._pending[0].get("save_counter") if self._pending else None
    if saved is not None and counter is not None and saved != counter:
      # The sidecar is written first: a run stopped while rewriting a
      # checkpoint (model.ckpt-0, or model.ckpt-K again in the next
      # sub-problem) leaves the new sidecar beside the old variables.
      sidecar = resume_state_path(path)
      raise checkpoints.DamagedCheckpointError(
          "checkpoint {} and its resume state {} are of different saves (the "
          "run stopped while rewriting them)".format(path, sidecar), sidecar,
          [n for n in checkpoints.list_checkpoints(self.logdir)
           if n != os.path.basename(path)])
    return "tf2"

  def saved(self, key):
    """What the restored sidecar says of ``key`` (``problem_order``,
    ``num_given_problems``, ``reg_seeds``; ``run_start``, ``problem_start``
    and ``now``: random streams), or None (nothing restored, or an older
    sidecar)."""
    if not self._pending:
      return None
    meta, _ = self._pending
    if key == "now":
      return _loaded_streams([meta["numpy"], meta["python"]],
                             meta["numpy_keys"])
    return meta.get(key)

  def attach_problem(self, problem, resuming, num_instances=1,
                     load_carried=True, restore_streams=True):
    """Starts the carried state of each of the ``num_instances`` optimizee
    instances (a meta-batch) for ``problem``; when ``resuming``, applies
    the restored sidecar: carried state, random streams and loop values, as
    they were when the checkpoint was written (after the problem and its
    probes had been drawn, which is why this waits for the problem).
    ``load_carried=False`` keeps the fresh carried state (``--mix_problems``:
    the saved one may belong to another problem, and every meta-iteration
    starts afresh; a resumed run that starts the next sub-problem).
    ``restore_streams=False`` keeps the random streams as they are (they
    were set before the problem was built). Returns False when the
    checkpoint has no sidecar (written by an older version), else True."""
    self.carried = [CarriedState(problem, self.optimizer)
                    for _ in range(num_instances)]
    pending, self._pending = self._pending, None
    if not resuming or pending is None:
      return True
    if pending is False:
      return False
    meta, arrays = pending
    if restore_streams:
      set_random_streams(_loaded_streams([meta["numpy"], meta["python"]],
                                         meta["numpy_keys"]))
    if load_carried:
      self._load_carried(arrays)
    lr = meta.pop("meta_learning_rate", None)
    if lr is not None:
      self.meta_optimizer.set_learning_rate(lr)
    self.values = _loop_values(meta)
    return True

  def _load_carried(self, arrays):
    """The instances' carried arrays, saved one instance after the other."""
    if len(self.carried) == 1:
      self.carried[0].load_arrays(arrays)
      return
    size = len(self.carried[0].to_arrays())
    if len(arrays) != size * len(self.carried):
      raise ValueError("saved carried state does not fit this problem and "
                       "meta-batch")
    for i, carried in enumerate(self.carried):
      carried.load_arrays(arrays[i * size:(i + 1) * size])

  def _write_sidecar(self, path):
    """Numpy's and Python's random states, the carried state and the loop
    values, atomically. Saving the random states (rather than re-seeding per
    meta-iteration) keeps the single random stream of the original, so a
    run with ``--seed`` draws exactly what the original would, interrupted
    or not."""
    flat = [a for carried in self.carried for a in carried.to_arrays()]
    arrays = {"carried_{}".format(i): a for i, a in enumerate(flat)}
    (numpy, python), keys = _saved_streams(random_streams(), "")
    meta = dict(numpy=numpy, python=python, num_carried=len(arrays),
                meta_learning_rate=self.meta_optimizer.learning_rate,
                # The number the checkpoint written next carries.
                save_counter=int(self._ckpt.save_counter.numpy()) + 1,
                problem_order=self.problem_order,
                num_given_problems=self.num_given_problems,
                reg_seeds=self.reg_seeds,
                **dataclasses.asdict(self.values))
    arrays.update(keys)
    for name in ("run_start", "problem_start"):
      if getattr(self, name) is not None:
        meta[name], keys = _saved_streams(getattr(self, name), name + "_")
        arrays.update(keys)
    with atomic_file.replace(path, "wb") as f:
      np.savez(f, meta=np.array(json.dumps(meta)), **arrays)

  @staticmethod
  def _read_sidecar(path):
    """(meta dict, carried arrays), or False when there is no sidecar."""
    if not os.path.exists(path):
      return False
    try:
      with np.load(path) as saved:
        meta = json.loads(str(saved["meta"]))
        meta["numpy_keys"] = saved["numpy_keys"]
        for name in ("run_start", "problem_start"):
          if name in meta:
            meta[name] = _loaded_streams(meta[name],
                                         saved[name + "_numpy_keys"])
        arrays = [saved["carried_{}".format(i)]
                  for i in range(meta.pop("num_carried"))]
    except (zipfile.BadZipFile, ValueError, KeyError, EOFError) as e:
      raise OSError(0, "the resume state is damaged ({}: {})".format(
          type(e).__name__, e), path) from e
    return meta, arrays

  def write_finished(self, meta_iteration, stopped):
    """Marks a curriculum run that ended as finished (atomically), so the
    same command run again says so instead of training on."""
    with atomic_file.replace(os.path.join(self.logdir, FINISHED_FILE)) as f:
      json.dump({"meta_iteration": meta_iteration, "stopped": stopped}, f)

  def read_finished(self, num_meta_iterations):
    """The meta-iteration a finished curriculum run ended at, or None when
    it has not finished (or ran to fewer meta-iterations than now asked)."""
    path = os.path.join(self.logdir, FINISHED_FILE)
    if not os.path.exists(path):
      return None
    with open(path) as f:
      done = json.load(f)
    if done["stopped"] or done["meta_iteration"] >= num_meta_iterations:
      return int(done["meta_iteration"])
    return None

  def best_checkpoint(self):
    """``model.ckpt-0`` (the best evaluated model) if it exists."""
    path = self.checkpoint_path(0)
    return path if tf.io.gfile.exists(path + ".index") else None

  # ------------------------------------------------------------ rollback
  def take_snapshot(self):
    """Keeps the meta-parameters and meta-optimizer slots in memory."""
    self._snapshot.take()

  def roll_back(self, lr_decay):
    """Undoes a diverged meta-iteration: the meta-parameters go back to the
    best evaluated model (``model.ckpt-0``) or, before there is one, to the
    snapshot; the meta-optimizer's slots to the snapshot; the meta learning
    rate is multiplied by ``lr_decay``; the next series starts from a fresh
    optimizer state. Returns the checkpoint rolled back to, or None."""
    self._snapshot.restore()
    best = self.best_checkpoint()
    if best is not None:
      checkpoints.restore_optimizer(best, self.optimizer)
    self.meta_optimizer.set_learning_rate(
        self.meta_optimizer.learning_rate * lr_decay)
    self.restart_next_series()
    return best

  # ------------------------------------------------------ carried state
  @property
  def reset_next_series(self):
    """Whether the next series starts from a fresh optimizer state
    instead of the carried one (stale after a rollback, and in a
    ``--mix_problems`` meta-iteration the carried one is of another
    problem). Set by :meth:`restart_next_series`, cleared by
    :meth:`series_ran`."""
    return self._reset_next_series

  def restart_next_series(self):
    """The next series starts from a fresh optimizer state."""
    self._reset_next_series = True

  def series_ran(self):
    """A series ran to its end: the next one continues its carried state."""
    self._reset_next_series = False

  # ------------------------------------------------------------- writers
  # The only writers of the state's fields outside this class: each says
  # what happened, and the field it changes is this class's business.
  def count(self, event):
    """One more ``event``: ``"nonfinite"`` (an unroll whose meta-gradient
    was made finite), ``"divergences"`` or ``"evaluations"``."""
    if event not in ("nonfinite", "divergences", "evaluations"):
      raise ValueError("unknown event {!r}".format(event))
    setattr(self.values, event, getattr(self.values, event) + 1)

  def record_evaluation(self, k, value, best, keep_value=True):
    """An evaluation after meta-iteration ``k``: the first one's value is
    kept; a ``best`` one becomes the best model (its value kept unless
    ``keep_value`` is False: a curriculum keeps its own best)."""
    if self.values.first_evaluation is None:
      self.values.first_evaluation = float(value)
    if best:
      if keep_value:
        self.progress.best_evaluation.assign(value)
      self.values.best_model_idx = k + 1

  def improve_robust_best(self, score):
    """Whether ``score`` beats the best robust score so far (then kept)."""
    if score < self.values.robust_best:
      self.values.robust_best = score
      return True
    return False

  def finish_meta_iteration(self, k, problem_itr=None):
    """Meta-iteration ``k`` is done (on sub-problem ``problem_itr``)."""
    self.progress.meta_iteration.assign(k + 1)
    if problem_itr is not None:
      self.progress.problem_itr.assign(problem_itr)

  def set_problem_order(self, order, count):
    """The sub-problems drawn (indices) from ``count`` problems."""
    self.problem_order = [int(i) for i in order]
    self.num_given_problems = count

  def mark_run_start(self, streams):
    """The random streams the run's problems are drawn with."""
    self.run_start = streams

  def mark_problem_start(self, streams):
    """The random streams a sub-problem's tasks are built with; its
    regularizer seeds start afresh."""
    self.problem_start = streams
    self.reg_seeds = []

  def add_reg_seed(self, seed):
    self.reg_seeds.append(seed)

  # ----------------------------------------------------------- curriculum
  def curriculum_state(self):
    p = self.progress
    return dict(stage=p.stage.numpy(), num_eval=p.num_eval.numpy(),
                improved=p.improved.numpy(), best=p.best_evaluation.numpy())

  def set_curriculum_state(self, state):
    p = self.progress
    p.stage.assign(state["stage"])
    p.num_eval.assign(state["num_eval"])
    p.improved.assign(state["improved"])
    p.best_evaluation.assign(state["best"])
