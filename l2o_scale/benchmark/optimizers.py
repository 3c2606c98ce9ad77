"""The optimizer under test and the tuned baselines.

The optimizer under test is given by a spec string (:func:`factory`):

* the name of a shipped learned optimizer (``l2o-scale``; ``python -m
  l2o_scale.pretrained`` lists them), built as
  ``LearnedOptimizer.pretrained(name, total_steps=budget)`` (the card's
  long-run settings for a run of the benchmark's budget; for one shipped
  with a schedule head, ``l2o-scale-head``, the head, whose progress input
  is fed the budget);
* ``checkpoint:PATH`` (or a path that exists): a checkpoint written by
  ``metarun.py``, ``LearnedOptimizer.from_checkpoint(PATH)``;
* ``KERAS_NAME[:LR]``: a Keras optimizer by its identifier, e.g.
  ``adam:1e-3`` (constant learning rate);
* ``import:package.module.attr``: a callable returning a Keras optimizer,
  called with ``total_steps=budget`` when it accepts that argument.

A learned optimizer's spec (a shipped name or a checkpoint) may end in
``+hold_zero_gradients``: the same optimizer with
``LearnedOptimizer(hold_zero_gradients=True)`` (no step where a step's
gradient is exactly zero, :mod:`l2o_scale.steps.zero_gradient_hold`).
A shipped name may end in ``+bare``: the optimizer as meta-training left it,
``LearnedOptimizer.pretrained(name)`` without its card's hand-set long-run
settings (weight decay, step decay); :func:`bare_variant` gives the bare
spec of a shipped optimizer whose card holds such settings, which the suite
runs beside it so that a hand-set setting is never what a learned optimizer
is credited for.

A learned optimizer's spec may end in ``+head=PATH``: the same optimizer
with the schedule head saved at ``PATH`` (docs/schedule-head.md), its
progress input fed ``total_steps=budget``; the head takes the place of a
card's long-run settings, so it does not go with ``+bare``.

The baselines (:class:`Baseline`) are Adam, AdamW and SGD with momentum 0.9,
each with a cosine decay of the learning rate to 0 over the budget. The
decay's base value lives in a variable, so one compiled training step serves
every learning rate of the grid and every seed.
"""

import dataclasses
import glob
import hashlib
import importlib
import inspect
import json
import math
import os

from l2o_scale import pretrained as shipped
from l2o_scale.runs import run_record

# Keras, the benchmark's training, checkpoints and the learned optimizer
# load TensorFlow; they are imported inside the functions that build or
# read an optimizer, so that parsing and refusing a spec (--help, a bad
# --optimizer) loads none of it.

# The suffix of a learned optimizer's spec that holds coordinates without a
# gradient (module doc).
HOLD_SUFFIX = "+hold_zero_gradients"
# The suffix of a shipped optimizer's spec that leaves out its card's
# long-run settings (module doc).
BARE_SUFFIX = "+bare"
# What starts a learned optimizer's schedule head, the last part of a spec
# (module doc).
HEAD_MARK = "+head="

HALF_DECADES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)


def next_half_decade(lr, up=True):
  """The next value of the 1, 3, 10, 30, ... ladder above (below) ``lr``,
  a value of that ladder."""
  exponent = math.floor(math.log10(lr) + 1e-9)
  mantissa = lr / 10 ** exponent
  if up:
    value = 3 * 10 ** exponent if mantissa < 2 else 10 ** (exponent + 1)
  else:
    value = 10 ** exponent / 10 * 3 if mantissa < 2 else 10 ** exponent
  return float("{:.1g}".format(value))


