"""Saving and restoring learned-optimizer checkpoints.

Two formats are read:

* **TF1 name-based** checkpoints written by the original ``metarun.py``
  (``tf.train.Saver``): tensors named by their TF1 variable names, e.g.
  ``LOL/PerTensor/Layer0_RNN/BiasGRUCell/gates/Affine/Matrix``. The meta
  optimizer's slots (``.../RMSProp``) and other extras in the file are ignored.
* **TF2 object-based** checkpoints written by this port
  (``tf.train.Checkpoint(optimizer=...)``), where each meta-parameter sits at
  ``optimizer/meta/<TF1 name with '/' escaped as '.S'>/.ATTRIBUTES/VARIABLE_VALUE``.

Restoring is all-or-nothing: every variable the optimizer needs is looked up
and shape-checked first; a mismatch raises :class:`CheckpointMismatchError`
naming the first missing or mis-shaped variable and nothing is assigned. A
file the reader cannot read (truncated ``.data``, garbled or empty
``.index``, missing ``.data``) raises :class:`DamagedCheckpointError` naming
that file, and a ``checkpoint`` state file that does not say which checkpoint
is the latest raises :class:`CheckpointStateError` naming it: a train dir is
never resumed (or restarted over its checkpoints) on a guess.
"""

import os
import re

from google.protobuf import text_format
import tensorflow as tf
from tensorflow.python.training import checkpoint_state_pb2  # pylint: disable=g-direct-tensorflow-import

CHECKPOINT_BASENAME = "model.ckpt"
TF2_ROOT = "optimizer"


STATE_FILENAME = "checkpoint"


class CheckpointMismatchError(ValueError):
  """The checkpoint does not fit the optimizer's configuration."""


class DamagedCheckpointError(OSError):
  """A checkpoint file cannot be read.

  ``filename``: the damaged file; ``damage``: what is wrong, one sentence
  naming the checkpoint and the file; ``others``: the other checkpoints of
  its folder. ``str()`` adds generic advice; a script can give its own.
  """

  def __init__(self, damage, filename, others):
    super().__init__(damage)
    self.damage = damage
    self.filename = filename
    self.others = others

  def __str__(self):
    return "{}. Restore the file from a copy, or use another checkpoint " \
        "({})".format(self.damage, ", ".join(self.others) or "there is none")


class CheckpointStateError(ValueError):
  """The ``checkpoint`` state file of a folder is unreadable, names a
  checkpoint that is not there, or is missing beside ``model.ckpt-K`` files."""


def tf2_key(tf1_name):
  """Key of a meta-parameter in this port's object-based checkpoint."""
  escaped = tf1_name.replace(".", "..").replace("/", ".S")
  return "{}/meta/{}/.ATTRIBUTES/VARIABLE_VALUE".format(TF2_ROOT, escaped)


def _damaged(path, error, data_read):
  """The DamagedCheckpointError for a reader ``error`` on checkpoint ``path``
  (``data_read``: the error came while reading tensors, i.e. the .data file)."""
  message = (getattr(error, "message", None) or str(error)).strip()
  reason = message.splitlines()[0] if message else type(error).__name__
  named = re.search(r"(\S+\.(?:index|data-\d+-of-\d+))", reason)
  if named:
    damaged = named.group(1)
  elif data_read:
    damaged = path + ".data-00000-of-00001"
  else:
    damaged = path + ".index"
  if not os.path.exists(damaged):
    reason = "is missing"
  elif isinstance(error, IndexError) or "bytes than requested" in reason:
    reason = "is truncated ({})".format(reason)
  else:
    reason = "cannot be read ({})".format(reason)
  return DamagedCheckpointError(
      "checkpoint {} is damaged: {} {}".format(path, damaged, reason), damaged,
      [n for n in list_checkpoints(os.path.dirname(path) or ".")
       if n != os.path.basename(path)])


class _Reader(object):
  """``tf.train.load_checkpoint`` whose read errors name the damaged file."""

  def __init__(self, path):
    self.path = path
    try:
      self.reader = tf.train.load_checkpoint(path)
      self.shapes = self.reader.get_variable_to_shape_map()
    except (tf.errors.OpError, IndexError, ValueError) as e:
      raise _damaged(path, e, data_read=False) from None

  def get_tensor(self, key):
    try:
      return self.reader.get_tensor(key)
    except (tf.errors.OpError, IndexError, ValueError) as e:
      raise _damaged(self.path, e, data_read=True) from None


