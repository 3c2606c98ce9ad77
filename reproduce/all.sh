#!/usr/bin/env bash
# Reproduces the L2O-Entropy loss curves with one command.
#
# Why: the paper claims that a flatness (Hessian) regularizer, curriculum
# learning and imitation make L2O-Scale generalize better. This script
# meta-trains the variants needed to check that claim, meta-tests each of them
# and the hand-designed baselines on the MNIST test problems, and draws the
# loss curves and a results table, so anyone can check the claim on their own
# machine. It is resumable: every stage leaves a marker file when it
# finishes and is skipped on the next run (delete the marker, or the output
# folder, to redo it); meta-training itself also resumes from its last
# checkpoint if it was interrupted.
#
# Usage:
#   bash reproduce/all.sh [--data_dir=DIR] [--out=DIR]
# Sizes (environment):
#   (default)        the paper's test (10,000 steps, 5 seeds, the four MNIST
#                    problems, held-out accuracy, flatness) of 13 learned
#                    optimizers: 4 variants x 3 training seeds meta-trained
#                    with the long recipe (docs/meta-training.md), plus the
#                    paper's own command; hours on 2 cores (4 h and more)
#   REPRO_MEDIUM=1   the result in docs/reproduction.md (about 2 h on 2
#                    cores): meta-trains with the stable recipe
#                    (docs/meta-training.md) L2O-Scale, the Hessian-ESD
#                    regularizer at alpha 1e-4 and 1e-2 and reg.+CL+MT, 3
#                    training seeds each; meta-tests them (2,000 steps, 3
#                    seeds, held-out accuracy, flatness) against the
#                    original's and tuned baselines
#   REPRO_PRETRAINED=1  minutes: meta-tests only the shipped pretrained
#                    optimizers (l2o_scale/pretrained/) against the baselines
#   REPRO_QUICK=1    a few minutes: few meta-iterations, a few hundred test
#                    steps (checks the pipeline; nothing is learned)
#   REPRO_TINY=1     smoke test (tests/test_reproduce.py): one learned variant,
#                    1 meta-iteration, 1 seed, 20 test steps, one problem
# Other environment variables:
#   L2O_SCALE_DATA_DIR  offline MNIST folder (same as --data_dir); unset and
#                       no --data_dir: tensorflow-datasets provides full MNIST
#   REPRO_OUT           output folder (default reproduce/out/<size>)
#   REPRO_JOBS          stages run in parallel (default 2 = the 2 CPU cores)
#   REPRO_VARIANTS      space-separated learned optimizers to train and test
#                       now, in this order (default: the size's list; run
#                       again without it to do the rest: finished stages are
#                       skipped). Any variant below (variant_flags) with an
#                       optional .t<seed>, e.g. hess-1e-3.t2 jacob-1e-4.t1
#   REPRO_PROBLEMS      space-separated test problems to meta-test on now
#                       (default: the size's list, e.g. mnist-mlp-sigmoid
#                       mnist-mlp-relu mnist-mlp-deeper mnist-conv); with
#                       REPRO_VARIANTS it runs a part of a size that takes
#                       too long whole
#   REPRO_RECIPE        the metarun recipe of the medium size (default fast)
#                       and of the full size (default long: the recipe of the
#                       shipped optimizers)
#   REPRO_META_LR       meta learning rate (quick/tiny 1e-3; medium and full:
#                       the recipe's)
#   REPRO_HEARTBEAT     seconds between the lines that say a stage is still
#                       running (default 15)
#   PYTHON              python interpreter (default python)
# Progress: a line when a stage starts and ends, the latter with the count
# of finished stages and an estimate of the time left (from the mean time of
# finished stages of the same kind); a line every REPRO_HEARTBEAT seconds
# while a stage runs, with the last line of its log. Ctrl-C stops the
# running stages too; finished ones are kept.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
PYTHON="${PYTHON:-python}"
DATA_DIR="${L2O_SCALE_DATA_DIR:-}"
OUT=""

for arg in "$@"; do
  case "$arg" in
    --data_dir=*) DATA_DIR="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    -h|--help) awk 'NR > 1 && /^#/ {print} /^set -euo/ {exit}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "all.sh: unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

