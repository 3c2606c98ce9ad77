"""The documentation builds and stays true to the code.

Why: README.md and docs/ are how users learn the project; a broken link, a
results page that lost its table, or a module name that no longer exists
misleads them silently. So: a strict MkDocs build (broken links and missing
included result files fail), the README's size, no first person or issue
numbers, and every module, path and name the pages cite found in the
checkout.
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(os.path.join(DOCS, n) for n in os.listdir(DOCS)
               if n.endswith(".md"))
README = os.path.join(ROOT, "README.md")
TEXTS = [README] + PAGES


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def _prose(path):
  """The text without fenced code blocks (commands may say anything)."""
  return re.sub(r"^```.*?^```", "", _read(path), flags=re.S | re.M)


def test_docs_build_in_strict_mode(tmp_path):
  proc = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
       str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
      timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  # The results page carries the generated tables and the figures.
  page = _read(tmp_path / "site" / "reproduction" / "index.html")
  assert "Regularizer effect" in page
  assert os.path.exists(tmp_path / "site" / "results" / "medium" /
                        "loss_curves.png")


def test_readme_is_short():
  with open(README, encoding="utf-8") as f:
    assert sum(1 for _ in f) <= 200


@pytest.mark.parametrize("path", TEXTS, ids=os.path.basename)
def test_no_first_person_or_issue_numbers(path):
  text = _prose(path)
  first_person = re.findall(r"\b(?:I|I'm|I've|I'd|me|my|mine)\b", text)
  first_person += re.findall(r"(?i)\b(?:we|we're|we've|our|ours)\b", text)
  assert not first_person, first_person
  assert not re.findall(r"(?i)\bissues? *#?\d+", text)


# `a/b.py`-style paths of the checkout, and dotted l2o_scale/optimizer/
# problems names (a module, or a name defined in one).
PATH = re.compile(r"`((?:l2o_scale|optimizer|problems|reproduce|tests|docs|"
                  r"\.ci)/[\w./-]+?)`")
DOTTED = re.compile(r"\b((?:l2o_scale|optimizer|problems)(?:\.\w+)+)")


def _module_file(parts):
  base = os.path.join(ROOT, *parts)
  for candidate in (base + ".py", os.path.join(base, "__init__.py")):
    if os.path.exists(candidate):
      return candidate
  return None


def _defines(path, name):
  return re.search(r"^\s*(?:def|class) {0}\b|^{0} *=|import {0}\b".format(
      re.escape(name)), _read(path), re.M) is not None


@pytest.mark.parametrize("path", TEXTS, ids=os.path.basename)
def test_cited_paths_and_names_exist(path):
  text = _read(path)
  missing = []
  for cited in set(PATH.findall(text)):
    cited = cited.rstrip("/.")
    if "<" in cited or "*" in cited:
      continue
    if not os.path.exists(os.path.join(ROOT, cited)):
      missing.append(cited)
  for dotted in set(DOTTED.findall(text)):
    parts = dotted.split(".")
    if _module_file(parts):
      continue
    module = _module_file(parts[:-1])
    if module is None or not _defines(module, parts[-1]):
      missing.append(dotted)
  assert not missing, "{} cites what the checkout lacks: {}".format(
      os.path.basename(path), sorted(missing))
