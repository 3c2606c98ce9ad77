"""Fidelity replayer: re-runs TF1 reference fixtures with the port and compares.

Usage::

    python -m l2o_scale.fidelity.tf1_reference [--data_dir DIR] PATH [PATH ...]

Each PATH is a fixture folder (holding ``spec.json``, ``arrays.npz`` and
``ckpt/``) or a folder of fixture folders, in the format of
``shared/fixtures/tf1_reference/README.md``. For each fixture the run is
rebuilt from ``spec.json`` alone, the optimizer is restored from the fixture's
TF1 checkpoint, the run is replayed and every expected array is compared with
the tolerances of the fixture's ``spec.json`` (never loosened):

* ``max_rel`` = max|port - expected| / (max|expected| + 1e-12)
* ``rel_l2``  = ||port - expected||_2 / (||expected||_2 + 1e-12)

One line per fixture: ``PASS <name> max_rel_err=<x>``, ``FAIL <name> <what
differs>`` or ``SKIP <name> <reason>``. The exit status is non-zero if a
fixture fails or none is found.
"""

import os

import numpy as np

if __name__ == "__main__":
  # fixture_spec imports TensorFlow: quietly, when run as a command.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  from l2o_scale.runs import quiet_cuda  # pylint: disable=g-import-not-at-top
  quiet_cuda.import_tensorflow()
from l2o_scale.fidelity import fixture_spec  # pylint: disable=g-import-not-at-top,g-bad-import-order
from l2o_scale.runs import entry_point  # pylint: disable=g-import-not-at-top,g-bad-import-order
from problems import datasets  # pylint: disable=g-import-not-at-top,g-bad-import-order

TINY = 1e-12


def max_rel(actual, expected):
  actual = np.asarray(actual, np.float64)
  expected = np.asarray(expected, np.float64)
  return float(np.max(np.abs(actual - expected)) /
               (np.max(np.abs(expected)) + TINY))


def rel_l2(actual, expected):
  actual = np.asarray(actual, np.float64)
  expected = np.asarray(expected, np.float64)
  return float(np.linalg.norm(actual - expected) /
               (np.linalg.norm(expected) + TINY))


MEASURES = {"max_rel": max_rel, "rel_l2": rel_l2}


def compare(results, expected_arrays, tolerances, group_of):
  """Compares replayed arrays with the expected ones.

  Args:
    results: dict key -> replayed array (the fixture's array names).
    expected_arrays: the fixture's npz.
    tolerances: spec['tolerances']: group -> {measure: tolerance}.
    group_of: function key -> tolerance group.

  Returns:
    (worst_error, failures): the largest measured error over all checks and a
    list of human-readable failures (empty when everything matches).
  """
  worst = 0.
  failures = []
  for key, actual in sorted(results.items()):
    expected = np.asarray(expected_arrays[key])
    actual = np.asarray(actual)
    if actual.size != expected.size:
      failures.append("{}: size {} != expected {}".format(
          key, actual.size, expected.size))
      continue
    actual = actual.reshape(expected.shape)
    if not np.all(np.isfinite(actual)):
      failures.append("{}: non-finite values".format(key))
      continue
    group = group_of(key)
    if group not in tolerances:
      failures.append("{}: no tolerance for group {!r}".format(key, group))
      continue
    for measure, tol in tolerances[group].items():
      err = MEASURES[measure](actual, expected)
      worst = max(worst, err)
      if not err <= tol:
        failures.append("{} {}={:.3g} > {:g}".format(key, measure, err, tol))
  missing = [k for k in expected_arrays.files
             if _is_checked_output(k) and k not in results]
  for key in missing:
    failures.append("{}: not produced by the replay".format(key))
  return worst, failures


def _is_checked_output(key):
  return (key == "objectives" or key.startswith(("final", "early/", "slot/",
                                                 "unroll")))


def meta_test_group(key):
  if key == "objectives":
    return "objectives"
  if key.startswith("early/"):
    return "early"
  if key.startswith("final"):
    return "final"
  if key.startswith("slot/"):
    return "slot"
  return key


def meta_train_group(key):
  """unroll{u}/meta_objective -> meta_objective; unroll{u}/grad/... -> grad."""
  parts = key.split("/")
  return parts[1] if len(parts) > 1 else key


def find_fixtures(paths):
  """Fixture folders under the given paths (a fixture or a folder of them)."""
  found = []
  for path in paths:
    if os.path.isfile(os.path.join(path, "spec.json")):
      found.append(path)
    elif os.path.isdir(path):
      for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        if os.path.isfile(os.path.join(sub, "spec.json")):
          found.append(sub)
  return found


def replay_fixture(folder, data_dir=None):
  """Replays one fixture. Returns (status, name, message)."""
  # Imported lazily so TF's compiled functions load once.
  from l2o_scale.fidelity import replay  # pylint: disable=g-import-not-at-top
  name = os.path.basename(os.path.normpath(folder))
  spec = fixture_spec.load_spec(folder)
  arrays = np.load(os.path.join(folder, "arrays.npz"))
  kind = spec.get("kind")
  if kind == "meta_test":
    results = replay.replay_meta_test(folder, spec, arrays, data_dir)
    group_of = meta_test_group
  elif kind == "meta_train":
    if not replay.META_TRAIN_AVAILABLE:
      return "SKIP", name, "meta_train replay needs meta-training (not built)"
    results = replay.replay_meta_train(folder, spec, arrays, data_dir)
    group_of = meta_train_group
  else:
    return "FAIL", name, "unknown fixture kind {!r}".format(kind)
  worst, failures = compare(results, arrays, spec["tolerances"], group_of)
  if failures:
    return "FAIL", name, "; ".join(failures[:8]) + (
        " (+{} more)".format(len(failures) - 8) if len(failures) > 8 else "")
  return "PASS", name, "max_rel_err={:.3g}".format(worst)


PROG = "python -m l2o_scale.fidelity.tf1_reference"


def main(argv=None):
  parser = entry_point.ArgumentParser(
      prog=PROG,
      description="Replay TF1 reference fixtures with the TF2 port.")
  parser.add_argument("paths", nargs="+", metavar="PATH",
                      help="fixture folder or folder of fixture folders")
  datasets.add_data_dir_argument(parser)
  args = parser.parse_args(argv)
  fixtures = find_fixtures(args.paths)
  if not fixtures:
    print("No fixture found under: {}".format(", ".join(args.paths)))
    return 2
  failed = False
  for folder in fixtures:
    try:
      status, name, message = replay_fixture(folder, args.data_dir)
    except Exception as e:  # pylint: disable=broad-except
      status, name = "FAIL", os.path.basename(os.path.normpath(folder))
      message = "{}: {}".format(type(e).__name__, e)
    failed |= status == "FAIL"
    print("{} {} {}".format(status, name, message), flush=True)
  return 1 if failed else 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
