"""No module over 500 lines and no function over 50 without a reason: a
docstring line starting "Why long:" (read from the source with ``ast``,
nothing is imported)."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ("metarun.py", "metatest.py")
PACKAGES = ("l2o_scale", "optimizer", "problems", "reproduce")
# Folders of data, not code.
SKIPPED = (os.path.join("reproduce", "results"), os.path.join("reproduce",
                                                              "out"))
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 50
REASON = "Why long:"

def source_files(root=ROOT):
  files = [s for s in SCRIPTS if os.path.isfile(os.path.join(root, s))]
  for package in PACKAGES:
    for folder, _, names in os.walk(os.path.join(root, package)):
      if os.path.relpath(folder, root).startswith(SKIPPED):
        continue
      files += [os.path.relpath(os.path.join(folder, n), root).replace(
          os.sep, "/") for n in names if n.endswith(".py")]
  return sorted(files)


def _has_reason(node):
  doc = ast.get_docstring(node) or ""
  return any(line.strip().startswith(REASON) for line in doc.splitlines())


def _functions(tree):
  """(qualified name, node) of every function, methods as Class.name."""
  found = []

  def visit(node, prefix):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
        found.append((prefix + child.name, child))
        visit(child, prefix + child.name + ".")
      elif isinstance(child, ast.ClassDef):
        visit(child, prefix + child.name + ".")
  visit(tree, "")
  return found


def oversized(root=ROOT):
  """``path`` of each module over the limit and ``path:function`` of each
  function over it, without a reason."""
  found = []
  for path in source_files(root):
    with open(os.path.join(root, path), encoding="utf-8") as f:
      text = f.read()
    tree = ast.parse(text, path)
    if len(text.splitlines()) > MAX_MODULE_LINES and not _has_reason(tree):
      found.append(path)
    for name, node in _functions(tree):
      if (node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES and
          not _has_reason(node)):
        found.append("{}:{}".format(path, name))
  return sorted(found)


def test_no_module_or_function_is_long_without_a_reason():
  assert oversized() == []


def _write(root, path, text):
  full = os.path.join(str(root), path)
  os.makedirs(os.path.dirname(full), exist_ok=True)
  with open(full, "w") as f:
    f.write(text)


def test_a_long_function_or_module_needs_its_reason(tmp_path):
  body = "".join("  x{} = {}\n".format(i, i) for i in range(50))
  _write(tmp_path, "l2o_scale/a.py", "def f():\n" + body)
  _write(tmp_path, "reproduce/b.py", "X = 1\n" * 501)
  _write(tmp_path, "reproduce/results/c.py", "X = 1\n" * 501)
  assert oversized(str(tmp_path)) == ["l2o_scale/a.py:f", "reproduce/b.py"]
  _write(tmp_path, "l2o_scale/a.py", "def f():\n  \"\"\"F.\n\n  Why long: "
         "a reason.\"\"\"\n" + body)
  _write(tmp_path, "reproduce/b.py", "\"\"\"B.\n\nWhy long: a reason.\n\"\"\""
         "\n" + "X = 1\n" * 501)
  assert oversized(str(tmp_path)) == []
