#!/usr/bin/env bash
# Sets up .venv if needed, then runs lint and the default test suite (slow tests excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
. "${VENV:-.venv}/bin/activate"
# The suite starts a few hundred Python processes: each would compile the project's modules
# anew (about 0.25 s) where byte code may not be written; it is cached in the environment.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$PWD/${VENV:-.venv}/pycache}"
ruff check core theory empirical paper_figures palsgd tests benchmarks
ruff format --check core theory empirical paper_figures palsgd tests benchmarks
python -m pytest -q -m "not slow" -n 2 "$@"
