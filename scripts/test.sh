#!/usr/bin/env bash
# Sets up .venv if needed, then runs lint and the default test suite (slow tests excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
. "${VENV:-.venv}/bin/activate"
# The suite starts a few hundred Python processes: where byte code may not be written
# (PYTHONDONTWRITEBYTECODE), each compiles the project's modules anew (about 0.25 s). They
# are compiled once here, into the usual __pycache__ folders (git ignores them).
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 core theory empirical paper_figures palsgd tests benchmarks > /dev/null
ruff check core theory empirical paper_figures palsgd tests benchmarks
ruff format --check core theory empirical paper_figures palsgd tests benchmarks
python -m pytest -q -m "not slow" -n 2 "$@"
