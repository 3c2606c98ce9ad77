"""Adapts a (make_loss, make_init_fn) model into a Problem.

Port of the training code's ``problems/model_adapter.py``. The TF1
class captured the tf.Variables a graph-building function created and swapped
them for the optimizer's tensors by mocking ``tf.Variable``; in TF2 the model
function is pure, so the adapter simply wraps it:

* ``make_loss_and_init_fn(device=...)`` returns ``(make_loss, make_init_fn)``;
* ``make_loss()`` returns ``(param_shapes, loss_fn)`` with ``loss_fn(params)``
  a scalar;
* ``make_init_fn(param_shapes)`` returns ``init_tensors(seed)`` (or is None
  for standard-normal init).

``device`` is accepted and forwarded: the original problem set
``adapter_rosenbrock_worker`` passes it to ``ModelAdapter``, whose TF1
constructor did not accept it (a TypeError there).
"""

from problems import problem_generator as pg


class ModelAdapter(pg.Problem):
  """A Problem around a pure model function (see the module docstring)."""

  def __init__(self, make_loss_and_init_fn, device=None):
    make_loss_fn, make_init_fn = make_loss_and_init_fn(device=device)
    param_shapes, self.loss_fn = make_loss_fn()
    self._init_tensors = (make_init_fn(param_shapes)
                          if make_init_fn is not None else None)
    super().__init__(param_shapes, random_seed=None, noise_stdev=0.0)

  def init_tensors(self, seed=None):
    if self._init_tensors is None:
      return super().init_tensors(seed)
    return self._init_tensors(seed)

  def objective(self, parameters, data=None, labels=None):
    return self.loss_fn(list(parameters))
