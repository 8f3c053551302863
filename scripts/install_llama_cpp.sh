#!/usr/bin/env bash
# Build llama-cpp-python with CMake flags that work on this CPU class, cache the wheel,
# install it into the current Python, and smoke-test it in a subprocess.
#
#   scripts/install_llama_cpp.sh            # uses $PYTHON, else the active python
#
# Environment:
#   SELFHEAL_LLAMA_CMAKE_ARGS   use exactly these CMake flags (e.g. "-DGGML_NATIVE=ON")
#   SELFHEAL_LLAMA_VERSION      llama-cpp-python version (default 0.3.36)
#   SELFHEAL_CACHE_DIR          cache root (default ${XDG_CACHE_HOME:-~/.cache}/selfheal)
#   SELFHEAL_LLAMA_AVX512=1     on AVX-512 CPUs try the AVX-512 build first (AVX2 as fallback)
#   SELFHEAL_LLAMA_SMOKE=1      re-run the smoke check even when the build is already installed
#   PYTHON                      interpreter to install into
#
# Without SELFHEAL_LLAMA_CMAKE_ARGS the flags are picked from the hardware, best first, and a
# candidate whose smoke check fails or crashes is dropped for the next one (see
# docs/local_model.md, "Which build"). Wheels are cached under
# $SELFHEAL_CACHE_DIR/wheels/<hash of version + flags + python>/, so a second run (or a fresh
# venv) installs in seconds instead of rebuilding for minutes.
set -euo pipefail