@dataclasses.dataclass(frozen=True)
class Baseline:
  """A baseline: its name, its learning-rate grid and its Keras class."""
  name: str
  label: str
  grid: tuple
  small_grid: tuple

  def make(self, total_steps):
    """A fresh optimizer and its schedule (``schedule.set_base(lr)``)."""
    import keras  # pylint: disable=g-import-not-at-top
    from l2o_scale.benchmark import training  # pylint: disable=g-import-not-at-top
    schedule = training.CosineToZero(total_steps)
    if self.name == "adam":
      return keras.optimizers.Adam(schedule), schedule
    if self.name == "adamw":
      return keras.optimizers.AdamW(schedule), schedule
    if self.name == "sgd":
      return keras.optimizers.SGD(schedule, momentum=0.9), schedule
    raise ValueError("unknown baseline {!r}".format(self.name))


BASELINES = (
    Baseline("adam", "Adam", HALF_DECADES[:5], (1e-3, 1e-2)),
    Baseline("adamw", "AdamW (weight decay 0.004)", HALF_DECADES[:5],
             (1e-3, 1e-2)),
    Baseline("sgd", "SGD, momentum 0.9", HALF_DECADES[2:7], (1e-2, 1e-1)),
)


def baseline(name):
  for b in BASELINES:
    if b.name == name:
      return b
  raise ValueError("unknown baseline {!r}; the baselines: {}".format(
      name, ", ".join(b.name for b in BASELINES)))


@dataclasses.dataclass(frozen=True)
class Spec:
  """An ``--optimizer`` value taken apart (:func:`parse`): ``kind`` is
  ``shipped``, ``checkpoint``, ``keras`` or ``import``; ``target`` the name,
  path, Keras identifier or ``module.attr``; ``lr`` a Keras optimizer's
  learning rate (None: Keras' default); ``hold`` whether it ends in
  :data:`HOLD_SUFFIX`; ``bare`` whether it ends in :data:`BARE_SUFFIX`;
  ``head`` the path of its schedule head (:data:`HEAD_MARK`) or None."""
  text: str
  kind: str
  target: str
  lr: float = None
  hold: bool = False
  bare: bool = False
  head: str = None


def _refuse(spec, why):
  return ValueError("--optimizer={!r}: {}".format(spec, why))


def parse(spec):
  """The :class:`Spec` of ``spec``; ValueError naming ``--optimizer`` for a
  malformed one (an empty path or module, a learning rate that is not a
  positive finite number, ``+bare`` on a shipped optimizer whose schedule
  head is learned). Light: imports no TensorFlow, opens no file but a
  shipped card where ``+bare`` asks."""
  rest, mark, head = spec.partition(HEAD_MARK)
  if mark:
    return _with_head(spec, parse(rest), head)
  learned, hold, bare = _split_suffixes(spec)
  if learned in shipped.names():
    return _shipped_spec(spec, learned, hold, bare)
  if bare:
    raise _refuse(spec, "{} goes with a shipped optimizer's name only (a "
                  "checkpoint runs without card settings already)".format(
                      BARE_SUFFIX))
  if learned.startswith("checkpoint:") or (learned and os.path.exists(
      learned)):
    path = (learned.split(":", 1)[1] if learned.startswith("checkpoint:")
            else learned)
    if not path:
      raise _refuse(spec, "give the checkpoint after 'checkpoint:' (a "
                    "model.ckpt-K prefix or its folder)")
    return Spec(spec, "checkpoint", path, hold=hold)
  if hold:
    raise _refuse(spec, "{} goes with a learned optimizer (a shipped name "
                  "or checkpoint:PATH) only".format(HOLD_SUFFIX))
  if spec.startswith("import:"):
    module, _, attr = spec[len("import:"):].rpartition(".")
    if not (module and attr):
      raise _refuse(spec, "give a dotted path after 'import:', "
                    "module.attr")
    return Spec(spec, "import", module + "." + attr)
  return _keras_spec(spec)


