"""One label and one look per optimizer, for every figure and table of the
reproduction (plot.py, medium.py).

Why: a reader compares figures side by side; the same optimizer must carry
the same name, colour, line style and marker in each of them, and two lines
that lie on top of each other must still be told apart. Hence:

* learned optimizers: solid lines, filled markers; a colour family per kind
  (Hessian-ESD regularizer: oranges, Jacobian: greens, darker = larger
  alpha);
* the original's baselines (fixed learning rates): dashed, open markers;
* tuned baselines (``<Opt>-lr<value>``): dash-dotted, open markers, the
  marker telling the learning rate apart.

Names follow the pipeline (reproduce/all.sh): ``<variant>`` or
``<variant>.t<k>`` (training seed ``k``; same look as the variant), the
original baselines ``SGD``, ``Adam``, ``Adagrad`` and tuned ones such as
``Adam-lr1e-3``. The learned variants' labels and looks are declared once,
in the variant registry (reproduce/pipeline/variants.py).
"""

import math
import re

from reproduce.pipeline import names
from reproduce.pipeline import variants

TRAIN_SEED_PATTERN = names.TRAIN_SEED_PATTERN
TUNED_PATTERN = re.compile(r"^(SGD|Adam|Adagrad)-lr(.+)$")

# Original baselines: (label, colour, marker). Learning rates as in the
# original's metatest.py.
BASELINES = {
    "SGD": ("SGD (lr 1e-3)", "#7f7f7f", "o"),
    "Adam": ("Adam (lr 1e-4)", "#9467bd", "s"),
    "Adagrad": ("Adagrad (lr 1e-5)", "#bcbd22", "D"),
}
TUNED_COLORS = {"SGD": "#000000", "Adam": "#e377c2", "Adagrad": "#8c564b"}
# Tuned learning rates: one marker per half decade, so neighbouring values
# of a sweep differ.
TUNED_MARKERS = ("^", "v", "<", ">", "P", "X")
_OTHER_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")


split_name = names.split_name


def tuned_lr(name):
  """``(optimizer, lr float)`` for ``<Opt>-lr<value>``, else None."""
  m = TUNED_PATTERN.match(name)
  if not m:
    return None
  try:
    return m.group(1), float(m.group(2))
  except ValueError:
    return None


def is_baseline(name):
  return split_name(name)[0] in BASELINES or tuned_lr(name) is not None


def label(name):
  """The display name (training-seed suffixes dropped)."""
  variant = split_name(name)[0]
  learned = variants.lookup(variant, strict=False)
  if learned:
    return learned.label
  if variant in BASELINES:
    return BASELINES[variant][0]
  t = tuned_lr(variant)
  if t:
    return "{} (tuned, lr {})".format(t[0], variant.split("-lr", 1)[1])
  return variant


def short_label(name):
  learned = variants.lookup(name, strict=False)
  return learned.short if learned else label(name)


def _stable_index(text, n):
  return sum(ord(c) for c in text) % n


def style(name):
  """dict(color, linestyle, marker, filled) for ``name``; the same for every
  figure and every run."""
  variant = split_name(name)[0]
  learned = variants.lookup(variant, strict=False)
  if learned:
    return dict(color=learned.color, linestyle="-", marker=learned.marker,
                filled=True)
  if variant in BASELINES:
    _, color, marker = BASELINES[variant]
    return dict(color=color, linestyle="--", marker=marker, filled=False)
  t = tuned_lr(variant)
  if t:
    half_decades = int(round(2 * math.log10(t[1]))) if t[1] > 0 else 0
    return dict(color=TUNED_COLORS[t[0]], linestyle="-.",
                marker=TUNED_MARKERS[half_decades % len(TUNED_MARKERS)],
                filled=False)
  return dict(color=_OTHER_COLORS[_stable_index(variant, len(_OTHER_COLORS))],
              linestyle=":", marker=".", filled=True)


def line_kwargs(name):
  """Keyword arguments for ``Axes.plot``/``errorbar``: colour, line style,
  marker (open markers have a white face)."""
  s = style(name)
  return dict(color=s["color"], linestyle=s["linestyle"], marker=s["marker"],
              markerfacecolor=s["color"] if s["filled"] else "white",
              markeredgecolor=s["color"])


def _order_key(variant):
  learned = variants.lookup(variant, strict=False)
  if learned:
    family = variants.family_of(variant) if variant not in \
        variants.VARIANTS else None
    try:
      alpha = float(family[1]) if family else 0.
    except ValueError:
      alpha = math.inf
    return (0, learned.order, "", alpha)
  if variant in BASELINES:
    return (2, list(BASELINES).index(variant), "", 0.)
  t = tuned_lr(variant)
  if t:
    return (3, list(BASELINES).index(t[0]), "", t[1])
  return (1, 0, variant, 0.)


def ordered(names):
  """Learned optimizers first (L2O-Scale, regularized variants, then
  reg. + CL + MT), then the original baselines, then tuned ones by
  optimizer and learning rate."""
  return sorted(names, key=lambda n: (_order_key(split_name(n)[0]),
                                      split_name(n)[1] or 0))
