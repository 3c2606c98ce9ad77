"""Atomic file writes: a reader sees the old file or the new one, never half.

Why: run records, resume sidecars, curriculum markers and
metatest's result files are written next to checkpoints that a crash, a kill
or a full disk may interrupt. Each is written to ``<path>.tmp`` and renamed
over ``<path>``; when writing fails (e.g. no space left) the temporary file
is removed and the error names the file, so nothing half-written is left
behind and the message says what could not be written.
"""

import contextlib
import os


@contextlib.contextmanager
def replace(path, mode="w"):
  """``with replace(path) as f: ...`` writes ``f`` and then renames it over
  ``path``. On any error the temporary file is removed; an OSError is
  re-raised with ``path`` as its filename."""
  tmp = path + ".tmp"
  try:
    with open(tmp, mode) as f:
      yield f
    os.replace(tmp, path)
  except BaseException as e:
    try:
      os.remove(tmp)
    except OSError:
      pass
    if isinstance(e, OSError) and e.filename != path:
      raise OSError(e.errno, e.strerror or str(e), path) from e
    raise
