"""The files the reproduction reads, written as metatest.py and metarun.py
write them: a meta-test run's loss record and held-out record, and a
training run's events file with its run record's training seed. Shared by
the tests of reproduce/plot.py, medium.py and the shipped optimizers'
pages."""

import json
import os
import pickle

import numpy as np

from reproduce import run_log
from reproduce import plot


def write_pickle(folder, seed, name, values):
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "seed{}_eval_loss_record.pickle-{}".format(
      seed, name)), "wb") as f:
    pickle.dump([np.float32(v) for v in values], f)


def write_final(folder, seed, name, final):
  """A curve whose last plot.FINAL_WINDOW losses equal ``final``."""
  write_pickle(folder, seed, name, [5.] + [final] * plot.FINAL_WINDOW)


def write_flat(folder, seed, name, acc, trace=None, eig=None):
  os.makedirs(folder, exist_ok=True)
  record = {"iteration": [0, 10], "heldout_accuracy": [0.1, acc],
            "heldout_loss": [1., .5], "train_loss": [1., .5],
            "train_accuracy": [.1, .9]}
  if trace is not None:
    record.update(hessian_trace=trace, hessian_top_eigenvalue=eig)
  with open(os.path.join(folder, "seed{}_heldout_record-{}.json".format(
      seed, name)), "w") as f:
    json.dump(record, f)


def write_events(train_root, name, events, seed=None):
  """A train dir's events file (as metarun.py writes it) and its run
  record's training seed."""
  folder = os.path.join(train_root, name, "HierarchicalRNN_GRUCell_20_2")
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, run_log.EVENTS), "a") as f:
    for kind, k, fields in events:
      f.write(json.dumps(dict(event=kind, meta_iteration=k, **fields)) + "\n")
  if seed is not None:
    with open(os.path.join(folder, "run_record.json"), "w") as f:
      json.dump({"training_flags": {"seed": seed}}, f)
  return folder
