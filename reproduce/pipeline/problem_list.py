"""The test problems of the reproduction, in one place.

Each entry: the name used in stage names and result folders, the
``metatest.py`` flag that selects it, the label of figures and tables, and
whether it is the conv net. The conv net differs from the MLPs in three
ways: a size gives it its own number of test steps (``test_steps_conv``)
and may meta-test only some learned optimizers on it (``conv_learned``);
it runs without XLA (on a CPU, XLA makes its convolutions several times
slower; metatest.py --jit_compile, where it halves the learned optimizer's
step on the MLPs); and it has no flatness measurement.

This is the seam to the project's problem registry: ``PROBLEMS`` is the
only list the pipeline, plot.py and the checks read, so swapping it for
the registry's entries changes nothing else.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Problem:
  name: str
  flag: str
  label: str
  conv: bool = False

  @property
  def xla_flag(self):
    return "--jit_compile=False" if self.conv else "--jit_compile=True"


PROBLEMS = {p.name: p for p in (
    Problem("mnist-mlp-sigmoid", "--include_mnist_mlp_problems",
            "MNIST MLP 784-20-10, sigmoid"),
    Problem("mnist-mlp-relu", "--include_mnist_mlp_relu_problems",
            "MNIST MLP 784-20-10, ReLU"),
    Problem("mnist-mlp-deeper", "--include_mnist_mlp_deeper_problems",
            "MNIST MLP 784-20-20-10, sigmoid"),
    Problem("mnist-conv", "--include_mnist_conv_problems", "MNIST ConvNet",
            conv=True),
)}


def names():
  return tuple(PROBLEMS)


def labels():
  """``{name: label}`` in the order of the figures' panels."""
  return {name: p.label for name, p in PROBLEMS.items()}
