"""Recipes: named sets of ``metarun.py`` flags, shipped with the package.

A recipe is an absl flagfile (``recipes/<name>.flags``, one ``--flag=value``
per line, ``#`` comments), so it can also be read, copied and passed as
``--flagfile=``. ``metarun.py --recipe=<name>`` expands to that flagfile
placed *before* the command line's own flags, so a flag given on the
command line wins over the recipe's. The recipe's flags reach the run
record like any other flag: a checkpoint trained with a recipe is
meta-tested and loaded in Keras without extra flags.
"""

import os

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes")
SUFFIX = ".flags"


def names():
  """The shipped recipes' names, sorted."""
  return sorted(f[:-len(SUFFIX)] for f in os.listdir(FOLDER)
                if f.endswith(SUFFIX))


def path(name):
  """The flagfile of recipe ``name``."""
  return os.path.join(FOLDER, name + SUFFIX)


def read(name):
  """``{flag: value}`` of recipe ``name`` (values as written)."""
  values = {}
  with open(path(name)) as f:
    for line in f:
      line = line.strip()
      if line and not line.startswith("#"):
        flag, _, value = line.lstrip("-").partition("=")
        values[flag] = value
  return values


def summary(name):
  """The recipe's leading comment (what it is), whole, as one line."""
  words = []
  with open(path(name)) as f:
    for line in f:
      if not line.startswith("#"):
        break
      words.append(line.lstrip("#").strip())
  return " ".join(w for w in words if w)


def expand(argv):
  """``argv`` with ``--flagfile=<recipe>`` inserted after the program name
  for a ``--recipe=<name>`` (or ``--recipe <name>``) it holds, so that the
  command line's flags, parsed after it, win. An unknown name is left for
  the flag's own validation to refuse; ``--recipe`` given twice is a
  ValueError (which recipe's flags win would be a guess)."""
  given = []
  for i, arg in enumerate(argv[1:], 1):
    if arg.startswith("--recipe="):
      given.append(arg.split("=", 1)[1])
    elif arg == "--recipe" and i + 1 < len(argv):
      given.append(argv[i + 1])
  if len(given) > 1:
    raise ValueError("--recipe is given {} times ({}); give one recipe and "
                     "set other flags on the command line.".format(
                         len(given), ", ".join(given)))
  name = given[0] if given else None
  if name is None or name not in names():
    return list(argv)
  return [argv[0], "--flagfile=" + path(name)] + list(argv[1:])
