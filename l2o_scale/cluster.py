"""One-machine launcher of a distributed meta-training cluster.

    python -m l2o_scale.cluster --workers=N [--ps=1] [--log_dir=D] -- <metarun flags>

starts ``metarun.py`` as ps task(s), N workers and the chief on free
127.0.0.1 ports (one TF_CONFIG per process), prints each process's id and
log, streams the chief's output, waits for the chief, then stops the ps and
workers (they serve until killed, as TF's servers do) -- also on Ctrl-C or
when the chief fails. The exit status is the chief's.
"""

import argparse
import contextlib
import json
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile

from l2o_scale.runs import entry_point

# The metarun.py next to the packages (a checkout or an installed tree).
METARUN = importlib.util.find_spec("metarun").origin
ROOT = os.path.dirname(METARUN)


def free_ports(count):
  """``count`` distinct free loopback ports (held open together while picked)."""
  with contextlib.ExitStack() as stack:
    socks = []
    for _ in range(count):
      s = stack.enter_context(socket.socket(socket.AF_INET,
                                            socket.SOCK_STREAM))
      s.bind(("127.0.0.1", 0))
      socks.append(s)
    return [s.getsockname()[1] for s in socks]


def cluster_spec(num_workers, num_ps):
  """A chief/worker/ps cluster dict on loopback ports."""
  ports = iter(free_ports(1 + num_workers + num_ps))
  address = lambda: "127.0.0.1:{}".format(next(ports))
  return dict(chief=[address()],
              worker=[address() for _ in range(num_workers)],
              ps=[address() for _ in range(num_ps)])


def tf_config(cluster, task_type, index):
  return json.dumps(dict(cluster=cluster,
                         task=dict(type=task_type, index=index)))


def _start(cluster, task_type, index, flags, log_dir, out):
  """Starts one task; its output goes to ``<log_dir>/<type>-<index>.log``.

  The chief's stdout (progress lines) is also streamed by :func:`_stream`;
  its stderr (TF's and gRPC's diagnostics, which repeat while a lost worker
  is retried) goes to ``chief-0.err.log``.
  """
  env = dict(os.environ, TF_CONFIG=tf_config(cluster, task_type, index),
             PYTHONPATH=os.pathsep.join(
                 [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
             PYTHONUNBUFFERED="1")
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  log = os.path.join(log_dir, "{}-{}.log".format(task_type, index))
  chief = task_type == "chief"
  err = log[:-len(".log")] + ".err.log" if chief else log
  with open(log if not chief else err, "w") as log_file:
    proc = subprocess.Popen(
        [sys.executable, METARUN] + list(flags), env=env,
        stdout=subprocess.PIPE if chief else log_file,
        stderr=log_file if chief else subprocess.STDOUT, text=True,
        start_new_session=True)
  out.write("{} {} at {}: pid {}, log {}{}\n".format(
      task_type, index, cluster[task_type][index], proc.pid, log,
      ", stderr " + err if chief else ""))
  out.flush()
  return proc, log


def _stream(proc, log, out):
  """Copies the chief's output to its log and to ``out`` until it exits."""
  with open(log, "w") as log_file:
    for line in proc.stdout:
      log_file.write(line)
      log_file.flush()
      out.write(line)
      out.flush()
  return proc.wait()


def _print_tail(path, out, lines=20):
  """A failed chief's own error lines (``metarun.py: ...`` and the indented
  reason lines under it, as its invalid-flag refusal lists them), else the
  end of its stderr (gRPC retry messages can bury the error)."""
  with open(path) as f:
    text = f.readlines()
  own, under_own = [], False
  for line in text:
    under_own = line.startswith("metarun.py:") or (
        under_own and line.startswith("  "))
    if under_own:
      own.append(line)
  out.write("--- {} of {} ---\n{}".format(
      "errors" if own else "last lines", path, "".join(own or text[-lines:])))


def _stop(procs, timeout=10):
  """SIGTERM, then SIGKILL after ``timeout`` s, to each started process."""
  for proc in procs:
    if proc.poll() is None:
      proc.send_signal(signal.SIGTERM)
  for proc in procs:
    try:
      proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()


def launch(num_workers, flags, num_ps=1, log_dir=None, out=sys.stdout):
  """Runs the cluster until the chief exits; returns the chief's status."""
  log_dir = log_dir or tempfile.mkdtemp(prefix="l2o_cluster_")
  os.makedirs(log_dir, exist_ok=True)
  cluster = cluster_spec(num_workers, num_ps)
  servers = []
  try:
    for task_type, count in (("ps", num_ps), ("worker", num_workers)):
      for i in range(count):
        servers.append(_start(cluster, task_type, i, flags, log_dir, out)[0])
    chief, log = _start(cluster, "chief", 0, flags, log_dir, out)
    servers.append(chief)
    status = _stream(chief, log, out)
    if status:
      _print_tail(log[:-len(".log")] + ".err.log", out)
    out.write("chief exited with status {}; logs in {}\n".format(status,
                                                                log_dir))
    return status
  except KeyboardInterrupt:
    out.write("interrupted: stopping the cluster; logs in {}\n".format(log_dir))
    return 130
  finally:
    _stop(servers)


def _interrupt(signum, frame):
  """SIGTERM to the launcher stops the cluster as Ctrl-C does."""
  del signum, frame
  raise KeyboardInterrupt


def main(argv=None):
  parser = entry_point.ArgumentParser(
      prog="python -m l2o_scale.cluster",
      description="Run metarun.py on a one-machine parameter-server cluster.",
      usage="python -m l2o_scale.cluster --workers=N [--ps=1] [--log_dir=D] "
            "-- <metarun.py flags>")
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--ps", type=int, default=1)
  parser.add_argument("--log_dir", default=None,
                      help="where the per-task logs go (default: a new "
                      "temporary folder)")
  parser.add_argument("flags", nargs=argparse.REMAINDER,
                      help="metarun.py flags, after --")
  args = parser.parse_args(argv)
  flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
  if args.workers < 1 or args.ps < 1:
    parser.error("--workers and --ps must be >= 1")
  signal.signal(signal.SIGTERM, _interrupt)
  return launch(args.workers, flags, args.ps, args.log_dir)


if __name__ == "__main__":
  entry_point.run_main("python -m l2o_scale.cluster", main)
