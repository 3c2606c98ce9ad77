"""Configuration declared once: dataclass fields that define absl flags.

Why: metarun.py defined ~25 flags and then copied each into
``TrainingConfig`` by hand, with every default written twice. Here a field
declared with :func:`flag` carries its flag's help text (and choices), so
the dataclass is the one place a setting, its default and its ``--help``
live; :func:`define_flags` defines the absl flags from it and
:func:`from_flags` builds the dataclass from the parsed flags.

The flag kind follows the field's type: ``int`` -> integer, ``float`` ->
float, ``bool`` -> boolean, ``str`` -> string (enum when the field has
``choices``), ``tuple`` -> list (of strings on the command line, of the
default's element type in the dataclass).
"""

import dataclasses
import sys

from absl import flags

_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float,
           bool: flags.DEFINE_boolean, str: flags.DEFINE_string}


def flag(default, help_text, choices=None):
  """A dataclass field whose absl flag has this help (and enum choices)."""
  metadata = {"help": help_text}
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


def _default(field):
  if field.default is not dataclasses.MISSING:
    return field.default
  return field.default_factory()


def _kind(field):
  annotation = field.type
  if isinstance(annotation, str):  # from __future__ import annotations
    annotation = {"int": int, "float": float, "bool": bool, "str": str,
                  "tuple": tuple}[annotation]
  return annotation


def define_flags(cls, module_name, flag_values=flags.FLAGS):
  """Defines one absl flag per :func:`flag` field of ``cls``.

  ``module_name``: the module the flags belong to (``__name__`` of the
  script), so ``--help`` lists them under it and
  ``get_key_flags_for_module`` finds them there.
  """
  if module_name == "__main__":  # A script: absl files its flags this way.
    module_name = sys.argv[0]
  for field in flag_fields(cls):
    kind = _kind(field)
    default = _default(field)
    common = dict(flag_values=flag_values, module_name=module_name)
    if field.metadata.get("choices"):
      flags.DEFINE_enum(field.name, default, list(field.metadata["choices"]),
                        field.metadata["help"], **common)
    elif kind is tuple:
      flags.DEFINE_list(field.name, [str(v) for v in default],
                        field.metadata["help"], **common)
    else:
      _DEFINE[kind](field.name, default, field.metadata["help"], **common)


def from_flags(cls, flag_values=flags.FLAGS):
  """``cls`` with every :func:`flag` field read from the parsed flags (a
  list flag becomes a tuple of its default's element type)."""
  values = {}
  for field in flag_fields(cls):
    value = flag_values[field.name].value
    if _kind(field) is tuple:
      default = _default(field)
      element = type(default[0]) if default else str
      value = tuple(element(v) for v in value)
    values[field.name] = value
  return cls(**values)
