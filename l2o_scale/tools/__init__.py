"""Tooling around the runtime: the benchmark (``bench``) and the fidelity
replayer of TF1 reference runs (``tf1_reference``, ``replay``,
``fixture_spec``). Nothing in meta-training or meta-testing imports these;
``python -m l2o_scale.bench`` and ``python -m l2o_scale.tf1_reference`` run
them."""
