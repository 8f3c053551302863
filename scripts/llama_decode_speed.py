"""Raw llama.cpp speed probe used for docs/local_model.md (build and thread comparisons).

    python scripts/llama_decode_speed.py THREADS [DECODE_STEPS]

Evaluates a ~60-token prompt once (prompt tokens/s), then DECODE_STEPS single-token decode
steps (decode tokens/s), on the default model. Run it alternately for the settings you
compare (e.g. OMP_WAIT_POLICY=PASSIVE vs unset, or PYTHONPATH=<another build>): only ratios
between runs made at the same time mean anything on a shared machine.
"""

from __future__ import annotations

import os
import sys
import time

import llama_cpp

from selfheal.models import find_model


def main() -> None:
    threads = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    path = find_model()
    if path is None:
        sys.exit("no model: python -m selfheal.models install")
    llm = llama_cpp.Llama(
        model_path=str(path), n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    toks = llm.tokenize(
        b'def quicksort(arr):\n    """Sort a list using quicksort."""\n' * 4, add_bos=False
    )
    t = time.perf_counter()
    llm.eval(toks)
    pp = time.perf_counter() - t
    tok = toks[-1]
    t = time.perf_counter()
    for i in range(steps):
        llm.eval([tok])
        tok = 1000 + i  # any token: this measures decode speed, not text
    dec = time.perf_counter() - t
    print(
        f"threads={threads} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')} "
        f"pp {len(toks) / pp:.1f} tok/s, decode {steps / dec:.2f} tok/s, "
        f"load1={os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
