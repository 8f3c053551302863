"""What a cold start costs: ``forget_prompts`` (a restart of the supervised llama-server)
against one cold answer, measured in the same run.

    PYTHONPATH=. python benchmarks/bench_restart.py [--repeats 5] [--out FILE]

The benchmark runner calls ``LocalProvider.forget_prompts`` before each (task, mode) run so
that no run finds a prompt another run processed (docs/evaluation.md); it restarts the
server, because the prompt cache llama-server keeps in host memory (``--cache-ram``) survives
every endpoint. This measures, on the installed model with selfheal's default server settings:
``restart`` (``forget_prompts``: stop, start, healthy), ``first answer`` (the next request, a
greedy completing answer to HumanEval/129 with the header prefilled, at most ``--tokens``
tokens: the prompt processed from its first token) and, as the baseline, ``warm answer`` (the
same request again, its prompt now cached). Each repeat uses a new nonce at the prompt's start,
so nothing is cached across repeats but what the repeat itself processed. Prints the medians
and the restart as a ratio of the first answer; ``--out`` keeps every repeat as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench_slots import humaneval129_messages

from selfheal.llm.base import Message
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import server_settings


def _timed(provider: LocalProvider, messages: list[Message], tokens: int) -> dict[str, Any]:
    started = time.monotonic()
    done = provider.complete(messages, max_tokens=tokens, temperature=0.0, stop=["\n```"])
    seconds = time.monotonic() - started
    return {"seconds": round(seconds, 3), "prompt": done.prompt_tokens,
            "cached": done.cached_tokens, "tokens": done.completion_tokens}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--out", default="", help="every repeat as JSON")
    args = ap.parse_args(argv)
    server = LocalServer(server_settings(progress=False))
    provider = LocalProvider(
        model=server.settings.alias, server=server, model_id=f"local:{server.settings.alias}"
    )
    rows: list[dict[str, Any]] = []
    try:
        server.start()
        print(f"first start: {server.start_seconds:.2f} s to healthy", file=sys.stderr)
        for r in range(args.repeats):
            messages = humaneval129_messages(f"{random.random():.12f}")
            load = os.getloadavg()[0]
            started = time.monotonic()
            provider.forget_prompts()
            restart = time.monotonic() - started
            row = {"repeat": r + 1, "restart": round(restart, 3),
                   "to_healthy": round(server.start_seconds or 0.0, 3),
                   "first": _timed(provider, messages, args.tokens),
                   "warm": _timed(provider, messages, args.tokens), "load": round(load, 2)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        server.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    restart = statistics.median(x["restart"] for x in rows)
    first = statistics.median(x["first"]["seconds"] for x in rows)
    warm = statistics.median(x["warm"]["seconds"] for x in rows)
    cached = statistics.median(x["first"]["cached"] for x in rows)
    print(f"\n{server.settings.alias}, {server.settings.slots} slots, {server.settings.threads} "
          f"threads; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{args.repeats} repeats, loads {', '.join(str(x['load']) for x in rows)}\n")  # fmt: skip
    print("| | median (s) |\n|---|---:|")
    print(f"| restart (forget_prompts) | {restart:.2f} |")
    print(f"| first answer after it ({cached:.0f} prompt tokens cached) | {first:.2f} |")
    print(f"| warm answer (baseline: the same request, prompt cached) | {warm:.2f} |")
    print(f"\nrestart / first answer: {restart / first:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
