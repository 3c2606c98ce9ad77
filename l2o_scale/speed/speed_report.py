"""The benchmark's report: machine, speed-ups against the original and
Adam, the JSON file and the table (see :mod:`l2o_scale.speed.command`)."""

import datetime
import json
import os
import platform
import subprocess

import tensorflow as tf

from l2o_scale.speed import timing as core

def machine_info():
  """What the numbers depend on: CPU, cores, TF, Python, commit."""
  cpu = platform.processor() or ""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  commit = None
  try:
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
        text=True, timeout=10, check=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", root, "status", "--porcelain"], capture_output=True,
        text=True, timeout=10, check=True).stdout.strip()
    if dirty:
      commit += " (with uncommitted changes)"
  except (OSError, subprocess.SubprocessError):
    pass
  try:
    load = os.getloadavg()[0]
  except OSError:
    load = None
  return {
      "cpu": cpu,
      "cpu_count": os.cpu_count(),
      "platform": platform.platform(),
      "python": platform.python_version(),
      "tensorflow": tf.__version__,
      "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
      "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
      "gpus": len(tf.config.list_physical_devices("GPU")),
      "load_average_1min_at_start": load,
      "git_commit": commit,
      "date": datetime.datetime.now().isoformat(timespec="seconds"),
  }


def _median(entry):
  return entry["median"] if entry and "median" in entry else None


def speedups(unrolls, l2o_step_no_xla, original):
  """Original seconds / port seconds for what both time the same way: the
  20-step unroll with its meta-update (plain and hessian-esd; the port also
  with ``--jit_compile``), the first call of each, and the per-call
  meta-test step (``sess.run`` with a feed dict vs. the compiled step
  without XLA)."""
  out = {}
  for ours, theirs in (("noreg", "meta_train_unroll_plain"),
                       ("hessian_esd", "meta_train_unroll_hessian_esd")):
    base = original.get(theirs) or {}
    if "median_s" not in base:
      continue
    for suffix in ("", "_xla"):
      entry = unrolls.get(ours + suffix)
      if entry and "median" in entry:
        out["unroll_" + ours + suffix] = base["median_s"] / entry["median"]
        out["first_call_" + ours + suffix] = (
            base["build_and_first_unroll_s"] / entry["first_call_seconds"])
  step = (original.get("meta_test_step") or {}).get("median_s")
  if step and l2o_step_no_xla:
    out["meta_test_step"] = step / l2o_step_no_xla
  return out


def run_original(script, python, data_dir=None):
  """Runs the original's ``time_original.py`` (../shared/original-tf1) on
  the MNIST folder ``data_dir`` (None: its own default) and returns its
  JSON, or {"error": ...}."""
  cmd = [python, script] + (["--data_dir", data_dir] if data_dir else [])
  try:
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
  except (OSError, subprocess.CalledProcessError, ValueError) as e:
    return {"error": "{}: {}".format(type(e).__name__, str(e)[:300])}


def make_report(steps, unrolls, info, quick=False, loop=None,
                meta_iteration=None, original=None):
  """The JSON report: headline medians at the top, details below.

  Headline: the learned step with XLA (without it if XLA failed or was not
  timed) against the faster of the Keras Adam steps.
  """
  report = _step_entries(steps)
  report.update(_unroll_entries(unrolls))
  report.update(_lower_bound_entries(steps, report["adam_step_seconds"]))
  if loop is not None:
    report.update(_loop_entries(loop))
  if meta_iteration is not None:
    report["meta_iteration_seconds"] = meta_iteration["median"]
    report["meta_iteration"] = meta_iteration
  if original is not None:
    report["original"] = original
    if "error" not in original:
      report["speedup_over_original"] = speedups(
          unrolls, report["l2o_step_seconds_no_xla"], original)
  report.update({
      "target_ratio": 2.0,
      "quick": bool(quick),
      "statistic": "median over repeats after warm-up; seconds per call",
      "steps": steps,
      "unrolls": unrolls,
      "machine": info,
  })
  return report


