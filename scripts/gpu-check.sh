#!/usr/bin/env bash
# One prepared check of the trainer on a GPU, within 8 minutes: every step has its own time
# limit and the limits never add up to more than 470 s (a step that would exceed what is
# left is given what is left, or skipped when under 10 s remain).
#   1. the tests marked `gpu` (device placement per rank, bf16/fp16, GPU vs CPU agreement,
#      checkpoint + resume, outer-state offload; other packages' gpu tests too),
#   2. the trainer's steady-state gradient and pull steps (GPT-Neo, ResNet) under
#      torch.cuda.set_sync_debug_mode("error"): a step that synchronises fails,
#   3. a multi-process CUDA launch over NCCL (`palsgd train --nproc N --device cuda`, N =
#      the GPUs, at most 4; skipped with one GPU, where NCCL refuses two ranks),
#   4. two processes sharing one GPU over gloo (`--nproc 2 --device cuda --backend gloo`),
#      then the paper recipe's K = 4 workers on one GPU (`palsgd figures --scale paper
#      --smoke-runs 1 --gpus 1`: one run of the plan, shrunk, its 4 ranks on cuda:0 over
#      gloo with CUDA tensors, launched as the real plan launches its runs), then K = 4
#      workers at H = 8 as 4 gloo ranks against one process of 4 stacked workers
#      (benchmarks/bench_workers_one_device.py: the share of time in the syncs, tokens/s),
#   5. one process, NCCL, bf16,
#   6. measured step costs of GPT-Neo-8M and GPT-Neo-125M written as a profile JSON and
#      read back by `palsgd cost predict --profiles-file`, and GPT-Neo-125M's training
#      step at the README sizes eager and compiled, as a share of the bf16 matmul rate
#      measured in the same run,
#   7. the data / offload benchmark on the GPU,
#   8. the simulator's numpy and torch backends (CPU and CUDA) with the roofline,
#   9. the overlapped sync against the blocking one on the emulated slow link, and the memory
#      per rank of PALSGD workers with and without FSDP2 sharding (small sizes, on the
#      host's CPUs with gloo: sharded workers on GPUs need one GPU per rank, more than this
#      check has; the last step, given what is left of the budget).
# Usage: scripts/gpu-check.sh [--dry-run] [--only N,N,...] [--out DIR]
#   --only: run only the steps numbered (the others are recorded as skipped).
#   --dry-run: every step on the CPU with tiny sizes (limits x4, 30 minutes in all, one
#   thread per process: a CPU machine may be shared): the GPU tests are collected (not run),
#   the steps of step 2 count synchronisations on a fake GPU, and the launches of steps
#   3-5 run with CUDA faked in every process (tests/harness: PALSGD_FAKE_GPUS), so that
#   the multi-process CUDA launch path runs up to the first kernel and beyond on the CPU.
# DIR (default gpu-check-out/) holds each step's output (steps/NN-name.log) and
# summary.txt + summary.json (one entry per step: ok, FAILED with its exit code, TIMEOUT,
# skipped; seconds), rewritten after every step, so they exist even when a step fails or
# the script is stopped. Exit code: 0 when every step passed or was skipped, else the exit
# code of the first failing step (124: out of time). Runs from the repository root with the
# active Python (or $PYTHON).
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0
OUT=gpu-check-out
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    --only)
      ONLY="${2:-}"; shift
      if ! [[ "$ONLY" =~ ^[1-9](,[1-9])*$ ]]; then
        echo "gpu-check.sh: --only takes step numbers 1-9 separated by commas, got '$ONLY'" >&2
        exit 2
      fi ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
PY="${PYTHON:-python}"
export PYTHONPATH="${PYTHONPATH:-$PWD}"
HARNESS="$PWD/tests/harness"
mkdir -p "$OUT/steps"
LOG="$OUT/gpu-check.log"
: > "$LOG"
if [ "$DRY" = 1 ]; then
  # a CPU machine, maybe shared: one thread per process, limits four times the GPU run's
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  BUDGET=1800; SCALE=4
else
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
  BUDGET=470; SCALE=1
fi
DEADLINE=$((SECONDS + BUDGET))
FIRST_FAIL=0
ENTRIES=()
CURRENT=""
STEP_PID=""

write_summary() {  # $1: the final line, if any
  {
    echo "gpu-check.sh $([ "$DRY" = 1 ] && echo --dry-run) ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    for e in "${ENTRIES[@]}"; do
      IFS='|' read -r n name status rc secs <<< "$e"
      printf '%-2s %-60s %-8s rc=%-4s %5s s\n' "$n" "$name" "$status" "$rc" "$secs"
    done
    [ -n "${1:-}" ] && echo "$1"
  } > "$OUT/summary.txt"
  {
    printf '{"dry_run": %s, "budget_s": %s, "steps": [' "$([ "$DRY" = 1 ] && echo true || echo false)" "$BUDGET"
    local sep=""
    for e in "${ENTRIES[@]}"; do
      IFS='|' read -r n name status rc secs <<< "$e"
      printf '%s{"step": %s, "name": "%s", "status": "%s", "exit_code": %s, "seconds": %s}' \
        "$sep" "$n" "$name" "$status" "$rc" "$secs"
      sep=", "
    done
    printf '], "exit_code": %s, "note": "%s"}\n' "$FIRST_FAIL" "${1:-}"
  } > "$OUT/summary.json"
}

