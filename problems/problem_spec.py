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
    """Callables (e.g. an activation) by name, not ``<function ... at 0x>``."""
    return "Spec({}, ({}), {{{}}})".format(
        _named(self.callable), ", ".join(_named(a) for a in self.args),
        ", ".join("{!r}: {}".format(k, _named(v))
                  for k, v in self.kwargs.items()))


def _named(value):
  """``repr`` of a value, with functions and classes by their name."""
  if callable(value) and hasattr(value, "__name__"):
    return value.__name__
  if isinstance(value, (list, tuple)):
    inner = ", ".join(_named(v) for v in value)
    return "[{}]".format(inner) if isinstance(value, list) else "({})".format(
        inner)
  return repr(value)
