#!/usr/bin/env bash
# Build llama-cpp-python with CMake flags that work on this CPU class, cache the wheel,
# install it into the current Python, and smoke-test it in a subprocess.
#
#   scripts/install_llama_cpp.sh            # uses $PYTHON, else the active python
#
# Environment:
#   SELFHEAL_LLAMA_CMAKE_ARGS   override the CMake flags (e.g. "-DGGML_NATIVE=ON")
#   SELFHEAL_LLAMA_VERSION      llama-cpp-python version (default 0.3.36)
#   SELFHEAL_CACHE_DIR          cache root (default ${XDG_CACHE_HOME:-~/.cache}/selfheal)
#   SELFHEAL_LLAMA_SMOKE=1      re-run the smoke check even when the build is already installed
#   PYTHON                      interpreter to install into
#
# Wheels are cached under $SELFHEAL_CACHE_DIR/wheels/<hash of version+flags+python>/, so a
# second run (or a fresh venv) installs in seconds instead of rebuilding for minutes.
# Why these flags: see docs/local_model.md ("Which build").
set -euo pipefail

say() { printf '[install_llama_cpp] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
VERSION="${SELFHEAL_LLAMA_VERSION:-0.3.36}"
CACHE="${SELFHEAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/selfheal}"

# Portable x86-64 CPU build: AVX2/FMA/F16C kernels, no AVX-512 and no AMX. GGML_NATIVE=ON
# (the default) compiles for the build machine and crashed on AVX-512 Xeons; see the docs.
CPU_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
ARM_ARGS="-DGGML_NATIVE=OFF"
CUDA_ARGS="-DGGML_CUDA=ON"

has_gpu() {
  command -v nvcc >/dev/null 2>&1 || return 1
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi -L 2>/dev/null | grep -q '^GPU'
}

if [[ -n "${SELFHEAL_LLAMA_CMAKE_ARGS:-}" ]]; then
  ARGS="$SELFHEAL_LLAMA_CMAKE_ARGS"; WHY="from SELFHEAL_LLAMA_CMAKE_ARGS"
elif has_gpu; then
  ARGS="$CUDA_ARGS"; WHY="nvcc and an NVIDIA GPU found"
elif [[ "$(uname -m)" == x86_64 || "$(uname -m)" == amd64 ]]; then
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null || [[ "$(uname -s)" != Linux ]]; then
    ARGS="$CPU_ARGS"; WHY="x86-64 CPU with AVX2"
  else
    ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF"
    WHY="x86-64 CPU without AVX2 (slow, portable build)"
  fi
else
  ARGS="$ARM_ARGS"; WHY="non-x86 CPU"
fi

TAG="$("$PY" -c 'import sys, platform; print(sys.implementation.cache_tag, platform.machine())')"
KEY="$(printf '%s\n%s\n%s\n' "llama-cpp-python==$VERSION" "$ARGS" "$TAG" | sha256sum | cut -c1-16)"
WHEEL_DIR="$CACHE/wheels/$KEY"
PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
STAMP="$PREFIX/.selfheal-llama-cpp-build"

say "python: $PY ($TAG), llama-cpp-python==$VERSION"
say "CMAKE_ARGS=$ARGS  ($WHY)"
say "wheel cache: $WHEEL_DIR"

smoke() {
  say "smoke check (load the model, generate; in a subprocess)"
  set +e
  "$PY" "$HERE/llama_smoke.py" --tokens 24
  local rc=$?
  set -e
  if [[ $rc -eq 0 ]]; then return 0; fi
  if [[ $rc -gt 128 ]]; then
    say "llama.cpp CRASHED (signal $((rc - 128))) with CMAKE_ARGS=$ARGS."
  else
    say "the smoke check failed (exit $rc) with CMAKE_ARGS=$ARGS."
  fi
  rm -f "$STAMP"
  rm -rf "$WHEEL_DIR"
  die "removed the cached wheel. Rebuild with other flags, e.g.
  SELFHEAL_LLAMA_CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\" $0
and see docs/local_model.md (\"Which build\")."
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$KEY" ]] && "$PY" -c 'import llama_cpp' >/dev/null 2>&1; then
  say "this build is already installed and passed its smoke check (stamp $STAMP)"
  [[ "${SELFHEAL_LLAMA_SMOKE:-0}" == 1 ]] && smoke   # re-check on demand
  exit 0
fi

WHEEL="$(ls "$WHEEL_DIR"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$WHEEL" ]]; then
  command -v cmake >/dev/null 2>&1 || "$PY" -m pip install --quiet cmake ninja
  mkdir -p "$CACHE/wheels"
  TMP="$(mktemp -d "$CACHE/wheels/.build-$KEY.XXXXXX")"
  trap 'rm -rf "$TMP"' EXIT
  JOBS="$(nproc 2>/dev/null || echo 2)"
  say "building llama-cpp-python==$VERSION from source with $JOBS jobs (minutes; cached afterwards)"
  start=$(date +%s)
  CMAKE_ARGS="$ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" FORCE_CMAKE=1 \
    "$PY" -m pip wheel --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$TMP" "llama-cpp-python==$VERSION" \
    || die "building llama-cpp-python failed; a C/C++ compiler and cmake are needed (apt install build-essential cmake)."
  say "built in $(( $(date +%s) - start ))s"
  rm -rf "$WHEEL_DIR"
  mv "$TMP" "$WHEEL_DIR"   # atomic: the cache never holds a half-built wheel
  trap - EXIT
  WHEEL="$(ls "$WHEEL_DIR"/llama_cpp_python-"$VERSION"-*.whl | head -n1)"
else
  say "reusing cached wheel $(basename "$WHEEL")"
fi

say "installing $(basename "$WHEEL")"
"$PY" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
"$PY" -m pip install --quiet "$WHEEL"   # its dependencies (numpy, jinja2, diskcache, ...)
smoke
echo "$KEY" > "$STAMP"
say "done"
