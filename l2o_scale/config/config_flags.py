"""Configuration declared once: dataclass fields that define absl flags.

A field declared with :func:`flag` carries its flag's help text, choices and
bounds, so the dataclass is the one place a setting, its default, its
``--help`` and its valid range live. :func:`define_flags` defines the absl
flags from it (into any ``FlagValues``, so each program owns its own set and
no definition depends on which module was imported first), :func:`validate`
refuses out-of-range or non-finite values with one line per flag, and
:func:`from_flags` builds the dataclass from the parsed flags.

The flag kind follows the field's type: ``int`` -> integer, ``float`` ->
float, ``bool`` -> boolean, ``str`` -> string (enum when the field has
``choices``), ``tuple`` -> list (of strings on the command line, of the
default's element type in the dataclass). A field may carry another flag
name (``name=``), e.g. ``Schedule.learning_rate`` is ``--meta_learning_rate``.
"""

import dataclasses
import math
import sys
import typing

from absl import flags

_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float,
           bool: flags.DEFINE_boolean, str: flags.DEFINE_string}
_KINDS = {"int": int, "float": float, "bool": bool, "str": str,
          "tuple": tuple}


def flag(default, help_text, choices=None, *, name=None, kind=None, ge=None,
         gt=None, le=None, lt=None, nonempty=False):
  """A dataclass field whose absl flag has this help (and enum choices).

  ``name``: the flag's name when it differs from the field's. ``kind``: the
  flag's type when the annotation does not say it (``Optional[int]``).
  ``ge``/``gt``/``le``/``lt``: bounds of a numeric flag, checked by
  :func:`validate` (which also refuses NaN and infinities); ``nonempty``: a
  string flag that may not be empty.
  """
  metadata = {"help": help_text, "name": name, "kind": kind,
              "bounds": dict(ge=ge, gt=gt, le=le, lt=lt),
              "nonempty": nonempty}
  if choices is not None:
    metadata["choices"] = tuple(choices)
  if isinstance(default, (list, tuple)):
    default = tuple(default)
    return dataclasses.field(default_factory=lambda: default,
                             metadata=metadata)
  return dataclasses.field(default=default, metadata=metadata)


def flag_fields(cls):
  """The fields of ``cls`` declared with :func:`flag`."""
  return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def flag_name(field):
  """The absl flag name of a :func:`flag` field."""
  return field.metadata.get("name") or field.name


def flag_names(cls):
  """The flag names of ``cls``, in declaration order."""
  return [flag_name(f) for f in flag_fields(cls)]


def default(field):
  """The default value of a dataclass field."""
  if field.default is not dataclasses.MISSING:
    return field.default
  return field.default_factory()


def kind(field):
  """The Python type of the field's flag (int, float, bool, str, tuple)."""
  if field.metadata.get("kind") is not None:
    return field.metadata["kind"]
  annotation = field.type
  if isinstance(annotation, str):  # from __future__ import annotations
    return _KINDS[annotation]
  if typing.get_origin(annotation) is typing.Union:
    return [a for a in typing.get_args(annotation) if a is not type(None)][0]
  return annotation


def define_flags(cls, module_name, flag_values=flags.FLAGS, overrides=None,
                 only=None, help_suffix=""):
  """Defines one absl flag per :func:`flag` field of ``cls``.

  ``module_name``: the module the flags belong to, so ``--help`` lists them
  under it and ``get_key_flags_for_module`` finds them there.
  ``overrides``: ``{flag name: default}`` for a program whose original
  default differs (metatest's unused schedule flags); ``only``: the flag
  names to define (all when None); ``help_suffix`` is appended to their
  help.
  """
  if module_name == "__main__":  # A script: absl files its flags this way.
    module_name = sys.argv[0]
  overrides = overrides or {}
  for field in flag_fields(cls):
    name = flag_name(field)
    if only is not None and name not in only:
      continue
    value = overrides.get(name, default(field))
    help_text = field.metadata["help"] + help_suffix
    common = dict(flag_values=flag_values, module_name=module_name)
    if field.metadata.get("choices"):
      flags.DEFINE_enum(name, value, list(field.metadata["choices"]),
                        help_text, **common)
    elif kind(field) is tuple:
      flags.DEFINE_list(name, [str(v) for v in value], help_text, **common)
    else:
      _DEFINE[kind(field)](name, value, help_text, **common)


