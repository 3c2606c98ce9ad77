"""The parts of :class:`l2o_scale.keras_optimizer.LearnedOptimizer`, one job
each, as Keras keeps ``adam.py`` over its base optimizer: the class users see
holds the Keras hooks and hands each job to one module here.

- :mod:`~l2o_scale.keras_parts.checks`: its arguments checked, and what
  refuses a step.
- :mod:`~l2o_scale.keras_parts.native`: the switch of the native kernel
  (``native_step``).
- :mod:`~l2o_scale.keras_parts.packed_state`: the learned optimizer's state
  of all variables as Keras optimizer variables, in its packed layout, one
  set per pass of the step.
- :mod:`~l2o_scale.keras_parts.joint_step`: one step of all variables
  together (the original ``apply_gradients``), in passes or on the variables
  with gradients only, through the step transforms of
  :mod:`l2o_scale.steps`.
- :mod:`~l2o_scale.keras_parts.saving`: the meta-parameters and state in a
  ``.keras`` file, the options in its config.
- :mod:`~l2o_scale.keras_parts.restore`: a learned optimizer restored from a
  checkpoint with its run record, or shipped by name with its card's
  settings for long runs.
"""