def _step_entries(steps):
  """The report's entries of (a): the learned and Adam steps and their
  ratios."""
  l2o_plain, l2o_xla = _median(steps.get("l2o")), _median(steps.get("l2o_xla"))
  adam_plain = _median(steps.get("adam"))
  adam_xla = _median(steps.get("adam_xla"))
  l2o = l2o_xla if l2o_xla is not None else l2o_plain
  adam = min(a for a in (adam_plain, adam_xla) if a is not None)
  report = {
      "l2o_step_seconds": l2o,
      "adam_step_seconds": adam,
      "l2o_over_adam_ratio": l2o / adam,
      "l2o_step_uses_xla": l2o_xla is not None,
      "l2o_step_seconds_no_xla": l2o_plain,
      "l2o_step_seconds_xla": l2o_xla,
      "adam_step_seconds_no_xla": adam_plain,
      "adam_step_seconds_xla": adam_xla,
      "l2o_no_xla_over_adam_ratio": l2o_plain / adam,
  }
  return report


def _lower_bound_entries(steps, adam):
  """The report's entries of the lower-bound step (against the ``adam``
  step's seconds) and of the XLA steps that failed."""
  report = {}
  gru_core = _median(steps.get("gru_core_xla"))
  if gru_core is not None:
    report["gru_core_step_seconds_xla"] = gru_core
    report["gru_core_over_adam_ratio"] = gru_core / adam
  for name in core.XLA_STEPS:
    if steps.get(name) and "error" in steps[name]:
      report[name + "_error"] = steps[name]["error"]
  return report


def _unroll_entries(unrolls):
  """The report's entries of (b): the unroll medians and the regularizer's
  cost."""
  return {
      "unroll_seconds_noreg": unrolls["noreg"]["median"],
      "unroll_seconds_hessian_esd": unrolls["hessian_esd"]["median"],
      "unroll_seconds_noreg_xla": _median(unrolls.get("noreg_xla")),
      "unroll_seconds_hessian_esd_xla": _median(unrolls.get("hessian_esd_xla")),
      "hessian_esd_over_noreg_ratio": (unrolls["hessian_esd"]["median"] /
                                       unrolls["noreg"]["median"]),
  }


def _loop_entries(loop):
  """The report's entries of the steps inside the compiled meta-test loop."""
  return {
      "loop_l2o_step_seconds": loop["l2o"],
      "loop_l2o_step_seconds_xla": loop["l2o_xla"],
      "loop_adam_step_seconds": loop["adam"],
      "loop_l2o_over_adam_ratio": loop["l2o"] / loop["adam"],
      "loop_l2o_xla_over_adam_ratio": loop["l2o_xla"] / loop["adam"],
      "loop_adam_step_seconds_xla": loop["adam_xla"],
      "loop_l2o_xla_over_adam_xla_ratio": loop["l2o_xla"] / loop["adam_xla"],
  }


STEP_ROWS = (
    ("l2o_xla", "learned step, XLA (HRNN, MLP 784-20-10, batch {})"),
    ("l2o", "learned step, no XLA"),
    ("adam_xla", "Keras Adam step, XLA (same MLP)"),
    ("adam", "Keras Adam step, no XLA"),
    ("gru_core_xla", "lower bound, XLA: loss+gradients + the GRU alone"))
UNROLL_ROWS = (
    ("sgd_floor", "unroll + meta-gradient, {} steps, SGD instead of the "
     "learned optimizer (floor)"),
    ("noreg", "unroll + meta-update, {} steps, no regularizer"),
    ("noreg_xla", "unroll + meta-update, {} steps, no regularizer, "
     "--jit_compile"),
    ("hessian_esd", "unroll + meta-update, {} steps, hessian-esd"),
    ("hessian_esd_xla", "unroll + meta-update, {} steps, hessian-esd, "
     "--jit_compile"))


def format_table(report):
  """Human-readable table of the headline numbers."""
  lines = _timing_table(report)
  lines.append("")
  lines.extend(_ratio_lines(report))
  m = report["machine"]
  lines.append("machine: {} ({} cores), TF {}, Python {}, load {}".format(
      m["cpu"], m["cpu_count"], m["tensorflow"], m["python"],
      m["load_average_1min_at_start"]))
  return "\n".join(lines)


