"""One line naming the machine a result was measured on: CPU model, cores,
TensorFlow and Python versions (results pages state it next to their
numbers). ``python -m reproduce.machine`` prints it."""

import importlib.metadata
import os
import platform

from l2o_scale.runs import entry_point


def describe():
  model = ""
  try:
    with open("/proc/cpuinfo") as f:
      model = next((l.split(":", 1)[1].strip() for l in f
                    if l.startswith("model name")), "")
  except OSError:
    pass
  try:
    tf = "TensorFlow " + importlib.metadata.version("tensorflow")
  except importlib.metadata.PackageNotFoundError:
    tf = "TensorFlow (version unknown)"
  return "{}, {} CPU cores, {}, Python {}".format(
      model or platform.processor() or platform.machine(), os.cpu_count(), tf,
      platform.python_version())


def main():
  print(describe())


if __name__ == "__main__":
  entry_point.run_main("python -m reproduce.machine", main)
