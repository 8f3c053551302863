#!/usr/bin/env bash
# Issue 45 item 6: the GPU check, in one command of at most 8 minutes, on a lent machine with no
# network (one NVIDIA GPU, nvcc, Python with torch and transformers; docs/gpu.md):
#
#   bash benchmarks/gpu_round4.sh            # from the repository root; results under $OUT
#
# carrying .gpu/ (prepared on the development machine, git-ignored): whl/ (the wheels of
# selfheal's runtime dependencies the machine lacks), qwen2.5-coder-tokenizer/ (the local model's
# tokenizer) and src/llama.cpp-*-server-src.tar.xz (llama.cpp from the llama-cpp-python 0.3.36
# sdist, cut to what llama-server's build reads). Four parts, each guarded (a failing part never
# stops the others), every log and JSON under $OUT:
#   (a) install the wheels (pip --no-index --no-deps) and check that selfheal imports;
#   (c) from the start, in the background at the lowest priority: build llama-server with CUDA
#       (install_llama_server.sh's flags, CMAKE_CUDA_ARCHITECTURES=90, -j16), killed at the
#       deadline; whether it built, how long it took, what `llama-server --version` says;
#   (b) benchmarks/bench_gpu.py on the Qwen2.5-Coder-1.5B architecture with random weights:
#       each batch size's first and second call in a fresh process without the warm-up, the
#       same after the warm-up, then one answer, complete_many(K) and the first round asked as
#       the pipeline asks it, K = 1, 4, 8, 16;
#   (d) a summary ($OUT/summary.txt).
# A dry run on a CPU (a tiny model; the wheels installed into a folder of their own):
#   GPU_ROUND4_MODEL="--hidden 32 --intermediate 64 --layers 1 --device cpu" GPU_ROUND4_TOKENS=4 \
#   GPU_ROUND4_COLD_TOKENS=4 GPU_ROUND4_CARRY=/work/main/.gpu PYTHON=.venv/bin/python \
#   GPU_ROUND4_PIP_ARGS="--target /tmp/whl --python-version 3.12 --only-binary=:all:" \
#   OUT=/tmp/out bash benchmarks/gpu_round4.sh
set -uo pipefail

START=$(date +%s)
BUDGET="${GPU_ROUND4_BUDGET:-470}"          # seconds for the whole script (under 8 minutes)
DEADLINE=$((START + BUDGET))
OUT="${OUT:-$PWD/gpu-round4-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
CARRY="${GPU_ROUND4_CARRY:-.gpu}"
MODEL_ARGS="${GPU_ROUND4_MODEL:---preset 1.5b --tokenizer $CARRY/qwen2.5-coder-tokenizer}"
TOKENS="${GPU_ROUND4_TOKENS:-128}"             # new tokens per answer in the main table
COLD_TOKENS="${GPU_ROUND4_COLD_TOKENS:-64}"    # in the first-call rows
MODEL_DIR="$(mktemp -d /tmp/gpu-round4-model.XXXXXX)"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

say() { printf '[gpu_round4 %4ss] %s\n' "$(($(date +%s) - START))" "$*" | tee -a "$SUMMARY" >&2; }
left() { echo $((DEADLINE - $(date +%s))); }
# run a part under the time left (minus a margin for what follows), logging to $OUT/<name>.log
part() {
  local name="$1" margin="$2"; shift 2
  local limit=$(( $(left) - margin ))
  if (( limit < 10 )); then say "$name: skipped, ${limit}s left"; return 124; fi
  local t0=$(date +%s)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc in $(( $(date +%s) - t0 ))s (limit ${limit}s)"
  return $rc
}

say "start: $(hostname), budget ${BUDGET}s, OUT=$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true
  command -v nvcc && nvcc --version | tail -2 || echo "no nvcc"
  nproc; "$PY" --version; } >"$OUT/machine.txt" 2>&1
say "machine: $(tr '\n' ' ' <"$OUT/machine.txt" | cut -c1-300)"

