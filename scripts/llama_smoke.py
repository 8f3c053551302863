"""Smoke check of a llama-cpp-python build: load the model, generate, check the answer.

Run in a subprocess by scripts/install_llama_cpp.sh and scripts/install.sh, so a crash of
the native code (the SIGSEGV of a bad build) fails the install with a clear message instead
of taking a notebook down later. Uses raw llama-cpp-python, not selfheal, so it also tests
experimental builds (PYTHONPATH=<dir with another build>).

    python scripts/llama_smoke.py [--model PATH] [--tokens 64] [--require-model]

Exit 0: the build works (prints CPU features and tokens/s). Exit 1: wrong answer.
Exit 2: no model (only with --require-model). Exit 3: the model file does not load.
A crash kills the process (signal).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

PROMPT = "Write a Python function add(a, b) that returns the sum of a and b. Reply with code only."


def _model_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("SELFHEAL_MODEL_PATH")
    if env:
        return Path(env)
    root = os.environ.get("SELFHEAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "selfheal"
    )
    p = Path(root) / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    return p if p.is_file() else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--require-model", action="store_true")
    args = parser.parse_args()

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as selfheal does, see llamacpp.py
    import llama_cpp

    print(f"llama-cpp-python {llama_cpp.__version__} from {Path(llama_cpp.__file__).parent}")
    info = llama_cpp.llama_print_system_info()
    print("system info:", info.decode() if isinstance(info, bytes) else info)
    model = _model_path(args.model)
    if model is None or not model.is_file():
        print("no model found: import-only check passed (generation not tested)")
        return 2 if args.require_model else 0

    threads = args.threads or len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    try:
        llm = llama_cpp.Llama(
            model_path=str(model),
            n_ctx=1024,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
            seed=0,
        )
    except ValueError as exc:  # not the build's fault: a bad model file
        print(f"MODEL PROBLEM: {exc}; check it with `python -m selfheal.models verify`")
        return 3
    load = time.perf_counter() - t0
    messages = [{"role": "user", "content": PROMPT}]
    t1 = time.perf_counter()
    out = llm.create_chat_completion(messages=messages, max_tokens=args.tokens, temperature=0.0)
    gen = time.perf_counter() - t1
    text = out["choices"][0]["message"]["content"] or ""
    n = out["usage"]["completion_tokens"]
    print(
        f"load {load:.2f}s, {n} tokens in {gen:.2f}s = {n / gen:.2f} tokens/s (incl. prompt), threads={threads}"
    )
    print("reply:", text.strip()[:300].replace("\n", "\\n"))
    ok = "def add" in text and "return" in text
    print("SMOKE OK" if ok else "SMOKE FAILED: the reply does not look like the requested function")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
