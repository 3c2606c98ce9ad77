"""Tests of the reproduction pipeline (reproduce/all.sh,
reproduce/pipeline/): end to end, its refusals, and in-process its plan,
variants, problem list, progress and runner.

Why: the harness is how a reader checks the paper's claim; it must run end
to end from a clean clone (a reduced REPRO_TINY run here, ~1 minute),
resume without redoing finished stages, stop its stages when interrupted,
and refuse what it cannot run in one line before starting anything.
"""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from reproduce import plot
from reproduce.pipeline import cli as pipeline_cli
from reproduce.pipeline import plan as pipeline_plan
from reproduce.pipeline import problem_list as pipeline_problems
from reproduce.pipeline import progress as pipeline_progress
from reproduce.pipeline import runner as pipeline_runner
from reproduce.pipeline import sizes as pipeline_sizes
from reproduce.pipeline import variants as pipeline_variants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------- all.sh end to end
def _table_rows(path):
  rows = {}
  for line in open(path).read().splitlines():
    if line.startswith("| MNIST"):
      cells = [c.strip() for c in line.strip("|").split("|")]
      rows[cells[1]] = cells
  return rows


def _number(cell):
  return float(cell.split("±")[0])


def _progress(stdout):
  """(stage k, total, rest) of each "[done] NAME in S s (stage k/N; rest)"
  line."""
  return [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in
          re.finditer(r"^\[done\] \S+ in [0-9.]+ s \(stage (\d+)/(\d+); "
                      r"(.*)\)$", stdout, re.M)]


def test_all_sh_tiny_end_to_end_and_resume(tmp_path, data_dir):
  """REPRO_TINY: 1 meta-iteration, 1 seed, 20 test steps, one problem."""
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", L2O_SCALE_DATA_DIR=data_dir,
             PYTHON=sys.executable, REPRO_HEARTBEAT="1")
  env.pop("REPRO_QUICK", None)
  cmd = ["bash", os.path.join(ROOT, "reproduce", "all.sh"),
         "--out={}".format(out)]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "plan:" in proc.stdout and "offline MNIST" in proc.stdout
  # Progress: every finished stage counted once, in order, with an estimate
  # of the time left until the last; a line while meta-training runs (it
  # imports TensorFlow and compiles the unroll: seconds on any machine).
  progress = _progress(proc.stdout)
  assert [k for k, _, _ in progress] == list(range(1, 6)), proc.stdout
  assert all(n == 5 for _, n, _ in progress)
  assert all(re.fullmatch(r"about \d+ (s|min) left", rest)
             for _, _, rest in progress[:-1]), progress
  assert progress[-1][2] == "all done"
  assert re.search(r"^\[\.\.\. \] train-l2o-scale running for \d+ s: ",
                   proc.stdout, re.M), proc.stdout
  # results.md states the run: its settings and this invocation.
  results = (out / "figures" / "results.md").read_text()
  assert "| meta-test steps | 20 |" in results
  assert "| wall time, end to end |" in results and ": 5 stages in " in results
  invocations = (out / "invocations.tsv").read_text().splitlines()
  assert len(invocations) == 1 and invocations[0].split("\t")[2] == "5"
  # The last line names every figure and table; no table on the terminal.
  figures = out / "figures"
  written = sorted(p.name for p in figures.iterdir()
                   if p.name != "outputs.json")
  last = proc.stdout.rstrip("\n").splitlines()[-1]
  assert last.startswith("outputs in {}: ".format(figures)), last
  assert sorted(last.split(": ", 1)[1].split(", ")) == written
  assert len(written) == 9 and "| MNIST" not in proc.stdout
  # The meta-training table, from the run's own events file.
  assert "| L2O-Scale (no reg.) | 1 | evaluation cost |" in results
  assert (figures / "loss_curves.png").stat().st_size > 1000
  assert (figures / "loss_curves.pdf").stat().st_size > 1000
  rows = _table_rows(figures / "results.md")
  for label in ("L2O-Scale (no reg.)", "SGD (lr 1e-3)", "Adam (lr 1e-4)",
                "Adagrad (lr 1e-5)"):
    assert label in rows, rows
    loss, split, acc = (_number(rows[label][4]), _number(rows[label][5]),
                        _number(rows[label][6]))
    assert math.isfinite(loss) and loss > 0
    assert math.isfinite(split) and split > 0
    assert math.isfinite(acc) and 0 <= acc <= 1
  # Resumable: a second run redoes nothing.
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "[run ]" not in proc.stdout
  assert proc.stdout.count("[skip]") == 6  # the plot too
  assert "stages: 5 (5 done earlier)" in proc.stdout
  assert len((out / "invocations.tsv").read_text().splitlines()) == 1
  # Other settings into the same folder are refused.
  env["REPRO_QUICK"], env["REPRO_TINY"] = "1", "0"
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode != 0
  assert "holds results of other settings" in proc.stderr


