"""Tuned baselines taken from an earlier benchmark's ``results.json``.

Tuning the baselines is most of a benchmark's cost (per task, 5 or more
learning rates of each baseline, then every seed at the chosen one), and
it does not depend on the optimizer under test. ``--reuse_baselines=PATH``
takes, per task and budget, each tuned baseline's block (its grid, the
chosen learning rate, every seed's run) from ``PATH`` instead of running it
again, where the earlier run trained that task with the same settings: the
budget, the seeds, the minibatch size, the measurement points, the grid
and how it grows, what selection reads, XLA on or off, the sizes of the
splits and, where both runs recorded it, the digest of the data. A task or
baseline the earlier file lacks, or ran otherwise, is run as usual.

The optimizer under test runs here, so the page compares it with
baselines measured on the machine and date the page names
(``baselines_from`` in ``results.json``), unless ``--reuse_optimizer``
asks for its runs too (the same spec, task and settings): then only what
the earlier file lacks runs here, e.g. the baselines without tuning added
beside an earlier page's, and the page says which runs came from where.
Several files, separated by commas, are asked in order.
"""

import json

from l2o_scale.benchmark import results_format
from l2o_scale.benchmark import untuned

# The Config fields that shape a tuned baseline's runs.
CONFIG_FIELDS = ("seeds", "batch_size", "tiny", "grid", "select_on",
                 "grid_extension", "jit_compile", "eval_points")
# The kinds of block a file gives: (kind, its count in ``source``, the
# dates of its runs in ``source``).
KINDS = (("tuned", "blocks", "date"),
         ("untuned", "untuned_blocks", "untuned_date"),
         ("optimizer", "optimizer_blocks", "optimizer_date"))
# The entry fields (per task and budget) that must agree.
ENTRY_FIELDS = ("task", "budget", "eval_every", "loss", "metric")


class StoredBaselines:
  """The tuned-baseline blocks of an earlier ``results.json``."""

  def __init__(self, path):
    """Reads ``path``; ValueError with one line naming
    ``--reuse_baselines`` when it cannot be read or is not a benchmark's
    results."""
    flag = "--reuse_baselines={}".format(path)
    try:
      with open(path, encoding="utf-8") as f:
        results = json.load(f)
    except OSError as e:
      raise ValueError("{}: cannot read it ({})".format(
          flag, e.strerror or e)) from None
    except ValueError:
      raise ValueError("{}: not JSON; give the results.json of an earlier "
                       "benchmark run".format(flag)) from None
    if (not isinstance(results, dict) or
        results.get("format") != results_format.FORMAT):
      raise ValueError("{}: not the results.json of a task-suite "
                       "benchmark".format(flag))
    self.path, self.results = path, results
    self.taken = 0  # tuned baseline blocks taken, for the page
    self.untuned_taken = 0  # blocks of baselines without tuning taken
    self.optimizer_taken = 0  # blocks of the optimizer under test taken
    self.last = None  # the file that gave the last block taken

  def source(self):
    """What this file gave and where its runs were measured, for
    ``results.json`` and the page: the blocks taken of each kind (tuned,
    without tuning, of the optimizer under test) and, per kind, the dates
    of the runs behind them: this file's own date where it ran blocks of
    that kind itself, and those of the still earlier files it took blocks
    of that kind from; the machines of all of them."""
    origin = self.results.get("baselines_from") or {}
    own = self.results.get("date", "?")[:10]
    counts = _blocks(self.results)
    taken = dict(tuned=self.taken, untuned=self.untuned_taken,
                 optimizer=self.optimizer_taken)
    dates, here, earlier = {}, False, False
    for kind, taken_key, date_key in KINDS:
      from_origin = origin.get(taken_key, 0)
      dates[date_key] = set()
      if from_origin:
        dates[date_key] = _pieces(origin.get(date_key))
        earlier = earlier or bool(taken[kind])
      if counts[kind] > from_origin:
        dates[date_key].add(own)
        here = here or bool(taken[kind])
    m = self.results.get("machine", {})
    cpus = (_pieces(origin.get("cpu")) if earlier else set()) | (
        {str(m.get("cpu"))} if here or not earlier else set())
    return dict({k: _joined(v) for k, v in dates.items()}, path=self.path,
                cpu=_joined(cpus),
                cpu_count=m.get("cpu_count", origin.get("cpu_count")),
                blocks=self.taken, untuned_blocks=self.untuned_taken,
                optimizer_blocks=self.optimizer_taken)

  def _entry(self, entry_key, config, sizes, data):
    """The earlier entry run with the settings of this one, or None."""
    old_config = self.results.get("config", {})
    if any(old_config.get(k) != getattr(config, k) for k in CONFIG_FIELDS):
      return None
    for e in self.results.get("entries", []):
      if any(e.get(k) != entry_key[k] for k in ENTRY_FIELDS):
        continue
      old_sizes = e.get("sizes", {})
      if any(old_sizes.get(k) != sizes[k] for k in
             ("train", "validation", "test")):
        continue
      if e.get("data") and data and e["data"] != data:
        continue
      return e
    return None

  def block(self, name, entry_key, config, sizes, data):
    """The earlier tuned block of baseline ``name`` for this task and
    budget, or None where it must run here."""
    e = self._entry(entry_key, config, sizes, data)
    block = e and e.get("baselines", {}).get(name)
    if not block or not block.get("runs"):
      return None
    self.taken += 1
    self.last = self.path
    return block


  def untuned_blocks(self, name, entry_key, config, sizes, data):
    """The earlier runs of baseline without tuning ``name`` for this task
    and budget, as {name: block} (schedule-free's with its reading at y),
    or None where they must run here."""
    e = self._entry(entry_key, config, sizes, data)
    found = (e or {}).get("untuned", {})
    names = [name] + ([untuned.AT_Y] if untuned.get(name).averaged else [])
    if not all(found.get(n, {}).get("runs") for n in names):
      return None
    self.untuned_taken += 1
    self.last = self.path
    return {n: dict(label=found[n]["label"], runs=found[n]["runs"])
            for n in names}


  def under_test_runs(self, spec, entry_key, config, sizes, data):
    """With ``--reuse_optimizer``: the earlier runs of the optimizer under
    test ``spec`` (or of its bare variant) for this task and budget, or
    None where it must run here."""
    e = self._entry(entry_key, config, sizes, data) or {}
    for which in ("optimizer", "bare"):
      block = e.get(which)
      if block and self._spec_of(which, block) == spec and block.get("runs"):
        self.optimizer_taken += 1
        self.last = self.path
        return block["runs"]
    return None

  def _spec_of(self, which, block):
    """The spec that ran ``block``: its own record, or, in files written
    before blocks recorded it, the run's ``--optimizer`` for the
    optimizer's block (a bare block then has no spec to match)."""
    if "spec" in block:
      return block["spec"]
    if which == "optimizer":
      return self.results.get("config", {}).get("optimizer")
    return None