def _timing_table(report):
  """Lines of the table of timings (median, min, first call) of the steps
  and unrolls the report holds."""
  rows = []
  for entries, labels, value in (
      (report["steps"], STEP_ROWS, report["steps"].get("batch_size")),
      (report["unrolls"], UNROLL_ROWS, report["unrolls"].get("unroll_length"))):
    for name, label in labels:
      entry = entries.get(name)
      if entry and "median" in entry:
        rows.append((label.format(value), entry["median"], entry["min"],
                     entry["first_call_seconds"]))
  width = max(len(r[0]) for r in rows)
  lines = ["{:<{w}}  {:>12}  {:>12}  {:>14}".format(
      "what", "median", "min", "first call", w=width)]
  lines.append("-" * len(lines[0]))
  for name, med, mn, first in rows:
    lines.append("{:<{w}}  {:>12}  {:>12}  {:>14}".format(
        name, _fmt_seconds(med), _fmt_seconds(mn), _fmt_seconds(first),
        w=width))
  return lines


def _ratio_lines(report):
  """Lines of the ratios: learned against Adam, in the meta-test loop, the
  regularizer's cost, the meta-iteration and the original code."""
  lines = [
      "learned{} / fastest Adam step: {:.2f}x (target <= {:.0f}x); learned "
      "without XLA: {:.2f}x".format(
          " (XLA)" if report["l2o_step_uses_xla"] else "",
          report["l2o_over_adam_ratio"], report["target_ratio"],
          report["l2o_no_xla_over_adam_ratio"])]
  if "gru_core_over_adam_ratio" in report:
    lines.append(
        "lower bound (the MLP's loss and gradients plus the per-parameter GRU "
        "alone, XLA) / fastest Adam step: {:.2f}x".format(
            report["gru_core_over_adam_ratio"]))
  for name in core.XLA_STEPS:
    if report.get(name + "_error"):
      lines.append("{} failed: {}".format(name, report[name + "_error"]))
  if "loop_l2o_step_seconds" in report:
    lines.append(
        "in the compiled meta-test loop (per step): learned {}, XLA {}; Adam "
        "{}, XLA {}; learned / Adam {:.2f}x, learned XLA / Adam {:.2f}x, "
        "both XLA {:.2f}x".format(
            _fmt_seconds(report["loop_l2o_step_seconds"]),
            _fmt_seconds(report["loop_l2o_step_seconds_xla"]),
            _fmt_seconds(report["loop_adam_step_seconds"]),
            _fmt_seconds(report["loop_adam_step_seconds_xla"]),
            report["loop_l2o_over_adam_ratio"],
            report["loop_l2o_xla_over_adam_ratio"],
            report["loop_l2o_xla_over_adam_xla_ratio"]))
  lines.append("hessian-esd / no regularizer unroll: {:.2f}x".format(
      report["hessian_esd_over_noreg_ratio"]))
  if "meta_iteration_seconds" in report:
    lines.append("one meta-iteration (5 unrolls of 20 steps with their "
                 "meta-updates, no evaluation): {}".format(
                     _fmt_seconds(report["meta_iteration_seconds"])))
  if "peak_memory_gib" in report.get("meta_iteration", {}):
    lines.append("peak resident memory of the benchmark after the "
                 "meta-iteration: {:.2f} GiB".format(
                     report["meta_iteration"]["peak_memory_gib"]))
  if report.get("speedup_over_original"):
    lines.append("original TF1 code, same run: " + ", ".join(
        "{} {:.2f}x".format(k, v)
        for k, v in sorted(report["speedup_over_original"].items())))
  elif report.get("original", {}).get("error"):
    lines.append("original TF1 code failed: " + report["original"]["error"])
  return lines


def _fmt_seconds(value):
  if value is None:
    return "-"
  if value < 1e-3:
    return "{:.1f} us".format(value * 1e6)
  if value < 1:
    return "{:.2f} ms".format(value * 1e3)
  return "{:.2f} s".format(value)


def write_json(path, report):
  """Writes the report (creating the folder)."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  with open(path, "w") as f:
    json.dump(report, f, indent=1)
    f.write("\n")