# ---------------------------------------------------------------- sizes
# Meta-training: metarun's fixed-unroll mode with 20-step partial unrolls.
# The curriculum variant (--if_cl) ignores FIX_NUM_STEPS: its curriculum
# starts at 100 steps (5 unrolls) and evaluates at 200.
# Learned optimizers: "<variant>" (one training seed, TRAIN_SEED) or
# "<variant>.t<seed>" (training seed <seed>); variant_flags names the flags.
TRAIN_SEED=1
RECIPE=""     # the metarun recipe (medium and full sizes), l2o_scale/config/recipes
TUNED=()       # tuned baselines "<Opt>-lr<lr>"
CONV_LEARNED=""  # learned optimizers tested on the conv net ("" = all)
FLATNESS=0     # metatest --flatness_probes
EVAL_PERIOD=1
PRETRAINED_ONLY=0
PAPER_FLAGS=()  # the paper-cmd variant's own schedule (full size)
# The learned variants of the medium and full sizes, 3 training seeds each
# (the conv net: training seed 1 only), and their tuned baselines.
SEED1_VARIANTS="l2o-scale.t1 hess-1e-4.t1 hess-1e-2.t1 l2o-entropy-reg-cl-mt.t1"
SEEDED_VARIANTS=()
for seed in 1 2 3; do
  for v in $SEED1_VARIANTS; do SEEDED_VARIANTS+=("${v%.t1}.t$seed"); done
done
TUNED_SWEEPS=(Adam-lr3e-4 Adam-lr1e-3 Adam-lr3e-3 Adam-lr1e-2
              SGD-lr0.1 SGD-lr0.3 SGD-lr1)
if [[ "${REPRO_TINY:-0}" == 1 ]]; then
  SIZE=tiny
  META_ITERS=1; FIX_NUM_STEPS=20; FIX_NUM_STEPS_EVAL=20; EVAL_EPOCHS=1
  META_LR=1e-3
  TEST_STEPS=20; TEST_STEPS_CONV=20; SEEDS=6; HELDOUT_EVERY=10
  VARIANTS=(l2o-scale)
  PROBLEMS=(mnist-mlp-sigmoid)
elif [[ "${REPRO_QUICK:-0}" == 1 ]]; then
  SIZE=quick
  META_ITERS=3; FIX_NUM_STEPS=40; FIX_NUM_STEPS_EVAL=40; EVAL_EPOCHS=1
  # The original's 1e-6 leaves 3 meta-iterations' variants bit-identical;
  # 1e-3 at least moves them (by ~1e-6 in the losses: the TF1 RMSProp starts
  # its mean square at 1). The quick size checks the pipeline, not the paper.
  META_LR=1e-3
  TEST_STEPS=300; TEST_STEPS_CONV=100; SEEDS=6,12,18; HELDOUT_EVERY=50
  VARIANTS=(l2o-scale l2o-entropy-paper-cmd l2o-entropy-reg l2o-entropy-reg-cl-mt)
  PROBLEMS=(mnist-mlp-sigmoid mnist-mlp-relu mnist-mlp-deeper mnist-conv)