def _with_head(spec, parsed, head):
  """``parsed`` (the spec before ``+head=``) with the schedule head file
  ``head``; a head goes with a learned optimizer without ``+bare``."""
  if parsed.kind not in ("shipped", "checkpoint"):
    raise _refuse(spec, "{} goes with a learned optimizer (a shipped name "
                  "or checkpoint:PATH) only".format(HEAD_MARK))
  if parsed.bare:
    raise _refuse(spec, "the schedule head takes the place of the card's "
                  "settings; leave out {}".format(BARE_SUFFIX))
  if not head:
    raise _refuse(spec, "give the schedule head's file after {!r} (a "
                  "head.npz of python -m l2o_scale.head_training)".format(
                      HEAD_MARK))
  return dataclasses.replace(parsed, text=spec, head=head)


def _shipped_spec(spec, learned, hold, bare):
  """The spec of the shipped optimizer ``learned``; ``+bare`` on one whose
  controller or schedule head is learned is refused (it has no hand-set
  settings to leave out)."""
  if bare and shipped.is_learned_adamw(learned):
    raise _refuse(spec, "{} has no hand-set settings to leave out: its "
                  "controller is learned (without it, it is AdamW with a "
                  "cosine decay)".format(learned))
  if bare and shipped.schedule_head(learned):
    raise _refuse(spec, "{} has no hand-set settings to leave out: its "
                  "schedule head is learned (without the head it is {}"
                  "{})".format(learned, shipped.record(learned)["card"].get(
                      "base", "its base"), BARE_SUFFIX))
  return Spec(spec, "shipped", learned, hold=hold, bare=bare)


def _keras_spec(spec):
  """A Keras optimizer's identifier with an optional ``:learning_rate``."""
  identifier, colon, lr = spec.partition(":")
  if not identifier:
    raise _no_optimizer(spec)
  if colon:
    try:
      lr = float(lr)
    except ValueError:
      raise _refuse(spec, "the learning rate after ':' must be a number, "
                    "e.g. {}:1e-3".format(identifier)) from None
    if not (math.isfinite(lr) and lr > 0):
      raise _refuse(spec, "the learning rate must be a positive finite "
                    "number, not {:g}".format(lr))
  return Spec(spec, "keras", identifier, lr if colon else None)


def _no_optimizer(spec):
  return ValueError(
      "--optimizer={!r} names no optimizer: give a shipped name ({}), "
      "checkpoint:PATH, a Keras optimizer as NAME[:LR] (e.g. adam:1e-3) or "
      "import:module.attr".format(spec, ", ".join(shipped.names())))


def _keras_optimizer(identifier, lr):
  import keras  # pylint: disable=g-import-not-at-top
  try:
    optimizer = keras.optimizers.get(identifier)
  except ValueError:
    return None
  if lr is not None:
    optimizer.learning_rate = float(lr)
  return optimizer


def _import_target(spec):
  """The callable ``module.attr`` of an ``import:`` spec; ValueError naming
  ``--optimizer`` when it cannot be imported."""
  module, _, attr = spec.target.rpartition(".")
  try:
    found = importlib.import_module(module)
  except ImportError as e:
    raise _refuse(spec.text, "cannot import {} ({})".format(module, e)) \
        from None
  target = getattr(found, attr, None)
  if not callable(target):
    raise _refuse(spec.text, "{} has no callable {!r}".format(module, attr))
  return target


def _from_import(spec, target, total_steps):
  """What the ``import:`` callable ``target`` returns for a run of
  ``total_steps``; ValueError naming ``--optimizer`` when it is not a
  Keras optimizer (the suite would fail on it in the middle of a run)."""
  import keras  # pylint: disable=g-import-not-at-top
  try:
    accepts = "total_steps" in inspect.signature(target).parameters
  except (TypeError, ValueError):
    accepts = False
  made = target(total_steps=total_steps) if accepts else target()
  if not isinstance(made, keras.optimizers.Optimizer):
    raise _refuse(spec, "{}.{}() returned {}, not a Keras optimizer".format(
        target.__module__, target.__qualname__, _what(made)))
  return made


def _what(value):
  """A value in a few words: its type and, for a short one, itself."""
  text = repr(value)
  return "a {} ({})".format(type(value).__name__, text) if len(text) <= 40 \
      else "a {}".format(type(value).__name__)