def test_all_sh_interrupted_stops_its_stages(tmp_path, data_dir):
  """A kill (as Ctrl-C) of all.sh stops the stages it runs in the
  background, says how to continue, and leaves no stage marked done that
  did not finish."""
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", L2O_SCALE_DATA_DIR=data_dir,
             PYTHON=sys.executable)
  env.pop("REPRO_QUICK", None)
  proc = subprocess.Popen(
      ["bash", os.path.join(ROOT, "reproduce", "all.sh"),
       "--out={}".format(out)], env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    for line in proc.stdout:
      if line.startswith("[run ] train-"):
        break
    pids = []
    for _ in range(100):  # the pid files of both stages that started
      pids = [int(p.read_text()) for p in (out / ".running").glob("*.pid")
              if p.read_text().strip()]
      if len(pids) == 2:
        break
      time.sleep(0.1)
    assert pids
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 130, err
  assert "interrupted" in err and "run the same command again" in err
  for pid in pids:
    for _ in range(100):
      if not _alive(pid):
        break
      time.sleep(0.1)
    assert not _alive(pid), "stage process {} still runs".format(pid)
  assert not (out / ".stages" / "train-l2o-scale.done").exists()


def _alive(pid):
  try:
    with open("/proc/{}/stat".format(pid)) as f:
      return f.read().split(")")[-1].split()[0] != "Z"
  except OSError:
    return False


def test_all_sh_pretrained_size_knows_every_shipped_optimizer(tmp_path):
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, REPRO_PRETRAINED="1", PYTHON=sys.executable,
             REPRO_VARIANTS="l2o-entropy-reg hess-1e-4")
  env.pop("REPRO_TINY", None)
  proc = subprocess.run(["bash", os.path.join(ROOT, "reproduce", "all.sh"),
                         "--out={}".format(tmp_path / "repro")], env=env,
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip() == (
      "all.sh: REPRO_VARIANTS names hess-1e-4, which is not shipped "
      "(shipped: {})".format(" ".join(pretrained.names())))


@pytest.mark.parametrize("setting,message", [
    ({"REPRO_PROBLEMS": "mnist-mlp-sigmoid mnist-conv"},
     "all.sh: REPRO_PROBLEMS names mnist-conv, which is not a problem of the "
     "tiny size (its problems: mnist-mlp-sigmoid)"),
    ({"REPRO_VARIANTS": "l2o-scale hess-x"},
     "all.sh: REPRO_VARIANTS names hess-x, which is no known variant")])
def test_all_sh_refuses_a_subset_outside_its_size(tmp_path, setting, message):
  out = tmp_path / "repro"
  env = dict(os.environ, REPRO_TINY="1", PYTHON=sys.executable, **setting)
  proc = subprocess.run(["bash", os.path.join(ROOT, "reproduce", "all.sh"),
                         "--out={}".format(out)], env=env,
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2 and proc.stderr.startswith(message), (
      proc.stderr)
  assert not (out / "config.txt").exists()  # nothing started


# ------------------------------------------------- the pipeline, in-process
_SETTINGS = pipeline_plan.Settings(python="python", out="/o", root="/r",
                                   data_dir="/d")


def _flag(argv, name):
  values = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
  assert len(values) == 1, (name, argv)
  return values[0]


def test_quick_plan_is_sizes_times_variants_times_problems():
  """The quick size: 4 meta-trainings, 3 baselines and 4 learned optimizers
  on each of 4 problems, the plot last, after all; each learned test after
  the training that writes the train dir it reads, and after it in order."""
  size = pipeline_sizes.SIZES["quick"]
  stages = pipeline_plan.build(size, _SETTINGS, ["python", "plot.py"])
  names = [s.name for s in stages]
  assert len(names) == len(set(names)) == 4 + 4 * 3 + 4 * 4 + 1
  assert names[-1] == "plot" and set(stages[-1].after) == set(names[:-1])
  trains = {_flag(s.argv, "--train_dir"): s for s in stages
            if s.name.startswith("train-")}
  assert all(s.after == () for s in trains.values())
  learned = [s for s in stages if "--test_optimizer=L2o" in s.argv]
  assert len(learned) == 16
  for s in learned:
    train = trains[_flag(s.argv, "--train_dir")]
    assert s.after == (train.name,)
    assert names.index(train.name) < names.index(s.name)
  # The commands all.sh ran before the pipeline (from its logs).
  assert " ".join(next(s for s in stages if s.name ==
                       "train-l2o-entropy-reg-cl-mt").argv) == (
      "python metarun.py --train_dir=/o/train/l2o-entropy-reg-cl-mt "
      "--num_meta_iterations=3 --fix_unroll=True --fix_unroll_length=20 "
      "--fix_num_steps=40 --fix_num_steps_eval=40 --evaluation_epochs=1 "
      "--evaluation_period=1 --meta_learning_rate=1e-3 --seed=1 "
      "--reg_optimizer=True --reg_option=hessian-esd --alpha=1e-4 "
      "--regularize_time=always --if_cl=True --if_mt=True --mt_ratio=0.1 "
      "--mt_k=1 --data_dir=/d")
  assert " ".join(next(s for s in stages if s.name ==
                       "test-mnist-conv-Adam").argv) == (
      "python metatest.py --test_optimizer=Adam --model_name=Adam "
      "--include_mnist_conv_problems --num_testing_itrs=100 "
      "--save_dir=/o/test/mnist-conv --seeds=6,12,18 --heldout_every=50 "
      "--progress_every=1000000 --overwrite --jit_compile=False --data_dir=/d")
  assert size.config_line("/d") == (
      "size=quick meta_iters=3 meta_lr=1e-3 recipe= fix_num_steps=40 "
      "fix_num_steps_eval=40 evaluation_epochs=1 test_steps=300 "
      "test_steps_conv=100 seeds=6,12,18 heldout_every=50 train_seed=1 "
      "data_dir=/d")


def test_full_plan_conv_subset_paper_schedule_and_tuned_baselines():
  size = pipeline_sizes.select({"REPRO_RECIPE": "stable"})
  assert size.name == "full" and size.recipe == "stable"
  stages = {s.name: s for s in pipeline_plan.build(size, _SETTINGS, ["p"])}
  paper = stages["train-l2o-entropy-paper-cmd.t1"].argv
  assert "--meta_learning_rate=1e-6" in paper and "--recipe=stable" not in paper
  assert _flag(stages["train-hess-1e-2.t3"].argv, "--seed") == "3"
  assert _flag(stages["train-hess-1e-2.t3"].argv, "--alpha") == "1e-2"
  conv = [n for n in stages if n.startswith("test-mnist-conv-")]
  assert "test-mnist-conv-hess-1e-2.t1" in conv
  assert "test-mnist-conv-hess-1e-2.t2" not in conv
  tuned = stages["test-mnist-mlp-relu-SGD-lr0.3"].argv
  assert "--test_optimizer=SGD" in tuned
  assert "--baseline_learning_rate=0.3" in tuned
  assert _flag(tuned, "--flatness_probes") == "10"
  assert not any(a.startswith("--flatness_probes")
                 for a in stages["test-mnist-conv-SGD"].argv)


def test_a_new_variant_is_one_registry_entry(monkeypatch):
  """An entry in VARIANTS is trained with its flags, accepted by
  REPRO_VARIANTS, and drawn with its own label and look."""
  from reproduce import styles  # pylint: disable=g-import-not-at-top
  new = pipeline_variants.Variant(
      "l2o-entropy-jacob", ("--reg_optimizer=True", "--reg_option=jacob"),
      "Jacobian test variant", "jacob", "#123456", "X", 3)
  monkeypatch.setitem(pipeline_variants.VARIANTS, new.name, new)
  size = pipeline_cli.choose(pipeline_sizes.SIZES["quick"],
                             {"REPRO_VARIANTS": "l2o-entropy-jacob.t2"})
  stages = {s.name: s for s in pipeline_plan.build(size, _SETTINGS, ["p"])}
  argv = stages["train-l2o-entropy-jacob.t2"].argv
  assert argv[-3:] == ("--reg_optimizer=True", "--reg_option=jacob",
                       "--data_dir=/d") and "--seed=2" in argv
  assert "test-mnist-conv-l2o-entropy-jacob.t2" in stages
  assert styles.label("l2o-entropy-jacob.t2") == "Jacobian test variant"
  assert styles.style("l2o-entropy-jacob")["color"] == "#123456"
  assert styles.ordered(["l2o-entropy-reg-cl-mt", "l2o-entropy-jacob", "SGD",
                         "l2o-scale"]) == [
                             "l2o-scale", "l2o-entropy-jacob",
                             "l2o-entropy-reg-cl-mt", "SGD"]


def test_variant_names_and_families():
  assert pipeline_variants.lookup("hess-1e-3.t2").flags == (
      "--reg_optimizer=True", "--reg_option=hessian-esd", "--alpha=1e-3",
      "--regularize_time=always")
  assert pipeline_variants.lookup("jacob-2.5e-4").flags[2] == "--alpha=2.5e-4"
  for bad in ("hess-x", "hess-1e-4.t", "l2o", "SGD", "jacob-"):
    assert pipeline_variants.lookup(bad) is None, bad
  with pytest.raises(pipeline_cli.Refused, match="no known variant"):
    pipeline_cli.choose(pipeline_sizes.SIZES["tiny"],
                        {"REPRO_VARIANTS": "l2o-scale hess-x"})
  looks = {(v.label, v.color, v.marker)
           for v in pipeline_variants.VARIANTS.values()}
  assert len(looks) == len(pipeline_variants.VARIANTS)


def test_problem_list_is_the_one_plot_and_plan_read():
  assert list(plot.PROBLEM_LABELS) == list(pipeline_problems.PROBLEMS)
  assert pipeline_sizes.SIZES["full"].problems == pipeline_problems.names()


def test_stage_kinds_for_the_estimate():
  kind = lambda n: pipeline_plan.kind_of(n, ["mnist-conv"], ["SGD"])
  assert kind("train-l2o-entropy-reg-cl-mt.t2") == "train-cl"
  assert kind("train-hess-1e-2.t1") == "train"
  assert kind("test-mnist-conv-SGD") == "test-mnist-conv-baseline"
  assert kind("test-mnist-conv-l2o-scale") == "test-mnist-conv-learned"
  assert kind("plot") == "plot"


def test_estimate_of_the_time_left():
  """Mean of the same kind, else of the family, else of all; divided by
  the stages run side by side (or by those left, when fewer)."""
  left = pipeline_progress.remaining_seconds
  finished = [("train", 100.), ("train", 200.), ("test-p-baseline", 10.)]
  # 150 (train) + 150 (train-cl: family train) + 10 + 10 (test family)
  assert left(["train", "train-cl", "test-p-baseline", "test-q-learned"],
              finished, jobs=2) == 160
  assert left(["plot"], finished, jobs=2) == round(310 / 3)
  assert left(["train"], finished, jobs=4) == 150  # fewer left than jobs
  assert left(["train"], [], jobs=2) is None
  text = pipeline_progress.progress_text
  assert text(3, 5, 160) == "stage 3/5; about 3 min left"
  assert text(5, 5, None) == "stage 5/5; all done"
  assert text(1, 5, None) == "stage 1/5"
  fmt = pipeline_progress.format_seconds
  assert [fmt(s) for s in (89, 90, 5399, 5400, 7290)] == [
      "89 s", "2 min", "90 min", "1 h 30 min", "2 h 02 min"]


def _fake_stages(tmp_path, spec):
  """Cheap stages: each appends its name to ran.txt, then exits with the
  given status."""
  ran = tmp_path / "ran.txt"
  return [pipeline_plan.Stage(name, ("sh", "-c", "echo {n} >> {f}; sleep "
                                     "0.2; exit {c}".format(n=name, f=ran,
                                                            c=code)),
                              kind) for name, kind, code in spec], ran


def _runner(tmp_path, stages, jobs=2):
  lines = []
  run = pipeline_runner.Runner(str(tmp_path / "out"), str(tmp_path), stages,
                               lambda n: n.split("-")[0], jobs=jobs,
                               heartbeat=1000, say=lines.append, poll=0.05)
  return run, lines


def test_runner_resumes_by_skipping_finished_stages(tmp_path):
  stages, ran = _fake_stages(tmp_path, [("train-a", "train", 0),
                                        ("test-b", "test", 0),
                                        ("test-c", "test", 0)])
  run, lines = _runner(tmp_path, stages)
  assert run.run(stages)
  assert sorted(ran.read_text().split()) == ["test-b", "test-c", "train-a"]
  record = json.loads((tmp_path / "out" / ".stages" /
                       "test-b.done").read_text())
  assert record["argv"] == list(stages[1].argv) and record["seconds"] > 0
  assert [l.split()[-1] for l in lines if l.startswith("[done]")][-1] == (
      "done)")
  assert len(open(run.times).read().splitlines()) == 3
  os.remove(run.marker("test-c"))  # a deleted marker redoes its stage
  run, lines = _runner(tmp_path, stages)
  assert run.run(stages)
  assert ran.read_text().split().count("test-c") == 2
  assert ran.read_text().split().count("train-a") == 1
  assert lines[:2] == ["[skip] train-a (done earlier)",
                       "[skip] test-b (done earlier)"]
  assert lines[-1].startswith("[done] test-c in ") and lines[-1].endswith(
      "(stage 3/3; all done)")


def test_markers_name_the_interpreter_as_python_wherever_it_lives(
    tmp_path):
  """An interpreter of a virtual environment inside the repository or
  beside it runs every stage, and no stage's command or marker holds its
  path (the repository keeps the study's markers)."""
  for python in (os.path.join(ROOT, ".venv", "bin", "python"),
                 os.path.join(os.path.dirname(ROOT), "venv", "bin",
                              "python")):
    settings = pipeline_plan.Settings(python=python, out=os.path.join(
        ROOT, "reproduce", "out", "x"), root=ROOT, data_dir="../d")
    stages = pipeline_plan.build(
        pipeline_sizes.SIZES["study"], settings,
        pipeline_cli.plot_argv(pipeline_sizes.SIZES["study"], settings, "d"))
    assert {s.argv[0] for s in stages} == {"python"}
    assert not any(python in a for s in stages for a in s.argv)
  stage = pipeline_plan.Stage("test-a", ("python", "-c",
                                         "import sys; print(sys.executable)"),
                              "test")
  lines = []
  run = pipeline_runner.Runner(str(tmp_path / "out"), str(tmp_path), [stage],
                               lambda n: "test", heartbeat=1000,
                               say=lines.append, poll=0.05,
                               python=sys.executable)
  assert run.run([stage])
  record = json.loads(open(run.marker("test-a")).read())
  assert record["argv"] == list(stage.argv)
  log = open(os.path.join(run.logs, "test-a.log")).read().splitlines()
  assert log[0].startswith("+ " + sys.executable + " -c ")
  assert log[1] == sys.executable


def test_runner_keeps_the_others_after_a_failure_and_limits_jobs(
    tmp_path, monkeypatch):
  stages, ran = _fake_stages(tmp_path, [(n, "test", 1 if n == "b" else 0)
                                        for n in "abcde"])
  run, _ = _runner(tmp_path, stages, jobs=2)
  most = []
  start = run._start  # pylint: disable=protected-access
  def counting_start(stage):
    start(stage)
    most.append(len(run.running))
  monkeypatch.setattr(run, "_start", counting_start)
  assert not run.run(stages)
  assert sorted(ran.read_text().split()) == list("abcde")
  assert max(most) == 2
  assert not run.done("b") and all(run.done(n) for n in "acde")
  assert not os.listdir(run.running_dir)


@pytest.mark.parametrize("value", ["0", "x", "-2", "1.5"])
def test_bad_job_counts_are_refused_in_one_line(value):
  with pytest.raises(pipeline_cli.Refused, match="REPRO_JOBS={} is no whole "
                     "number of at least 1".format(re.escape(value))):
    pipeline_cli.positive_int({"REPRO_JOBS": value}, "REPRO_JOBS", 2)
  assert pipeline_cli.positive_int({}, "REPRO_JOBS", 2) == 2