def define_booleans(names_and_help, module_name, flag_values=flags.FLAGS):
  """Boolean flags, default False, from ``[(name, help)]`` (the include_*
  problem flags, whose list is the problem registry's)."""
  for name, help_text in names_and_help:
    flags.DEFINE_boolean(name, False, help_text, flag_values=flag_values,
                         module_name=module_name)


def from_flags(cls, flag_values=flags.FLAGS, **extra):
  """``cls`` with every :func:`flag` field read from the parsed flags (a
  list flag becomes a tuple of its default's element type); ``extra`` gives
  the fields that are not flags, or a flag field's value as the caller
  interprets it (that flag is then not read)."""
  values = {field.name: flag_value(field, flag_values)
            for field in flag_fields(cls) if field.name not in extra}
  values.update(extra)
  return cls(**values)


def flag_items(instance):
  """``[(flag name, value)]`` of the :func:`flag` fields of the dataclass
  ``instance``, in declaration order, each value as its parsed flag holds
  it (a tuple field as a list flag's strings): the inverse of
  :func:`from_flags`, for records of the flags a run was given."""
  items = []
  for field in flag_fields(type(instance)):
    value = getattr(instance, field.name)
    if kind(field) is tuple:
      value = [str(v) for v in value]
    items.append((flag_name(field), value))
  return items


def given(cls, flag_values=flags.FLAGS):
  """``{field name: value}`` of the :func:`flag` fields of ``cls`` whose flag
  was given on the command line, for a program whose defaults come from
  elsewhere (a preset the given flags override)."""
  return {field.name: flag_value(field, flag_values)
          for field in flag_fields(cls)
          if flag_values[flag_name(field)].present}


def flag_value(field, flag_values):
  """One field's value from the parsed flags (a list flag becomes a tuple
  of its default's element type)."""
  value = flag_values[flag_name(field)].value
  if kind(field) is tuple:
    element = type(default(field)[0]) if default(field) else str
    try:
      value = tuple(element(v) for v in value)
    except ValueError:
      raise ValueError("--{} takes a comma-separated list of {} values, not "
                       "{!r}".format(flag_name(field), element.__name__,
                                     ",".join(value))) from None
  return value


_BOUND_TEXT = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
_BOUND_TEST = {"ge": lambda v, b: v >= b, "gt": lambda v, b: v > b,
               "le": lambda v, b: v <= b, "lt": lambda v, b: v < b}


def field_errors(field, value):
  """Error lines for one field's value (empty when it is valid)."""
  name = flag_name(field)
  if field.metadata.get("nonempty") and isinstance(value, str) and (
      not value.strip()):
    return ["--{} must not be empty".format(name)]
  if (value is None or isinstance(value, bool) or
      not isinstance(value, (int, float))):
    return []
  if not math.isfinite(value):
    return ["--{} must be a finite number (got {})".format(name, value)]
  bounds = field.metadata.get("bounds") or {}
  if all(bounds.get(key) is None or _BOUND_TEST[key](value, bounds[key])
         for key, _ in _BOUND_TEXT):
    return []
  return ["--{} must be {} (got {:g})".format(name, bounds_text(bounds),
                                              value)]


def bounds_text(bounds):
  """``>= 1``, ``> 0``, ``in [0, 1)``... for a field's bounds."""
  low = [(k, bounds[k]) for k in ("ge", "gt") if bounds.get(k) is not None]
  high = [(k, bounds[k]) for k in ("le", "lt") if bounds.get(k) is not None]
  if low and high:
    (lk, lv), (hk, hv) = low[0], high[0]
    return "in {}{:g}, {:g}{}".format("[" if lk == "ge" else "(", lv, hv,
                                      "]" if hk == "le" else ")")
  key, value = (low or high)[0]
  return "{} {:g}".format(dict(_BOUND_TEXT)[key], value)


def validate(cls, flag_values):
  """Error lines, one per :func:`flag` field of ``cls`` whose value in
  ``flag_values`` (parsed absl flags, an instance of ``cls``, or any object
  with the flag names as attributes) is non-finite, out of its bounds, or empty where it may not
  be."""
  errors = []
  for field in flag_fields(cls):
    name = flag_name(field)
    if isinstance(flag_values, flags.FlagValues):
      if name not in flag_values:
        continue
      value = flag_values[name].value
    elif dataclasses.is_dataclass(flag_values):
      value = getattr(flag_values, field.name)
    elif hasattr(flag_values, name):
      value = getattr(flag_values, name)
    else:
      continue
    errors.extend(field_errors(field, value))
  return errors
