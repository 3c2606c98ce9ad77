"""The code blocks of README.md and docs/*.md run as written.

Each page's ```python blocks run in order in one fresh process (as a reader
pastes them into one session: a block may use the names of those before
it), from an empty working folder laid out as the pages assume: the offline
MNIST at ``../shared/data/mnist`` (here a 256-image copy of the real
files, so the examples take seconds), and, standing in for the user's
``metarun.py --recipe=fast`` run, ``runs/fast/HierarchicalRNN_GRUCell_20_2``
holding a shipped optimizer's checkpoint and run record. A ```bash block
runs too, unless the line before it says why not
(``<!-- example not run: REASON -->``: a long run, an install, several
machines); every fence names its language (python, bash, or text for
output and diagrams).
"""

import gzip
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

from problems import datasets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = ["README.md"] + sorted(
    os.path.join("docs", n) for n in os.listdir(DOCS) if n.endswith(".md"))
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)[ \t]*\n(?P<body>.*?)"
                   r"^(?P=indent)```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!-- example not run: (\S.*?) -->[ \t]*\n *$")
LANGUAGES = ("python", "bash", "text")
TINY = 256  # images per split in the examples' MNIST copy


def _blocks(page):
  """[(language, code, reason it is not run or None)] of ``page``."""
  with open(os.path.join(ROOT, page), encoding="utf-8") as f:
    text = f.read()
  blocks = []
  for match in FENCE.finditer(text):
    indent = len(match.group("indent"))
    code = "\n".join(line[indent:] for line in
                     match.group("body").splitlines())
    before = text[:match.start()]
    reason = NOT_RUN.search(before[-200:])
    blocks.append((match.group("lang"), code + "\n",
                   reason.group(1) if reason else None))
  return blocks


def _write_idx(folder, split, images, labels):
  image_name, label_name = datasets._MNIST_FILES[split]  # pylint: disable=protected-access
  with gzip.open(os.path.join(folder, image_name + ".gz"), "wb") as f:
    f.write(struct.pack(">IIII", 2051, len(images), 28, 28))
    f.write(images.astype("uint8").tobytes())
  with gzip.open(os.path.join(folder, label_name + ".gz"), "wb") as f:
    f.write(struct.pack(">II", 2049, len(labels)))
    f.write(labels.astype("uint8").tobytes())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  """``<tmp>/work`` with ``../shared/data/mnist`` and ``runs/fast``."""
  from tests.paths import mnist_dir  # pylint: disable=g-import-not-at-top
  from l2o_scale import pretrained  # pylint: disable=g-import-not-at-top
  base = tmp_path_factory.mktemp("examples")
  mnist = base / "shared" / "data" / "mnist"
  mnist.mkdir(parents=True)
  for split in ("train", "test"):
    images, labels = datasets.load_mnist_arrays(split, mnist_dir())
    _write_idx(str(mnist), split, images[:TINY], labels[:TINY])
  work = base / "work"
  run = work / "runs" / "fast" / "HierarchicalRNN_GRUCell_20_2"
  shutil.copytree(pretrained.folder("l2o-scale"), run)
  return work


def _env():
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("L2O_SCALE_DATA_DIR", None)  # the examples name their data
  return env


def test_every_fence_names_its_language_and_why_it_is_not_run():
  for page in PAGES:
    for lang, code, reason in _blocks(page):
      assert lang in LANGUAGES, (page, lang, code[:80])
      assert reason is None or lang == "bash", (page, code[:80])


PYTHON_PAGES = [p for p in PAGES
                if any(lang == "python" for lang, _, _ in _blocks(p))]


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_examples_run(page, workdir):
  blocks = [code for lang, code, _ in _blocks(page) if lang == "python"]
  # One process, the blocks in order; a failure names its block.
  runner = "\n".join(
      "try:\n    exec(compile({!r}, {!r}, 'exec'))\n"
      "except BaseException:\n    print('in block {} of {}')\n    raise"
      .format(code, "{} block {}".format(page, i + 1), i + 1, page)
      for i, code in enumerate(blocks))
  # Seconds on an idle 2-core machine; the limit is for a loaded one.
  out = subprocess.run([sys.executable, "-c", runner], cwd=str(workdir),
                       env=_env(), capture_output=True, text=True,
                       timeout=1800)
  assert out.returncode == 0, (out.stdout[-2000:] + out.stderr[-4000:])


BASH_BLOCKS = [(page, i, code) for page in PAGES
               for i, (lang, code, reason) in enumerate(_blocks(page))
               if lang == "bash" and reason is None]


@pytest.mark.parametrize("page,index,code", BASH_BLOCKS,
                         ids=["{}-{}".format(p, i) for p, i, _ in BASH_BLOCKS])
def test_shell_examples_run(page, index, code, workdir):
  env = _env()
  env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
  out = subprocess.run(["bash", "-e", "-c", code], cwd=str(workdir), env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, (page, index, out.stderr[-3000:])
