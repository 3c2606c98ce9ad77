"""Ships a chosen controller as a pretrained learned AdamW
(``l2o_scale/pretrained/<name>/LearnedAdamW/``): its ``controller.npz`` and
a run record whose optimizer flags are the base rule's settings, whose
training flags are the meta-training's and whose card says where it comes
from (:mod:`l2o_scale.pretrained`, kind ``learned_adamw``)."""

import json
import os

import numpy as np

from l2o_scale import learned_adamw
from l2o_scale import pretrained
from l2o_scale.controller_training import training
from l2o_scale.runs import run_record

SUBDIR = "LearnedAdamW"


def ship(name, controller_path, train_dir, card_extra, command,
         root=pretrained.ROOT):
  """Writes the shipped folder of ``name`` under ``root``; returns it. The
  controller must load (:func:`l2o_scale.learned_adamw.load_controller`)
  and come from the run in ``train_dir`` (its settings file)."""
  theta = learned_adamw.load_controller(controller_path)
  config = training.saved_config(train_dir)
  folder = os.path.join(root, name, SUBDIR)
  os.makedirs(folder, exist_ok=True)
  learned_adamw.save_controller(
      os.path.join(folder, learned_adamw.CONTROLLER_FILE), theta)
  settings = config.base().as_dict()
  with open(os.path.join(train_dir, training.LOG_FILE)) as f:
    estimates = [json.loads(line) for line in f]
  card = dict(
      kind=pretrained.LEARNED_ADAMW, name=name,
      controller=learned_adamw.CONTROLLER_FILE, settings=settings,
      description="AdamW with a cosine decay whose learning rate and weight "
      "decay a learned controller sets per tensor and step (total_steps: "
      "the run's length)",
      data="tasks drawn from the families {} (generated data)".format(
          ", ".join(config.families)),
      training_seed=config.seed,
      estimates=int(np.count_nonzero([e["estimate"] for e in estimates])),
      wall_time_seconds=float(sum(e["seconds"] for e in estimates)),
      trained_by=os.path.basename(controller_path), **card_extra)
  run_record.write(folder, "LearnedAdamW", settings, config.settings(),
                   command, card=card)
  return folder

