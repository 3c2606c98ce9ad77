"""The protocol of the controlled AdamW's meta-training, declared once: the
task families it is meta-trained on, the validation tasks its base setting
and its controller are chosen on, and the test tasks it is judged on once
(docs/learned-adamw.md). :func:`check` verifies that the three sets share
no data and that the test tasks' model families are in neither of the
others (:func:`l2o_scale.benchmark.families.check_disjoint`).
"""

from l2o_scale.benchmark import families

META_TRAINING = ("mlp_blobs", "mlp_fourier", "mlp_autoencoder",
                 "bag_majority")
VALIDATION = ("regression_synthetic", "text_topics", "attention_topics",
              "mlp_spirals", "text_topics_rich")
TEST = ("cnn_mnist", "resnet_mnist", "mixer_mnist", "logreg_mnist")
# The base rule's grid, searched on the validation tasks for the best single
# default (the zero controller's settings).
BASE_LEARNING_RATES = (3e-4, 1e-3, 3e-3, 1e-2)
BASE_WEIGHT_DECAYS = (0.004, 0.05, 0.5)
BUDGET = 2000
SELECTION_SEEDS = (0, 1)


def check():
  families.check_disjoint(META_TRAINING, VALIDATION, TEST)
