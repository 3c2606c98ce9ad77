"""Tests of the reproduction's sizes (reproduce/pipeline/sizes.py) and of the
flatness study's path through the pipeline.

Why: a size is what a reader runs to check a result; its documented row,
its definition and the committed results it claims to regenerate must
agree. The flatness study (docs/flatness-study.md) runs over several
sittings and fresh clones, so its stages must resume per optimizer from
what the repository keeps, wherever the repository lies.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

from reproduce.pipeline import cli
from reproduce.pipeline import plan
from reproduce.pipeline import runner
from reproduce.pipeline import sizes
from reproduce.pipeline import variants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEDIUM = os.path.join(ROOT, "reproduce", "results", "medium")
STUDY = os.path.join(ROOT, "reproduce", "results", "study")


@pytest.fixture(autouse=True)
def _sigterm_kept():
  """cli.main turns SIGTERM into an interruption; the test process's own
  handler comes back after each test."""
  handler = signal.getsignal(signal.SIGTERM)
  yield
  signal.signal(signal.SIGTERM, handler)


def _flag(argv, name):
  values = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
  assert len(values) == 1, (name, argv)
  return values[0]


def _stages(size, root="/r", out=None, data_dir="d"):
  settings = plan.Settings("python", out or os.path.join(root, "o"), root,
                           data_dir)
  return {s.name: s for s in plan.build(size, settings, ["p"])}


# ------------------------------------------------------------ the docs
@pytest.mark.parametrize("name", ["quick", "medium", "study", "full"])
def test_each_documented_size_is_its_definition(name):
  """The Sizes table of docs/reproduction.md holds each size's row as the
  size's definition renders it."""
  size = sizes.SIZES[name]
  with open(os.path.join(ROOT, "docs", "reproduction.md")) as f:
    rows = [l.rstrip("\n") for l in f if l.startswith(
        "| `{}=1` |".format(size.env) if size.env else "| full (default) |")]
  assert rows == [sizes.doc_row(size)], (
      "docs/reproduction.md's row of the {} size differs from its "
      "definition; the row is:\n{}".format(name, sizes.doc_row(size)))


def test_documented_rows_state_what_the_definitions_run():
  """The rows say what the stages run (independent of the renderer)."""
  medium = sizes.doc_row(sizes.SIZES["medium"])
  assert "24 optimizers" in medium and "`stable` recipe" in medium
  assert "30 meta-iterations" in medium and "training seeds 1-3" in medium
  study = sizes.doc_row(sizes.SIZES["study"])
  assert "48 optimizers" in study and "training seeds 1-8" in study
  assert "[flatness study](flatness-study.md)" in study
  full = sizes.doc_row(sizes.SIZES["full"])
  assert "this project's protocol" in full and "paper's settings" not in full
  assert "`l2o-entropy-paper-cmd`, regularizer off" in full


# ------------------------------------------------------------ medium
def test_medium_regenerates_the_committed_configuration():
  """REPRO_MEDIUM=1 writes the committed config line (but for where the
  data lie) and runs the stages the committed timings.tsv records."""
  size = sizes.select({"REPRO_MEDIUM": "1"})
  with open(os.path.join(MEDIUM, "config.txt")) as f:
    committed = f.read().rstrip("\n")
  strip = lambda line: re.sub(r" data_dir=\S*$", "", line)
  assert strip(size.config_line("d")) == strip(committed)
  with open(os.path.join(MEDIUM, "timings.tsv")) as f:
    ran = {line.split("\t")[0] for line in f} - {"plot"}
  assert set(_stages(size)) - {"plot"} == ran


def test_the_medium_size_trains_with_the_stable_recipe():
  size = sizes.SIZES["medium"]
  argv = _stages(size)["train-hess-1e-3.t2"].argv
  assert "--recipe=stable" in argv and "--num_meta_iterations=30" in argv
  assert _flag(argv, "--seed") == "2" and _flag(argv, "--alpha") == "1e-3"
  assert size.resolved_flags()["meta_learning_rate"] == "3e-3"


# ------------------------------------------------------------ settings
def test_meta_iterations_are_a_setting():
  size = sizes.select({"REPRO_MEDIUM": "1", "REPRO_META_ITERS": "5"})
  argv = _stages(size)["train-l2o-scale.t1"].argv
  assert _flag(argv, "--num_meta_iterations") == "5"
  assert " meta_iters=5 " in size.config_line("d")
  tiny = sizes.select({"REPRO_TINY": "1", "REPRO_META_ITERS": "2"})
  assert _flag(_stages(tiny)["train-l2o-scale"].argv,
               "--num_meta_iterations") == "2"
  full = sizes.select({"REPRO_META_ITERS": "5"})  # the long recipe's period
  paper = _stages(full)["train-l2o-entropy-paper-cmd.t1"].argv
  assert _flag(paper, "--num_meta_iterations") == "100"  # its own schedule


