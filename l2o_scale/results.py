"""Meta-test results side by side: ``python -m l2o_scale.results DIR...``.

Reads the files ``metatest.py`` writes into a ``--save_dir``
(:mod:`l2o_scale.meta_testing.result_files` names them:
``seed<S>_eval_loss_record.pickle-<model_name>``: the per-step training
loss, a pickled list; ``seed<S>_heldout_record-<model_name>.json``: held-out
loss and accuracy, with ``--heldout_every``; a ``-problem<K>`` suffix when
one run tested several problems; ``metatest_record-<model_name>.json``: the
problems of the run, by name) and prints one row per directory, model name
and problem: the number of seeds, the final training loss (mean of the last
``--last`` recorded steps of each seed) and the last held-out accuracy and
loss, each as mean ± standard deviation over seeds. A seed whose value is
nan or inf is counted as diverged, apart from those not recorded. A damaged
file is skipped with a warning naming it, so the other seeds and models
still show. ``--figure out.png`` also draws, per problem, the training loss
(smoothed mean over seeds over the faint raw mean, log scale) and, where
recorded, the held-out accuracy against iterations.

Only numpy (and matplotlib for ``--figure``): no TensorFlow import. The
files are read by :mod:`l2o_scale.results_reading`.
"""

import collections
import math
import os
import sys
import tempfile

import numpy as np

from l2o_scale import results_reading as reading
from l2o_scale.runs import atomic_file
from l2o_scale.runs import entry_point

# matplotlib is imported inside the functions that draw (--figure): the
# table alone does without it, and its backend is chosen before pyplot
# loads.

PROG = "python -m l2o_scale.results"


Row = collections.namedtuple(
    "Row", ["run", "seeds", "steps", "final_loss", "heldout_accuracy",
            "heldout_loss"])
# mean and sample std (None for one value) of the finite values; the number
# of non-finite (diverged) values left out, and of all values.
Spread = collections.namedtuple("Spread", ["mean", "std", "diverged",
                                           "count"])


def _spread(values):
  """The :class:`Spread` of ``values`` (None: not recorded, left out)."""
  values = np.asarray([v for v in values if v is not None], np.float64)
  finite = values[np.isfinite(values)]
  diverged = int(values.size - finite.size)
  if finite.size == 0:
    return Spread(math.nan, None, diverged, int(values.size))
  std = float(np.std(finite, ddof=1)) if finite.size > 1 else None
  return Spread(float(np.mean(finite)), std, diverged, int(values.size))


def summarize(runs, last=10):
  """One :class:`Row` per run, in the order directories and names sort."""
  rows = []
  for run in sorted(runs, key=reading.sort_key):
    seeds = runs[run]
    finals, accuracies, heldout_losses, steps = [], [], [], set()
    for seed in sorted(seeds):
      loss = seeds[seed].get("loss")
      if loss is not None and loss.size:
        finals.append(float(np.mean(loss[-last:])))
        steps.add(int(loss.size))
      heldout = seeds[seed].get("heldout")
      if heldout and heldout.get("heldout_accuracy"):
        accuracies.append(float(heldout["heldout_accuracy"][-1]))
        heldout_losses.append(float(heldout["heldout_loss"][-1]))
    rows.append(Row(run, sorted(seeds), sorted(steps), _spread(finals),
                    _spread(accuracies), _spread(heldout_losses)))
  return rows


def _cell(spread, digits):
  """``mean ± std``, with the diverged seeds counted; ``-``: not
  recorded."""
  if spread.count == 0:
    return "-"
  if spread.diverged == spread.count:
    return "diverged ({}/{} seeds)".format(spread.diverged, spread.count)
  text = ("{:.{d}g}".format(spread.mean, d=digits) if digits
          else "{:.4f}".format(spread.mean))
  if spread.std is not None:
    text += " ± " + ("{:.2g}".format(spread.std) if digits
                     else "{:.4f}".format(spread.std))
  if spread.diverged:
    text += ", {}/{} seeds diverged".format(spread.diverged, spread.count)
  return text


def _problem_cell(run):
  if run.label:
    return run.label
  return "-" if run.problem is None else str(run.problem)