elif [[ "${REPRO_MEDIUM:-0}" == 1 || "${REPRO_PRETRAINED:-0}" == 1 ]]; then
  SIZE=medium
  # The recipe sets the meta-optimizer, its learning rate, the unrolls and
  # the evaluations; 10 meta-iterations leave the curriculum room for its
  # stages (3 evaluations each) and the regularizers 50 meta-updates.
  RECIPE="${REPRO_RECIPE:-fast}"
  META_ITERS=10; FIX_NUM_STEPS=""; FIX_NUM_STEPS_EVAL=""; EVAL_EPOCHS=""
  TEST_STEPS=2000; TEST_STEPS_CONV=300; SEEDS=6,12,18; HELDOUT_EVERY=250
  FLATNESS=10
  # 12 optimizers, what fits about 2 h on 2 cores: the Hessian regularizer at
  # the paper's alpha and at 100x it. Other alphas and the Jacobian
  # regularizer: REPRO_VARIANTS="hess-1e-3.t1 jacob-1e-4.t1 ...".
  VARIANTS=("${SEEDED_VARIANTS[@]}")
  CONV_LEARNED="$SEED1_VARIANTS"
  TUNED=("${TUNED_SWEEPS[@]}")
  PROBLEMS=(mnist-mlp-sigmoid mnist-mlp-relu mnist-mlp-deeper mnist-conv)
  if [[ "${REPRO_PRETRAINED:-0}" == 1 ]]; then
    SIZE=pretrained
    PRETRAINED_ONLY=1
    # Every shipped optimizer (l2o_scale/pretrained/, as the package lists
    # them).
    read -r -a VARIANTS <<< "$(cd "$ROOT" && "$PYTHON" -c \
      'from l2o_scale import pretrained; print(" ".join(pretrained.names()))')"
    if [[ ${#VARIANTS[@]} == 0 ]]; then
      echo "all.sh: no shipped optimizer found in l2o_scale/pretrained/" >&2
      exit 1
    fi
    CONV_LEARNED=""
    TUNED=(Adam-lr1e-3 SGD-lr0.1)
  fi
else
  SIZE=full
  # The paper's test: 10,000 steps, 5 seeds, the four MNIST problems. The
  # learned variants are meta-trained with the long-horizon recipe (their
  # unrolls see late phases of 10,000-step runs), 3 training seeds each;
  # the paper's own command (the original's schedule, meta learning rate
  # 1e-6: PAPER_FLAGS) is one more variant, trained once.
  RECIPE="${REPRO_RECIPE:-long}"
  META_ITERS=30; FIX_NUM_STEPS=""; FIX_NUM_STEPS_EVAL=""; EVAL_EPOCHS=""
  PAPER_FLAGS=(--num_meta_iterations=100 --fix_unroll=True
               --fix_unroll_length=20 --fix_num_steps=100
               --fix_num_steps_eval=100 --evaluation_epochs=20
               --meta_learning_rate=1e-6)
  TEST_STEPS=10000; TEST_STEPS_CONV=10000; SEEDS=6,12,18,24,30
  HELDOUT_EVERY=500
  FLATNESS=10
  VARIANTS=("${SEEDED_VARIANTS[@]}")
  VARIANTS+=(l2o-entropy-paper-cmd.t1)
  CONV_LEARNED="$SEED1_VARIANTS l2o-entropy-paper-cmd.t1"
  TUNED=("${TUNED_SWEEPS[@]}")
  PROBLEMS=(mnist-mlp-sigmoid mnist-mlp-relu mnist-mlp-deeper mnist-conv)
fi
META_LR="${REPRO_META_LR:-${META_LR:-}}"
# What every meta-training of this size is given: a recipe (and the
# meta-iterations), or the schedule itself.
if [[ -n "$RECIPE" ]]; then
  TRAIN_FLAGS=(--recipe="$RECIPE" --num_meta_iterations="$META_ITERS")
  [[ -n "$META_LR" ]] && TRAIN_FLAGS+=(--meta_learning_rate="$META_LR")
else
  TRAIN_FLAGS=(--num_meta_iterations="$META_ITERS" --fix_unroll=True
               --fix_unroll_length=20 --fix_num_steps="$FIX_NUM_STEPS"
               --fix_num_steps_eval="$FIX_NUM_STEPS_EVAL"
               --evaluation_epochs="$EVAL_EPOCHS"
               --evaluation_period="$EVAL_PERIOD"
               --meta_learning_rate="$META_LR")
fi
BASELINES=(SGD Adam Adagrad "${TUNED[@]}")
JOBS="${REPRO_JOBS:-2}"
OUT="${OUT:-${REPRO_OUT:-$ROOT/reproduce/out/$SIZE}}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
LOGS="$OUT/logs"; MARKS="$OUT/.stages"; TIMES="$OUT/timings.tsv"
mkdir -p "$LOGS" "$MARKS"

variant_flags() {
  local reg="--reg_optimizer=True --reg_option=hessian-esd --alpha=1e-4"
  case "${1%.t*}" in
    # L2O-Scale: no regularizer.
    l2o-scale) echo "" ;;
    # The paper's command; --regularize_time=none keeps the regularizer's
    # switch off in every unroll (docs/meta-training.md, quirks), so it trains without it.
    l2o-entropy-paper-cmd) echo "$reg --regularize_time=none" ;;
    # The same with the switch on in every unroll: the regularizer is active.
    l2o-entropy-reg) echo "$reg --regularize_time=always" ;;
    # Enhanced L2O-Entropy: active regularizer + curriculum + imitation.
    l2o-entropy-reg-cl-mt)
      echo "$reg --regularize_time=always --if_cl=True --if_mt=True --mt_ratio=0.1 --mt_k=1" ;;
    # Medium size: each regularizer at alpha 1e-4, 1e-3, 1e-2, active.
    hess-*) echo "--reg_optimizer=True --reg_option=hessian-esd --alpha=${1#hess-} --regularize_time=always" | sed 's/\.t[0-9]*//' ;;
    jacob-*) echo "--reg_optimizer=True --reg_option=jacob --alpha=${1#jacob-} --regularize_time=always" | sed 's/\.t[0-9]*//' ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}

