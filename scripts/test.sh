#!/usr/bin/env bash
# The test suite, as `make test` and CI run it (after scripts/install.sh and
# scripts/install_browser.sh): lint first, then every marker, the real local model and the
# browser included. Under CI=true a skipped test of a required component (the local model,
# llama-server, Chromium, the sandbox kernels...) fails the run: tests/required_components.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${SELFHEAL_VENV:-$ROOT/.venv}/bin/python"

# ruff, mypy, lint-imports (`make lint`)
bash scripts/lint.sh

# the unit, integration, real-model and real-browser tests (pytest exits 5 if it found none,
# which fails this script like any other non-zero exit)
"$PY" -m pytest tests -p no:cacheprovider -ra

# the tutorials, executed top to bottom with the scripted mock model
SELFHEAL_MODEL=mock "$PY" -m pytest --nbmake notebooks -p no:cacheprovider