@pytest.mark.parametrize("env, message", [
    ({"REPRO_META_ITERS": "0"}, "REPRO_META_ITERS=0 is no whole number"),
    ({"REPRO_META_ITERS": "3.5"}, "REPRO_META_ITERS=3.5 is no whole number"),
    ({"REPRO_STUDY": "1", "REPRO_META_ITERS": "1"},
     "REPRO_META_ITERS=1 is below the evaluation period of the study size "
     "(2): no checkpoint would be evaluated and chosen; give at least 2"),
    ({"REPRO_MEDIUM": "1", "REPRO_STUDY": "1"},
     "REPRO_MEDIUM=1 and REPRO_STUDY=1 are set: choose one size")])
def test_bad_size_settings_are_refused_in_one_line(env, message, tmp_path,
                                                   capsys):
  status = cli.main(["--out={}".format(tmp_path / "o")],
                    dict(env, PYTHON=sys.executable))
  assert status == 2
  err = capsys.readouterr().err
  assert err.startswith("all.sh: " + message) and err.count("\n") == 1
  assert not (tmp_path / "o").exists()


def test_help_lists_every_size_and_setting(capsys):
  with pytest.raises(SystemExit):
    cli.parse_args(["--help"], {})
  text = capsys.readouterr().out
  for name in ("REPRO_STUDY=1", "REPRO_MEDIUM=1", "REPRO_META_ITERS",
               "REPRO_QUICK=1", "REPRO_TINY=1", "REPRO_PRETRAINED=1"):
    assert name in text, name
  assert "this project's protocol" in text


# ------------------------------------------------------------ the study
def test_the_study_is_its_protocol():
  """docs/flatness-study.md: 6 arms x training seeds 1-8, seed by seed;
  the stable recipe with the validation selection; 10,000 steps on the
  sigmoid and deeper MLPs, test seeds 6, 12, 18, flatness; no baselines."""
  size = sizes.select({"REPRO_STUDY": "1"})
  arms = ("l2o-scale", "hess-5pct-always", "hess-5pct-posterior",
          "hess-25pct-always", "hess-25pct-posterior", "reg-cl-mt")
  assert size.variants == tuple("{}.t{}".format(a, s) for s in range(1, 9)
                                for a in arms)
  assert size.problems == ("mnist-mlp-sigmoid", "mnist-mlp-deeper")
  assert size.baselines == ()
  stages = _stages(size)
  assert len(stages) == 48 * 3 + 1
  train = stages["train-reg-cl-mt.t8"].argv
  assert train[train.index("--recipe=stable"):train.index("--seed=8")] == (
      "--recipe=stable", "--num_meta_iterations=30", "--selection=robust",
      "--selection_objective=validation")
  for flag in ("--if_cl=True", "--if_mt=True", "--mt_ratio=0.1", "--mt_k=1",
               "--regularize_time=always",
               "--alpha=" + sizes.STUDY_ALPHAS["5pct", "always"]):
    assert flag in train, flag
  test = stages["test-mnist-mlp-deeper-hess-25pct-posterior.t3"].argv
  assert (_flag(test, "--num_testing_itrs"), _flag(test, "--seeds"),
          _flag(test, "--heldout_every"), _flag(test, "--flatness_probes"),
          _flag(test, "--restore_model_name")) == (
              "10000", "6,12,18", "500", "10", "model.ckpt-0")
  assert size.out == "reproduce/results/study/runs"
  lines = cli.plan_lines(size, plan.Settings("python", "/o", "/r"), 2)
  assert ("--selection=robust --selection_objective=validation" in
          "\n".join(lines))
  placeholders = [l for l in lines if "PLACEHOLDERS" in l]
  assert len(placeholders) == (0 if sizes.STUDY_ALPHAS_CALIBRATED else 1)


@pytest.mark.parametrize("arm, share, when", [
    ("hess-5pct-always", "5pct", "always"),
    ("hess-5pct-posterior", "5pct", "posterior"),
    ("hess-25pct-always", "25pct", "always"),
    ("hess-25pct-posterior", "25pct", "posterior")])
def test_the_arms_read_their_alpha_from_one_place(arm, share, when):
  flags = variants.lookup(arm + ".t4").flags
  assert flags == ("--reg_optimizer=True", "--reg_option=hessian-esd",
                   "--alpha=" + sizes.STUDY_ALPHAS[share, when],
                   "--regularize_time=" + when)
  assert (sizes.STUDY_ALPHAS["5pct", when] !=
          sizes.STUDY_ALPHAS["25pct", when])