problem_flag() {
  case "$1" in
    mnist-mlp-sigmoid) echo --include_mnist_mlp_problems ;;
    mnist-mlp-relu) echo --include_mnist_mlp_relu_problems ;;
    mnist-mlp-deeper) echo --include_mnist_mlp_deeper_problems ;;
    mnist-conv) echo --include_mnist_conv_problems ;;
    *) echo "unknown problem $1" >&2; return 1 ;;
  esac
}

# REPRO_VARIANTS: any variant of variant_flags, optionally .t<seed>.
if [[ -n "${REPRO_VARIANTS:-}" ]]; then
  for v in $REPRO_VARIANTS; do
    if [[ "$PRETRAINED_ONLY" == 1 ]]; then
      if [[ " ${VARIANTS[*]} " != *" $v "* ]]; then
        echo "all.sh: REPRO_VARIANTS names $v, which is not shipped (shipped: ${VARIANTS[*]})" >&2
        exit 2
      fi
      continue
    fi
    if ! [[ "$v" =~ ^(l2o-scale|l2o-entropy-paper-cmd|l2o-entropy-reg|l2o-entropy-reg-cl-mt|(hess|jacob)-[0-9]+(\.[0-9]+)?(e-?[0-9]+)?)(\.t[0-9]+)?$ ]]; then
      echo "all.sh: REPRO_VARIANTS names $v, which is no known variant (known: l2o-scale l2o-entropy-paper-cmd l2o-entropy-reg l2o-entropy-reg-cl-mt hess-<alpha> jacob-<alpha>, each optionally .t<seed>)" >&2
      exit 2
    fi
  done
  read -r -a VARIANTS <<< "$REPRO_VARIANTS"
fi

# REPRO_PROBLEMS: a subset of the size's problems.
if [[ -n "${REPRO_PROBLEMS:-}" ]]; then
  for p in $REPRO_PROBLEMS; do
    if [[ " ${PROBLEMS[*]} " != *" $p "* ]]; then
      echo "all.sh: REPRO_PROBLEMS names $p, which is not a problem of the $SIZE size (its problems: ${PROBLEMS[*]})" >&2
      exit 2
    fi
  done
  read -r -a PROBLEMS <<< "$REPRO_PROBLEMS"
fi

test_steps() { [[ "$1" == mnist-conv ]] && echo "$TEST_STEPS_CONV" || echo "$TEST_STEPS"; }
# XLA halves the learned optimizer's step on the MLPs; on a CPU it makes the
# conv net's convolutions several times slower (metatest.py --jit_compile).
xla_flag() { [[ "$1" == mnist-conv ]] && echo --jit_compile=False || echo --jit_compile=True; }

DATA_FLAG=()
if [[ -n "$DATA_DIR" ]]; then
  DATA_DIR="$(cd "$DATA_DIR" && pwd)"
  DATA_FLAG=("--data_dir=$DATA_DIR")
fi

