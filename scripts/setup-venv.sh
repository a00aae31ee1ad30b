#!/usr/bin/env bash
# Creates (or reuses) the virtual environment .venv with the project and its test extras.
# torch: the CPU build of 2.13.0 by default; set TORCH_SPEC to bring another build.
# The installers' output goes to $VENV/setup.log (SETUP_LOG overrides), not to the terminal:
# two lines on success; on failure the log's last 40 lines and exit code 1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PY="${PYTHON:-python3}"
mkdir -p "$VENV"
LOG="${SETUP_LOG:-$VENV/setup.log}"
echo "setup-venv: installing the project into $VENV (installer output: $LOG)"
install() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  . "$VENV/bin/activate"
  python -m pip install -q --upgrade pip
  if ! python -c "import torch" 2>/dev/null; then
    python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
  fi
  python -m pip install -q -e '.[test]'
}
if ! (install) >"$LOG" 2>&1; then
  echo "setup-venv: failed; the last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi
echo "setup-venv: ready ($("$VENV/bin/python" --version 2>&1), torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
