#!/usr/bin/env bash
# One prepared check of the trainer on a GPU (under 8 minutes on one H200):
#   1. the tests marked `gpu` (device placement per rank, bf16/fp16, GPU vs CPU agreement,
#      checkpoint + resume, outer-state offload; other packages' gpu tests too),
#   2. a 2-process run sharing the GPU over gloo (`palsgd train --nproc 2 --backend gloo`),
#   3. a 1-process NCCL run,
#   4. measured step costs of GPT-Neo-8M and GPT-Neo-125M (forward+backward, pull, flat
#      all-reduce, consensus host time, peak memory) written as a profile JSON, read back by
#      `palsgd cost predict --profiles-file`,
#   5. the data / offload benchmark on the GPU,
#   6. the simulator's numpy and torch backends (CPU and CUDA) with the RNG-inclusive roofline,
#   7. the overlapped sync against the blocking one on the emulated slow link, and the memory
#      per rank of PALSGD workers with and without FSDP2 sharding (both on the host's CPUs
#      with gloo: sharded workers on GPUs need one GPU per rank, more than this check has).
# Usage: scripts/gpu-check.sh [--dry-run] [--out DIR]
#   --dry-run: the same steps on the CPU with tiny sizes (checks the script end to end).
# Every result lands in DIR (default gpu-check-out/); the exit code is that of the first
# failing step (0 when all pass). Runs from the repository root with the active Python.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY=0
OUT=gpu-check-out
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
PY="${PYTHON:-python}"
export PYTHONPATH="${PYTHONPATH:-$PWD}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
: > "$LOG"
step() { echo "== $*" | tee -a "$LOG"; SECONDS_AT=$SECONDS; }
done_step() { echo "   ok ($((SECONDS - SECONDS_AT)) s)" | tee -a "$LOG"; }

if [ "$DRY" = 1 ]; then
  DEV=cpu; BACKEND2=gloo; BACKEND1=gloo; TRAIN_T=6; PROFILE_ARGS=(--dry-run)
  DATA_ARGS=(--steps 1 --stories 400 --num-workers 1 --device cpu)
  TESTS=(tests/test_gpu.py tests/test_simulate_torch.py)
  SIM_ARGS=(--backends-only --quick --steps 1)
  OVERLAP_ARGS=(--algorithms local_sgd --taus 2 --rounds 2 --batch 32 --repeats 1
                --windows 0 1 --mechanism-repeats 1)
  SHARD_ARGS=(--model gptneo-tiny --H 2)
else
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
    echo "gpu-check.sh: CUDA is not available (use --dry-run on a CPU machine)" >&2; exit 2; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
  DEV=cuda; BACKEND2=gloo; BACKEND1=nccl; TRAIN_T=60; PROFILE_ARGS=()
  DATA_ARGS=(--steps 4 --stories 20000 --num-workers 4 --device cuda)
  TESTS=(tests)
  SIM_ARGS=(--backends-only --steps 8)
  OVERLAP_ARGS=(--repeats 1)
  SHARD_ARGS=(--model gptneo-8m)
fi
COMMON=(--no-progress --T "$TRAIN_T" --seq-len 64 --batch-size 8 --A 2 --H 8 --T0 4
        --eval-interval 20 --eval-batches 2 --log-interval 10 --checkpoint-interval 20)

step "1. tests marked gpu"
"$PY" -m pytest -q -m gpu -p no:cacheprovider "${TESTS[@]}" 2>&1 | tee -a "$LOG" | tail -3
done_step

step "2. two processes sharing the device over gloo"
"$PY" -m palsgd train "${COMMON[@]}" --nproc 2 --device "$DEV" --backend "$BACKEND2" \
  --output-dir "$OUT/run-gloo-2proc" --overwrite 2>&1 | tail -2 | tee -a "$LOG"
done_step

step "3. one process, backend $BACKEND1"
"$PY" -m palsgd train "${COMMON[@]}" --nproc 1 --device "$DEV" --backend "$BACKEND1" \
  --precision "$([ "$DRY" = 1 ] && echo fp32 || echo bf16)" \
  --output-dir "$OUT/run-1proc" --overwrite 2>&1 | tail -2 | tee -a "$LOG"
done_step

step "4. step costs of GPT-Neo -> profile JSON -> palsgd cost predict"
"$PY" benchmarks/gpu_profile.py --out "$OUT" "${PROFILE_ARGS[@]}" 2>&1 | tail -4 | tee -a "$LOG"
"$PY" -m palsgd cost predict --setting gptneo-8m-tinystories --profile measured-local \
  --profiles-file "$OUT/gpu-profile.json" --output "$OUT/cost-predict-8m.json" > /dev/null
echo "   cost predict read the profile: $OUT/cost-predict-8m.json" | tee -a "$LOG"
done_step

step "5. data time per step and offload memory"
"$PY" benchmarks/bench_data.py --out "$OUT/bench-data.json" "${DATA_ARGS[@]}" 2>&1 \
  | tail -9 | tee -a "$LOG"
done_step

step "6. simulator backends (numpy, torch CPU/CUDA) and roofline"
OMP_NUM_THREADS=1 "$PY" benchmarks/bench_simulate.py "${SIM_ARGS[@]}" \
  --out "$OUT/bench-simulate-backends.json" 2>&1 | tail -12 | tee -a "$LOG"
done_step

step "7. overlapped vs blocking sync (emulated link) and sharded-worker memory (CPU, gloo)"
OMP_NUM_THREADS=1 "$PY" benchmarks/bench_overlap.py "${OVERLAP_ARGS[@]}" \
  --json "$OUT/bench-overlap.json" 2>&1 | tail -20 | tee -a "$LOG"
OMP_NUM_THREADS=1 "$PY" benchmarks/bench_sharded.py "${SHARD_ARGS[@]}" \
  --json "$OUT/bench-sharded.json" 2>&1 | tail -4 | tee -a "$LOG"
done_step

echo "gpu-check.sh: all steps passed; results in $OUT" | tee -a "$LOG"
