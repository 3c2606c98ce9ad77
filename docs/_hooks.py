"""MkDocs hook: the docs show result files where they are generated, never
copies of their numbers.

* ``<!-- include: PATH -->`` on a line of its own is replaced by the file at
  ``PATH`` (relative to the repository root), its headings moved one level
  down so that they nest under the page's. PATH names a file that a
  command writes (e.g. ``reproduce/results/medium/results.md``, written by
  ``reproduce/plot.py``), so the page states what that command gave.
* ``<!-- bench: PATH -->`` is replaced by the tables of a benchmark report
  (the JSON that ``python -m l2o_scale.speed --json PATH`` writes).
* Every figure under ``reproduce/results/`` is published at
  ``results/<path below reproduce/results>``, so pages link
  ``results/medium/loss_curves.png``.

A missing file is an error, so a strict build fails instead of publishing a
page without its results.
"""

import json
import os
import re

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "reproduce", "results")
INCLUDE = re.compile(r"^<!-- include: (\S+) -->$", re.M)
HEADING = re.compile(r"^(#{1,5}) ", re.M)
FIGURE_TYPES = (".png", ".pdf")


def on_files(files, config):
  for folder, _, names in os.walk(RESULTS):
    for name in sorted(names):
      if name.endswith(FIGURE_TYPES):
        path = os.path.join(folder, name)
        uri = "results/" + os.path.relpath(path, RESULTS).replace(os.sep, "/")
        files.append(File.generated(config, uri, abs_src_path=path))
  return files


def _included(match):
  path = os.path.join(ROOT, match.group(1))
  if not os.path.isfile(path):
    raise PluginError("include: {} does not exist".format(match.group(1)))
  with open(path, encoding="utf-8") as f:
    text = f.read()
  return HEADING.sub(lambda m: "#" + m.group(1) + " ", text).rstrip() + "\n"


# ------------------------------------------------------------ benchmark
# ``<!-- bench: PATH -->``: the tables of a JSON report of
# ``python -m l2o_scale.speed`` (its --json output), rows for the fields the
# report has.
BENCH = re.compile(r"^<!-- bench: (\S+) -->$", re.M)


def _get(report, *keys):
  for key in keys:
    if not isinstance(report, dict) or key not in report:
      return None
    report = report[key]
  return report


def _ms(seconds):
  return "—" if seconds is None else "{:.2f} ms".format(seconds * 1e3)


def _s(seconds):
  return "—" if seconds is None else "{:.2f} s".format(seconds)


def _x(ratio):
  return "—" if ratio is None else "{:.2f}x".format(ratio)


def _bench_tables(report):
  machine = report.get("machine", {})
  lines = ["Measured on {} ({} CPU cores, TensorFlow {}, Python {}), {}; "
           "load average {:.1f} at the start; {}.".format(
               machine.get("cpu", "?"), machine.get("cpu_count", "?"),
               machine.get("tensorflow", "?"), machine.get("python", "?"),
               str(machine.get("date", "?"))[:10],
               machine.get("load_average_1min_at_start") or 0.,
               report.get("statistic", "medians")), ""]
  speed = report.get("speedup_over_original", {})
  orig = report.get("original", {})
  rows = [
      ("20-step unroll + meta-update, no regularizer",
       _s(report.get("unroll_seconds_noreg")),
       _s(_get(orig, "meta_train_unroll_plain", "median_s")),
       _x(speed.get("unroll_noreg"))),
      ("the same, `--jit_compile`", _s(report.get("unroll_seconds_noreg_xla")),
       "", _x(speed.get("unroll_noreg_xla"))),
      ("20-step unroll + meta-update, `hessian-esd`",
       _s(report.get("unroll_seconds_hessian_esd")),
       _s(_get(orig, "meta_train_unroll_hessian_esd", "median_s")),
       _x(speed.get("unroll_hessian_esd"))),
      ("the same, `--jit_compile`",
       _s(report.get("unroll_seconds_hessian_esd_xla")), "",
       _x(speed.get("unroll_hessian_esd_xla"))),
      ("first call (build, compile, run), no regularizer",
       _s(_get(report, "unrolls", "noreg", "first_call_seconds")),
       _s(_get(orig, "meta_train_unroll_plain", "build_and_first_unroll_s")),
       _x(speed.get("first_call_noreg"))),
      ("first call, `hessian-esd`",
       _s(_get(report, "unrolls", "hessian_esd", "first_call_seconds")),
       _s(_get(orig, "meta_train_unroll_hessian_esd",
               "build_and_first_unroll_s")),
       _x(speed.get("first_call_hessian_esd"))),
      ("meta-test step of the learned optimizer, per call (no XLA)",
       _ms(report.get("l2o_step_seconds_no_xla")),
       _ms(_get(orig, "meta_test_step", "median_s")),
       _x(speed.get("meta_test_step"))),
      ("the unroll's floor: SGD in place of the learned optimizer",
       _s(_get(report, "unrolls", "sgd_floor", "median")), "", ""),
      ("one meta-iteration (5 unrolls with meta-updates)",
       _s(report.get("meta_iteration_seconds")), "", ""),
  ]
  lines += ["#### Against the original TF1 code (same run)", "",
            "| what | port | original | speed-up |", "|---|---|---|---|"]
  lines += ["| {} | {} | {} | {} |".format(*r) for r in rows
            if r[1] != "—"]
  rows = [
      ("learned step, XLA", _ms(report.get("l2o_step_seconds_xla"))),
      ("learned step, no XLA", _ms(report.get("l2o_step_seconds_no_xla"))),
      ("Keras Adam step, XLA", _ms(report.get("adam_step_seconds_xla"))),
      ("Keras Adam step, no XLA", _ms(report.get("adam_step_seconds_no_xla"))),
      ("**learned (XLA) / faster Adam**",
       "**{}**".format(_x(report.get("l2o_over_adam_ratio")))),
      ("lower bound (loss, gradients and the per-parameter GRU alone, XLA) "
       "/ faster Adam", _x(report.get("gru_core_over_adam_ratio"))),
      ("in the compiled meta-test loop: learned (XLA) / Adam",
       _x(report.get("loop_l2o_xla_over_adam_ratio"))),
      ("in the compiled meta-test loop: learned (XLA) / Adam (XLA)",
       _x(report.get("loop_l2o_xla_over_adam_xla_ratio"))),
  ]
  lines += ["", "#### Against Adam (same run)", "", "| what | per step |",
            "|---|---|"]
  lines += ["| {} | {} |".format(*r) for r in rows if r[1] != "—"]
  return "\n".join(lines) + "\n"


def _bench(match):
  path = os.path.join(ROOT, match.group(1))
  if not os.path.isfile(path):
    raise PluginError("bench: {} does not exist".format(match.group(1)))
  with open(path, encoding="utf-8") as f:
    return _bench_tables(json.load(f))


def on_page_markdown(markdown, page, config, files):
  return BENCH.sub(_bench, INCLUDE.sub(_included, markdown))
