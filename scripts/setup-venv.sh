#!/usr/bin/env bash
# Creates (or reuses) the virtual environment .venv with the project and its test extras.
# torch: the CPU build of 2.13.0 by default; set TORCH_SPEC to bring another build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
fi
python -m pip install -q -e '.[test]'
