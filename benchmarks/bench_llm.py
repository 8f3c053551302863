"""The local model through the provider against raw llama.cpp, measured in one run.

    PYTHONPATH=. python benchmarks/bench_llm.py [--npp 300] [--ntg 128] [--levels 1,2,4] [--rounds 3]

Prints, for the installed model on the llama-server build ``make install`` made:

* generated tokens/s (all sequences together) for 1, 2, 4 concurrent completions through
  ``OpenAICompatible.acomplete`` requests sent at once to the supervised server, against
  ``llama-batched-bench`` (same binary build, model, threads, batch sizes, ``-npp``/``-ntg``) at
  the same levels. The provider's figure is measured by the client: tokens that arrived (through
  ``on_token``) while every sequence was decoding (from the last first token to the first last
  token), over that time; raw's is ``S_TG`` (all sequences decoding together);
* prompt tokens/s at each level (all prompts over the time to the last first token; raw
  ``S_PP``) and end to end (prompt + generated tokens over the wall clock; raw ``S``);
* prompt tokens/s of one long cold prompt, and time to first token of a short one;
* a shared-prefix second call against a cold one (the slot's prompt cache).

Each request gets its own random prefix, so nothing is served from the prompt cache unless the
test means it; generation ignores end-of-sequence (``ignore_eos``) so every request generates
exactly ``--ntg`` tokens, like llama-batched-bench. Raw and provider alternate level by level
(``--rounds`` pairs each; medians are printed, and the ratio is the median of the per-pair
ratios). Run it on an otherwise idle machine (it checks the load average first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from selfheal.llm.base import Completion, Message
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import build_info, server_settings
from selfheal.local.weights import ensure_model

WORDS = [
    "value",
    "list",
    "index",
    "sort",
    "merge",
    "count",
    "total",
    "range",
    "check",
    "parse",
    "token",
    "string",
    "number",
    "result",
    "window",
    "buffer",
    "stream",
    "filter",
    "reduce",
    "key",
    "item",
    "order",
    "first",
    "last",
    "empty",
    "error",
    "return",
]


def _text(n_words: int, rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


@dataclass
class Level:
    parallel: int
    gen_tps: float
    prompt_tps: float
    e2e_tps: float
    client_cpu: float
    prompt_tokens: int
    completion_tokens: int


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def raw_bench(
    binary: Path, model: Path, args: argparse.Namespace, threads: int, levels: str
) -> dict[int, dict]:
    """llama-batched-bench at each level (its jsonl output), same env as the server."""
    bench = binary.with_name("llama-batched-bench")
    if not bench.is_file():
        sys.exit(f"{bench} is missing: rebuild with scripts/install_llama_server.sh")
    cmd = [
        str(bench),
        "-m", str(model),
        "-c", str(args.slots * args.ctx),
        "-b", "2048",
        "-ub", "512",
        "-npp", str(args.npp),
        "-ntg", str(args.ntg),
        "-npl", levels,
        "-t", str(threads),
        "-tb", str(threads),
        "--output-format", "jsonl",
    ]  # fmt: skip
    env = {**os.environ}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # what the supervised server gets
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    rows: dict[int, dict] = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            rows[int(row["pl"])] = row
    if not rows:
        sys.exit(f"no results from llama-batched-bench:\n{out.stdout}\n{out.stderr[-2000:]}")
    return rows


async def words_for(p: OpenAICompatible, tokens: int, rng: random.Random) -> int:
    """How many filler words make a ``tokens``-token chat prompt (template included), measured
    on the server: the provider's prompts then match llama-batched-bench's ``-npp``."""
    small = await p.acomplete([Message(role="user", content=f"{rng.random()} x")], max_tokens=1)
    sample = 200
    big = await p.acomplete(
        [Message(role="user", content=f"{rng.random()} " + _text(sample, rng))], max_tokens=1
    )
    per_word = (big.prompt_tokens - small.prompt_tokens) / (sample - 1)
    return max(1, round((tokens - small.prompt_tokens) / per_word))


async def provider_level(
    p: OpenAICompatible, parallel: int, words: int, args: argparse.Namespace, rng: random.Random
) -> Level:
    """``parallel`` concurrent requests, each with its own fresh ~npp-token prompt."""
    prompts = [
        [Message(role="user", content=f"{rng.random()} " + _text(words, rng))]
        for _ in range(parallel)
    ]
    arrivals: list[list[float]] = [[] for _ in prompts]
    cpu0 = time.process_time()
    t0 = time.monotonic()
    results: list[Completion] = list(
        await asyncio.gather(
            *(
                p.acomplete(
                    m,
                    max_tokens=args.ntg,
                    temperature=0.0,
                    on_token=lambda _piece, mine=mine: mine.append(time.monotonic()),
                )
                for m, mine in zip(prompts, arrivals, strict=True)
            )
        )
    )
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    # the window in which every sequence is decoding: from the last first token to the first
    # last token; the tokens that arrived in it, over its length (batched-bench's S_TG is the
    # same situation: all sequences decoding together)
    start = max(a[0] for a in arrivals)
    end = min(a[-1] for a in arrivals)
    in_window = sum(1 for a in arrivals for t in a if start < t <= end)
    return Level(
        parallel=parallel,
        gen_tps=in_window / (end - start),
        prompt_tps=sum(c.prompt_tokens for c in results) / (start - t0),
        e2e_tps=sum(c.prompt_tokens + c.completion_tokens for c in results) / wall,
        client_cpu=cpu / wall,
        prompt_tokens=sum(c.prompt_tokens for c in results) // parallel,
        completion_tokens=sum(c.completion_tokens for c in results) // parallel,
    )


async def prompt_and_ttft(p: OpenAICompatible, rng: random.Random) -> dict[str, float]:
    out: dict[str, float] = {}
    long = [Message(role="user", content=f"{rng.random()} " + _text(1400, rng))]
    c = await p.acomplete(long, max_tokens=1)
    out["long_prompt_tokens"] = c.prompt_tokens
    out["prompt_tps"] = c.prompt_tokens / (c.time_to_first_token or c.latency)
    short = [Message(role="user", content=f"{rng.random()} Write a Python function add(a, b).")]
    ttfts = []
    for _ in range(3):
        short = [Message(role="user", content=f"{rng.random()} Write a Python function add(a, b).")]
        c = await p.acomplete(short, max_tokens=8)
        ttfts.append(c.time_to_first_token or c.latency)
    out["short_prompt_tokens"] = c.prompt_tokens
    out["ttft_short"] = statistics.median(ttfts)
    return out


async def shared_prefix(p: OpenAICompatible, rng: random.Random) -> dict[str, float]:
    system = f"{rng.random()} You are a careful Python programmer. " + _text(1200, rng)
    ask = [
        "Write a function median(xs) that returns the median of a list.",
        "Write a function clamp(x, lo, hi) that limits x to the range [lo, hi].",
    ]
    runs = []
    for question in ask:
        messages = [Message(role="system", content=system), Message(role="user", content=question)]
        c = await p.acomplete(messages, max_tokens=1)
        runs.append(c)
    cold, warm = runs
    return {
        "prompt_tokens": cold.prompt_tokens,
        "cold_ttft": cold.time_to_first_token or cold.latency,
        "cold_cached": cold.cached_tokens,
        "warm_ttft": warm.time_to_first_token or warm.latency,
        "warm_cached": warm.cached_tokens,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npp", type=int, default=300, help="prompt tokens per sequence")
    ap.add_argument("--ntg", type=int, default=128, help="generated tokens per sequence")
    ap.add_argument("--levels", default="1,2,4", help="concurrent completions")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096, help="context per slot")
    ap.add_argument("--rounds", type=int, default=3, help="raw/provider pairs per level")
    ap.add_argument("--force", action="store_true", help="run even if the machine is busy")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    load = os.getloadavg()[0]
    if load > 1.5 and not args.force:
        sys.exit(f"load average {load:.2f}: the machine is busy (use --force to run anyway)")

    model = ensure_model(progress=False)
    settings = server_settings(model, slots=args.slots, ctx_per_slot=args.ctx)
    threads = settings.threads
    info = build_info(settings.binary)
    print(f"# bench_llm  {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"cpu: {_cpu()}, {os.cpu_count()} cpus, threads {threads}; load before {load:.2f}")
    print(f"model: {model.name}; server: {settings.binary}")
    print(f"build: {info.get('cmake_args', '?')}")
    print(
        f"server: {settings.slots} slots x {settings.ctx_per_slot} ctx; npp {args.npp}, ntg {args.ntg}\n"
    )

    rng = random.Random(1234)
    pairs: dict[int, list[tuple[Level, dict]]] = {n: [] for n in levels}
    server = LocalServer(settings)
    p = LocalProvider(model=settings.alias, server=server, extra_body={"ignore_eos": True})
    q = LocalProvider(model=settings.alias, server=server)
    try:

        async def setup() -> int:
            await p.acomplete([Message(role="user", content="warm up")], max_tokens=4)
            return await words_for(p, args.npp, rng)

        words = asyncio.run(setup())
        # raw and provider alternate level by level, so both see the same background load
        for r in range(args.rounds):
            for n in levels:
                print(f"round {r + 1}, {n} concurrent ...", file=sys.stderr, flush=True)
                raw = raw_bench(Path(settings.binary), model, args, threads, str(n))[n]
                prov = asyncio.run(provider_level(p, n, words, args, rng))
                pairs[n].append((prov, raw))
        extra = asyncio.run(prompt_and_ttft(q, rng))
        prefix = asyncio.run(shared_prefix(q, rng))
    finally:
        server.stop()

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    print(
        "| concurrent completions | generated tok/s, provider | generated tok/s, "
        "llama-batched-bench | provider / raw | prompt tok/s, provider / raw | end to end "
        "tok/s, provider / raw |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in levels:
        prov_gen = med([pv.gen_tps for pv, _ in pairs[n]])
        raw_gen = med([rw["speed_tg"] for _, rw in pairs[n]])
        ratio = med([pv.gen_tps / rw["speed_tg"] for pv, rw in pairs[n]])
        prov_pp = med([pv.prompt_tps for pv, _ in pairs[n]])
        raw_pp_n = med([rw["speed_pp"] for _, rw in pairs[n]])
        prov_e2e = med([pv.e2e_tps for pv, _ in pairs[n]])
        raw_e2e = med([rw["speed"] for _, rw in pairs[n]])
        print(
            f"| {n} | {prov_gen:.1f} | {raw_gen:.1f} | {100 * ratio:.0f}% "
            f"| {prov_pp:.1f} / {raw_pp_n:.1f} | {prov_e2e:.1f} / {raw_e2e:.1f} |"
        )
    print()
    print("medians of the rounds; provider / raw is the median of the per-round ratios.")
    print("per round, provider / raw generated tok/s:")
    for n in levels:
        cells = ", ".join(f"{pv.gen_tps:.1f}/{rw['speed_tg']:.1f}" for pv, rw in pairs[n])
        print(f"  {n} concurrent: {cells}")
    cpu = ", ".join(f"{n}: {100 * med([pv.client_cpu for pv, _ in pairs[n]]):.0f}%" for n in levels)
    print(f"  CPU used by this (client) process while the requests ran, of one core: {cpu}")
    tokens = pairs[levels[0]][0][0]
    print(
        f"  (provider prompts: {tokens.prompt_tokens} tokens incl. chat template; raw: {args.npp})"
    )
    print()
    raw_pp = med([rw["speed_pp"] for _, rw in pairs[levels[0]]])
    print("| measure | value |")
    print("|---|---:|")
    print(
        f"| prompt tok/s, one cold {extra['long_prompt_tokens']:.0f}-token prompt, provider "
        f"(tokens / time to first token) | {extra['prompt_tps']:.1f} |"
    )
    print(f"| prompt tok/s, llama-batched-bench ({args.npp} tokens, 1 sequence) | {raw_pp:.1f} |")
    print(
        f"| time to first token, cold {extra['short_prompt_tokens']:.0f}-token prompt (s, median of 3) "
        f"| {extra['ttft_short']:.2f} |"
    )
    print(
        f"| {prefix['prompt_tokens']:.0f}-token prompt, cold: time to first token (s), cached tokens "
        f"| {prefix['cold_ttft']:.2f}, {prefix['cold_cached']:.0f} |"
    )
    print(
        f"| same system prompt, another question: time to first token (s), cached tokens "
        f"| {prefix['warm_ttft']:.2f}, {prefix['warm_cached']:.0f} |"
    )
    print(
        f"| shared-prefix speed-up (time to first token) | {prefix['cold_ttft'] / prefix['warm_ttft']:.1f}x |"
    )
    print(f"\nload after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
