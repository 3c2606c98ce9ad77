"""The layering of docs/architecture.md holds: every import in the packages
(at module level or inside a function) goes to the importer's layer or one
below it, read from the source with ``ast`` (nothing is imported)."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("l2o_scale", "optimizer", "problems")
SCRIPTS = ("metarun.py", "metatest.py")


def layer_table(root=ROOT):
  """[(layer name, [path prefixes])], top layer first, from the table under
  "## Layers" of docs/architecture.md."""
  with open(os.path.join(root, "docs", "architecture.md")) as f:
    text = f.read().split("## Layers", 1)[1].split("\n## ", 1)[0]
  rows = []
  for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
      continue
    rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
  return rows


def _layer_of(path, table):
  """Index of the row whose longest prefix names ``path`` (repo-relative,
  ``/``-separated), or None."""
  best = None
  for index, (_, prefixes) in enumerate(table):
    for prefix in prefixes:
      if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
        if best is None or len(prefix) > best[1]:
          best = (index, len(prefix))
  return None if best is None else best[0]


def _module_path(root, dotted):
  """Repo-relative file of module ``dotted``, or None outside the repo."""
  base = dotted.replace(".", "/")
  for candidate in (base + ".py", base + "/__init__.py"):
    if os.path.isfile(os.path.join(root, candidate)):
      return candidate
  return None


def _imported_paths(root, path, packages=PACKAGES):
  """Repo-relative files that ``path`` imports (absolute imports of
  ``packages``, relative imports; ``from a import b`` counts as ``a.b`` when
  that is a module)."""
  with open(os.path.join(root, path)) as f:
    tree = ast.parse(f.read(), path)
  found = set()
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      module = node.module or ""
      if node.level:
        package = os.path.dirname(path).split("/")
        package = package[:len(package) - node.level + 1]
        module = ".".join(package + ([module] if module else []))
      # ``from a import b``: the module a.b, else a (b is a name in it).
      names = [n for n in (module + "." + alias.name for alias in node.names)
               if _module_path(root, n)] or [module]
    for name in names:
      target = _module_path(root, name)
      if name.split(".")[0] in packages and target is not None:
        found.add(target)
  return found


def source_files(root=ROOT):
  files = [s for s in SCRIPTS if os.path.isfile(os.path.join(root, s))]
  for package in PACKAGES:
    for folder, _, names in os.walk(os.path.join(root, package)):
      files.extend(os.path.relpath(os.path.join(folder, n), root).replace(
          os.sep, "/") for n in names if n.endswith(".py"))
  return sorted(files)


def violations(root=ROOT):
  """Lines "importer (layer) imports imported (layer above)", and files
  that no layer names."""
  table = layer_table(root)
  found = []
  for path in source_files(root):
    mine = _layer_of(path, table)
    if mine is None:
      found.append("{} is in no layer of docs/architecture.md".format(path))
      continue
    for target in sorted(_imported_paths(root, path)):
      theirs = _layer_of(target, table)
      if theirs is not None and theirs < mine:
        found.append("{} ({}) imports {} ({}), a layer above it".format(
            path, table[mine][0], target, table[theirs][0]))
  return found


def test_every_import_goes_down_the_layers():
  assert violations() == []


def test_meta_training_and_meta_testing_import_in_one_direction():
  table = [name for name, _ in layer_table()]
  assert table.index("meta-training") < table.index("meta-testing")
  for path in source_files():
    if path.startswith("l2o_scale/meta_testing/"):
      assert not [t for t in _imported_paths(ROOT, path)
                  if t.startswith("l2o_scale/meta_training/")], path


def _write(root, path, text):
  full = os.path.join(str(root), path)
  os.makedirs(os.path.dirname(full), exist_ok=True)
  with open(full, "w") as f:
    f.write(text)


def test_a_reverse_import_is_caught(tmp_path):
  """A lower layer importing a higher one, even inside a function and as
  ``from package import module``, is a violation; a downward one is not."""
  _write(tmp_path, "docs/architecture.md",
         "## Layers\n\n| layer | folder | what |\n|---|---|---|\n"
         "| top | `l2o_scale/top/` | x |\n| low | `l2o_scale/low/`, "
         "`l2o_scale/__init__.py` | y |\n| model | `optimizer/`, "
         "`problems/` | z |\n\n## Next\n")
  _write(tmp_path, "l2o_scale/__init__.py", "")
  _write(tmp_path, "l2o_scale/top/__init__.py", "")
  _write(tmp_path, "l2o_scale/top/a.py",
         "from l2o_scale.low import b\nimport optimizer.c\n")
  _write(tmp_path, "l2o_scale/low/__init__.py", "")
  _write(tmp_path, "l2o_scale/low/b.py", "import os\n")
  _write(tmp_path, "optimizer/c.py", "")
  assert violations(str(tmp_path)) == []
  _write(tmp_path, "l2o_scale/low/b.py",
         "def f():\n  from l2o_scale import top\n  return top\n")
  _write(tmp_path, "problems/d.py", "from l2o_scale.top import a\n")
  _write(tmp_path, "l2o_scale/stray.py", "")
  assert violations(str(tmp_path)) == [
      "l2o_scale/low/b.py (low) imports l2o_scale/top/__init__.py (top), "
      "a layer above it",
      "l2o_scale/stray.py is in no layer of docs/architecture.md",
      "problems/d.py (model) imports l2o_scale/top/a.py (top), a layer "
      "above it"]


# The circle search also covers the reproduction's modules, which no layer
# of the package holds.
CIRCLE_PACKAGES = PACKAGES + ("reproduce",)


def import_circles(root=ROOT):
  """Sets of two or more modules that import each other, directly or
  through others (every import, at module level or inside a function),
  sorted; [] where none do."""
  files = [f for f in source_files(root)]
  for folder, _, names in os.walk(os.path.join(root, "reproduce")):
    files += [os.path.relpath(os.path.join(folder, n), root).replace(
        os.sep, "/") for n in names if n.endswith(".py")]
  graph = {f: _imported_paths(root, f, CIRCLE_PACKAGES) for f in files}

  def reach(start):
    seen, todo = set(), [start]
    while todo:
      for target in graph.get(todo.pop(), ()):
        if target not in seen:
          seen.add(target)
          todo.append(target)
    return seen

  reached = {f: reach(f) for f in graph}
  circles = {tuple(sorted({f} | {g for g in reached[f] if f in reached[g]}))
             for f in graph if f in reached[f]}
  return sorted(list(c) for c in circles)


def test_no_import_circle():
  assert import_circles() == []


def test_a_circle_through_a_function_import_is_caught(tmp_path):
  _write(tmp_path, "l2o_scale/__init__.py", "")
  _write(tmp_path, "l2o_scale/a.py", "from l2o_scale import b\n")
  _write(tmp_path, "l2o_scale/b.py", "import os\n")
  _write(tmp_path, "reproduce/__init__.py", "")
  _write(tmp_path, "reproduce/c.py", "from . import d\n")
  _write(tmp_path, "reproduce/d.py", "X = 1\n")
  assert import_circles(str(tmp_path)) == []
  _write(tmp_path, "l2o_scale/b.py",
         "def f():\n  from l2o_scale import a\n  return a\n")
  _write(tmp_path, "reproduce/d.py", "from reproduce import c\n")
  assert import_circles(str(tmp_path)) == [
      ["l2o_scale/a.py", "l2o_scale/b.py"], ["reproduce/c.py", "reproduce/d.py"]]


def test_no_package_module_imports_a_script():
  """The command-line scripts (metarun.py, metatest.py) read flags at a
  program's boundary; the packages never import them (a library module
  that did would read another program's flags)."""
  scripts = {os.path.splitext(s)[0] for s in SCRIPTS}
  found = []
  for path in source_files():
    if path in SCRIPTS:
      continue
    with open(os.path.join(ROOT, path)) as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module] if isinstance(node, ast.ImportFrom) and
               not node.level else [])
      found += ["{} imports {}".format(path, n) for n in names
                if n and n.split(".")[0] in scripts]
  assert found == []


