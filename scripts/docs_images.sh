#!/usr/bin/env bash
# The screenshots in docs/img (README, docs/notebook.md): the real-browser tests run with their
# screenshots sent to a temporary folder, then JupyterLab's approval, candidates, finished-view and
# %selfheal approval shots are copied to docs/img. The tests themselves never write into the repository.
# Needs what scripts/install_browser.sh installs. Usage: bash scripts/docs_images.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${SELFHEAL_VENV:-$ROOT/.venv}/bin/python"
SHOTS="$(mktemp -d)"
trap 'rm -rf "$SHOTS"' EXIT

# CI=true: a missing browser fails here instead of skipping and copying nothing
CI=true SELFHEAL_BROWSER_ARTIFACTS="$SHOTS" "$PY" -m pytest tests/browser -p no:cacheprovider -q \
    -k jupyterlab

mkdir -p docs/img
cp "$SHOTS/jupyterlab_approval.png" docs/img/notebook_approval.png
cp "$SHOTS/jupyterlab_candidates.png" docs/img/notebook_candidates.png
cp "$SHOTS/jupyterlab_view.png" docs/img/notebook_view.png
cp "$SHOTS/jupyterlab_magic_approval.png" docs/img/notebook_selfheal_approval.png
echo "docs/img: notebook_approval.png notebook_candidates.png notebook_view.png" \
    "notebook_selfheal_approval.png updated"
