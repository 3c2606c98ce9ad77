"""Step transforms: changes of the step an optimizer proposes, composed by
:func:`chain` in the manner of optax (``optax/_src/combine.py``).

Not in the original, which applies each optimizer's update as it is. A step
transform maps the values before a step (``old``) and the values the
optimizer proposes (``proposed``) to new proposed values; :func:`chain`
applies several in order, each to the output of the one before. One
transform is one module (:mod:`l2o_scale.steps.step_schedule`,
:mod:`l2o_scale.steps.weight_decay`); the meta-test step
(:func:`l2o_scale.meta_testing.inner_step.inner_step`) and the Keras
optimizer (:class:`l2o_scale.keras_optimizer.LearnedOptimizer`) apply the
same chain, and :func:`l2o_scale.steps.settings.step_transforms_from` builds
it from metatest.py's flags or a pretrained optimizer's card.

The transforms work on values, not on update directions, so that a
transform that changes nothing returns ``proposed`` bit for bit. What varies
over a run comes in ``inputs``, a dict of this step's scalars: a transform
names the per-step arrays it needs for a run of known length
(:meth:`StepTransform.step_inputs`, computed on the host once), and the
caller feeds each step its entries. :data:`SCALE` is the step's scale: the
step schedule's in metatest.py, Keras' learning rate in Keras; the weight
decay is scaled by it, as Keras' and AdamW's are by their learning rate.
Every caller also gives :data:`GRADIENTS`, the step's gradients, for a
transform that reads them (:mod:`l2o_scale.steps.zero_gradient_hold`).
"""

# The input that scales a step (a float32 scalar tensor).
SCALE = "scale"
# The input that holds the step's gradients (a list, one per variable).
GRADIENTS = "gradients"


class StepTransform(object):
  """One change of the proposed step. Subclasses implement :meth:`apply`
  and, where they apply, the other methods."""

  def apply(self, old, proposed, inputs):
    """New proposed values (a list) from the values before the step
    (``old``), the proposed ones and this step's ``inputs``."""
    raise NotImplementedError

  def step_inputs(self, num_steps):
    """The per-step inputs of a run of ``num_steps`` steps: a dict of
    float32 arrays ``[num_steps]`` (none by default)."""
    del num_steps
    return {}

  def key(self):
    """What a compiled step depends on besides its inputs (hashable): two
    transforms with the same key trace the same graph."""
    return (type(self).__name__,)

  def keras_kwargs(self, total_steps):
    """The arguments of a Keras optimizer that give this transform over a
    run of ``total_steps`` steps."""
    raise ValueError("{} has no Keras form".format(type(self).__name__))


class Identity(StepTransform):
  """Changes nothing (optax's ``identity``); :func:`chain` drops it, so a
  transform that is off adds no op to the graph."""

  def apply(self, old, proposed, inputs):
    del old, inputs
    return list(proposed)

  def keras_kwargs(self, total_steps):
    del total_steps
    return {}


def identity():
  return Identity()


class Chain(StepTransform):
  """Transforms applied in order (optax's ``chain``); built by
  :func:`chain`."""

  def __init__(self, transforms):
    self.transforms = tuple(t for t in transforms
                            if not isinstance(t, Identity))

  @property
  def is_identity(self):
    """Whether the chain changes nothing (then it adds no op)."""
    return not self.transforms

  def apply(self, old, proposed, inputs):
    old = list(old)
    proposed = list(proposed)
    for transform in self.transforms:
      proposed = transform.apply(old, proposed, inputs)
    return proposed

  def step_inputs(self, num_steps):
    inputs = {}
    for transform in self.transforms:
      for name, values in transform.step_inputs(num_steps).items():
        if name in inputs:
          raise ValueError("two step transforms give the input {!r}; chain "
                           "one of them".format(name))
        inputs[name] = values
    return inputs

  def key(self):
    return tuple(t.key() for t in self.transforms)

  def keras_kwargs(self, total_steps):
    kwargs = {}
    for transform in self.transforms:
      kwargs.update(transform.keras_kwargs(total_steps))
    return kwargs

  def check(self, optimizer):
    """Refuses to change the step of ``optimizer`` if it attends
    (:func:`check_compatible`); a chain that changes nothing goes with
    any optimizer."""
    if not self.is_identity:
      check_compatible(optimizer)


def chain(*transforms):
  """The transforms applied in order, each to the proposal of the one
  before; :class:`Identity` entries (transforms that are off) dropped."""
  flat = []
  for transform in transforms:
    flat.extend(transform.transforms if isinstance(transform, Chain)
                else [transform])
  return Chain(flat)


def check_compatible(optimizer):
  """Refuses an optimizer that attends (``use_attention``): the variables
  then hold the attended point and its real parameters live in its state,
  which a changed step would leave behind."""
  if getattr(optimizer, "use_attention", False):
    raise ValueError("a scaled step (step schedule, Keras learning_rate), a "
                     "weight decay or a held step (hold_zero_gradients) does "
                     "not go with an optimizer that attends "
                     "(use_attention): its real parameters live in its state")