def _escaped(text):
  return text.replace("|", "\\|")


def table(rows, last=10):
  """The rows as a Markdown table (lines after it explain the columns and
  note what differs between seeds)."""
  show_dir = len({row.run.directory for row in rows}) > 1
  show_problem = any(row.run.problem is not None or row.run.label
                     for row in rows)
  header = ((["directory"] if show_dir else []) + ["model"] +
            (["problem"] if show_problem else []) +
            ["seeds", "steps", "final training loss", "held-out accuracy",
             "held-out loss"])
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  notes = []
  for row in rows:
    cells = ([row.run.directory] if show_dir else []) + [row.run.model]
    if show_problem:
      cells.append(_problem_cell(row.run))
    cells += [str(len(row.seeds)),
              "/".join(str(s) for s in row.steps) or "-",
              _cell(row.final_loss, 4), _cell(row.heldout_accuracy, 0),
              _cell(row.heldout_loss, 4)]
    lines.append("| " + " | ".join(_escaped(c) for c in cells) + " |")
    if len(row.steps) > 1:
      notes.append("{}: its seeds ran different numbers of steps ({}); each "
                   "seed's final loss is over its own last steps, the figure "
                   "cuts them to the shortest.".format(
                       reading.run_name(row.run, show_dir),
                       "/".join(str(s) for s in row.steps)))
  note = ("mean ± std over seeds; final training loss: mean of the last {} "
          "steps of each seed; held-out: the last record; diverged: the "
          "value is nan or inf (left out of the mean); -: not "
          "recorded.".format(last))
  return "\n".join(lines + ["", note] + notes)


def check_figure_path(path):
  """Refuses a ``--figure`` path that cannot be written, before any work:
  ValueError for an unknown image format, an OSError for a missing or
  read-only folder."""
  from matplotlib import backend_bases  # pylint: disable=g-import-not-at-top
  if os.path.isdir(path):
    raise IsADirectoryError(
        21, "--figure={} is a folder; give a file name in it, e.g. "
        "{}".format(path, os.path.join(path, "compare.png")), path)
  formats = sorted(backend_bases.FigureCanvasBase.get_supported_filetypes())
  ext = os.path.splitext(path)[1].lower().lstrip(".")
  if ext not in formats:
    raise ValueError("--figure={} {}; end the name in one of .{}".format(
        path, "has no extension" if not ext else
        "has an unknown image format .{}".format(ext), ", .".join(formats)))
  folder = os.path.dirname(path) or "."
  if not os.path.isdir(folder):
    raise FileNotFoundError(
        2, "--figure={}: no folder {}; create it or give another "
        "path".format(path, folder), path)
  try:  # What a write does (os.access ignores read-only file systems).
    with tempfile.TemporaryFile(dir=folder):
      pass
  except OSError as e:
    raise PermissionError(
        e.errno or 13, "--figure={}: cannot write in {} ({}); give another "
        "path".format(path, folder, e.strerror or e), path) from None
  return ext


def _smoothed(values, span):
  """Exponential moving average with ``span`` (bias-corrected at the
  start, as TensorBoard's smoothing)."""
  alpha = 2. / (span + 1.)
  out = np.empty_like(values)
  average, weight = 0., 0.
  for i, v in enumerate(values):
    average = (1 - alpha) * average + alpha * v
    weight = (1 - alpha) * weight + alpha
    out[i] = average / weight
  return out


def _loss_curve(seeds):
  """(mean per step over the seeds that stayed finite, how many seeds
  diverged, note on lengths or '') of one run; mean None when none
  stayed finite."""
  losses = [s["loss"] for s in seeds.values() if s.get("loss") is not None]
  finite = [loss for loss in losses if np.all(np.isfinite(loss))]
  if not finite:
    return None, len(losses), ""
  n = min(loss.size for loss in finite)
  note = ("seeds cut to {} steps".format(n)
          if any(loss.size != n for loss in finite) else "")
  return (np.stack([loss[:n] for loss in finite]).mean(0),
          len(losses) - len(finite), note)


