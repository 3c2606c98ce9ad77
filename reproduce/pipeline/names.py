"""How the reproduction names a learned optimizer: ``<variant>`` (meta-trained
with the size's training seed) or ``<variant>.t<k>`` (training seed ``k``).

The sizes, the variants and the plan all read such names; this module
imports none of them, so none of them imports another to read a name.
"""

import re

TRAIN_SEED_PATTERN = re.compile(r"^(.+)\.t(\d+)$")


def split_name(name):
  """``(variant, train_seed)``; train_seed None without ``.t<k>``."""
  m = TRAIN_SEED_PATTERN.match(name)
  return (m.group(1), int(m.group(2))) if m else (name, None)
