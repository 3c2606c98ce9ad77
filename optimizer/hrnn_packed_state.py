"""The hierarchical RNN's packed state: all tensors' state end to end.

Not in the original, which keeps one state dict per tensor with the slot
names of ``_initialize_state`` (``optimizer/hierarchical_rnn.py``, l.303-344
of the L2O-Scale-Evaluation copy). The packed state is a dict of
feature-major blocks with the coordinates of all tensors end to end along
the last axis (N = total size): ``parameter`` [level_sizes[0], N],
``decays`` [2, N] (the scale decay, then the input decay),
``log_learning_rate`` [1, N] (with ``dynamic_output_scale``), ``grad_accum``
and ``ms`` [num_gradient_scales, N], ``layer`` [T, level_sizes[1]] (one row
per tensor, with 2 or 3 levels) and, with ``use_attention``, ``true_param``:
the list of the tensors' true parameters (without attention they are the
parameters). The step (:mod:`optimizer.hrnn_step`) reads and writes this
layout; these functions convert from and to the per-tensor dicts and cut it
into groups of tensors.
"""

import tensorflow as tf

# How the leaves of the packed state hold the tensors: these keys one row
# per tensor, these a list with one entry per tensor; the others one column
# per coordinate.
TENSOR_ROWS = ("layer",)
TENSOR_LISTS = ("true_param",)


def pack(hrnn, states):
  """Per-tensor TF1 state dicts -> the packed layout."""
  sizes = [s["true_param"].shape.num_elements() for s in states]
  seg = hrnn.segments(sizes)

  def rows(key):
    return seg.concat([tf.reshape(s[key], [1, -1]) for s in states])

  g = hrnn.num_gradient_scales
  packed = {
      "parameter": seg.concat([tf.transpose(s["parameter"])
                               for s in states]),
      "decays": tf.concat([rows("scl_decay"), rows("inp_decay")], 0),
      "grad_accum": tf.concat([rows("grad_accum{}".format(i + 1))
                               for i in range(g)], 0),
      "ms": tf.concat([rows("ms{}".format(i + 1)) for i in range(g)], 0),
  }
  if hrnn.use_attention:
    # Without attention the true parameters are the parameters.
    packed["true_param"] = [s["true_param"] for s in states]
  if hrnn.dynamic_output_scale:
    packed["log_learning_rate"] = rows("log_learning_rate")
  if hrnn.num_layers > 1:
    packed["layer"] = tf.concat([s["layer"] for s in states], 0)
  return packed


def unpack(hrnn, packed, params):
  """The packed layout -> per-tensor TF1 state dicts (:func:`pack`)."""
  seg = hrnn.segments([p.shape.num_elements() for p in params])

  def columns(block):
    # One list of [N_t, 1] columns per row of the block.
    per_tensor = seg.split(block)
    n = int(block.shape[0])
    return [[tf.reshape(r, [-1, 1]) for r in
             (tf.split(piece, n, 0) if n > 1 else [piece])]
            for piece in per_tensor]

  split_blocks = [(keys, columns(block))
                  for keys, block in _named_blocks(hrnn, packed)]
  param_states = seg.split(packed["parameter"])
  layers = (tf.split(packed["layer"], seg.count, 0)
            if hrnn.num_layers > 1 else None)
  states = []
  for t in range(seg.count):
    state = {"parameter": tf.transpose(param_states[t]),
             "true_param": (packed["true_param"][t] if hrnn.use_attention
                            else params[t])}
    for keys, per_tensor in split_blocks:
      state.update(zip(keys, per_tensor[t]))
    if layers is not None:
      state["layer"] = layers[t]
    states.append(state)
  return states


def _named_blocks(hrnn, packed):
  """(TF1 slot names of its rows, block) for each per-coordinate block."""
  named = [(("scl_decay", "inp_decay"), packed["decays"])]
  if hrnn.dynamic_output_scale:
    named.append((("log_learning_rate",), packed["log_learning_rate"]))
  g = hrnn.num_gradient_scales
  named.append((tuple("grad_accum{}".format(i + 1) for i in range(g)),
                packed["grad_accum"]))
  named.append((tuple("ms{}".format(i + 1) for i in range(g)),
                packed["ms"]))
  return named


def columns_of(packed, first, last, start, end):
  """The packed state of tensors ``first`` to ``last - 1`` alone, whose
  coordinates are ``start`` to ``end - 1``."""
  def columns(key, leaf):
    if key in TENSOR_LISTS:
      return list(leaf[first:last])
    if key in TENSOR_ROWS:
      return leaf[first:last]
    return leaf[:, start:end]
  return {key: columns(key, leaf) for key, leaf in packed.items()}


def join(parts):
  """The packed state of all tensors from the packed states of consecutive
  groups of them (the inverse of :func:`columns_of`)."""
  def join_leaves(key):
    leaves = [part[key] for part in parts]
    if key in TENSOR_LISTS:
      return [t for leaf in leaves for t in leaf]
    return tf.concat(leaves, 0 if key in TENSOR_ROWS else 1)
  return {key: join_leaves(key) for key in parts[0]}