class StoredSet:
  """Several earlier ``results.json`` files, asked in order: a block comes
  from the first file that ran it with the same settings (e.g. the tuned
  baselines of tasks measured on different pages)."""

  def __init__(self, paths):
    self.files = [StoredBaselines(p) for p in paths]
    self.path = ",".join(paths)
    self.last = None

  def _first(self, method, *args):
    for stored in self.files:
      found = getattr(stored, method)(*args)
      if found:
        self.last = stored.path
        return found
    return None

  def block(self, *args):
    return self._first("block", *args)

  def untuned_blocks(self, *args):
    return self._first("untuned_blocks", *args)

  def under_test_runs(self, *args):
    return self._first("under_test_runs", *args)

  def source(self):
    """:meth:`StoredBaselines.source` over the files that gave blocks
    (all of them where none did), counts summed, each kind's dates from
    the files that gave blocks of that kind; ``sources`` lists each
    file's."""
    used = [s.source() for s in self.files
            if s.taken or s.untuned_taken or s.optimizer_taken]
    used = used or [s.source() for s in self.files]
    merged = {date_key: _joined(set().union(*[
        _pieces(u.get(date_key)) for u in used if u[taken_key]]))
              for _, taken_key, date_key in KINDS}
    return dict(merged, path=self.path,
                cpu=_joined(set().union(*[_pieces(u["cpu"]) for u in used])),
                cpu_count=used[0].get("cpu_count"),
                sources=used, **{taken_key: sum(u[taken_key] for u in used)
                                 for _, taken_key, _ in KINDS})


def _pieces(joined):
  """The dates (to the day) or machines of a ``source`` field, which
  joins several with " and "."""
  if not joined:
    return set()
  return {p.strip()[:10] if p.strip()[:4].isdigit() else p.strip()
          for p in str(joined).split(" and ") if p.strip()}


def days(joined):
  """The days of a ``source`` date field (several joined with " and "),
  sorted; [] for none."""
  return sorted(_pieces(joined))


def _joined(pieces):
  return " and ".join(sorted(pieces)) or None


def _blocks(results):
  """The blocks of ``results`` of each kind, counted as they are taken: a
  baseline without tuning is one block (schedule-free's reading at y is
  the same runs), the optimizer under test one per spec and task."""
  entries = results.get("entries", ())
  return dict(
      tuned=sum(len(e.get("baselines", {})) for e in entries),
      untuned=sum(len([n for n in e.get("untuned", {}) if n != untuned.AT_Y])
                  for e in entries),
      optimizer=sum(1 for e in entries for which in ("optimizer", "bare")
                    if e.get(which)))


def load(paths):
  """The stored runs of ``paths`` (one ``results.json``, or several
  separated by commas: :class:`StoredSet`), None for none."""
  if not paths:
    return None
  paths = [p for p in paths.split(",") if p]
  return StoredBaselines(paths[0]) if len(paths) == 1 else StoredSet(paths)