def _accuracy_curve(seeds):
  """(iterations, mean held-out accuracy over seeds) at the iterations
  every seed recorded, or None."""
  records = [s["heldout"] for s in seeds.values()
             if s.get("heldout") and s["heldout"]["heldout_accuracy"]]
  if not records:
    return None
  common = set(records[0]["iteration"])
  for record in records[1:]:
    common &= set(record["iteration"])
  iterations = sorted(common)
  if not iterations:
    return None
  acc = np.array([[dict(zip(r["iteration"], r["heldout_accuracy"]))[i]
                   for i in iterations] for r in records], np.float64)
  return np.asarray(iterations), acc.mean(0)


def _problem_title(run):
  if run.label:
    return run.label
  return ("problem not recorded" if run.problem is None
          else "problem {}".format(run.problem))


SMOOTHING = 20  # The moving average spans 1/20 of the run.
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def figure(runs, path):
  """Per problem, the training loss (smoothed mean over seeds over the
  faint raw mean) and, where recorded, the held-out accuracy (axis limits
  from the second half of the runs where each curve has
  :data:`ZOOM_POINTS` points there, else from all) of every run. Returns the (closed)
  matplotlib figure."""
  fmt = check_figure_path(path)
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  groups = collections.defaultdict(list)
  for run in sorted(runs, key=reading.sort_key):
    groups[_problem_title(run)].append(run)
  has_heldout = any(_accuracy_curve(runs[run]) is not None for run in runs)
  show_dir = len({run.directory for run in runs}) > 1
  models = sorted({(run.directory, run.model) for run in runs})
  colors = plt.get_cmap("tab10").colors
  style = {m: dict(color=colors[i % len(colors)],
                   linestyle=LINE_STYLES[i % len(LINE_STYLES)],
                   marker=MARKERS[i % len(MARKERS)])
           for i, m in enumerate(models)}
  fig, axes = plt.subplots(len(groups), 2 if has_heldout else 1,
                           figsize=(12 if has_heldout else 6.5,
                                    4.2 * len(groups)), squeeze=False)
  for (title, group), panels in zip(sorted(groups.items()), axes):
    _loss_panel(panels[0], title, group, runs, style, show_dir)
    if has_heldout:
      _accuracy_panel(panels[1], title, group, runs, style, show_dir)
  fig.tight_layout()
  with atomic_file.replace(path, "wb") as f:
    fig.savefig(f, format=fmt, dpi=120)
  plt.close(fig)
  return fig


