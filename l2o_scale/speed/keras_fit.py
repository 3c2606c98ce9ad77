"""``python -m l2o_scale.speed.keras_fit``: the time of one Keras ``fit``
step with each optimizer on one model, taking turns in one process.

The model is an MLP of 784 inputs (MNIST's pixel count), two hidden ReLU
layers of ``--width`` units and 10 outputs (670k parameters at the default
512), trained on random data of batch ``--batch_size`` with
``jit_compile=True``. Each round fits every optimizer for ``--steps`` steps
after one compiling epoch, in turn, so that load on the machine falls on
all alike; the report gives each optimizer's median over rounds and its
ratio to AdamW's median (speed drifts between runs, ratios in one run far
less).
"""

import json
import statistics
import time

import numpy as np

from l2o_scale.runs import entry_point

# Keras and the optimizers are imported inside the functions that time
# them: --help and a refused argument load no TensorFlow.

PROG = "python -m l2o_scale.speed.keras_fit"
OPTIMIZERS = ("adamw", "adam", "learned_adamw", "learned_adamw_zero",
              "schedule_free_adamw")


def _optimizer(name, total_steps):
  import keras  # pylint: disable=g-import-not-at-top
  from l2o_scale import learned_adamw  # pylint: disable=g-import-not-at-top
  from l2o_scale.steps import controlled_adamw  # pylint: disable=g-import-not-at-top
  if name == "adamw":
    return keras.optimizers.AdamW()
  if name == "adam":
    return keras.optimizers.Adam()
  if name == "schedule_free_adamw":
    return keras.optimizers.ScheduleFreeAdamW()
  if name == "learned_adamw_zero":
    return learned_adamw.LearnedAdamW(total_steps)
  if name == "learned_adamw":
    # A controller with a non-zero output layer: the whole step runs.
    theta = controlled_adamw.initial_theta(0)
    theta[-controlled_adamw.HIDDEN_UNITS * 2 - 2:] = 0.1
    return learned_adamw.LearnedAdamW(total_steps, controller=theta)
  raise ValueError("unknown optimizer {!r}; the choices: {}".format(
      name, ", ".join(OPTIMIZERS)))


def time_steps(names, width=512, batch_size=128, steps=200, rounds=3,
               seed=0):
  """{name: [seconds per step, one per round]}."""
  import keras  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((batch_size * steps, 784)).astype(np.float32)
  y = rng.integers(0, 10, batch_size * steps)
  models = {}
  for name in names:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((784,)),
                              keras.layers.Dense(width, activation="relu"),
                              keras.layers.Dense(width, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=_optimizer(name, 10 ** 6), jit_compile=True,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    model.fit(x[:batch_size * 5], y[:batch_size * 5], batch_size=batch_size,
              epochs=1, verbose=0)  # compiles
    models[name] = model
  times = {name: [] for name in names}
  for _ in range(rounds):
    for name in names:
      start = time.perf_counter()
      models[name].fit(x, y, batch_size=batch_size, epochs=1, verbose=0,
                       shuffle=False)
      times[name].append((time.perf_counter() - start) / steps)
  return times, models[names[0]].count_params()


def main(argv=None):
  parser = entry_point.ArgumentParser(prog=PROG, description=__doc__.split(
      "\n\n")[0])
  parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
  parser.add_argument("--width", type=int, default=512)
  parser.add_argument("--batch_size", type=int, default=128)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--json", help="also write the numbers here")
  args = parser.parse_args(argv)
  names = [n for n in args.optimizers.split(",") if n]
  for name in names:
    if name not in OPTIMIZERS:
      parser.error("--optimizers: unknown {!r}; the choices: {}".format(
          name, ", ".join(OPTIMIZERS)))
  if any(v < 1 for v in (args.width, args.batch_size, args.steps,
                         args.rounds)):
    parser.error("--width, --batch_size, --steps and --rounds must be >= 1")
  times, params = time_steps(names, args.width, args.batch_size, args.steps,
                             args.rounds)
  medians = {n: statistics.median(t) for n, t in times.items()}
  reference = medians.get("adamw", medians[names[0]])
  print("Keras fit, MLP 784-{0}-{0}-10 ({1:,} parameters), batch {2}, XLA, "
        "{3} rounds of {4} steps:".format(args.width, params,
                                          args.batch_size, args.rounds,
                                          args.steps))
  for name in names:
    print("  {:22s} {:7.2f} ms per step  {:5.2f} x AdamW".format(
        name, 1e3 * medians[name], medians[name] / reference))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(parameters=params, width=args.width,
                     batch_size=args.batch_size, steps=args.steps,
                     rounds=args.rounds, seconds_per_step=times,
                     median_ratio_to_adamw={n: medians[n] / reference
                                            for n in names}), f, indent=1)


if __name__ == "__main__":
  entry_point.run_main(PROG, main)