# (c) the llama-server CUDA build, in the background from the start
build_llama() {
  local tarball
  tarball=$(ls "$CARRY"/src/llama.cpp-*-server-src.tar.xz 2>/dev/null | head -1)
  [[ -n "$tarball" ]] || { echo "no llama.cpp source in $CARRY/src"; return 2; }
  command -v nvcc >/dev/null || { echo "no nvcc: no CUDA build"; return 3; }
  command -v cmake >/dev/null || { echo "no cmake"; return 4; }
  local src=/tmp/gpu-round4-llama
  rm -rf "$src" && mkdir -p "$src" && tar -xJf "$tarball" -C "$src" || return 5
  local flags="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF"
  flags+=" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF"
  flags+=" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
  echo "cmake flags: $flags"
  local t0=$(date +%s) hints=""
  # shellcheck disable=SC2086
  if ! cmake -S "$src/llama.cpp" -B "$src/build" $flags; then
    # no cuBLAS beside nvcc: look for the pip wheel's (nvidia-cublas) and point CMake at it
    hints=$(cublas_hints)
    [[ -n "$hints" ]] || { echo "configure failed; no cuBLAS found to point it at"; return 6; }
    echo "configure again with: $hints"
    rm -rf "$src/build"
    # shellcheck disable=SC2086
    cmake -S "$src/llama.cpp" -B "$src/build" $flags $hints || return 6
  fi
  local t1=$(date +%s)
  cmake --build "$src/build" --target llama-server -j16 || return 7
  local t2=$(date +%s)
  echo "BUILT: configure $((t1 - t0))s, build $((t2 - t1))s, total $((t2 - t0))s"
  ls -la "$src/build/bin/llama-server"
  LD_LIBRARY_PATH="/tmp/gpu-round4-cublas/lib:${LD_LIBRARY_PATH:-}" \
    "$src/build/bin/llama-server" --version 2>&1 | tail -5
}
cublas_hints() {  # CMake flags for a cuBLAS from pip (headers and unversioned .so links)
  local roots inc lib shim=/tmp/gpu-round4-cublas
  roots=$("$PY" -c "import nvidia; print(' '.join(nvidia.__path__))" 2>/dev/null) || return 0
  # shellcheck disable=SC2086
  inc=$(find $roots -name cublas_v2.h 2>/dev/null | head -1)
  # shellcheck disable=SC2086
  lib=$(find $roots -name 'libcublas.so*' 2>/dev/null | head -1)
  [[ -n "$inc" && -n "$lib" ]] || return 0
  inc=$(dirname "$inc"); lib=$(dirname "$lib")
  mkdir -p "$shim/lib"
  for f in "$lib"/*.so.*; do ln -sf "$f" "$shim/lib/$(basename "${f%%.so.*}").so"; ln -sf "$f" "$shim/lib/"; done
  echo "-DCMAKE_LIBRARY_PATH=$shim/lib -DCMAKE_INCLUDE_PATH=$inc -DCMAKE_CXX_FLAGS=-I$inc -DCMAKE_CUDA_FLAGS=-I$inc"
}
BUILD_T0=$(date +%s)
export CARRY PY GPU_ROUND4_PIP_ARGS="${GPU_ROUND4_PIP_ARGS:-}"
export -f build_llama cublas_hints
( part llama-build 20 nice -n 19 bash -c build_llama ) &
BUILD_PID=$!

# (a) the wheels, then the import check
install_wheels() {
  local wheels=("$CARRY"/whl/*.whl)
  [[ -e "${wheels[0]}" ]] || { echo "no wheels in $CARRY/whl"; return 2; }
  local pip=("$PY" -m pip install --no-index --no-deps --disable-pip-version-check -q)
  # shellcheck disable=SC2206
  pip+=(${GPU_ROUND4_PIP_ARGS:-})  # a dry run installs elsewhere (--target DIR ...)
  if ! "${pip[@]}" "${wheels[@]}"; then
    echo "together failed: one by one"
    for w in "${wheels[@]}"; do "${pip[@]}" "$w" || echo "FAILED $w"; done
  fi
  PYTHONPATH=. "$PY" -c "import selfheal, selfheal.llm.hf, torch, transformers; print('selfheal imports; torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
}
export -f install_wheels
part install 60 bash -c install_wheels
tail -1 "$OUT/install.log" | tee -a "$SUMMARY"

# (b) bench_gpu.py: each batch size's first call (a fresh process each), then the table
bench() {  # bench NAME MARGIN ARGS...
  local name="$1" margin="$2"; shift 2
  # shellcheck disable=SC2086
  part "$name" "$margin" env PYTHONPATH=. "$PY" benchmarks/bench_gpu.py $MODEL_ARGS \
    --model-dir "$MODEL_DIR" --json "$OUT/$name.json" "$@"
}
bench bench-cold 240 --first-calls --warm none --sizes 4 8 16 --tokens "$COLD_TOKENS"
bench bench-warm 200 --first-calls --warm load --sizes 4 8 16 --tokens "$COLD_TOKENS"
bench bench-rounds 25 --sizes 1 4 8 16 --tokens "$TOKENS" --no-sequential --first-round

# (c) the build: wait for it until the deadline (part's own timeout ends it there)
wait "$BUILD_PID" 2>/dev/null
BUILD_RC=$(grep -o 'llama-build: rc=[0-9]*' "$SUMMARY" | tail -1)
say "llama-server CUDA build: ${BUILD_RC:-not finished} after $(( $(date +%s) - BUILD_T0 ))s; log tail:"
tail -6 "$OUT/llama-build.log" 2>/dev/null | tee -a "$SUMMARY"

# (d) the summary
{
  echo
  echo "== tables (bench_gpu.py stdout) =="
  for name in bench-cold bench-warm bench-rounds; do
    echo "-- $name"
    # the table, or (cut off) the rows measured so far
    tail -25 "$OUT/$name.log" 2>/dev/null | grep -v -e 'Loading weights' -e 'Writing model' || echo "(no log)"
  done
  echo
  echo "total: $(( $(date +%s) - START ))s of ${BUDGET}s"
} | tee -a "$SUMMARY"
rm -rf "$MODEL_DIR"
exit 0
