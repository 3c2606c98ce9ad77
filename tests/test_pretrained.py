"""The shipped pretrained optimizers (l2o_scale/pretrained/, package data):
they load by name with their cards (no extra flags) and optimize the MNIST
MLP better than a tuned Adam from the same start and batches: the `long`
recipe's over 2,000 steps (at 10,000 steps: l2o_scale.tools.horizon_check),
the `stable` recipe's, whose start is faster, over 300."""

import json
import os

import numpy as np
import pytest

from l2o_scale.meta_testing import baselines
from l2o_scale import keras_optimizer
from l2o_scale import pretrained
from l2o_scale.meta_testing import testing
from problems import problem_sets

# Name: (its cap on the learned learning rate, steps it beats Adam in).
VARIANTS = {"l2o-scale": (-6.9, 2000), "l2o-entropy-reg": (-6.9, 2000),
            "l2o-entropy-reg-cl-mt": (-6.9, 2000),
            "l2o-scale-stable": (-4.6, 300)}
SUBDIR = "HierarchicalRNN_GRUCell_20_2"


def _final(optimizer, problem, dataset, batch_size, steps=300, seed=6):
  objectives, _, _ = testing.test_optimizer(
      optimizer, problem, steps, dataset=dataset, batch_size=batch_size,
      seed=seed, progress=False)
  objectives = np.asarray(objectives, np.float64)
  assert np.all(np.isfinite(objectives))
  return objectives[-10:].mean()


@pytest.mark.parametrize("variant", VARIANTS)
def test_card_describes_the_checkpoint(variant):
  folder = pretrained.folder(variant)
  assert folder == os.path.join(pretrained.ROOT, variant, SUBDIR)
  assert os.path.exists(os.path.join(folder, "model.ckpt-0.index"))
  with open(os.path.join(folder, "run_record.json")) as f:
    record = json.load(f)
  assert record["optimizer_flags"]["max_log_lr"] == VARIANTS[variant][0]
  card = record["card"]
  assert card["name"] == variant and card["meta_iterations"] == 30
  assert card["training_seed"] == 1 and card["wall_time_seconds"] > 0
  assert "/work/" not in json.dumps(record)  # no local paths shipped


def test_pretrained_beat_tuned_adam_on_the_mlp(data_dir):
  spec, dataset, batch_size = problem_sets.get("test_mnist_mlp_problems",
                                               data_dir=data_dir)[0]
  problem = spec.build()
  adam = {}
  for variant, (max_log_lr, steps) in VARIANTS.items():
    if steps not in adam:
      adam[steps] = _final(baselines.build("Adam", 1e-3), problem, dataset,
                           batch_size, steps)
    learned = keras_optimizer.LearnedOptimizer.pretrained(variant)
    assert learned.learned_optimizer.max_log_lr == max_log_lr  # the card's
    final = _final(learned.learned_optimizer, problem, dataset, batch_size,
                   steps)
    assert final < adam[steps], (variant, steps, final, adam[steps])


def test_names_and_cards_are_listed():
  assert pretrained.names() == sorted(VARIANTS)
  lines = pretrained.describe("l2o-scale")
  assert lines[0].startswith("l2o-scale: L2O-Scale")
  assert any(l.startswith("  command: metarun.py ") and "--recipe=long" in l
             for l in lines)
  with pytest.raises(ValueError, match="no pretrained optimizer 'nope'; the "
                     "shipped ones are: l2o-entropy-reg, "):
    pretrained.checkpoint("nope")
