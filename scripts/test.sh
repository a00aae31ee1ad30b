#!/usr/bin/env bash
# Sets up .venv if needed, then runs lint and the default test suite (slow tests excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
. "${VENV:-.venv}/bin/activate"
ruff check core theory empirical paper_figures palsgd tests benchmarks
ruff format --check core theory empirical paper_figures palsgd tests benchmarks
python -m pytest -q -m "not slow" -n 2 "$@"