def test_the_study_alphas_are_the_calibrated_ones():
  """sizes.STUDY_ALPHAS are calibration.json's alphas (per target share and
  --regularize_time) to two significant digits, and each is the target
  share over the measured median share per unit alpha."""
  assert sizes.STUDY_ALPHAS_CALIBRATED
  with open(os.path.join(STUDY, "calibration.json")) as f:
    calibrations = json.load(f)["calibrations"]
  measured = {}
  for c in calibrations:
    when = re.search(r"--regularize_time=(\w+)", c["command"]).group(1)
    assert "--reg_option=hessian-esd" in c["command"]
    for target, alpha in c["alphas"].items():
      assert alpha == pytest.approx(float(target) / c["median_ratio"],
                                    rel=1e-9)
      measured["{:d}pct".format(round(100 * float(target))), when] = alpha
  assert set(measured) == set(sizes.STUDY_ALPHAS)
  for key, alpha in measured.items():
    assert float(sizes.STUDY_ALPHAS[key]) == pytest.approx(alpha, rel=0.02)


def test_the_study_stages_are_the_same_wherever_the_repository_lies():
  """Commands (and so the stage markers) and the config line name paths
  relative to the repository root: a moved clone resumes."""
  size = sizes.SIZES["study"]
  def everything(root):
    out = os.path.join(root, sizes.STUDY_OUT)
    data = os.path.relpath(os.path.join(os.path.dirname(root), "shared"),
                           root)
    return ([s.argv for s in _stages(size, root, out, data).values()],
            size.config_line(data))
  here, there = everything("/a/main"), everything("/b/c/clone")
  assert here == there
  assert "--train_dir=reproduce/results/study/runs/train/l2o-scale.t1" in \
      here[0][0]


def test_a_test_starts_when_its_own_training_is_done(tmp_path):
  """Per-stage dependencies: train-b cannot finish before test-a has run,
  so a barrier after every training would never end (it times out)."""
  flag = tmp_path / "test-a-ran"
  ran = tmp_path / "ran.txt"
  def stage(name, script, after=()):
    return plan.Stage(name, ("sh", "-c", "echo {} >> {}; {}".format(
        name, ran, script)), name.split("-")[0], after)
  wait = "for i in $(seq 100); do [ -f {} ] && exit 0; sleep 0.1; done; " \
         "exit 1".format(flag)
  stages = [stage("train-a", "true"),
            stage("train-b", wait),
            stage("test-a", "touch {}".format(flag), ("train-a",)),
            stage("test-b", "true", ("train-b",))]
  lines = []
  run = runner.Runner(str(tmp_path / "out"), str(tmp_path), stages,
                      lambda n: n.split("-")[0], jobs=2, heartbeat=1000,
                      say=lines.append, poll=0.05)
  assert run.run(stages), lines
  order = ran.read_text().split()
  assert order.index("test-a") < order.index("test-b")
  assert all(run.done(s.name) for s in stages)


def test_a_failed_training_skips_only_its_own_tests(tmp_path):
  ran = tmp_path / "ran.txt"
  def stage(name, code, after=()):
    return plan.Stage(name, ("sh", "-c", "echo {} >> {}; exit {}".format(
        name, ran, code)), name.split("-")[0], after)
  stages = [stage("train-a", 1), stage("test-a", 0, ("train-a",)),
            stage("train-b", 0), stage("test-b", 0, ("train-b",))]
  lines = []
  run = runner.Runner(str(tmp_path / "out"), str(tmp_path), stages,
                      lambda n: n.split("-")[0], jobs=1, heartbeat=1000,
                      say=lines.append, poll=0.05)
  assert not run.run(stages)
  assert ran.read_text().split() == ["train-a", "train-b", "test-b"]
  assert "[skip] test-a (needs train-a, which failed)" in lines


