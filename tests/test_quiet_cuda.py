"""TF's CUDA probing is hidden on CPU-only machines, real messages are not."""

import os
import subprocess
import sys
import textwrap

import pytest

from l2o_scale.runs import quiet_cuda

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lines as TF 2.21 prints them on a machine without a CUDA driver.
PROBING = (
    "WARNING: All log messages before absl::InitializeLog() is called are "
    "written to STDERR\n"
    "I0000 00:00:1795425747.045073    2464 cudart_stub.cc:31] Could not find "
    "cuda drivers on your machine, GPU will not be used.\n"
    "E0000 00:00:1795425752.779731    2464 cuda_platform.cc:52] failed call "
    "to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR "
    "(303)\n")
REAL = ("E0000 00:00:1795425752.8 2464 some_kernel.cc:1] real error: out of "
        "memory\nW0000 00:00:1795425752.9 2464 x.cc:2] a real warning\n")


def test_drop_probing_lines_keeps_everything_else():
  assert quiet_cuda.drop_probing_lines(PROBING + REAL) == REAL
  assert quiet_cuda.drop_probing_lines(REAL) == REAL
  assert quiet_cuda.drop_probing_lines(PROBING) == ""


def _run(code, env_extra=None, path_first=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.update(env_extra or {})
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (path_first, ROOT, env.get("PYTHONPATH")) if p)
  return subprocess.run([sys.executable, "-c", code], env=env,
                        capture_output=True, text=True, timeout=300)


def _fake_tensorflow(folder):
  """A stand-in ``tensorflow`` package in ``folder`` that writes probing
  and real lines to fd 2 from 'C++' (os.write, below Python's sys.stderr)
  while importing and listing devices."""
  fake = folder / "tensorflow"
  fake.mkdir()
  (fake / "__init__.py").write_text(textwrap.dedent("""
      import os, types
      os.write(2, {probing!r}.encode())
      os.write(2, b"import-time real line\\n")
      def _list(kind):
        os.write(2, {real!r}.encode())
        return []
      config = types.SimpleNamespace(list_physical_devices=_list)
      """).format(probing=PROBING, real=REAL))


def test_captured_stderr_is_filtered_not_lost(tmp_path):
  """A stand-in ``tensorflow`` writes probing and real lines to fd 2 from
  'C++' (os.write, below Python's sys.stderr) while importing and listing
  devices: only the real ones reach the terminal, in order."""
  if quiet_cuda.has_cuda_driver():
    pytest.skip("this machine has a CUDA driver: nothing is filtered")
  _fake_tensorflow(tmp_path)
  code = ("from l2o_scale.runs import quiet_cuda\n"
          "quiet_cuda.import_tensorflow()\n")
  out = _run(code, path_first=str(tmp_path))
  assert out.returncode == 0, out.stderr
  assert out.stderr == "import-time real line\n" + REAL
  shown = _run(code, {"L2O_SCALE_SHOW_CUDA_PROBING": "1"},
               path_first=str(tmp_path))
  assert "cuInit" in shown.stderr  # The opt-out shows everything.


def test_real_tf_import_prints_no_probing_lines():
  if quiet_cuda.has_cuda_driver():
    pytest.skip("this machine has a CUDA driver: nothing is filtered")
  out = _run("from l2o_scale.runs import quiet_cuda\n"
             "tf = quiet_cuda.import_tensorflow()\n"
             "print(tf.reduce_sum(tf.ones([3])).numpy())\n")
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == "3.0"
  assert "cuInit" not in out.stderr and "cuda drivers" not in out.stderr


def test_a_log_line_tf_prints_twice_is_shown_once():
  """The oneDNN note comes once per TF library loaded: the second copy
  (other timestamp and pid) is dropped, other lines are kept in order."""
  text = ("I0000 00:00:1795577665.032223     653 port.cc:153] oneDNN custom "
          "operations are on.\n"
          "some warning\n"
          "I0000 00:00:1795577666.541301     654 port.cc:153] oneDNN custom "
          "operations are on.\n"
          "some warning\n")
  assert quiet_cuda.drop_probing_lines(text) == (
      "I0000 00:00:1795577665.032223     653 port.cc:153] oneDNN custom "
      "operations are on.\nsome warning\nsome warning\n")


