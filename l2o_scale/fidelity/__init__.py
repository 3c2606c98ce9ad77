"""The fidelity replayer: TF1 reference runs (fixtures written by the
original code) replayed with the port and compared within each fixture's
tolerances (``tf1_reference``, ``python -m l2o_scale.fidelity.tf1_reference``;
``replay``, ``fixture_spec``). Nothing in the product imports it; see
docs/fidelity.md."""
