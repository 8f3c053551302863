#!/usr/bin/env bash
# Build llama.cpp's own server (llama-server) and llama-batched-bench from the llama.cpp tree
# vendored in the llama-cpp-python sdist on PyPI, with CMake flags that work on this CPU class,
# and cache the binaries by version + flags. The one llama.cpp build of an install.
#
#   scripts/install_llama_server.sh         # prints the directory holding bin/llama-server
#   scripts/install_llama_server.sh --print-flags   # the CMake flags it would try, in order,
#                                                   # one line each, then why; builds nothing
#
# With the model installed, every candidate build is smoke-tested (scripts/llama_smoke.py: start
# the server on the model, generate a small function, stop): a build that crashes or answers
# wrongly is removed, marked <key>.failed (not rebuilt next time) and the next flags are tried.
# The chosen build is recorded in $SELFHEAL_CACHE_DIR/llama-server/current, where selfheal looks
# first (selfheal.local.settings.find_server_binary()).
#
# Environment:
#   SELFHEAL_LLAMA_CMAKE_ARGS   use exactly these CMake flags (e.g. "-DGGML_NATIVE=ON")
#   SELFHEAL_LLAMA_VERSION      llama-cpp-python sdist version that carries llama.cpp (0.3.36)
#   SELFHEAL_CACHE_DIR          cache root (default ${XDG_CACHE_HOME:-~/.cache}/selfheal)
#   SELFHEAL_LLAMA_AVX512=1     on AVX-512 CPUs try the AVX-512 build first (AVX2 as fallback)
#   SELFHEAL_LLAMA_CUDA         auto (default): a CUDA build when nvcc and an NVIDIA GPU are present
#                               (the CPU build as fallback); 1: CUDA or fail; 0: never CUDA.
#                               selfheal then starts the server with --n-gpu-layers 99 (every layer)
#   SELFHEAL_MODEL_PATH         the GGUF the smoke test uses (default: the installed model)
#   SELFHEAL_LLAMA_SMOKE=0      skip the smoke test
#   PYTHON                      interpreter whose pip downloads the sdist and runs the smoke test
#
# The result lives in $SELFHEAL_CACHE_DIR/llama-server/<hash of version + flags>/ with
# bin/llama-server, bin/llama-batched-bench (benchmarks/bench_llm.py compares against it),
# build.json (version, flags, seconds) and smoke.ok once the smoke test passed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
say() { printf '[install_llama_server] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
VERSION="${SELFHEAL_LLAMA_VERSION:-0.3.36}"
CACHE="${SELFHEAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/selfheal}"
COMMON="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

# x86-64 with AVX-512: AMX explicitly off (GGML_NATIVE=ON would enable AMX where CPUID shows it
# without the kernel enabling it, and crash).
AVX512_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# Portable x86-64: AVX2/FMA/F16C, no AVX-512, no AMX. The measured build on this CPU class.
AVX2_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
OLD_X86_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF"
ARM_ARGS="-DGGML_NATIVE=OFF"
CUDA_ARGS="-DGGML_CUDA=ON"
# the GPU present only: a build for every CUDA architecture takes far longer (CMake >= 3.24)
CUDA_NATIVE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native"

has_gpu() {
  command -v nvcc >/dev/null 2>&1 || return 1
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi -L 2>/dev/null | grep -q '^GPU'
}
cpu_has() {
  local f
  for f in "$@"; do grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw "$f" || return 1; done
}

CANDIDATES=()
CUDA_WANTED="${SELFHEAL_LLAMA_CUDA:-auto}"
case "$CUDA_WANTED" in
  auto|1|0) ;;
  *) die "SELFHEAL_LLAMA_CUDA=$CUDA_WANTED: must be auto, 1 or 0" ;;
esac
if [[ -n "${SELFHEAL_LLAMA_CMAKE_ARGS:-}" ]]; then
  CANDIDATES=("$SELFHEAL_LLAMA_CMAKE_ARGS"); WHY="from SELFHEAL_LLAMA_CMAKE_ARGS"