def test_a_meta_training_carried_unfinished_by_a_commit_starts_over(
    tmp_path):
  """A train dir holding only what the study's .gitignore keeps, without
  its stage marker (committed while it ran), is deleted before the run,
  so metarun starts it over instead of refusing a checkpoint without a
  state file; anything else is left alone."""
  def train_dir(name, files):
    for f in files:
      path = tmp_path / "out" / "train" / name / f
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text("x")
    return str(tmp_path / "out" / "train" / name)
  kept = ["sub/model.ckpt-0.index", "sub/model.ckpt-0.data-00000-of-00001",
          "sub/run_record.json", "sub/meta_training_events.jsonl"]
  carried = train_dir("a.t1", kept)
  finished = train_dir("b.t1", kept)
  resumable = train_dir("c.t1", kept + ["sub/checkpoint"])
  odd = train_dir("d.t1", ["run_record.json"])
  stages = [plan.Stage("train-" + os.path.basename(d),
                       ("python", "metarun.py", "--train_dir=" + d), "train")
            for d in (carried, finished, resumable, odd)]
  run = runner.Runner(str(tmp_path / "out"), str(tmp_path), stages,
                      lambda n: n, say=lambda _: None)
  with open(run.marker("train-b.t1"), "w") as f:
    f.write("{}")
  said = []
  cli.start_over_carried(stages, run, said.append)
  assert not os.path.exists(carried)
  assert all(os.path.isdir(d) for d in (finished, resumable, odd))
  assert len(said) == 1 and said[0].startswith("[new ] train-a.t1: ")
  assert not cli.carried_only(str(tmp_path / "nothing"))


def _ignored(paths):
  """Which of ``paths`` (relative to the repository root) git ignores."""
  proc = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"],
                        cwd=ROOT, input="\n".join(paths) + "\n",
                        capture_output=True, text=True, check=False)
  assert proc.returncode in (0, 1), proc.stderr
  return set(proc.stdout.split())


def test_study_end_to_end_resumes_from_what_the_repository_keeps(
    data_dir, monkeypatch, capsys):
  """A tiny version of the study (1 meta-iteration, 20 test steps, two
  arms, one seed, one problem) into a folder inside the repository: its
  markers and config name no absolute path; after the files that
  reproduce/results/study/.gitignore leaves out are deleted (a fresh
  clone), a meta-test whose marker is gone reruns from what is kept, and
  nothing else runs."""
  study = sizes.SIZES["study"]
  tiny = dataclasses.replace(
      study, meta_iters=1, test_steps=20, heldout_every=10, seeds="6",
      flatness=0, problems=("mnist-mlp-sigmoid",),
      variants=("l2o-scale.t1", "hess-25pct-posterior.t1"),
      extra_flags=study.extra_flags + (
          "--fix_num_steps=20", "--fix_num_steps_eval=20",
          "--evaluation_period=1", "--selection_steps=20"))
  monkeypatch.setitem(sizes.SIZES, "study", tiny)
  # Inside the repository (reproduce/out/ is ignored), as the study's own.
  out = os.path.join(ROOT, "reproduce", "out", "test-study-" +
                     uuid.uuid4().hex[:8])
  env = dict(os.environ, REPRO_STUDY="1", PYTHON=sys.executable,
             L2O_SCALE_DATA_DIR=data_dir, REPRO_HEARTBEAT="600")
  for key in sizes.SIZE_SWITCHES:
    if key != "REPRO_STUDY":
      env.pop(key, None)
  try:
    assert cli.main(["--out=" + out], env) == 0, capsys.readouterr()
    first = capsys.readouterr().out
    files = [os.path.relpath(os.path.join(d, n), out)
             for d, _, names in os.walk(out) for n in names]
    for name in files:
      if name.startswith((".stages", "config.txt")):
        with open(os.path.join(out, name)) as f:
          text = f.read()
        assert ROOT not in text and os.path.dirname(ROOT) not in text, name
    # A fresh clone: only what the study's .gitignore keeps.
    as_study = {"reproduce/results/study/runs/" + f: f for f in files}
    for path in _ignored(list(as_study)):
      os.remove(os.path.join(out, as_study[path]))
    kept = {f for p, f in as_study.items()
            if os.path.exists(os.path.join(out, f))}
    for arm in tiny.variants:
      mine = {os.path.basename(f) for f in kept
              if f.startswith("train/{}/".format(arm))}
      assert mine == {"model.ckpt-0.index",
                      "model.ckpt-0.data-00000-of-00001", "run_record.json",
                      "meta_training_events.jsonl"}, mine
      assert cli.carried_only(os.path.join(out, "train", arm))
    redo = "test-mnist-mlp-sigmoid-hess-25pct-posterior.t1"
    os.remove(os.path.join(out, ".stages", redo + ".done"))
    assert cli.main(["--out=" + out], env) == 0, capsys.readouterr()
    second = capsys.readouterr().out
  finally:
    shutil.rmtree(out, ignore_errors=True)
  for arm in tiny.variants:  # each meta-test after its own training
    assert first.index("[done] train-" + arm) < first.index(
        "[run ] test-mnist-mlp-sigmoid-" + arm)
  assert re.findall(r"^\[run \] (\S+)", second, re.M) == [redo, "plot"]
  assert "stages: 4 (3 done earlier)" in second