# A folder holds one size only: refuse to mix results of different settings.
CONFIG="size=$SIZE meta_iters=$META_ITERS meta_lr=$META_LR recipe=$RECIPE fix_num_steps=$FIX_NUM_STEPS fix_num_steps_eval=$FIX_NUM_STEPS_EVAL evaluation_epochs=$EVAL_EPOCHS test_steps=$TEST_STEPS test_steps_conv=$TEST_STEPS_CONV seeds=$SEEDS heldout_every=$HELDOUT_EVERY train_seed=$TRAIN_SEED data_dir=${DATA_DIR:-tfds}"
if [[ -f "$OUT/config.txt" && "$(cat "$OUT/config.txt")" != "$CONFIG" ]]; then
  echo "all.sh: $OUT holds results of other settings:" >&2
  echo "  there: $(cat "$OUT/config.txt")" >&2
  echo "  now:   $CONFIG" >&2
  echo "Use another --out (or REPRO_OUT), or delete that folder." >&2
  exit 1
fi
echo "$CONFIG" > "$OUT/config.txt"

cd "$ROOT"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

# ---------------------------------------------------------------- plan
describe_data() {
  "$PYTHON" - "${DATA_DIR:-}" <<'EOF'
import sys
from problems import datasets
folder = sys.argv[1] or None
try:
  train, _ = datasets.load_mnist_arrays("train", folder)
  test, _ = datasets.load_mnist_arrays("test", folder)
except datasets.DataNotFoundError as e:
  sys.exit(str(e))
if folder:
  kind = ("offline MNIST subset" if len(train) < 60000 else "offline MNIST")
  print("{} from {} (train split {} images, test split {})".format(
      kind, folder, len(train), len(test)))
else:
  kind = "full MNIST via tensorflow-datasets"
  print("{} (train split {} images, test split {})".format(
      kind, len(train), len(test)))
# Second line: the short name used in the figure title.
print("{}, {:,} train / {:,} test images".format(kind, len(train), len(test)))
EOF
}

echo "== L2O-Entropy reproduction, size: $SIZE =="
echo "output:  $OUT (logs in logs/, stage markers in .stages/: delete a marker to redo its stage)"
echo -n "data:    "
DATA_LINES="$(describe_data 2>/dev/null)" || {
  echo; describe_data >&2 || true; exit 1; }
DATA_DESC="$(echo "$DATA_LINES" | tail -2 | head -1)"
DATA_SHORT="$(echo "$DATA_LINES" | tail -1)"
echo "$DATA_DESC"
echo "$DATA_DESC" > "$OUT/data.txt"
echo "plan:"
if [[ "$PRETRAINED_ONLY" == 1 ]]; then
  echo "  1. no meta-training: the shipped optimizers in l2o_scale/pretrained/ (${VARIANTS[*]}; how each was trained: the card in its run_record.json)"
else
  echo "  1. meta-train ${#VARIANTS[@]} optimizer(s) with metarun.py (MNIST MLP 784-20-10 sigmoid; training seed $TRAIN_SEED, or k for a name ending .tk):"
  if [[ -n "$RECIPE" ]]; then
    echo "     $META_ITERS meta-iteration(s) with the $RECIPE recipe (l2o_scale/config/recipes/$RECIPE.flags)"
  else
    echo "     $META_ITERS meta-iteration(s) at meta learning rate $META_LR; fixed 20-step unrolls, $FIX_NUM_STEPS steps per meta-iteration, evaluation every $EVAL_PERIOD: $FIX_NUM_STEPS_EVAL steps x $EVAL_EPOCHS run(s)"
  fi
  for v in "${VARIANTS[@]}"; do printf '     %-24s %s\n' "$v" "$(variant_flags "$v")"; done
fi
echo "  2. meta-test with metatest.py on: ${PROBLEMS[*]}"
echo "     optimizers: ${VARIANTS[*]} (restored from model.ckpt-0, the best evaluated) ${BASELINES[*]}"
echo "     seeds $SEEDS; $TEST_STEPS steps ($TEST_STEPS_CONV on the conv net); held-out accuracy every $HELDOUT_EVERY steps"
[[ -n "$CONV_LEARNED" && " ${PROBLEMS[*]} " == *" mnist-conv "* ]] && echo "     conv net: learned optimizers $CONV_LEARNED only"
[[ "$FLATNESS" != 0 ]] && echo "     flatness of the solution on the MLPs (Hessian trace with $FLATNESS probes, top eigenvalue)"
echo "  3. reproduce/plot.py -> $OUT/figures/loss_curves.{png,pdf}, $OUT/figures/results.md"
echo "  stages in parallel: $JOBS"
echo