def _split_suffixes(spec):
  """(the spec without its suffixes, whether it ends in
  :data:`HOLD_SUFFIX`, whether in :data:`BARE_SUFFIX`), the suffixes in
  either order."""
  found = {HOLD_SUFFIX: False, BARE_SUFFIX: False}
  stripped = True
  while stripped:
    stripped = False
    for suffix in found:
      if spec.endswith(suffix) and not found[suffix]:
        spec, found[suffix], stripped = spec[:-len(suffix)], True, True
  return spec, found[HOLD_SUFFIX], found[BARE_SUFFIX]


def _suffixes(parsed):
  return ((BARE_SUFFIX if parsed.bare else "") +
          (HOLD_SUFFIX if parsed.hold else ""))


def bare_variant(spec):
  """The ``+bare`` spec of a shipped optimizer whose card holds long-run
  settings (the same optimizer without them); None for any other spec."""
  parsed = parse(spec)
  if (parsed.kind != "shipped" or parsed.bare or parsed.head or
      not shipped.long_run_settings(parsed.target)):
    return None
  return parsed.target + BARE_SUFFIX + (HOLD_SUFFIX if parsed.hold else "")


def resolve_checkpoint(spec):
  """The checkpoint prefix a ``checkpoint`` spec names now (its folder's
  latest checkpoint for a folder); FileNotFoundError naming
  ``--optimizer`` when there is none, ValueError when a folder's
  ``checkpoint`` file does not say which."""
  from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top
  try:
    return checkpoints.resolve_checkpoint_path(spec.target)
  except FileNotFoundError as e:
    raise FileNotFoundError("--optimizer={!r}: {}".format(spec.text, e)) \
        from None
  except ValueError as e:  # a folder without a readable 'checkpoint' file
    raise _refuse(spec.text, e) from None


def _digest(files, settings):
  """A digest of the files' contents and of ``settings`` (JSON)."""
  digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode())
  for path in files:
    with open(path, "rb") as f:
      for block in iter(lambda f=f: f.read(1 << 20), b""):
        digest.update(block)
  return digest.hexdigest()[:12]


def _checkpoint_files(prefix):
  return [prefix + ".index"] + sorted(glob.glob(glob.escape(prefix) +
                                                ".data-*"))


def identity(spec, checkpoint=None):
  """What names the optimizer of ``spec`` in a stored run's key: the spec,
  and what else determines its runs, so that none is reused once that
  changed: for a shipped optimizer a digest of its checkpoint and card
  settings (new meta-parameters, new settings for long runs); for
  ``checkpoint:PATH`` a digest of the checkpoint files (``checkpoint``, the
  prefix resolved; by default resolved now) and of the optimizer flags of
  the run record beside them; for ``import:module.attr`` a digest of the
  module's source file; with a schedule head, also a digest of the head's
  file."""
  parsed = parse(spec)
  head = [parsed.head] if parsed.head else []
  if parsed.kind == "shipped" and shipped.is_learned_adamw(parsed.target):
    found = shipped.controller(parsed.target)
    digest = _digest([found.path], found.settings)
  elif parsed.kind == "shipped":
    own_head = shipped.schedule_head(parsed.target)
    digest = _digest(_checkpoint_files(shipped.checkpoint(parsed.target)) +
                     (head or ([own_head] if own_head else [])),
                     None if parsed.bare or parsed.head else
                     shipped.long_run_settings(parsed.target))
  elif parsed.kind == "checkpoint":
    prefix = checkpoint or resolve_checkpoint(parsed)
    record = run_record.read(os.path.dirname(prefix) or ".")
    digest = _digest(_checkpoint_files(prefix) + head,
                     run_record.optimizer_flag_values(record))
  elif parsed.kind == "import":
    try:
      source = inspect.getsourcefile(inspect.getmodule(_import_target(
          parsed)))
    except TypeError:  # a built-in module: no source file
      source = None
    digest = _digest([source] if source else [], None)
  else:
    return spec
  learned, _, _ = _split_suffixes(spec.partition(HEAD_MARK)[0])
  return "{}@{}{}{}".format(learned, digest, _suffixes(parsed),
                            HEAD_MARK + parsed.head if parsed.head else "")