def test_nothing_reaches_into_keras_private_modules():
  for path in source_files():
    with open(os.path.join(ROOT, path)) as f:
      assert "keras.src" not in f.read(), path


def _python(code):
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, cwd=ROOT, env=env, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]


def test_import_is_light_and_installs_no_hook():
  """``import l2o_scale`` leaves the import system as it was and imports
  neither TensorFlow nor Keras."""
  _python("import sys\nhooks = list(sys.meta_path)\nimport l2o_scale\n"
          "assert sys.meta_path == hooks, sys.meta_path\n"
          "assert 'tensorflow' not in sys.modules\n"
          "assert 'keras' not in sys.modules\n")


def test_import_after_keras_registers_the_optimizer_publicly():
  _python("import keras\nimport l2o_scale\n"
          "found = keras.saving.get_registered_object("
          "'l2o_scale>LearnedOptimizer')\n"
          "assert found is l2o_scale.keras_optimizer.LearnedOptimizer\n")


def test_train_state_fields_have_one_writer(root=ROOT):
  """No module but train_state.py assigns a TrainState field (its loop
  values, progress counters, carried state, random streams): the others
  call its named writers (count, record_evaluation, ...)."""
  fields = {"values", "progress", "carried", "run_start", "problem_start",
            "problem_order", "num_given_problems", "reg_seeds",
            "best_model_idx", "first_evaluation", "robust_best", "nonfinite",
            "divergences", "evaluations", "meta_iteration", "problem_itr",
            "best_evaluation", "stage", "num_eval", "improved"}
  found = []
  for path in source_files(root):
    if path.endswith("meta_training/train_state.py"):
      continue
    with open(os.path.join(root, path)) as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      targets = []
      if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [
            node.target]
      elif (isinstance(node, ast.Call) and isinstance(node.func,
                                                      ast.Attribute) and
            node.func.attr in ("assign", "append", "assign_add")):
        targets = [node.func.value]
      for target in targets:
        for t in (target.elts if isinstance(target, ast.Tuple) else
                  [target]):
          text = ast.unparse(t)
          if (isinstance(t, ast.Attribute) and t.attr in fields and
              re.search(r"(^|\.)(train_)?state\.", text)):
            found.append("{}:{}: {}".format(path, node.lineno, text))
  assert not found, "\n".join(found)