elif [[ "$CUDA_WANTED" == 1 ]]; then
  has_gpu || die "SELFHEAL_LLAMA_CUDA=1 but nvcc or an NVIDIA GPU (nvidia-smi -L) is missing"
  CANDIDATES=("$CUDA_NATIVE_ARGS" "$CUDA_ARGS"); WHY="CUDA (SELFHEAL_LLAMA_CUDA=1)"
elif [[ "$(uname -m)" == x86_64 || "$(uname -m)" == amd64 ]]; then
  if [[ "${SELFHEAL_LLAMA_AVX512:-0}" == 1 ]] && cpu_has avx512f avx512bw avx512vl avx512_vnni; then
    CANDIDATES=("$AVX512_ARGS" "$AVX2_ARGS"); WHY="x86-64 CPU with AVX-512 (AVX2 build as fallback)"
  elif cpu_has avx2 fma f16c; then
    CANDIDATES=("$AVX2_ARGS"); WHY="x86-64 CPU with AVX2"
  else
    CANDIDATES=("$OLD_X86_ARGS"); WHY="x86-64 CPU without AVX2 (slow, portable build)"
  fi
else
  CANDIDATES=("$ARM_ARGS"); WHY="non-x86 CPU"
fi
if [[ -z "${SELFHEAL_LLAMA_CMAKE_ARGS:-}" && "$CUDA_WANTED" == auto ]] && has_gpu; then
  CANDIDATES=("$CUDA_NATIVE_ARGS" "$CUDA_ARGS" "${CANDIDATES[@]}")
  WHY="nvcc and an NVIDIA GPU found: CUDA (every layer on the GPU), the $WHY build as fallback"
fi
if [[ "${1:-}" == --print-flags ]]; then
  printf '%s\n' "${CANDIDATES[@]}"
  printf 'why: %s\n' "$WHY"
  exit 0
fi

key_of() { printf '%s\n%s\n%s\n' "llama.cpp from llama-cpp-python==$VERSION" "$COMMON $1" "$(uname -m)" | sha256sum | cut -c1-16; }

# smoke <dir>: 0 = works (or no model to test it with yet), 1 = a broken build
smoke() {
  local dir="$1" rc
  [[ "${SELFHEAL_LLAMA_SMOKE:-1}" == 0 ]] && return 0
  [[ -f "$dir/smoke.ok" ]] && return 0
  say "smoke test: start llama-server on the model, generate, stop"
  set +e
  "$PY" "$HERE/llama_smoke.py" "$dir/bin/llama-server" --require-model >&2
  rc=$?
  set -e
  case $rc in
    0) date > "$dir/smoke.ok"; return 0 ;;
    2) say "no model installed yet: smoke test skipped (it runs on the next install)"; return 0 ;;
    3) die "the model file does not load (not a build problem): python -m selfheal.local.weights verify / install" ;;
    *) say "the smoke test failed (exit $rc) with this build"; return 1 ;;
  esac
}

choose() {  # $1 = build dir: record it as the one selfheal uses, print it
  printf '%s\n' "$(basename "$1")" > "$CACHE/llama-server/current"
  echo "$1"
}

# Cached already?
for ARGS in "${CANDIDATES[@]}"; do
  key="$(key_of "$ARGS")"
  dir="$CACHE/llama-server/$key"
  [[ -f "$CACHE/llama-server/$key.failed" ]] && { say "skipping flags that failed before: $ARGS"; continue; }
  if [[ -x "$dir/bin/llama-server" ]] && "$dir/bin/llama-server" --version >/dev/null 2>&1; then
    say "cached: $dir ($WHY)"
    if smoke "$dir"; then choose "$dir"; exit 0; fi
    rm -rf "$dir"; echo "smoke test failed" > "$CACHE/llama-server/$key.failed"
  fi