on_signal() {
  local what="stopped by $1${CURRENT:+ during step $CURRENT}"
  echo "gpu-check.sh: $what" | tee -a "$LOG" >&2
  if [ -n "$STEP_PID" ]; then  # timeout passes the signal on to the step's processes
    kill -TERM "$STEP_PID" 2> /dev/null
    wait "$STEP_PID" 2> /dev/null
  fi
  [ "$FIRST_FAIL" = 0 ] && FIRST_FAIL=130
  write_summary "$what"
  exit "$FIRST_FAIL"
}
trap 'on_signal SIGINT' INT
trap 'on_signal SIGTERM' TERM

record() {  # number, name, status, exit code, seconds
  ENTRIES+=("$1|$2|$3|$4|$5")
  printf '   %s (%s s)\n' "$3" "$5" | tee -a "$LOG"
  if [ "$3" != ok ] && [ "$3" != skipped ] && [ "$FIRST_FAIL" = 0 ]; then FIRST_FAIL="$4"; fi
  write_summary
}

# run_step N NAME LIMIT_S CMD...: CMD (a command or one of the functions below) under
# `timeout` (SIGTERM, SIGKILL 10 s later), its output in steps/N-*.log; the tail is shown.
# The step runs in the background so that a signal to this script is handled at once.
run_step() {
  local n="$1" name="$2" limit="$3"; shift 3
  local left=$((DEADLINE - SECONDS)) file start rc status defs
  echo "== $n. $name" | tee -a "$LOG"
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$n,"* ]]; then
    echo "   skipped: not selected (--only $ONLY)" | tee -a "$LOG"
    record "$n" "$name" skipped 0 0; return
  fi
  if [ "$left" -lt 10 ]; then record "$n" "$name" skipped 0 0; return; fi
  limit=$((limit * SCALE))
  [ "$limit" -gt "$left" ] && limit="$left"
  file="$OUT/steps/$(printf '%02d' "$n")-$(echo "$name" | tr -c 'a-zA-Z0-9\n' '-' | cut -c1-40).log"
  defs="$(declare -p PY OUT HARNESS COMMON PROFILE_ARGS); $(declare -f fake train profile_and_predict overlap_and_shards paper_recipe_one_gpu shared_gpu)"
  CURRENT="$n"
  start=$SECONDS
  timeout --kill-after=10 "$limit" bash -c "$defs; \"\$@\"" "step-$n" "$@" \
    < /dev/null > "$file" 2>&1 &
  STEP_PID=$!
  wait "$STEP_PID"
  rc=$?
  STEP_PID=""
  CURRENT=""
  tail -4 "$file" | sed 's/^/   | /' | tee -a "$LOG"
  case "$rc" in
    0) status=ok ;;
    124|137) status=TIMEOUT; rc=124 ;;
    *) status=FAILED ;;
  esac
  record "$n" "$name" "$status" "$rc" "$((SECONDS - start))"
}

skip_step() {  # number, name, reason
  echo "== $1. $2" | tee -a "$LOG"
  echo "   skipped: $3" | tee -a "$LOG"
  record "$1" "$2" skipped 0 0
}

# fake GPUs for one command: fake N LOGDIR CMD...
fake() {
  local n="$1" logdir="$2"; shift 2
  mkdir -p "$logdir"
  PYTHONPATH="$HARNESS:$PYTHONPATH" PALSGD_FAKE_GPUS="$n" PALSGD_FAKE_GPU_LOG="$logdir" "$@"
}

if [ "$DRY" = 1 ]; then
  NGPU=0
  DEV=cpu
  COMMON=(--no-progress --T 4 --seq-len 16 --batch-size 2 --A 2 --H 2 --T0 1
          --eval-interval 2 --eval-batches 1 --log-interval 2 --checkpoint-interval 2)
  PROFILE_ARGS=(--dry-run)
  DATA_ARGS=(--steps 1 --stories 400 --num-workers 1 --device cpu)
  SIM_ARGS=(--backends-only --quick --steps 2)
else
  NGPU=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
  if [ "$NGPU" -lt 1 ]; then
    echo "gpu-check.sh: CUDA is not available (use --dry-run on a CPU machine)" >&2; exit 2
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
  DEV=cuda
  COMMON=(--no-progress --T 60 --seq-len 64 --batch-size 8 --A 2 --H 8 --T0 4
          --eval-interval 20 --eval-batches 2 --log-interval 10 --checkpoint-interval 20)
  PROFILE_ARGS=()
  DATA_ARGS=(--steps 4 --stories 20000 --num-workers 4 --device cuda)
  SIM_ARGS=(--backends-only --steps 8)
