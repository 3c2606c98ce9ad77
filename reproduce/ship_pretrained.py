"""Packs a trained optimizer of a reproduction run as a shipped pretrained one.

Why: the original code was never released with a trained optimizer. This
copies the best evaluated model (``model.ckpt-0``) of one ``reproduce/all.sh``
training stage into
``l2o_scale/pretrained/<name>/HierarchicalRNN_GRUCell_20_2/`` (package data:
``LearnedOptimizer.pretrained(name)``, ``metatest.py --pretrained=name``)
-- meta-parameters only, no meta-optimizer slots -- with its card: the
``run_record.json`` that ``metatest.py`` and ``LearnedOptimizer`` read to
rebuild the optimizer (so it runs without extra flags), plus a ``"card"``
section: data, seeds, meta-iterations, wall time and the meta-test metrics of
the run.

Usage (after a medium-size run)::

  python reproduce/ship_pretrained.py --out=reproduce/out/medium \\
      --stage=l2o-scale.t1 --name=l2o-scale
"""

import argparse
import json
import os
import re
import shlex
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "reproduce"))

from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import metarun  # pylint: disable=g-import-not-at-top,wrong-import-position
import plot  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import checkpoints  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.config import optimizer_flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.config import recipes  # pylint: disable=g-import-not-at-top,wrong-import-position
from l2o_scale.runs import run_record  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS


def training_command(log_path):
  """The metarun.py argument list from the first line all.sh logged."""
  with open(log_path) as f:
    first = f.readline()
  if not first.startswith("+ "):
    raise ValueError("{} does not start with the logged command".format(
        log_path))
  words = shlex.split(first[2:])
  return words[words.index("metarun.py"):]


def parse_training_flags(argv):
  """FLAGS as metarun.py parsed ``argv``: a ``--recipe`` expands first,
  so the record holds the values the run trained with."""
  FLAGS.unparse_flags()
  FLAGS(recipes.expand(argv))


def log_facts(log_path):
  text = open(log_path).read()
  best = re.findall(r"^best model index=(\d+)", text, re.M)
  scores = re.findall(r"^selection (\d+), robust score=(\S+)", text, re.M)
  rollbacks = len(re.findall(r"rolled back to", text))
  return {"best_meta_iteration": int(best[-1]) if best else None,
          "robust_scores": [float(s) for _, s in scores],
          "rollbacks": rollbacks}


def stage_seconds(timings_path, stage):
  if not os.path.exists(timings_path):
    return None
  for line in open(timings_path):
    name, _, secs = line.strip().partition("\t")
    if name == stage:
      return float(secs)
  return None


def meta_test_metrics(results_dir, model_name):
  """Per problem: final train loss and held-out accuracy, mean/std/n."""
  out = {}
  if not os.path.isdir(results_dir):
    return out
  losses, heldout = plot.load_results(results_dir)
  for problem, by_opt in losses.items():
    if model_name not in by_opt:
      continue
    finals = plot.final_losses(by_opt[model_name])
    entry = {"test_seeds": sorted(by_opt[model_name]),
             "steps": int(min(len(v) for v in by_opt[model_name].values())),
             "final_train_loss_mean": float(np.mean(finals)),
             "final_train_loss_std": float(np.std(finals)),
             "all_finite": bool(all(np.all(np.isfinite(v)) for v in
                                    by_opt[model_name].values()))}
    records = heldout.get(problem, {}).get(model_name)
    if records:
      acc = plot.final_heldout(records)
      entry.update(heldout_accuracy_mean=float(np.mean(acc)),
                   heldout_accuracy_std=float(np.std(acc)))
    out[problem] = entry
  return out


def ship(out_dir, stage, name, description, dest_root,
         trained_by="reproduce/all.sh (REPRO_MEDIUM=1)"):
  log = os.path.join(out_dir, "logs", "train-{}.log".format(stage))
  argv = training_command(log)
  parse_training_flags(argv)
  subdir = optimizer_flags.checkpoint_subdir(FLAGS)
  source = os.path.join(out_dir, "train", stage, subdir, "model.ckpt-0")
  dest = os.path.join(dest_root, name, subdir)
  os.makedirs(dest, exist_ok=True)
  optimizer = optimizer_flags.optimizer_spec(FLAGS).build()
  checkpoints.restore_optimizer(source, optimizer)
  checkpoints.save_optimizer(os.path.join(dest, "model.ckpt-0"), optimizer)
  optimizer_values, training_values = metarun.record_sections(FLAGS)
  data = open(os.path.join(out_dir, "data.txt")).read().strip() if \
      os.path.exists(os.path.join(out_dir, "data.txt")) else None
  card = dict(
      name=name, description=description,
      trained_by="{}, stage train-{}".format(trained_by, stage),
      data=data, training_seed=FLAGS.seed,
      meta_iterations=FLAGS.num_meta_iterations,
      wall_time_seconds=stage_seconds(os.path.join(out_dir, "timings.tsv"),
                                      "train-" + stage),
      meta_test=meta_test_metrics(os.path.join(out_dir, "test"), stage),
      **log_facts(log))
  record = _without_local_paths(
      dict(optimizer_flags=optimizer_values, training_flags=training_values,
           command=" ".join(argv), card=card), out_dir, FLAGS.data_dir,
      dest_root, name)
  run_record.write(dest, FLAGS.optimizer, **record)
  return dest


def _without_local_paths(record, out_dir, data_dir, dest_root, name):
  """The card names no folder of the machine it was made on."""
  text = json.dumps(record)
  shipped = os.path.join(os.path.relpath(dest_root, ROOT), name)
  text = text.replace(os.path.join(os.path.abspath(out_dir), "train", ""),
                      "<all.sh output>/train/")
  if data_dir:
    text = text.replace(os.path.abspath(data_dir), "<MNIST folder>")
  record = json.loads(text)
  record["training_flags"]["train_dir"] = shipped
  return record


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="all.sh output folder")
  parser.add_argument("--stage", required=True,
                      help="learned optimizer name in that run, e.g. "
                      "l2o-scale.t1")
  parser.add_argument("--name", required=True, help="shipped name")
  parser.add_argument("--description", default="")
  parser.add_argument("--dest", default=os.path.join(ROOT, "l2o_scale",
                                                     "pretrained"))
  parser.add_argument("--trained_by", default="reproduce/all.sh "
                      "(REPRO_MEDIUM=1)", help="what produced --out")
  args = parser.parse_args(argv)
  print(ship(args.out, args.stage, args.name, args.description, args.dest,
             args.trained_by))


if __name__ == "__main__":
  main()