done

command -v cmake >/dev/null 2>&1 || die "cmake is needed (apt install cmake build-essential, or pip install cmake)"
command -v c++ >/dev/null 2>&1 || die "a C++ compiler is needed (apt install build-essential)"

SRC_CACHE="$CACHE/src"
mkdir -p "$SRC_CACHE"
SDIST="$(ls "$SRC_CACHE"/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)"
if [[ -z "$SDIST" ]]; then
  say "downloading the llama-cpp-python==$VERSION sdist (it carries llama.cpp under vendor/)"
  "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$SRC_CACHE" "llama-cpp-python==$VERSION" \
    || die "pip could not download llama-cpp-python==$VERSION (is PyPI reachable?)"
  SDIST="$(ls "$SRC_CACHE"/llama_cpp_python-"$VERSION".tar.gz)"
fi

build() {  # $1 = CMake flags; prints the cache dir on success
  local args="$1" key dir tmp jobs start
  key="$(key_of "$args")"
  dir="$CACHE/llama-server/$key"
  tmp="$(mktemp -d "$CACHE/llama-server.build-$key.XXXXXX")"
  jobs="$(nproc 2>/dev/null || echo 2)"
  say "CMake flags: $COMMON $args"
  say "building llama-server + llama-batched-bench with $jobs jobs (minutes; cached afterwards)"
  start=$(date +%s)
  tar -xzf "$SDIST" -C "$tmp"
  local src="$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp"
  [[ -f "$src/CMakeLists.txt" ]] || { rm -rf "$tmp"; die "no llama.cpp tree in $SDIST"; }
  # shellcheck disable=SC2086
  if ! cmake -S "$src" -B "$tmp/build" $COMMON $args >"$tmp/cmake.log" 2>&1 \
     || ! cmake --build "$tmp/build" --target llama-server llama-batched-bench -j "$jobs" >>"$tmp/cmake.log" 2>&1; then
    tail -n 30 "$tmp/cmake.log" >&2
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$tmp/out/bin"
  cp "$tmp/build/bin/llama-server" "$tmp/build/bin/llama-batched-bench" "$tmp/out/bin/"
  if ! "$tmp/out/bin/llama-server" --version >"$tmp/out/version.txt" 2>&1; then
    say "the built llama-server does not start with these flags:"; cat "$tmp/out/version.txt" >&2
    rm -rf "$tmp"
    return 1
  fi
  local secs=$(( $(date +%s) - start ))
  printf '{"llama_cpp_python_sdist": "%s", "cmake_args": "%s", "build_seconds": %s, "machine": "%s"}\n' \
    "$VERSION" "$COMMON $args" "$secs" "$(uname -m)" > "$tmp/out/build.json"
  rm -rf "$tmp/build" "$tmp/llama_cpp_python-$VERSION"
  if ! smoke "$tmp/out"; then
    rm -rf "$tmp"
    echo "smoke test failed" > "$CACHE/llama-server/$key.failed"   # not rebuilt next time
    return 1
  fi
  rm -rf "$dir"
  mkdir -p "$CACHE/llama-server"
  mv "$tmp/out" "$dir"   # atomic: the cache never holds a half-built server
  rm -rf "$tmp"
  say "built in ${secs}s: $dir"
  choose "$dir"
}

say "llama.cpp from llama-cpp-python==$VERSION; flags: $WHY"
mkdir -p "$CACHE/llama-server"
for ARGS in "${CANDIDATES[@]}"; do
  [[ -f "$CACHE/llama-server/$(key_of "$ARGS").failed" ]] && continue
  if build "$ARGS"; then exit 0; fi
  say "that build failed; trying the next flags"
done
die "no llama.cpp build worked (failed flags are remembered in $CACHE/llama-server/*.failed;
  delete those files to try again). Try other flags, e.g.
  SELFHEAL_LLAMA_CMAKE_ARGS=\"$AVX2_ARGS\" $0"