say() { printf '[install_llama_cpp] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
VERSION="${SELFHEAL_LLAMA_VERSION:-0.3.36}"
CACHE="${SELFHEAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/selfheal}"

# x86-64 with AVX-512 (F/BW/VL + VNNI, as the kernel reports them): AVX-512 kernels, AMX
# explicitly off. GGML_NATIVE=ON (pip's default) lets the compiler enable whatever CPUID
# shows, including AMX on hosts that expose it to CPUID without enabling it in the kernel.
AVX512_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# Portable x86-64: AVX2/FMA/F16C, no AVX-512, no AMX. The known-good build on this CPU class.
AVX2_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
OLD_X86_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF"
ARM_ARGS="-DGGML_NATIVE=OFF"
CUDA_ARGS="-DGGML_CUDA=ON"

has_gpu() {
  command -v nvcc >/dev/null 2>&1 || return 1
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi -L 2>/dev/null | grep -q '^GPU'
}
cpu_has() {  # all given flags in /proc/cpuinfo
  local f
  for f in "$@"; do grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw "$f" || return 1; done
}

CANDIDATES=()
if [[ -n "${SELFHEAL_LLAMA_CMAKE_ARGS:-}" ]]; then
  CANDIDATES=("$SELFHEAL_LLAMA_CMAKE_ARGS"); WHY="from SELFHEAL_LLAMA_CMAKE_ARGS"
elif has_gpu; then
  CANDIDATES=("$CUDA_ARGS"); WHY="nvcc and an NVIDIA GPU found"
elif [[ "$(uname -m)" == x86_64 || "$(uname -m)" == amd64 ]]; then
  if [[ "${SELFHEAL_LLAMA_AVX512:-0}" == 1 ]] && cpu_has avx512f avx512bw avx512vl avx512_vnni; then
    CANDIDATES=("$AVX512_ARGS" "$AVX2_ARGS"); WHY="x86-64 CPU with AVX-512 (AVX2 build as fallback)"
  elif cpu_has avx2 fma f16c || [[ "$(uname -s)" != Linux ]]; then
    CANDIDATES=("$AVX2_ARGS"); WHY="x86-64 CPU with AVX2"
  else
    CANDIDATES=("$OLD_X86_ARGS"); WHY="x86-64 CPU without AVX2 (slow, portable build)"
  fi
else
  CANDIDATES=("$ARM_ARGS"); WHY="non-x86 CPU"
fi

TAG="$("$PY" -c 'import sys, platform; print(sys.implementation.cache_tag, platform.machine())')"
PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
STAMP="$PREFIX/.selfheal-llama-cpp-build"
say "python: $PY ($TAG), llama-cpp-python==$VERSION; flags: $WHY"

key_of() { printf '%s\n%s\n%s\n' "llama-cpp-python==$VERSION" "$1" "$TAG" | sha256sum | cut -c1-16; }

# Already installed with one of the candidates (and smoke-tested then)?
if [[ -f "$STAMP" ]] && "$PY" -c 'import llama_cpp' >/dev/null 2>&1; then
  for ARGS in "${CANDIDATES[@]}"; do
    if [[ "$(cat "$STAMP")" == "$(key_of "$ARGS")" ]]; then
      say "already installed and smoke-tested: CMAKE_ARGS=$ARGS (stamp $STAMP)"
      if [[ "${SELFHEAL_LLAMA_SMOKE:-0}" == 1 ]]; then
        "$PY" "$HERE/llama_smoke.py" --tokens 24 || die "the smoke check failed (exit $?)"
      fi
      exit 0
    fi
  done
fi

build_and_install() {  # $1 = CMake args; returns 0 when installed and smoke-tested
  local args="$1" key wheel_dir wheel tmp jobs start rc
  key="$(key_of "$args")"
  wheel_dir="$CACHE/wheels/$key"
  say "CMAKE_ARGS=$args"
  say "wheel cache: $wheel_dir"
  wheel="$(ls "$wheel_dir"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$wheel" ]]; then
    command -v cmake >/dev/null 2>&1 || "$PY" -m pip install --quiet cmake ninja
    mkdir -p "$CACHE/wheels"
    tmp="$(mktemp -d "$CACHE/wheels/.build-$key.XXXXXX")"
    jobs="$(nproc 2>/dev/null || echo 2)"
    say "building llama-cpp-python==$VERSION from source with $jobs jobs (minutes; cached afterwards)"
    start=$(date +%s)
    # --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS and would hand back another build
    if ! CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" FORCE_CMAKE=1 \
      "$PY" -m pip wheel --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$tmp" "llama-cpp-python==$VERSION"; then
      rm -rf "$tmp"
      say "building failed; a C/C++ compiler and cmake are needed (apt install build-essential cmake)."
      return 1
    fi
    say "built in $(( $(date +%s) - start ))s"
    rm -rf "$wheel_dir"
    mv "$tmp" "$wheel_dir"   # atomic: the cache never holds a half-built wheel
    wheel="$(ls "$wheel_dir"/llama_cpp_python-"$VERSION"-*.whl | head -n1)"
  else
    say "reusing cached wheel $(basename "$wheel")"
  fi
  say "installing $(basename "$wheel")"
  "$PY" -m pip install --quiet --force-reinstall --no-deps "$wheel"
  "$PY" -m pip install --quiet "$wheel"   # its dependencies (numpy, jinja2, diskcache, ...)

  say "smoke check (load the model, generate; in a subprocess)"
  set +e
  "$PY" "$HERE/llama_smoke.py" --tokens 24
  rc=$?
  set -e
  if [[ $rc -eq 0 ]]; then
    echo "$key" > "$STAMP"
    return 0
  fi
  if [[ $rc -eq 3 ]]; then
    die "the model file does not load (not a build problem): python -m selfheal.models verify / install"
  fi
  if [[ $rc -gt 128 ]]; then
    say "llama.cpp CRASHED (signal $((rc - 128))) with CMAKE_ARGS=$args"
  else
    say "the smoke check failed (exit $rc) with CMAKE_ARGS=$args"
  fi
  rm -f "$STAMP"
  rm -rf "$wheel_dir"
  mkdir -p "$CACHE/wheels"
  echo "smoke check exit $rc" > "$CACHE/wheels/$key.failed"   # do not rebuild it next time
  say "removed that cached wheel (marked $CACHE/wheels/$key.failed)"
  return 1
}

for ARGS in "${CANDIDATES[@]}"; do
  if [[ ${#CANDIDATES[@]} -gt 1 && -f "$CACHE/wheels/$(key_of "$ARGS").failed" ]]; then
    say "skipping CMAKE_ARGS=$ARGS: it failed its smoke check before ($CACHE/wheels/$(key_of "$ARGS").failed)"
    continue
  fi
  if build_and_install "$ARGS"; then
    say "done"
    exit 0
  fi
  say "trying the next candidate build"
done
die "no llama.cpp build passed. Try other flags, e.g.
  SELFHEAL_LLAMA_CMAKE_ARGS=\"$AVX2_ARGS\" $0
and see docs/local_model.md (\"Which build\")."