def _read_head(parsed):
  """The schedule head of a spec, if it has one, read once for all its
  runs (:func:`l2o_scale.steps.settings.attach_head`) as the config each
  run's optimizer builds its own head from; None without one. Refused
  before any training: FileNotFoundError or ValueError naming
  ``--optimizer`` when its file is missing or is not a saved head."""
  if not parsed.head:
    return None
  # Imported here: the head's modules load TensorFlow, which reading specs
  # (the report) does not need.
  from l2o_scale.steps import learned_schedule  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import settings as step_settings  # pylint: disable=g-import-not-at-top
  try:
    return step_settings.attach_head(parsed.head,
                                     "--optimizer=" + parsed.text).get_config()
  except FileNotFoundError:
    raise FileNotFoundError("--optimizer={!r}: no schedule head file {}"
                            .format(parsed.text, parsed.head)) from None
  except learned_schedule.HeadFileError as e:  # It names the file.
    raise _refuse(parsed.text, str(e)) from None


def factory(spec):
  """``total_steps -> a fresh Keras optimizer`` for the spec (module doc),
  and what names it in the stored runs' keys (:func:`identity`).

  Checks what it can before any training: raises ``ValueError`` with one
  line for a spec that names nothing, an ``import:`` that fails or a
  checkpoint or schedule head that does not load, ``FileNotFoundError``
  for a missing checkpoint or head file. A checkpoint folder is
  resolved to its latest checkpoint once, here."""
  # Imported here: it restores TF checkpoints and pulls in the optimizer.
  from l2o_scale.keras_optimizer import LearnedOptimizer  # pylint: disable=g-import-not-at-top
  parsed = parse(spec)
  head = _read_head(parsed)
  # With a head (each optimizer builds its own from the config read once),
  # total_steps feeds its progress input and no card setting applies;
  # without one, it applies the card's long-run settings.
  with_head = dict(schedule_head=head) if head else {}
  if parsed.kind == "shipped" and shipped.is_learned_adamw(parsed.target):
    if parsed.hold or parsed.head:
      raise _refuse(spec, "{} is a learned AdamW: it takes no {} or {}".format(
          parsed.target, HOLD_SUFFIX, HEAD_MARK))
    return (lambda total_steps: LearnedOptimizer.pretrained(
        parsed.target, total_steps=total_steps)), identity(spec)
  if parsed.kind == "shipped":
    return (lambda total_steps: LearnedOptimizer.pretrained(
        parsed.target, total_steps=None if parsed.bare else total_steps,
        hold_zero_gradients=parsed.hold, **with_head)), identity(spec)
  if parsed.kind == "checkpoint":
    prefix = resolve_checkpoint(parsed)
    make = lambda total_steps: LearnedOptimizer.from_checkpoint(
        prefix, hold_zero_gradients=parsed.hold,
        **(dict(with_head, total_steps=total_steps) if with_head else {}))
    try:
      make(None)  # A checkpoint that does not restore is refused now.
    except (ValueError, OSError) as e:
      raise _refuse(spec, str(e).splitlines()[0]) from None
    return make, identity(spec, prefix)
  if parsed.kind == "import":
    target = _import_target(parsed)
    # One call now (for a 1-step run): what it returns is refused before
    # any training, as a checkpoint that does not restore is.
    _from_import(spec, target, 1)
    return (lambda total_steps: _from_import(spec, target, total_steps)), (
        identity(spec))
  if _keras_optimizer(parsed.target, parsed.lr) is None:
    raise _no_optimizer(spec)
  return (lambda total_steps: _keras_optimizer(parsed.target, parsed.lr)), (
      identity(spec))
