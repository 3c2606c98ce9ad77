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
naming the first missing or mis-shaped variable and nothing is assigned.
"""

import os
import re

import tensorflow as tf

CHECKPOINT_BASENAME = "model.ckpt"
TF2_ROOT = "optimizer"


class CheckpointMismatchError(ValueError):
  """The checkpoint does not fit the optimizer's configuration."""


def tf2_key(tf1_name):
  """Key of a meta-parameter in this port's object-based checkpoint."""
  escaped = tf1_name.replace(".", "..").replace("/", ".S")
  return "{}/meta/{}/.ATTRIBUTES/VARIABLE_VALUE".format(TF2_ROOT, escaped)


def checkpoint_format(path):
  """'tf2' or 'tf1' depending on how the checkpoint at ``path`` was written."""
  names = dict(tf.train.list_variables(path))
  return "tf2" if "_CHECKPOINTABLE_OBJECT_GRAPH" in names else "tf1"


def resolve_checkpoint_path(path):
  """Accepts a checkpoint prefix or a directory holding a ``checkpoint`` file."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError("No checkpoint in directory {}".format(path))
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    folder = os.path.dirname(path) or "."
    raise FileNotFoundError(
        "No checkpoint {}. Checkpoints in {}: {}".format(
            path, folder, ", ".join(list_checkpoints(folder)) or "none"))
  return path


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


def read_meta_parameters(path, optimizer):
  """Reads the optimizer's meta-parameters from a checkpoint, shape-checked.

  Returns a dict TF1 name -> numpy array, or raises CheckpointMismatchError.
  """
  path = resolve_checkpoint_path(path)
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
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


def restore_optimizer(path, optimizer):
  """Restores every meta-parameter of ``optimizer`` from ``path`` (TF1 or TF2).

  Nothing is assigned unless every variable is found with the right shape.
  Returns the resolved checkpoint path.
  """
  values = read_meta_parameters(path, optimizer)
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
