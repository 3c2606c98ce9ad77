"""What the run says while it runs: the estimate of the time left, the
progress text after a stage, a stage's latest news.

The estimate: each stage not done yet takes the mean time of finished
stages of its kind (else of its family, train or test; else of all), and
the sum is divided by the stages run in parallel (by the stages left, when
fewer). Nothing is estimated before any stage has finished.
"""

import collections
import os
import re


def format_seconds(seconds):
  """``42 s``, ``18 min``, ``1 h 05 min`` (whole seconds in)."""
  s = int(seconds)
  if s < 90:
    return "{} s".format(s)
  if s < 5400:
    return "{} min".format((s + 30) // 60)
  return "{:d} h {:02d} min".format(s // 3600, (s % 3600 + 30) // 60)


def family(kind):
  return kind.split("-", 1)[0]


def remaining_seconds(todo_kinds, finished, jobs):
  """Whole seconds left (an int), or None before any stage finished.

  ``todo_kinds``: the kind of each stage not done; ``finished``: (kind,
  seconds) of every finished stage, of this run and earlier ones.
  """
  if not finished:
    return None
  by_kind, by_family = collections.defaultdict(list), collections.defaultdict(
      list)
  for kind, secs in finished:
    by_kind[kind].append(secs)
    by_family[family(kind)].append(secs)
  everything = [secs for _, secs in finished]
  mean = lambda values: sum(values) / len(values)
  total = 0.
  for kind in todo_kinds:
    if by_kind[kind]:
      total += mean(by_kind[kind])
    elif by_family[family(kind)]:
      total += mean(by_family[family(kind)])
    else:
      total += mean(everything)
  todo = len(todo_kinds)
  return int("%.0f" % (total / (max(todo, 1) if todo < jobs else jobs)))


def progress_text(done, total, left):
  """``stage K/N; about T left`` after a stage finished (``left``: the
  estimate, None when there is none)."""
  if done == total:
    return "stage {}/{}; all done".format(done, total)
  if left is None:
    return "stage {}/{}".format(done, total)
  return "stage {}/{}; about {} left".format(done, total,
                                             format_seconds(left))


# Lines not worth showing: the logged command, TensorFlow's start-up notes.
_NOISE = re.compile(r"^(\+ |[IWEF][0-9]{4} |$)")


def last_news(log_path, tail_bytes=65536, width=110):
  """The stage's last line worth showing, shortened; ``starting`` when
  there is none yet."""
  try:
    with open(log_path, "rb") as f:
      f.seek(0, os.SEEK_END)
      f.seek(max(0, f.tell() - tail_bytes))
      text = f.read().decode("utf-8", errors="replace")
  except OSError:
    return "starting"
  lines = [l.replace("\r", "") for l in text.split("\n")]
  lines = [l for l in lines if not _NOISE.match(l)]
  return lines[-1][:width] if lines else "starting"
