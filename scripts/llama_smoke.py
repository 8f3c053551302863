"""Smoke check of a llama-server build: start it on the model, generate, check the answer, stop.

Run by scripts/install_llama_server.sh (and so `make install`) on every fresh build, so a bad
build (the SIGSEGV of a CPU-feature mismatch) fails the install with a clear message instead of
failing a notebook later. Standard library only: it tests the binary, not selfheal.

    python scripts/llama_smoke.py BINARY [--model PATH] [--tokens 32] [--require-model]

Exit 0: the server answered with the requested function (prints its speed). Exit 1: it
answered something else. Exit 2: no model (only with --require-model; without it the check is
skipped). Exit 3: the model file does not load. Exit 4: the server crashed or never got
healthy (its log is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--model")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--require-model", action="store_true")
    args = parser.parse_args()

    model = _model_path(args.model)
    if model is None or not model.is_file():
        print("no model found: the generation check is skipped")
        return 2 if args.require_model else 0
    with tempfile.NamedTemporaryFile(prefix="llama-smoke-", suffix=".log") as log:
        return _smoke(args, model, log)


def _smoke(args: argparse.Namespace, model: Path, log: IO[bytes]) -> int:
    """Start llama-server on ``model`` (its output to ``log``), ask it for a function, stop it."""
    port = _free_port()
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
    argv = [args.binary, "--model", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--parallel", "1", "--ctx-size", "1024", "--threads", str(threads), "--no-webui"]
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        while True:
            if proc.poll() is not None:
                return _dead(proc, log.name, "exited before it was ready")
            if _get(f"http://127.0.0.1:{port}/health", 1.0) == 200:
                break
            if time.perf_counter() - t0 > args.timeout:
                return _dead(proc, log.name, f"was not healthy after {args.timeout:g} s")
            time.sleep(0.2)
        load = time.perf_counter() - t0
        body = {
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": args.tokens,
            "temperature": 0.0,
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=args.timeout) as r:
                reply = json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return _dead(proc, log.name, f"failed the request ({exc})")
        text = reply["choices"][0]["message"]["content"] or ""
        timings = reply.get("timings") or {}
        print(
            f"llama-server ready in {load:.1f}s; prompt {timings.get('prompt_per_second', 0):.1f} "
            f"tokens/s, generation {timings.get('predicted_per_second', 0):.1f} tokens/s, "
            f"threads={threads}"
        )
        print("reply:", text.strip()[:300].replace("\n", "\\n"))
        ok = "def add" in text and "return" in text
        print("SMOKE OK" if ok else "SMOKE FAILED: the reply is not the requested function")
        return 0 if ok else 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _dead(proc: subprocess.Popen[bytes], log: str, what: str) -> int:
    code = proc.poll()
    how = f" (signal {-code})" if code is not None and code < 0 else f" (exit {code})"
    text = Path(log).read_text(errors="replace")
    print(f"SMOKE FAILED: llama-server {what}{how}. The end of its log:")
    print("\n".join(text.splitlines()[-25:]))
    if "failed to load model" in text or "error loading model" in text:
        print("the model file does not load: python -m selfheal.local.weights verify / install")
        return 3
    return 4


if __name__ == "__main__":
    sys.exit(main())
