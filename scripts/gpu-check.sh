#!/usr/bin/env bash
# GPU checks: the CUDA tests (marker "gpu") and the simulator backends benchmark on the GPU.
# Run on a machine with a CUDA device, from the repository root, with the project's venv:
#   scripts/gpu-check.sh [OUT_DIR]
# Without CUDA the tests are skipped and the benchmark times the CPU backends only.
set -euo pipefail
out="${1:-gpu-check-out}"
mkdir -p "$out"
export PYTHONPATH="${PYTHONPATH:-$PWD}"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
python -m pytest -q -m gpu -rs tests/test_simulate_torch.py
OMP_NUM_THREADS=1 python benchmarks/bench_simulate.py --backends-only --steps 8 \
    --out "$out/bench_simulate_backends.json"
