"""Speculative decoding without a draft model (llama-server's n-gram drafts), measured on
the requests heal makes.

    PYTHONPATH=. python benchmarks/bench_spec.py [--tasks 8] [--rounds 1] [--types ngram-mod]

Supervised servers on the installed model and build, identical except ``--spec-type`` (``none``
against each of ``--types``), started one after the other. For each of the first ``--tasks``
HumanEval prompts, each server answers, alternating which goes first:

* ``greedy``: the generator's first request (temperature 0, one at a time);
* ``2 at once``: the greedy answer and a sample (temperature 0.8, seeded) together, the first
  round of ``heal``;
* ``repair``: a patch request that shows the greedy answer and asks for the whole function
  back with a change (the repair round: most of the answer copies the prompt, where n-gram
  drafts should pay most).

Every request starts from a cold prompt cache (a random prefix). Prints the total seconds per
scenario and setting, generated tokens, and whether the greedy answers are the same text with
and without drafts (they must be: drafting only changes speed). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
from typing import Any

from evaluation.suites import get_suite
from selfheal.llm.base import Message
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import server_settings

SYSTEM = "You are a careful Python programmer. Reply with one fenced Python code block."


def _messages(prompt: str, nonce: str) -> list[Message]:
    return [
        Message(role="system", content=f"[{nonce}] {SYSTEM}"),
        Message(role="user", content=f"Complete this function.\n\n```python\n{prompt}```"),
    ]


def _repair(prompt: str, code: str, nonce: str) -> list[Message]:
    return [
        Message(role="system", content=f"[{nonce}] {SYSTEM}"),
        Message(
            role="user",
            content=(
                f"The spec:\n\n```python\n{prompt}```\n\nA candidate:\n\n{code}\n\n"
                "It fails one of the examples. Return the whole corrected function, with a "
                "docstring and a comment on each step."
            ),
        ),
    ]


async def _scenarios(
    p: OpenAICompatible, prompt: str, tokens: int
) -> tuple[dict[str, float], dict[str, int], str]:
    secs: dict[str, float] = {}
    toks: dict[str, int] = {}
    nonce = f"{random.random():.12f}"
    t = time.monotonic()
    greedy = await p.acomplete(_messages(prompt, nonce), max_tokens=tokens, temperature=0.0)
    secs["greedy"], toks["greedy"] = time.monotonic() - t, greedy.completion_tokens
    nonce = f"{random.random():.12f}"
    t = time.monotonic()
    pair: list[Any] = list(
        await asyncio.gather(
            p.acomplete(_messages(prompt, nonce), max_tokens=tokens, temperature=0.0),
            p.acomplete(_messages(prompt, nonce), max_tokens=tokens, temperature=0.8, seed=11),
        )
    )
    secs["2 at once"] = time.monotonic() - t
    toks["2 at once"] = sum(c.completion_tokens for c in pair)
    nonce = f"{random.random():.12f}"
    t = time.monotonic()
    fixed = await p.acomplete(
        _repair(prompt, greedy.text, nonce), max_tokens=tokens, temperature=0.0
    )
    secs["repair"], toks["repair"] = time.monotonic() - t, fixed.completion_tokens
    return secs, toks, greedy.text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--types", default="ngram-mod", help="comma-separated --spec-type values")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    if load > 0.8:
        print(f"note: load average {load:.2f}; the machine is not idle", file=sys.stderr)
    prompts = [t.prompt for t in get_suite("humaneval").tasks()[: args.tasks]]
    base = server_settings(progress=False)
    labels = ["none", *[x for x in args.types.split(",") if x]]
    servers = {
        label: LocalServer(
            base.model_copy(update={"extra_args": (*base.extra_args, "--spec-type", label)})
            if label != "none"
            else base
        )
        for label in labels
    }
    providers = {
        label: LocalProvider(model=s.settings.alias, server=s, model_id=f"local:{s.settings.alias}")
        for label, s in servers.items()
    }
    secs: dict[tuple[str, str], float] = {}
    toks: dict[tuple[str, str], int] = {}
    same: dict[str, int] = {label: 0 for label in labels}
    try:
        for s in servers.values():
            s.start()
        for r in range(args.rounds):
            for i, prompt in enumerate(prompts):
                order = labels if (i + r) % 2 == 0 else list(reversed(labels))
                texts: dict[str, str] = {}
                for label in order:
                    s_, t_, text = asyncio.run(_scenarios(providers[label], prompt, args.tokens))
                    texts[label] = text
                    for k, v in s_.items():
                        secs[(k, label)] = secs.get((k, label), 0.0) + v
                        toks[(k, label)] = toks.get((k, label), 0) + t_[k]
                    print(f"round {r + 1} task {i} {label}: " + ", ".join(
                        f"{k} {v:.1f} s/{t_[k]} tok" for k, v in s_.items()), file=sys.stderr)  # fmt: skip
                for label in labels:
                    same[label] += texts[label] == texts["none"]
    finally:
        for s in servers.values():
            s.stop()
    n = args.tasks * args.rounds
    print(f"\nn-gram drafts: {n} HumanEval prompts, {base.slots} slots, {base.threads} threads, "
          f"at most {args.tokens} tokens; {platform.processor() or platform.machine()}, "
          f"load {load:.2f} at the start\n")  # fmt: skip
    head = " | ".join(f"`{x}` s (tok)" for x in labels)
    print(f"| request | {head} |")
    print("|---|" + "---:|" * len(labels))
    for k in ("greedy", "2 at once", "repair"):
        cells = []
        for label in labels:
            ratio = secs[(k, "none")] / secs[(k, label)] if label != "none" else 1.0
            extra = f", {ratio:.2f}x" if label != "none" else ""
            cells.append(f"{secs[(k, label)]:.1f} ({toks[(k, label)]}{extra})")
        print(f"| {k} | " + " | ".join(cells) + " |")
    print(
        "\ngreedy answers identical to `none`: " + ", ".join(f"{x} {same[x]}/{n}" for x in labels)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
