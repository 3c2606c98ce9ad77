"""Meta-training and meta-testing core of the L2O-Scale TF2 port."""

from l2o_scale import keras_registration as _keras_registration

_keras_registration.install()
