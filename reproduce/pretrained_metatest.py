"""Meta-tests every shipped pretrained optimizer with the documented command
and writes what it gives as a Markdown table (docs/keras.md includes it).

Why: numbers copied into documentation by hand go stale when the shipped
optimizers or the code change. This runs the command the docs show, for each
shipped optimizer (as it is, and with its card's settings for long runs:
weight decay and the end-of-run decay of the step) and for Adam at lr 1e-3
in the same settings, and writes the commands, the machine, the date and
the results into one file that the docs include as it is.

Usage (a few minutes on 2 cores)::

  python -m reproduce.pretrained_metatest --data_dir=DIR \\
      [--out=reproduce/results/pretrained/metatest.md] [--steps=3000]
"""

import datetime
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

from l2o_scale import pretrained
from l2o_scale.runs import entry_point
from problems import datasets
from reproduce import machine
from reproduce import plot
from reproduce import styles

PROG = "python -m reproduce.pretrained_metatest"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SEEDS = "6,12,18"
PROBLEM = "mnist-mlp-sigmoid"  # folder of the results, as all.sh names it
# The shipped optimizers: a package folder, or the checkout's.
PRETRAINED_DIRS = (os.path.join(ROOT, "l2o_scale", "pretrained"),
                   os.path.join(HERE, "pretrained"))


def shipped_names():
  """Every shipped optimizer (``l2o_scale.pretrained.names()``), in the
  plots' order."""
  return styles.ordered(pretrained.names())


def supports_pretrained_flag(python):
  """True when metatest.py takes ``--pretrained=NAME``."""
  out = subprocess.run([python, "metatest.py", "--helpfull"], cwd=ROOT,
                       capture_output=True, text=True, check=False)
  return "--pretrained" in out.stdout


def optimizer_flags(name, by_name):
  """metatest.py flags that select shipped optimizer ``name``."""
  if by_name:
    return ["--pretrained=" + name]
  for folder in PRETRAINED_DIRS:
    if os.path.isdir(os.path.join(folder, name)):
      return ["--train_dir=" + os.path.relpath(os.path.join(folder, name),
                                               ROOT),
              "--restore_model_name=model.ckpt-0"]
  raise FileNotFoundError("no shipped optimizer {} in {}".format(
      name, " or ".join(PRETRAINED_DIRS)))


def command(python, optimizer, model_name, steps, save_dir, data_dir):
  cmd = [python, "metatest.py"] + optimizer + [
      "--include_mnist_mlp_problems", "--num_testing_itrs={}".format(steps),
      "--seeds=" + SEEDS, "--heldout_every=500",
      "--model_name=" + model_name, "--save_dir=" + save_dir]
  if data_dir:
    cmd.append("--data_dir=" + data_dir)
  return cmd


def shown(cmd, save_dir, data_dir):
  """The command as the docs show it: no local folders."""
  words = ["python"] + cmd[1:]
  text = " ".join(shlex.quote(w) for w in words)
  text = text.replace(save_dir, "D")
  if data_dir:
    text = text.replace(data_dir, "<MNIST folder>")
  return text


def table(results_dir, models, steps):
  """The Markdown table of ``models`` [(model_name, label)] from metatest's
  outputs in ``results_dir/<PROBLEM>/``."""
  losses, heldout = plot.load_results(results_dir)
  by_opt = losses[PROBLEM]
  held = heldout.get(PROBLEM, {})
  seeds = SEEDS.split(",")
  lines = ["| optimizer | " + " | ".join(
      "seed {}: final train loss / held-out accuracy".format(s)
      for s in seeds) + " | mean |", "|---" * (len(seeds) + 2) + "|"]
  for model, label in models:
    finals = plot.final_losses(by_opt[model])
    acc = plot.final_heldout(held.get(model, {}))
    cells = ["{:.4f} / {:.4f}".format(l, a) for l, a in zip(finals, acc)]
    lines.append("| {} | {} | {:.4f} / {:.4f} |".format(
        label, " | ".join(cells), float(np.mean(finals)),
        float(np.mean(acc))))
  return ("{} steps on the MNIST MLP 784-20-10 (sigmoid), the problem the "
          "optimizers were meta-trained on; test seeds {}. Final train loss: mean of the last {} minibatch "
          "losses; held-out accuracy: on the MNIST test split after the "
          "last step.\n\n".format(steps, SEEDS.replace(",", ", "),
                                  plot.FINAL_WINDOW) + "\n".join(lines) + "\n")


def main(argv=None):
  parser = entry_point.ArgumentParser(
      prog=PROG, description=__doc__.split("\n\n")[0])
  datasets.add_data_dir_argument(parser)
  parser.add_argument("--out", default=os.path.join(
      HERE, "results", "pretrained", "metatest.md"))
  parser.add_argument("--steps", type=int, default=3000)
  parser.add_argument("--python", default=sys.executable)
  args = parser.parse_args(argv)
  data_dir = datasets.resolve_data_dir(args.data_dir)
  data_dir = os.path.abspath(data_dir) if data_dir else None
  by_name = supports_pretrained_flag(args.python)
  shown_cmds = []
  with tempfile.TemporaryDirectory() as work:
    save_dir = os.path.join(work, PROBLEM)
    runs = []
    for name in shipped_names():
      runs.append((name, name, optimizer_flags(name, by_name)))
      settings = pretrained.long_run_settings(name)
      if settings:
        runs.append((name + "-long-run-settings",
                     name + ", the card's settings for long runs",
                     optimizer_flags(name, by_name) +
                     pretrained.long_run_flags(settings)))
    runs.append(("Adam-lr1e-3", "Adam (lr 1e-3)",
                 ["--test_optimizer=Adam", "--baseline_learning_rate=1e-3"]))
    for model, _, flags in runs:
      cmd = command(args.python, flags, model, args.steps, save_dir, data_dir)
      print("+", " ".join(cmd), flush=True)
      subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
      shown_cmds.append(shown(cmd, save_dir, data_dir))
    text = table(work, [(m, l) for m, l, _ in runs], args.steps)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    f.write("Generated by `python -m reproduce.pretrained_metatest` on {} "
            "({}).\n\n".format(datetime.date.today().isoformat(),
                               machine.describe()))
    f.write(text)
    f.write("\nThe commands:\n\n```bash\n" + "\n".join(shown_cmds) +
            "\n```\n")
  print(open(args.out).read())
  return 0


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
