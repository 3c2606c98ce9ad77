#!/usr/bin/env bash
# Reproduces the L2O-Entropy loss curves with one command: meta-trains the
# variants of the paper, meta-tests them and the hand-designed baselines on
# the MNIST test problems, and draws the figures and the results tables.
# Resumable: finished stages are skipped on the next run.
#
# Usage:
#   bash reproduce/all.sh [--data_dir=DIR] [--out=DIR]
#   REPRO_QUICK=1 bash reproduce/all.sh --data_dir=DIR   # minutes
#   REPRO_MEDIUM=1 | REPRO_STUDY=1 | REPRO_PRETRAINED=1 | REPRO_TINY=1
#                                                         # other sizes
# `bash reproduce/all.sh --help` lists the sizes and every environment
# variable (REPRO_OUT, REPRO_JOBS, REPRO_VARIANTS, REPRO_PROBLEMS,
# REPRO_RECIPE, REPRO_META_LR, REPRO_META_ITERS, REPRO_HEARTBEAT,
# L2O_SCALE_DATA_DIR, PYTHON).
#
# The pipeline is Python (reproduce/pipeline/): the sizes (sizes.py), the
# learned variants (variants.py) and the test problems (problem_list.py) are
# declared there once; plan.py turns them into stages, runner.py runs them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The pipeline is the package reproduce.pipeline of this checkout, found from
# any working directory (relative --out and --data_dir stay relative to it).
# exec: a Ctrl-C or kill reaches the pipeline, which stops its stages.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m reproduce.pipeline "$@"
