"""The test problems of the reproduction, in one place.

Each entry: the name used in stage names and result folders, the
``metatest.py`` flag that selects it, the label of figures and tables, and
whether it is the conv net. The conv net differs from the MLPs in three
ways: a size gives it its own number of test steps (``test_steps_conv``)
and may meta-test only some learned optimizers on it (``conv_learned``);
it runs without XLA (on a CPU, XLA makes its convolutions several times
slower; metatest.py --jit_compile, where it halves the learned optimizer's
step on the MLPs); and it has no flatness measurement.

The entries come from the project's problem registry
(:mod:`problems.registry`): adding a test problem to the reproduction is
one entry there, with ``reproduction=True``.
"""

import dataclasses

from problems import registry


@dataclasses.dataclass(frozen=True)
class Problem:
  name: str
  flag: str
  label: str
  conv: bool = False

  @property
  def xla_flag(self):
    return "--jit_compile=False" if self.conv else "--jit_compile=True"


# The registry's entries that the reproduction meta-tests on
# (``reproduction=True``); a problem that XLA does not compile fast is
# treated as the conv net above.
PROBLEMS = {e.name: Problem(e.name, "--" + e.flag, e.label,
                            conv=not e.xla_fast)
            for e in registry.PROBLEMS if e.reproduction}


def names():
  return tuple(PROBLEMS)


def labels():
  """``{name: label}`` in the order of the figures' panels."""
  return {name: p.label for name, p in PROBLEMS.items()}