fi
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -p no:randomly)
train() { "$PY" -m palsgd train "${COMMON[@]}" --overwrite "$@"; }
# the paper recipe's K = 4 workers sharing one GPU: one run of the plan, shrunk
paper_recipe_one_gpu() {
  "$PY" -m palsgd figures --scale paper --smoke-runs 1 --nproc 4 --gpus 1 --no-progress \
    --out "$OUT/paper-recipe-1gpu"
}
# step 4: two gloo ranks on one GPU, then the paper recipe's four
if [ "$DRY" = 1 ]; then
  shared_gpu() {
    fake 1 "$OUT/fake-gpu-log-4" train --nproc 2 --device cuda --backend gloo \
      --output-dir "$OUT/run-gloo-2proc" &&
    fake 1 "$OUT/fake-gpu-log-4-paper" paper_recipe_one_gpu &&
    "$PY" benchmarks/bench_workers_one_device.py --dry-run --K 2 --out "$OUT/bench-workers-one-gpu.json"
  }
else
  shared_gpu() {
    train --nproc 2 --device cuda --backend gloo --output-dir "$OUT/run-gloo-2proc" &&
    paper_recipe_one_gpu &&
    "$PY" benchmarks/bench_workers_one_device.py --device cuda --out "$OUT/bench-workers-one-gpu.json"
  }
fi
profile_and_predict() {
  "$PY" benchmarks/gpu_profile.py --out "$OUT" "${PROFILE_ARGS[@]}" &&
  "$PY" -m palsgd cost predict --setting gptneo-8m-tinystories --profile measured-local \
    --profiles-file "$OUT/gpu-profile.json" --output "$OUT/cost-predict-8m.json"
}

if [ "$DRY" = 1 ]; then
  GPU_TESTS=($(grep -l "mark.gpu" tests/test_*.py))
  run_step 1 "tests marked gpu (collected)" 60 "${PYTEST[@]}" -m gpu --collect-only "${GPU_TESTS[@]}"
  run_step 2 "steady-state steps, syncs counted on a fake GPU" 60 \
    "${PYTEST[@]}" tests/test_sync_free_steps.py -k "no_host_sync or gpt_neo_attention"
  run_step 3 "2 ranks over NCCL, one fake GPU each" 60 \
    fake 2 "$OUT/fake-gpu-log-3" train --nproc 2 --device cuda --output-dir "$OUT/run-nccl"
  run_step 4 "2 ranks + the paper recipe's 4 share one fake GPU (gloo); 4 ranks vs 4 stacked" \
    90 shared_gpu
  run_step 5 "1 process, NCCL, on a fake GPU" 40 \
    fake 1 "$OUT/fake-gpu-log-5" train --nproc 1 --device cuda --backend nccl \
    --output-dir "$OUT/run-1proc"
else
  run_step 1 "tests marked gpu" 120 "${PYTEST[@]}" -m gpu -k "not steady_state" tests
  run_step 2 "steady-state steps under set_sync_debug_mode(error)" 45 \
    "${PYTEST[@]}" -m gpu tests/test_gpu.py -k steady_state
  if [ "$NGPU" -ge 2 ]; then
    N=$((NGPU < 4 ? NGPU : 4))
    run_step 3 "$N ranks over NCCL, one GPU each" 45 \
      train --nproc "$N" --device cuda --output-dir "$OUT/run-nccl"
  else
    skip_step 3 "ranks over NCCL, one GPU each" "one GPU: NCCL needs a GPU per rank"
  fi
  run_step 4 "2 ranks + the paper recipe's 4 share one GPU (gloo); 4 ranks vs 4 stacked" 150 \
    shared_gpu
  run_step 5 "1 process, NCCL, bf16" 40 \
    train --nproc 1 --device cuda --backend nccl --precision bf16 --output-dir "$OUT/run-1proc"
fi

run_step 6 "step costs, 125M eager vs compiled -> profile JSON -> cost predict" 150 \
  profile_and_predict
run_step 7 "data time per step and offload memory" 40 \
  "$PY" benchmarks/bench_data.py --out "$OUT/bench-data.json" "${DATA_ARGS[@]}"
run_step 8 "simulator backends (numpy, torch CPU/CUDA) and roofline" 50 \
  env OMP_NUM_THREADS=1 "$PY" benchmarks/bench_simulate.py "${SIM_ARGS[@]}" \
  --out "$OUT/bench-simulate-backends.json"
overlap_and_shards() {
  env OMP_NUM_THREADS=1 "$PY" benchmarks/bench_overlap.py --algorithms local_sgd --taus 2 \
    --rounds 2 --batch 32 --repeats 1 --windows 0 1 --mechanism-repeats 1 \
    --json "$OUT/bench-overlap.json" &&
  env OMP_NUM_THREADS=1 "$PY" benchmarks/bench_sharded.py --model gptneo-tiny --H 2 \
    --json "$OUT/bench-sharded.json"
}
run_step 9 "overlapped vs blocking sync, sharded-worker memory (CPU, gloo)" 60 \
  overlap_and_shards

if [ "$FIRST_FAIL" = 0 ]; then
  final="gpu-check.sh: every step passed or was skipped; results in $OUT"
else
  final="gpu-check.sh: a step failed (first failure: exit code $FIRST_FAIL); results in $OUT"
fi
echo "$final" | tee -a "$LOG"
write_summary "$final"
exit "$FIRST_FAIL"
