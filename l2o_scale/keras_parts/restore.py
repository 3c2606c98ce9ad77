"""The learned optimizer behind a
:class:`l2o_scale.keras_optimizer.LearnedOptimizer`: restored from a
checkpoint with the options of its run record, or shipped with the package
by name with its card's settings for long runs."""

import warnings

from l2o_scale import pretrained as shipped
from l2o_scale.config import optimizer_flags
from l2o_scale.keras_parts import checks
from l2o_scale.runs import checkpoints
from l2o_scale.runs import run_record
from l2o_scale.steps import settings as step_settings
from optimizer import hierarchical_rnn


def from_checkpoint(path, level_sizes, optimizer_kwargs):
  """(the restored ``HierarchicalRNN``, the checkpoint prefix, its options):
  the options of the run record beside ``path`` updated by
  ``optimizer_kwargs``; the rules and errors of
  :meth:`l2o_scale.keras_optimizer.LearnedOptimizer.from_checkpoint`."""
  try:
    resolved = checkpoints.resolve_checkpoint_path(path)
  except FileNotFoundError as e:
    if path in shipped.names():
      raise FileNotFoundError("{}; {!r} is the name of a pretrained "
                              "optimizer: LearnedOptimizer.pretrained({!r})"
                              .format(e, path, path)) from None
    raise
  # One reader and one read of the record (a shipped one's shared with its
  # card's readers, l2o_scale.pretrained.read_record): each file opened
  # once.
  reader = checkpoints.open_reader(resolved)
  record, note = run_record.record_for_checkpoint(
      resolved, checkpoints.checkpoint_format(resolved, reader),
      optimizer_kwargs is not None,
      "pass the options it was trained with as optimizer_kwargs ({} for "
      "metarun.py's defaults)", read_record=shipped.read_record)
  if note:
    # The caller of LearnedOptimizer.from_checkpoint.
    warnings.warn(note, stacklevel=3)
  kwargs = optimizer_flags.optimizer_kwargs_from_values(
      run_record.optimizer_flag_values(record))
  if optimizer_kwargs:
    unknown = set(optimizer_kwargs) - set(kwargs) - {"random_seed"}
    if unknown:
      raise TypeError("Unknown HierarchicalRNN options: {}".format(
          ", ".join(sorted(unknown))))
    kwargs.update(optimizer_kwargs)
  learned = hierarchical_rnn.HierarchicalRNN(list(level_sizes), **kwargs)
  checkpoints.restore_optimizer(resolved, learned, reader)
  return learned, resolved, kwargs


def card_kwargs(name, total_steps, keras_kwargs):
  """The Keras arguments of the shipped optimizer ``name`` for a run of
  ``total_steps`` steps (None: of unknown length). With a
  ``schedule_head`` (given, else the one ``name`` ships with,
  :func:`l2o_scale.pretrained.schedule_head`), the head reads the length
  and the card's settings do not apply; otherwise ``keras_kwargs``
  completed by the card's settings for long runs in their Keras form
  (:meth:`l2o_scale.steps.transform.StepTransform.keras_kwargs`), given
  arguments winning, where the length is known and the card has such
  settings."""
  keras_kwargs = dict(keras_kwargs)
  if keras_kwargs.get("schedule_head") is None:
    own = shipped.schedule_head(name)
    keras_kwargs["schedule_head"] = None if own is None else (
        step_settings.attach_head(
            own, "{} has a learned schedule head, which".format(name),
            not checks.is_one(keras_kwargs.get("learning_rate", 1.)),
            keras_kwargs.get("weight_decay")))
  if keras_kwargs["schedule_head"] is not None:
    keras_kwargs["total_steps"] = total_steps
    return keras_kwargs
  settings = (shipped.long_run_settings(name) if total_steps is not None
              else None)
  if settings is not None:
    card = step_settings.step_transforms_from(**settings)
    for key, value in card.keras_kwargs(total_steps).items():
      keras_kwargs.setdefault(key, value)
  return keras_kwargs
