"""One writer per train dir: an O_EXCL lock file holding pid, host and start
time; stale (and taken over) once its process is gone, or once its pid
belongs to another process (the kernel's start time of the pid differs from
the one recorded: the pid was reused after the run died)."""

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


def process_start(pid):
  """An id of the process ``pid``'s start (boot id and start time in clock
  ticks, from /proc), or None where /proc does not tell."""
  try:
    with open("/proc/{}/stat".format(pid)) as f:
      stat = f.read()
    with open("/proc/sys/kernel/random/boot_id") as f:
      boot = f.read().strip()
  except OSError:
    return None
  # Field 22 (starttime); the command name (field 2) may hold spaces.
  return "{}:{}".format(boot, stat.rsplit(")", 1)[1].split()[19])


def _held_by(holder, host):
  """Whether the lock ``holder`` (its JSON) is a live run: on another host
  (not checkable), or a live pid here whose start matches the recorded one
  (a lock without a recorded start is trusted while its pid lives)."""
  if holder.get("host") != host or not str(holder.get("pid")).isdigit():
    return True
  pid = int(holder["pid"])
  if not _alive(pid):
    return False
  recorded = holder.get("process_start")
  return recorded is None or process_start(pid) in (None, recorded)


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
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=command,
            process_start=process_start(os.getpid()))
  for _ in range(3):
    try:
      fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _holder(lock_path)
      if holder is None and _young(lock_path):
        holder = dict(pid="?", host="?", started="just now")
      if holder and _held_by(holder, me["host"]):
        raise LockedError(
            "{} is in use by another run (pid {} on {}, started {}: {}). Wait "
            "for it, or use another --train_dir; if no run uses it any more "
            "(that pid is now another process, or the host is gone), delete "
            "{}.".format(directory, holder.get("pid"), holder.get("host"),
                         holder.get("started"), holder.get("command", ""),
                         lock_path))
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