def open_reader(path):
  """A reader of the checkpoint ``path`` (a prefix), for
  :func:`checkpoint_format` and :func:`restore_optimizer` to share: its
  index is opened once."""
  return _Reader(path)


def checkpoint_format(path, reader=None):
  """'tf2' or 'tf1' depending on how the checkpoint at ``path`` was written
  (``reader``: one of :func:`open_reader` for it)."""
  return ("tf2" if "_CHECKPOINTABLE_OBJECT_GRAPH" in (
      reader or _Reader(path)).shapes else "tf1")


def latest_checkpoint(folder):
  """The checkpoint the ``checkpoint`` state file of ``folder`` names as the
  latest (a path), or None for a folder with neither a state file nor
  ``model.ckpt-K`` files.

  Raises CheckpointStateError naming the state file when it is unreadable or
  empty, names a checkpoint whose ``.index`` is not there, or is missing
  while checkpoints are there: TensorFlow would then start a run over (and
  overwrite ``model.ckpt-1``...) or restore a checkpoint of another folder.
  """
  state_path = os.path.join(folder, STATE_FILENAME)
  present = list_checkpoints(folder)
  fix = ("Restore it from a copy, or write it naming the latest checkpoint: "
         "echo 'model_checkpoint_path: \"{}\"' > {}".format(
             present[-1] if present else CHECKPOINT_BASENAME + "-K",
             state_path))
  if not os.path.exists(state_path):
    if present:
      raise CheckpointStateError(
          "{} holds {} but no '{}' state file saying which is the latest, so "
          "the run cannot know where to resume. {}".format(
              folder, ", ".join(present), STATE_FILENAME, fix))
    return None
  try:
    with open(state_path) as f:
      state = text_format.Parse(f.read(),
                                checkpoint_state_pb2.CheckpointState())
  except (text_format.ParseError, UnicodeDecodeError) as e:
    raise CheckpointStateError("{} is garbled ({}). {}".format(
        state_path, str(e).splitlines()[0], fix)) from None
  if not state.model_checkpoint_path:
    raise CheckpointStateError("{} names no checkpoint. {}".format(
        state_path, fix))
  latest = state.model_checkpoint_path
  if not os.path.isabs(latest):
    latest = os.path.join(folder, latest)
  if os.path.realpath(os.path.dirname(latest)) != os.path.realpath(folder):
    raise CheckpointStateError(
        "{} names {}, a checkpoint of another folder (the train dir was "
        "copied or moved). {}".format(state_path, latest, fix))
  if not tf.io.gfile.exists(latest + ".index"):
    raise CheckpointStateError(
        "{} names {} as the latest checkpoint, but its files are not there "
        "(checkpoints there: {}). {}".format(
            state_path, state.model_checkpoint_path,
            ", ".join(present) or "none", fix))
  return latest


def resolve_checkpoint_path(path):
  """Accepts a checkpoint prefix, a directory holding a ``checkpoint`` file,
  or a train dir (``metarun.py --train_dir``) whose one run folder (e.g.
  ``HierarchicalRNN_GRUCell_20_2``) holds one. A directory without a
  checkpoint raises FileNotFoundError naming its run folders, where it
  has several."""
  if os.path.isdir(path):
    latest = latest_checkpoint(path)
    if latest is None:
      runs = _run_folders(path)
      if len(runs) == 1:
        return resolve_checkpoint_path(runs[0])
      raise FileNotFoundError("No checkpoint in directory {}{}".format(
          path, "; its run folders: {}: pass one of them".format(
              ", ".join(runs)) if runs else ""))
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    folder = os.path.dirname(path) or "."
    raise FileNotFoundError(
        "No checkpoint {}. Checkpoints in {}: {}".format(
            path, folder, ", ".join(list_checkpoints(folder)) or "none"))
  return path


def _run_folders(folder):
  """The sub-folders of ``folder`` that hold checkpoints or a ``checkpoint``
  state file (the run folders of a train dir), sorted."""
  found = []
  for name in sorted(os.listdir(folder)):
    sub = os.path.join(folder, name)
    if os.path.isdir(sub) and (
        list_checkpoints(sub) or
        os.path.exists(os.path.join(sub, STATE_FILENAME))):
      found.append(sub)
  return found


