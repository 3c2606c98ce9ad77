"""A fault-injected folder: writes under it fail as on a read-only or a full
disk, for tests that must run everywhere (no ``mount``, no privileges).

``install(root, mode)`` patches the Python file API of the running process
(``open``, ``os.open``/``os.write``, ``os.mkdir``/``os.makedirs``,
``os.replace``/``os.rename``, ``os.remove``/``os.unlink``/``os.rmdir``) for
paths under ``root``:

* ``"ro"``: every write, creation, rename or removal raises ``OSError``
  ``EROFS`` (errno and path as the kernel reports them);
* ``"full"``: a disk of ``pages`` pages of 4 KiB, as a small tmpfs counts
  them (each file holds whole pages): a write that needs one page more than
  there are raises ``OSError`` ``ENOSPC`` naming the file; removing a file
  frees its pages.

Writes through TensorFlow's own file system (checkpoints, event files) are
not seen: the tests using this fail at the first Python-level write, before
any of those.

Run a script under it with :func:`command`.
"""

import builtins
import errno
import io
import os
import sys

PAGE = 4096


def command(root, mode, script, args, pages=1):
  """``[python, -c, ...]`` running ``script`` (a path) with ``args`` as its
  argv, with ``root`` fault-injected as ``mode``; run it in the repository
  root (``cwd``), where ``tests.faultfs`` imports from."""
  code = ("import sys; from tests import faultfs; "
          "faultfs.install({root!r}, {mode!r}, {pages}); "
          "sys.argv = [{script!r}] + {args!r}; import runpy; "
          "runpy.run_path({script!r}, run_name='__main__')").format(
              root=str(root), mode=mode, pages=pages,
              script=str(script), args=list(args))
  return [sys.executable, "-c", code]


def install(root, mode, pages=1):
  if mode not in ("ro", "full"):
    raise ValueError("mode must be 'ro' or 'full', not {!r}".format(mode))
  root = os.path.abspath(root)
  sizes = {}  # path under root -> bytes written (full mode)
  fds = {}  # open descriptor -> path under root
  real = {name: getattr(os, name) for name in (
      "open", "write", "close", "mkdir", "replace", "rename", "remove",
      "unlink", "rmdir")}
  real_open = builtins.open

  def under(path):
    if isinstance(path, int):
      return False
    try:
      path = os.path.abspath(os.fsdecode(path))
    except TypeError:
      return False
    return path == root or path.startswith(root + os.sep)

  def fail(code, path):
    raise OSError(code, os.strerror(code), os.fsdecode(path))

  def used_pages():
    return sum(-(-size // PAGE) for size in sizes.values())

  def grow(path, extra):
    path = os.path.abspath(os.fsdecode(path))
    old = sizes.get(path, 0)
    new_pages = used_pages() - (-(-old // PAGE)) + (-(-(old + extra) // PAGE))
    if new_pages > pages:
      fail(errno.ENOSPC, path)
    sizes[path] = old + extra

  class _Counted(io.IOBase):
    """A file opened for writing under root, whose writes take pages."""

    def __init__(self, f, path):
      super().__init__()
      self._f, self._path = f, path

    def write(self, data):
      grow(self._path, len(data.encode() if isinstance(data, str) else data))
      return self._f.write(data)

    def __getattr__(self, name):
      return getattr(self._f, name)

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      self._f.close()

    def close(self):
      self._f.close()

    def fileno(self):
      return self._f.fileno()

    def flush(self):
      return self._f.flush()

  def patched_open(file, mode="r", *args, **kwargs):
    if under(file) and any(c in mode for c in "wax+"):
      if mode_ro:
        fail(errno.EROFS, file)
      f = real_open(file, mode, *args, **kwargs)
      if "w" in mode:
        sizes[os.path.abspath(os.fsdecode(file))] = 0
      return _Counted(f, file)
    return real_open(file, mode, *args, **kwargs)

  writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

  def patched_os_open(path, flags, *args, **kwargs):
    if under(path) and flags & writes:
      if mode_ro:
        fail(errno.EROFS, path)
      fd = real["open"](path, flags, *args, **kwargs)
      fds[fd] = path
      return fd
    return real["open"](path, flags, *args, **kwargs)

  def patched_write(fd, data):
    if fd in fds:
      grow(fds[fd], len(data))
    return real["write"](fd, data)

  def patched_close(fd):
    fds.pop(fd, None)
    return real["close"](fd)

  def guarded(name, *path_args):
    def wrapper(*args, **kwargs):
      for i in path_args:
        if i < len(args) and under(args[i]) and mode_ro:
          fail(errno.EROFS, args[i])
      result = real[name](*args, **kwargs)
      if name in ("remove", "unlink"):
        sizes.pop(os.path.abspath(os.fsdecode(args[0])), None)
      elif name in ("replace", "rename"):
        src = os.path.abspath(os.fsdecode(args[0]))
        if src in sizes:
          sizes[os.path.abspath(os.fsdecode(args[1]))] = sizes.pop(src)
      return result
    return wrapper

  mode_ro = mode == "ro"
  builtins.open = patched_open
  io.open = patched_open
  os.open = patched_os_open
  os.write = patched_write
  os.close = patched_close
  os.mkdir = guarded("mkdir", 0)
  os.rmdir = guarded("rmdir", 0)
  os.remove = guarded("remove", 0)
  os.unlink = guarded("unlink", 0)
  os.replace = guarded("replace", 0, 1)
  os.rename = guarded("rename", 0, 1)