def _loss_panel(ax, title, group, runs, style, show_dir):
  positive = True
  for run in group:
    mean, diverged, note = _loss_curve(runs[run])
    name = reading.run_name(run, show_dir)
    if diverged:
      note = ", ".join(filter(None, [note, "{} of {} seeds diverged, not "
                                     "drawn".format(diverged, len(runs[run]))]))
    label = name + (" ({})".format(note) if note else "")
    s = style[(run.directory, run.model)]
    if mean is None:
      ax.plot([], [], label=label, **s)
      continue
    positive &= bool(np.all(mean > 0))
    steps = np.arange(mean.size)
    span = max(1, mean.size // SMOOTHING)
    smooth = (np.exp(_smoothed(np.log(mean), span)) if np.all(mean > 0)
              else _smoothed(mean, span))
    ax.plot(steps, mean, color=s["color"], alpha=0.2, linewidth=0.6)
    ax.plot(steps, smooth, label=label, linewidth=1.8,
            markevery=max(1, mean.size // 8), markersize=5, **s)
  ax.set(xlabel="step", ylabel="training loss (minibatch)",
         yscale="log" if positive else "linear",
         title="{}\ntraining loss: mean over seeds, smoothed (raw: "
         "faint)".format(title))
  ax.legend(fontsize=8)
  ax.grid(alpha=0.3)


# The held-out axis zooms to the second half of the runs only where each
# curve keeps at least this many points there: with fewer (records every
# half run or less often), the zoom would leave each line a segment that
# enters from below the frame.
ZOOM_POINTS = 3


def _accuracy_panel(ax, title, group, runs, style, show_dir):
  curves = []
  for run in group:
    curve = _accuracy_curve(runs[run])
    if curve is None:
      continue
    iterations, accuracy = curve
    ax.plot(iterations, accuracy, label=reading.run_name(run, show_dir),
            markersize=5, **style[(run.directory, run.model)])
    curves.append((iterations, accuracy))
  late = [accuracy[iterations >= iterations[-1] / 2]
          for iterations, accuracy in curves]
  zoom = bool(late) and all(
      np.sum(np.isfinite(points)) >= ZOOM_POINTS for points in late)
  shown = np.concatenate(late if zoom else [a for _, a in curves]) if (
      curves) else np.array([])
  shown = shown[np.isfinite(shown)]
  if shown.size:
    low, high = float(shown.min()), float(shown.max())
    pad = max(0.15 * (high - low), 0.005)
    ax.set_ylim(low - pad, high + pad)
  ax.set(xlabel="step", ylabel="held-out accuracy" + (
      " (axis: range of the second half)" if zoom else ""),
         title="{}\nheld-out accuracy: mean over seeds".format(title))
  if shown.size:
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
  else:
    ax.set_axis_off()
    ax.text(0.5, 0.5, "no held-out records (metatest.py --heldout_every)",
            ha="center", va="center", transform=ax.transAxes)


def _os_error_line(error):
  """One line for a file error: its message when it names the file (the
  checks above), else the file and the system's reason."""
  if error.filename and str(error.filename) in (error.strerror or ""):
    return error.strerror
  if error.filename:
    return "cannot write {}: {}".format(error.filename,
                                        error.strerror or error)
  return str(error)


def _refuse(message):
  """One line ``<prog>: error: <message>`` and exit status 2, as the
  parser's own refusals (:class:`l2o_scale.runs.entry_point.ArgumentParser`)."""
  sys.stderr.write("{}: error: {}\n".format(PROG, message))
  raise SystemExit(2)


def _read_dirs(dirs):
  """``(runs, skipped)`` of the save dirs ``dirs``, each read once (a folder
  given twice, e.g. "res", "res/" and "./res", shows once); ValueError for
  one that is no directory or holds no result file."""
  runs, skipped, given = {}, [], {}
  for d in dirs:
    given.setdefault(os.path.realpath(d), os.path.normpath(d))
  for directory in given.values():
    if not os.path.isdir(directory):
      raise ValueError("{} is not a directory".format(directory))
    before = len(skipped)
    found = reading.read_dir(directory, skipped)
    if not found and len(skipped) == before:
      raise ValueError("no seed<S>_eval_loss_record.pickle-<name> files in "
                       "{}".format(directory))
    runs.update(found)
  return runs, skipped

def main(argv=None):
  parser = entry_point.ArgumentParser(
      prog=PROG,
      description="Shows the meta-test results of metatest.py save dirs "
      "side by side: per model name, the final training loss "
      "and held-out accuracy, mean ± std over seeds.")
  parser.add_argument("dirs", nargs="+", metavar="DIR",
                      help="a metatest.py --save_dir")
  parser.add_argument("--last", type=int, default=10,
                      help="steps averaged for the final training loss "
                      "(default 10)")
  parser.add_argument("--figure", metavar="PATH",
                      help="also draw the curves into this image file "
                      "(its extension names the format: .png, .pdf, .svg...)")
  args = parser.parse_args(argv)
  if args.last < 1:
    _refuse("--last must be >= 1 (got {})".format(args.last))
  try:
    if args.figure:
      check_figure_path(args.figure)
    runs, skipped = _read_dirs(args.dirs)
    for path, why in skipped:
      sys.stderr.write("{}: warning: skipped {}: {}\n".format(PROG, path, why))
    if not runs:
      raise ValueError("no readable result files in {} ({} damaged; see the "
                       "warnings above)".format(", ".join(args.dirs),
                                                len(skipped)))
    print(table(summarize(runs, args.last), args.last))
    if skipped:
      print("{} damaged file(s) skipped, the rest shown (warnings on "
            "stderr): {}".format(len(skipped), ", ".join(
                path for path, _ in skipped)))
    if args.figure:
      figure(runs, args.figure)
      print("figure: {}".format(args.figure))
  except OSError as e:
    _refuse(_os_error_line(e))
  except ValueError as e:
    _refuse(str(e))
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