def checkpoint_in(folder, name=""):
  """The checkpoint ``folder/name``, or the latest in ``folder`` when ``name``
  is empty (the original's rule, evaluation metaopt.py l.684-691); the one
  place that says which checkpoint is missing and which there are."""
  if not name:
    if not os.path.isdir(folder):
      raise FileNotFoundError("Checkpoint directory {} does not exist.".format(
          folder))
    return resolve_checkpoint_path(folder)
  path = os.path.join(folder, name)
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(
        "No checkpoint {!r} in {}. Checkpoints there: {}. Pass one of them "
        "as --restore_model_name.".format(
            name, folder, ", ".join(list_checkpoints(folder)) or "none"))
  return path


def checkpoint_folder_given(train_dir, subdir):
  """An error line when ``train_dir`` is itself a checkpoint folder (it
  holds ``model.ckpt-K`` files or a run record) and has no ``subdir``: the
  scripts would look in (or start a fresh run in) ``train_dir/subdir``
  instead of using it. None otherwise."""
  if not os.path.isdir(train_dir) or os.path.isdir(os.path.join(train_dir,
                                                                 subdir)):
    return None
  found = list_checkpoints(train_dir) or [
      n for n in ("run_record.json",) if os.path.exists(
          os.path.join(train_dir, n))]
  if not found:
    return None
  return ("--train_dir={} is a checkpoint folder itself (it holds {}); "
          "--train_dir is the folder above it, whose {} subfolder the "
          "optimizer flags name: pass --train_dir={}".format(
              train_dir, ", ".join(found), subdir,
              os.path.dirname(os.path.normpath(train_dir)) or "."))


def list_checkpoints(folder):
  """Names of the checkpoint prefixes in ``folder`` (``model.ckpt-K``)."""
  if not os.path.isdir(folder):
    return []
  names = sorted({f[:-len(".index")] for f in os.listdir(folder)
                  if f.endswith(".index")}, key=_checkpoint_sort_key)
  return names


def _checkpoint_sort_key(name):
  match = re.search(r"-(\d+)$", name)
  return (int(match.group(1)) if match else -1, name)


def read_meta_parameters(path, optimizer, reader=None):
  """Reads the optimizer's meta-parameters from a checkpoint, shape-checked
  (``reader``: one of :func:`open_reader` for it, else one opened here).

  Returns a dict TF1 name -> numpy array, or raises CheckpointMismatchError.
  """
  path = resolve_checkpoint_path(path)
  reader = reader or _Reader(path)
  shapes = reader.shapes
  fmt = "tf2" if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes else "tf1"
  values = {}
  for name, var in optimizer.tf1_variables().items():
    key = tf2_key(name) if fmt == "tf2" else name
    if key not in shapes:
      raise CheckpointMismatchError(
          "Checkpoint {} ({} format) has no variable {!r}, which this "
          "optimizer configuration needs (shape {}). The checkpoint was "
          "written with other optimizer options.".format(
              path, fmt.upper(), name, var.shape.as_list()))
    if list(shapes[key]) != var.shape.as_list():
      raise CheckpointMismatchError(
          "Variable {!r} has shape {} in checkpoint {} but {} in this "
          "optimizer configuration.".format(name, list(shapes[key]), path,
                                            var.shape.as_list()))
    values[name] = reader.get_tensor(key)
  return values


def restore_optimizer(path, optimizer, reader=None):
  """Restores every meta-parameter of ``optimizer`` from ``path`` (TF1 or TF2;
  ``reader``: one of :func:`open_reader` for it).

  Nothing is assigned unless every variable is found with the right shape.
  Returns the resolved checkpoint path.
  """
  values = read_meta_parameters(path, optimizer, reader)
  for name, var in optimizer.tf1_variables().items():
    var.assign(values[name])
  return resolve_checkpoint_path(path)


class MetaParameters(tf.Module):
  """What a TF2 checkpoint stores of an optimizer: its meta-parameters by TF1 name.

  Saving the optimizer module itself would file each variable under the
  first attribute path that reaches it (e.g. a cell's ``gates``), which
  changes with the module's structure; this flat dict keeps the keys equal
  to :func:`tf2_key` of the TF1 names.
  """

  def __init__(self, optimizer):
    super().__init__(name="meta_parameters")
    self.meta = dict(optimizer.tf1_variables())


def tf2_checkpoint(optimizer, **extra_trackables):
  """A ``tf.train.Checkpoint`` laid out as this port's checkpoints are."""
  return tf.train.Checkpoint(**{TF2_ROOT: MetaParameters(optimizer)},
                             **extra_trackables)


def save_optimizer(path, optimizer, **extra_trackables):
  """Writes a TF2 checkpoint of the optimizer (and any extra trackables)."""
  return tf2_checkpoint(optimizer, **extra_trackables).write(path)
