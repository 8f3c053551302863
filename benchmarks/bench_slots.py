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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=60)
    ap.add_argument("--slots", type=int, default=4)
    args = ap.parse_args(argv)
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
