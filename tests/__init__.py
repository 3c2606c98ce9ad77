"""The test suite. A package, so that its helper modules (``tests.paths``,
``tests.repro_files``, ``tests.faultfs``, ``tests.metarun_process``,
``tests.resume_check``, ``tests.hrnn_reference``) import by their names from
the repository root, as pytest runs them."""
