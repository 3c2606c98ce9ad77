"""A serialisable recipe for building a problem (port of ``problem_spec.py``).

``Spec(callable, args, kwargs)``; ``build()`` calls it. Problem sets are lists
of ``(Spec, dataset, batch_size)``.
"""


class Spec(object):
  """Problem class plus the arguments to construct it."""

  def __init__(self, callable_, args, kwargs):
    self.callable = callable_
    self.args = tuple(args)
    self.kwargs = dict(kwargs)

  def build(self):
    """Returns ``callable(*args, **kwargs)``."""
    return self.callable(*self.args, **self.kwargs)

  def __repr__(self):
    return "Spec({}, {}, {})".format(
        getattr(self.callable, "__name__", self.callable), self.args,
        self.kwargs)
