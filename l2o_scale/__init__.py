"""Meta-training and meta-testing core of the L2O-Scale TF2 port."""