def test_info_lines_are_dropped_where_the_level_hides_info():
  """TF prints the oneDNN note before its logging starts, past
  TF_CPP_MIN_LOG_LEVEL: the filter drops info lines where the level hides
  info, and keeps warnings, errors and lines of no log format."""
  text = ("I0000 00:00:1795577665.032223     653 port.cc:153] oneDNN custom "
          "operations are on.\n" + REAL + "plain line\n")
  assert quiet_cuda.drop_probing_lines(text, info=True) == (
      REAL + "plain line\n")
  assert quiet_cuda.drop_probing_lines(text) == text


def test_the_keras_optimizer_import_prints_no_probing_lines():
  """``from l2o_scale.keras_optimizer import LearnedOptimizer`` (TensorFlow
  and Keras not imported yet): TF's start-up lines filtered as in the
  command-line programs."""
  if quiet_cuda.has_cuda_driver():
    pytest.skip("this machine has a CUDA driver: nothing is filtered")
  out = _run("from l2o_scale.keras_optimizer import LearnedOptimizer\n"
             "import tensorflow as tf\n"
             "print(len(tf.config.list_physical_devices()))\n",
             {"TF_CPP_MIN_LOG_LEVEL": "0"})
  assert out.returncode == 0, out.stderr
  assert "cuInit" not in out.stderr and "cuda drivers" not in out.stderr, (
      out.stderr)


def test_install_filters_the_first_import_whenever_it_comes(tmp_path):
  """quiet_cuda.install() (every entry point's): the import of TensorFlow
  that a library makes later, here through a module importing it, is
  filtered; the finder leaves sys.meta_path once it has found it."""
  if quiet_cuda.has_cuda_driver():
    pytest.skip("this machine has a CUDA driver: nothing is filtered")
  _fake_tensorflow(tmp_path)
  (tmp_path / "user_library.py").write_text("import tensorflow\n")
  out = _run("import sys\n"
             "from l2o_scale.runs import quiet_cuda\n"
             "quiet_cuda.install()\n"
             "import user_library\n"
             "print(sum(type(f).__name__ == '_QuietTensorFlowImport'\n"
             "          for f in sys.meta_path))\n",
             path_first=str(tmp_path))
  assert out.returncode == 0, out.stderr
  assert out.stderr == "import-time real line\n" + REAL
  assert out.stdout == "0\n"


def test_the_keras_snippet_starts_quietly():
  """docs/keras.md's start (``from l2o_scale.keras_optimizer import
  LearnedOptimizer`` before ``import keras``, then a fit compiled by XLA)
  with no TF_CPP_MIN_LOG_LEVEL set: none of TensorFlow's or XLA's info
  lines (the CPU instructions, the XLA service, "Compiled cluster using
  XLA!"), on any machine; a level the user sets is kept."""
  code = ("import os\n"
          "from l2o_scale.keras_optimizer import LearnedOptimizer\n"
          "import keras\n"
          "import numpy as np\n"
          "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
          "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
          "model.compile(optimizer=LearnedOptimizer.pretrained('l2o-scale'),\n"
          "              loss='mse', jit_compile=True)\n"
          "model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  out = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr
  assert out.stdout == "1\n"
  info = [l for l in out.stderr.splitlines()
          if l.startswith("I0") or "To enable the following" in l]
  assert not info, out.stderr
  mine = _run("import os\n"
              "from l2o_scale.keras_optimizer import LearnedOptimizer\n"
              "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n",
              {"TF_CPP_MIN_LOG_LEVEL": "0"})
  assert mine.stdout == "0\n", mine.stderr
