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
    self.taken = 0  # baseline blocks taken, for the page
    self.optimizer_taken = 0  # blocks of the optimizer under test taken

  def source(self):
    """Where the baselines were measured, for ``results.json`` and the
    page: the earlier run's date and machine, or, where that run took its
    baselines from a still earlier one, that one's."""
    origin = self.results.get("baselines_from")
    if origin:
      return dict(origin, path=self.path, blocks=self.taken,
                  optimizer_blocks=self.optimizer_taken,
                  optimizer_date=self.results.get("date"))
    m = self.results.get("machine", {})
    return dict(path=self.path, date=self.results.get("date"),
                cpu=m.get("cpu"), cpu_count=m.get("cpu_count"),
                blocks=self.taken, optimizer_blocks=self.optimizer_taken,
                optimizer_date=self.results.get("date"))

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
    self.taken += 1
    return {n: dict(label=found[n]["label"], runs=found[n]["runs"])
            for n in names}


  def under_test_runs(self, spec, entry_key, config, sizes, data):
    """With ``--reuse_optimizer``: the earlier runs of the optimizer under
    test ``spec`` (or of its bare variant) for this task and budget, or
    None where it must run here."""
    e = self._entry(entry_key, config, sizes, data) or {}
    for which in ("optimizer", "bare"):
      block = e.get(which)
      if block and block.get("spec") == spec and block.get("runs"):
        self.optimizer_taken += 1
        return block["runs"]
    return None


class StoredSet:
  """Several earlier ``results.json`` files, asked in order: a block comes
  from the first file that ran it with the same settings (e.g. the tuned
  baselines of tasks measured on different pages)."""

  def __init__(self, paths):
    self.files = [StoredBaselines(p) for p in paths]
    self.path = ",".join(paths)

  def _first(self, method, *args):
    for stored in self.files:
      found = getattr(stored, method)(*args)
      if found:
        return found
    return None

  def block(self, *args):
    return self._first("block", *args)

  def untuned_blocks(self, *args):
    return self._first("untuned_blocks", *args)

  def under_test_runs(self, *args):
    return self._first("under_test_runs", *args)

  def source(self):
    """The sources of the files that gave blocks (all of them where none
    did), their counts summed; ``sources`` lists each."""
    used = [s.source() for s in self.files if s.taken or s.optimizer_taken]
    used = used or [s.source() for s in self.files]
    dates = sorted({(u.get("date") or "?")[:10] for u in used})
    cpus = sorted({str(u.get("cpu")) for u in used})
    return dict(path=self.path, date=" and ".join(dates),
                cpu=" and ".join(cpus), cpu_count=used[0].get("cpu_count"),
                blocks=sum(u["blocks"] for u in used),
                optimizer_blocks=sum(u["optimizer_blocks"] for u in used),
                optimizer_date=" and ".join(sorted({
                    (u.get("optimizer_date") or "?")[:10] for u in used})),
                sources=used)


def load(paths):
  """The stored runs of ``paths`` (one ``results.json``, or several
  separated by commas: :class:`StoredSet`), None for none."""
  if not paths:
    return None
  paths = [p for p in paths.split(",") if p]
  return StoredBaselines(paths[0]) if len(paths) == 1 else StoredSet(paths)

