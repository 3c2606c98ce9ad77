"""The registry of learned variants of the reproduction: one entry each.

A variant is what ``metarun.py`` is given on top of a size's schedule (its
flags) and how every figure and table shows it (label, short label, colour,
marker, place in the order). ``plan`` builds the meta-training commands
from it, ``styles`` (plot.py, medium.py, figures.py) the looks.

Names of learned optimizers: ``<variant>`` (the size's training seed) or
``<variant>.t<k>`` (training seed ``k``; :mod:`names`). Besides the fixed variants below,
two families take the regularizer's alpha in the name: ``hess-<alpha>``
(Hessian-ESD) and ``jacob-<alpha>`` (Jacobian), active in every unroll.
The flatness study's arms (``hess-5pct-always`` ... ``reg-cl-mt``) take
their alphas from ``sizes.STUDY_ALPHAS``.

Adding a variant is one entry in ``VARIANTS`` (or a family in
``FAMILIES``).
"""

import dataclasses
import re

from . import names
from .sizes import STUDY_ALPHAS


@dataclasses.dataclass(frozen=True)
class Variant:
  """A learned variant: ``flags`` (metarun.py's, in order), ``label`` (the
  figures' and tables' name), ``short`` (notes inside a panel), ``color``,
  ``marker``, ``order`` (learned optimizers sort by it) and ``doc``."""
  name: str
  flags: tuple
  label: str
  short: str
  color: str
  marker: str
  order: int
  doc: str = ""


@dataclasses.dataclass(frozen=True)
class Family:
  """Variants ``<prefix>-<alpha>``: one regularizer at any alpha.
  ``looks``: {alpha text: (colour, marker)}; ``other``: the look of any
  other alpha."""
  prefix: str
  reg_option: str
  label: str
  looks: dict
  other: tuple
  order: int


_HESSIAN = ("--reg_optimizer=True", "--reg_option=hessian-esd",
            "--alpha=1e-4")


def _study_hessian(share, when):
  """The flatness study's Hessian-ESD flags at ``share`` of the
  meta-gradient at ``--regularize_time=when`` (a key of STUDY_ALPHAS)."""
  return ("--reg_optimizer=True", "--reg_option=hessian-esd",
          "--alpha=" + STUDY_ALPHAS[share, when], "--regularize_time=" + when)


# The flatness study's Hessian-ESD arms (docs/flatness-study.md): a 5% or
# 25% share of the meta-gradient (sizes.STUDY_ALPHAS), in every unroll
# ("always") or in the last one of each meta-iteration ("posterior", the
# original's default): (share, when, colour, marker).
_STUDY_ARMS = (("5pct", "always", "#6a3d9a", "P"),
               ("5pct", "posterior", "#cab2d6", "X"),
               ("25pct", "always", "#b15928", "8"),
               ("25pct", "posterior", "#e7ba52", "X"))
_WHERE = {"always": "every unroll", "posterior": "last unroll"}


def _study_arm(order, share, when, color, marker):
  percent = share[:-len("pct")] + "%"
  return Variant(
      "hess-{}-{}".format(share, when), _study_hessian(share, when),
      "Hessian-ESD {} share, {}".format(percent, when),
      "{} {}".format(percent, when), color, marker, 20 + order,
      "Hessian-ESD at a {} share, {}".format(percent, _WHERE[when]))


VARIANTS = {v.name: v for v in (
    Variant("l2o-scale", (), "L2O-Scale (no reg.)", "L2O-Scale", "#1f77b4",
            "o", 0, "no regularizer"),
    # The paper's command: --regularize_time=none keeps the regularizer's
    # switch off in every unroll (docs/meta-training.md, quirks).
    Variant("l2o-entropy-paper-cmd", _HESSIAN + ("--regularize_time=none",),
            "Hessian-ESD α=1e-4, paper's cmd (reg. off)", "paper cmd",
            "#17becf", "v", 1,
            "the paper's command, whose regularizer stays off"),
    Variant("l2o-entropy-reg", _HESSIAN + ("--regularize_time=always",),
            "L2O-Entropy reg. (Hessian-ESD α=1e-4)", "reg. active",
            "#ff7f0e", "h", 2, "the same with the regularizer active"),
    Variant("l2o-entropy-reg-cl-mt",
            _HESSIAN + ("--regularize_time=always", "--if_cl=True",
                        "--if_mt=True", "--mt_ratio=0.1", "--mt_k=1"),
            "L2O-Entropy (reg. + CL + MT)", "reg.+CL+MT", "#d62728", "*", 90,
            "active regularizer + curriculum + imitation"),
    *(_study_arm(i, *arm) for i, arm in enumerate(_STUDY_ARMS)),
    # L2O-Entropy's full method at the study's 5% share.
    Variant("reg-cl-mt",
            _study_hessian("5pct", "always") + (
                "--if_cl=True", "--if_mt=True", "--mt_ratio=0.1", "--mt_k=1"),
            "L2O-Entropy (reg. 5% + CL + MT)", "reg. 5%+CL+MT", "#ad494a",
            "*", 91, "reg. at a 5% share + curriculum + imitation"),
)}

FAMILIES = {f.prefix: f for f in (
    Family("hess", "hessian-esd", "Hessian-ESD reg.",
           {"1e-4": ("#fd8d3c", "^"), "1e-3": ("#e6550d", ">"),
            "1e-2": ("#a63603", "<")}, ("#fdbe85", "d"), 10),
    Family("jacob", "jacob", "Jacobian reg.",
           {"1e-4": ("#74c476", "s"), "1e-3": ("#31a354", "D"),
            "1e-2": ("#006d2c", "p")}, ("#bae4b3", "H"), 11),
)}

_ALPHA = r"[0-9]+(\.[0-9]+)?(e-?[0-9]+)?"
_FAMILY_PATTERN = re.compile(r"^({})-({})$".format(
    "|".join(map(re.escape, FAMILIES)), _ALPHA))


def family_of(variant):
  """``(Family, alpha text)`` for ``<prefix>-<alpha>``, else None (alpha
  unchecked: a look for any name the figures meet)."""
  prefix, _, alpha = variant.partition("-")
  if prefix in FAMILIES and alpha:
    return FAMILIES[prefix], alpha
  return None


def lookup(name, strict=True):
  """The :class:`Variant` of a learned optimizer's name (``.t<k>``
  allowed), a family's made on the fly; None for an unknown name.
  ``strict=False`` takes any text as a family's alpha (looks for names
  the figures meet)."""
  variant = names.split_name(name)[0]
  if variant in VARIANTS:
    return VARIANTS[variant]
  if strict and not _FAMILY_PATTERN.match(variant):
    return None
  if family_of(variant) is None:
    return None
  family, alpha = family_of(variant)
  color, marker = family.looks.get(alpha, family.other)
  return Variant(variant, ("--reg_optimizer=True",
                           "--reg_option=" + family.reg_option,
                           "--alpha=" + alpha, "--regularize_time=always"),
                 "{} α={}".format(family.label, alpha),
                 "{} α={}".format(family.label, alpha), color, marker,
                 family.order, "{} at alpha {}, active".format(family.label,
                                                                alpha))


def known_text():
  """The known names, for an error message."""
  return " ".join(list(VARIANTS) + ["{}-<alpha>".format(p) for p in
                                    FAMILIES]) + ", each optionally .t<seed>"