# ---------------------------------------------------------------- stages
# Every stage of this run, in order (filled by queue), for the progress
# lines: "[done] NAME in 52 s (stage 5/40; about 18 min left)".
ALL_STAGES=()
HEARTBEAT="${REPRO_HEARTBEAT:-15}"  # seconds between "still running" lines
RUNNING="$OUT/.running"             # pid files of the running stages
mkdir -p "$RUNNING"
INVOCATION_START=$(date +%s)

# stage_kind NAME: stages of one kind take about as long as each other
# (meta-training, with or without curriculum; a problem's learned or
# baseline meta-tests; the plot).
stage_kind() {
  local name="$1" p opt
  case "$name" in
    train-*cl-mt*) echo train-cl; return ;;
    train-*) echo train; return ;;
  esac
  for p in "${PROBLEMS[@]}"; do
    if [[ "$name" == "test-$p-"* ]]; then
      opt="${name#test-$p-}"
      if [[ " ${BASELINES[*]} " == *" $opt "* ]]; then
        echo "test-$p-baseline"
      else
        echo "test-$p-learned"
      fi
      return
    fi
  done
  echo "$name"
}

# remaining_seconds: estimated wall time of the stages not done yet, from
# the mean time of finished stages of the same kind (else of the same
# family, train or test; else of all), divided by the stages run in
# parallel. Prints nothing before any stage has finished.
remaining_seconds() {
  local s n secs
  {
    for s in "${ALL_STAGES[@]}"; do
      [[ -f "$MARKS/$s.done" ]] || printf 'todo\t%s\n' "$(stage_kind "$s")"
    done
    if [[ -f "$TIMES" ]]; then
      while IFS=$'\t' read -r n secs; do
        printf 'time\t%s\t%s\n' "$(stage_kind "$n")" "$secs"
      done < "$TIMES"
    fi
  } | awk -F'\t' -v jobs="$JOBS" '
    function family(k) { sub(/-.*/, "", k); return k }
    $1 == "time" { s[$2] += $3; c[$2]++; f = family($2); fs[f] += $3; fc[f]++
                   all += $3; n++ }
    $1 == "todo" { todo[++t] = $2 }
    END {
      if (n == 0) exit
      for (i = 1; i <= t; i++) {
        k = todo[i]; f = family(k)
        if (c[k]) total += s[k] / c[k]
        else if (fc[f]) total += fs[f] / fc[f]
        else total += all / n
      }
      printf "%.0f\n", total / (t < jobs ? (t > 0 ? t : 1) : jobs)
    }'
}

format_seconds() {
  local s="$1"
  if (( s < 90 )); then echo "${s} s"
  elif (( s < 5400 )); then echo "$(( (s + 30) / 60 )) min"
  else printf '%d h %02d min\n' $(( s / 3600 )) $(( (s % 3600 + 30) / 60 )); fi
}

