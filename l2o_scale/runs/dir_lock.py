"""One writer per train dir: an O_EXCL lock file holding pid, host and start
time; stale (and taken over) once its process is gone (issue 13)."""

import json
import os
import socket
import time

FILENAME = ".metarun.lock"


class LockedError(RuntimeError):
  """Another live run holds the dir."""


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _young(lock_path, seconds=10):
  """A lock file being written right now reads as empty: still a lock."""
  try:
    return time.time() - os.path.getmtime(lock_path) < seconds
  except OSError:
    return False


def _holder(lock_path):
  try:
    with open(lock_path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def acquire(directory, command=""):
  """Creates the lock in ``directory``; returns its path.

  Raises LockedError naming the holder when a live process on this host holds
  it. A lock whose process is gone (killed, crashed) is stale and replaced.
  A lock from another host is respected: its liveness cannot be checked.
  """
  lock_path = os.path.join(directory, FILENAME)
  me = dict(pid=os.getpid(), host=socket.gethostname(),
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=command)
  for _ in range(3):
    try:
      fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _holder(lock_path)
      if holder is None and _young(lock_path):
        holder = dict(pid="?", host="?", started="just now")
      if holder and (holder.get("host") != me["host"] or
                     not str(holder.get("pid")).isdigit() or
                     _alive(int(holder["pid"]))):
        raise LockedError(
            "{} is in use by another run (pid {} on {}, started {}: {}). Wait "
            "for it, or use another --train_dir.".format(
                directory, holder.get("pid"), holder.get("host"),
                holder.get("started"), holder.get("command", "")))
      try:  # Stale (or unreadable half-written) lock: take it over.
        os.remove(lock_path)
      except FileNotFoundError:
        pass
      continue
    with os.fdopen(fd, "w") as f:
      json.dump(me, f)
    return lock_path
  raise LockedError("could not lock {}".format(directory))


def release(lock_path):
  """Removes the lock if this process still holds it."""
  holder = _holder(lock_path)
  if holder and holder.get("pid") == os.getpid():
    os.remove(lock_path)
