#!/usr/bin/env bash
# Lint, as `make lint` and `make test` (scripts/test.sh) run it: ruff (rules and format), mypy
# (the packages and scripts pyproject.toml names) and the import contracts.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${SELFHEAL_VENV:-$ROOT/.venv}/bin"
PATHS=(selfheal tests evaluation benchmarks scripts)
"$BIN/ruff" check "${PATHS[@]}"
"$BIN/ruff" format --check "${PATHS[@]}"
"$BIN/mypy"
"$BIN/lint-imports"