# progress_text: "stage K/N; about T left" after a stage finished.
progress_text() {
  local s done=0 left
  for s in "${ALL_STAGES[@]}"; do [[ -f "$MARKS/$s.done" ]] && done=$((done + 1)); done
  if (( done == ${#ALL_STAGES[@]} )); then
    echo "stage $done/${#ALL_STAGES[@]}; all done"
    return
  fi
  left="$(remaining_seconds)"
  if [[ -n "$left" ]]; then
    echo "stage $done/${#ALL_STAGES[@]}; about $(format_seconds "$left") left"
  else
    echo "stage $done/${#ALL_STAGES[@]}"
  fi
}

# last_news LOG: the stage's last line worth showing (not the logged command
# nor TensorFlow's start-up notes), shortened.
last_news() {
  local line
  line="$(grep -v -E '^(\+ |[IWEF][0-9]{4} |$)' "$1" 2>/dev/null | tail -n 1 | tr -d '\r' | cut -c1-110)"
  echo "${line:-starting}"
}

# run_stage NAME CMD...: skips NAME if its marker exists, else runs CMD with
# output to logs/NAME.log, records the wall time and writes the marker.
# While CMD runs, a line every $HEARTBEAT seconds says so, with the last
# line of its log.
run_stage() {
  local name="$1"; shift
  local log="$LOGS/$name.log"
  if [[ -f "$MARKS/$name.done" ]]; then
    echo "[skip] $name (done earlier)"
    return 0
  fi
  echo "[run ] $name  (log: ${log#$OUT/})"
  local start end pid now next=$HEARTBEAT status=0
  start=$(date +%s.%N)
  { echo "+ $*"; exec "$@"; } > "$log" 2>&1 &
  pid=$!
  echo "$pid" > "$RUNNING/$name.pid"
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    now=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%d", b-a}')
    if (( now >= next )) && kill -0 "$pid" 2>/dev/null; then
      echo "[... ] $name running for $(format_seconds "$now"): $(last_news "$log")"
      next=$((next + HEARTBEAT))
    fi
  done
  wait "$pid" || status=$?
  rm -f "$RUNNING/$name.pid"
  if (( status != 0 )); then
    echo "[FAIL] $name; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
  end=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')
  printf '%s\t%s\n' "$name" "$secs" >> "$TIMES"
  touch "$MARKS/$name.done"
  echo "[done] $name in ${secs} s ($(progress_text))"
}

# Ctrl-C or a kill: stop the running stages too (they run in the
# background, where a shell without job control makes them ignore Ctrl-C),
# keep what finished.
stop_stages() {
  trap - INT TERM
  local f
  # The background shells first, so that none reports its stage as failed.
  kill -TERM $(jobs -p) 2>/dev/null
  for f in "$RUNNING"/*.pid; do
    [[ -f "$f" ]] && kill -TERM "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
  echo "all.sh: interrupted; finished stages are kept: run the same command again to continue" >&2
  exit 130
}
trap stop_stages INT TERM
rm -f "$RUNNING"/*.pid

# Runs the queued commands of queue Q (an array name) with at most $JOBS at
# a time; fails if any fails (after letting the others finish, so their
# work is kept).
FIRST=(); SECOND=()
queue() {
  local -n q="$1"; shift
  q+=("$(printf '%q ' "$@")")
  ALL_STAGES+=("$2")  # "$1" is run_stage
}
run_queue() {
  local -n q="$1"
  local cmd failed="$OUT/.failed"
  rm -f "$failed"
  for cmd in "${q[@]}"; do
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n || true; done
    { eval "$cmd" || touch "$failed"; } &
  done
  wait
  [[ ! -f "$failed" ]]
}

train_dir() {
  if [[ "$PRETRAINED_ONLY" == 1 ]]; then echo "$ROOT/l2o_scale/pretrained/$1"
  else echo "$OUT/train/$1"; fi
}
train_seed() { [[ "$1" == *.t* ]] && echo "${1##*.t}" || echo "$TRAIN_SEED"; }

# common_flags P: metatest's flags for problem P, in COMMON.
common_flags() {
  COMMON=("$(problem_flag "$1")" --num_testing_itrs="$(test_steps "$1")"
          --save_dir="$OUT/test/$1" --seeds="$SEEDS"
          --heldout_every="$HELDOUT_EVERY" --progress_every=1000000
          --overwrite "$(xla_flag "$1")" "${DATA_FLAG[@]}")
  # The flatness of the solution (Hessian trace, top eigenvalue) on the MLPs.
  if [[ "$FLATNESS" != 0 && "$1" != mnist-conv ]]; then
    COMMON+=(--flatness_probes="$FLATNESS")
  fi
}

# First queue: meta-training, then the baselines' tests (they need no
# trained optimizer, so they fill the slots the last, longest trainings
# leave free). Second queue: the learned optimizers' tests.
if [[ "$PRETRAINED_ONLY" != 1 ]]; then
  for v in "${VARIANTS[@]}"; do
    # shellcheck disable=SC2046
    flags_of_v=("${TRAIN_FLAGS[@]}")
    if [[ "${v%.t*}" == l2o-entropy-paper-cmd && ${#PAPER_FLAGS[@]} -gt 0 ]]; then
      flags_of_v=("${PAPER_FLAGS[@]}")
    fi
    queue FIRST run_stage "train-$v" "$PYTHON" metarun.py --train_dir="$(train_dir "$v")" \
      "${flags_of_v[@]}" --seed="$(train_seed "$v")" \
      $(variant_flags "$v") "${DATA_FLAG[@]}"
  done
fi
for p in "${PROBLEMS[@]}"; do
  common_flags "$p"
  for b in "${BASELINES[@]}"; do
    if [[ "$b" == *-lr* ]]; then
      queue FIRST run_stage "test-$p-$b" "$PYTHON" metatest.py --test_optimizer="${b%%-lr*}" \
        --baseline_learning_rate="${b##*-lr}" --model_name="$b" "${COMMON[@]}"
    else
      queue FIRST run_stage "test-$p-$b" "$PYTHON" metatest.py --test_optimizer="$b" \
        --model_name="$b" "${COMMON[@]}"
    fi
  done
done
for p in "${PROBLEMS[@]}"; do
  common_flags "$p"
  for v in "${VARIANTS[@]}"; do
    if [[ "$p" == mnist-conv && -n "$CONV_LEARNED" && " $CONV_LEARNED " != *" $v "* ]]; then
      continue
    fi
    queue SECOND run_stage "test-$p-$v" "$PYTHON" metatest.py --test_optimizer=L2o \
      --train_dir="$(train_dir "$v")" --restore_model_name=model.ckpt-0 \
      --model_name="$v" "${COMMON[@]}"
  done
done
ALL_STAGES+=(plot)
DONE_AT_START=0
for s in "${ALL_STAGES[@]}"; do [[ -f "$MARKS/$s.done" ]] && DONE_AT_START=$((DONE_AT_START + 1)); done
echo "stages: ${#ALL_STAGES[@]} ($DONE_AT_START done earlier); a line every ${HEARTBEAT} s while one runs"
run_queue FIRST || { echo "all.sh: meta-training or a baseline's test failed" >&2; exit 1; }
run_queue SECOND || { echo "all.sh: meta-testing failed" >&2; exit 1; }

# This invocation's wall time up to the last meta-test, for results.md
# ("The run"), if it ran any stage.
DONE_NOW=0
for s in "${ALL_STAGES[@]}"; do [[ -f "$MARKS/$s.done" ]] && DONE_NOW=$((DONE_NOW + 1)); done
if (( DONE_NOW > DONE_AT_START )); then
  printf '%s\t%s\t%s\t%s\n' "$(date -u -d "@$INVOCATION_START" +%Y-%m-%d)" \
    "$(( $(date +%s) - INVOCATION_START ))" "$(( DONE_NOW - DONE_AT_START ))" \
    "$("$PYTHON" reproduce/machine.py)" >> "$OUT/invocations.tsv"
  rm -f "$MARKS/plot.done"
fi

TEST_STEPS_TEXT="$TEST_STEPS test steps"
if [[ "$TEST_STEPS_CONV" != "$TEST_STEPS" && " ${PROBLEMS[*]} " == *" mnist-conv "* ]]; then
  TEST_STEPS_TEXT="$TEST_STEPS_TEXT, $TEST_STEPS_CONV on the conv net"
fi
# The plot is cheap; redo it whenever a test stage is newer than its marker.
if [[ -f "$MARKS/plot.done" ]] && \
   [[ -n "$(find "$MARKS" -name 'test-*.done' -newer "$MARKS/plot.done")" ]]; then
  rm -f "$MARKS/plot.done"
fi
run_stage plot "$PYTHON" reproduce/plot.py --results_dir="$OUT/test" \
  --out_dir="$OUT/figures" --logs_dir="$LOGS" --run_dir="$OUT" \
  --title="L2O-Entropy reproduction, $SIZE size ($META_ITERS meta-iteration(s), $TEST_STEPS_TEXT); $DATA_SHORT"

echo
echo "wall time per stage (s):"
sort -u "$TIMES" | awk -F'\t' '{printf "  %-40s %8.1f\n", $1, $2; s+=$2} END {printf "  %-40s %8.1f\n", "sum", s}'
echo
echo "results: $OUT/figures/loss_curves.png, loss_curves.pdf, results.md"
cat "$OUT/figures/results.md"
