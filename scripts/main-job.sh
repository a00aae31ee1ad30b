#!/usr/bin/env bash
# Sets up .venv if needed, then runs the main job: Monte-Carlo verification of every
# encoded bound on the embedded default problems (no downloads, no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
. "${VENV:-.venv}/bin/activate"
palsgd verify --out reports/verify "$@"
