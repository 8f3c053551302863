"""Benchmark the local llama.cpp provider against raw llama-cpp-python, in one run.

    PYTHONPATH=. python benchmarks/bench_llamacpp.py [--tokens 128] [--repeats 3]

Prints a markdown table:

* generation tokens/s through ``LlamaCppProvider.complete`` vs raw
  ``Llama.create_chat_completion`` on the same prompt, same ``Llama`` object, same settings
  (KV cache cleared before every run, greedy decoding), and their ratio (goal >= 95%);
* prompt processing tokens/s (a long prompt evaluated once) and time to first token;
* the effect of KV prefix reuse: a second request sharing a long system prompt with the
  previous one, against the same request with a cleared cache.

Numbers are medians of ``--repeats`` alternating runs. Everything is measured in this run:
only ratios between rows of the same run mean anything across machines.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from selfheal.llm.base import Message
from selfheal.llm.llamacpp import LlamaCppProvider

GEN_PROMPT = (
    "Write a Python module that implements a binary search tree class with insert, delete, "
    "search, minimum, maximum and in-order traversal methods. Include docstrings."
)
SYSTEM = (
    "You are a careful Python engineer. You write small, correct, well-tested functions. "
    "Follow these rules strictly:\n"
    + "\n".join(
        f"{i}. Rule {i}: prefer clear names, handle edge cases such as empty input, None, "
        f"negative numbers and very large values, and never use global state (case {i})."
        for i in range(1, 41)
    )
)


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    provider = LlamaCppProvider.from_default(progress=False)
    load_s, _ = _timed(provider.load)
    llm = provider.llama
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    print(
        f"# bench_llamacpp  ({platform.processor() or platform.machine()}, {os.cpu_count()} cpus)"
    )
    print(
        f"model {provider.model_id}, n_ctx {provider.n_ctx}, n_threads {provider.n_threads}, load {load_s:.2f}s"
    )
    print(f"llama.cpp: {info.decode() if isinstance(info, bytes) else info}")
    print()

    msgs = [Message(role="user", content=GEN_PROMPT)]
    raw_msgs: list[Any] = [{"role": "user", "content": GEN_PROMPT}]

    # warm-up (page in the weights, compile nothing)
    llm.reset()
    provider.complete(msgs, max_tokens=8)

    ours: list[float] = []
    raw: list[float] = []
    ttft: list[float] = []
    decode: list[float] = []
    for _ in range(args.repeats):
        llm.reset()
        c = provider.complete(msgs, max_tokens=args.tokens)
        ours.append(c.completion_tokens / c.latency)
        if c.time_to_first_token is not None and c.completion_tokens > 1:
            ttft.append(c.time_to_first_token)
            decode.append((c.completion_tokens - 1) / (c.latency - c.time_to_first_token))
        llm.reset()
        dt, out = _timed(
            lambda: llm.create_chat_completion(
                messages=raw_msgs, max_tokens=args.tokens, temperature=0.0, repeat_penalty=1.0
            )
        )
        raw.append(out["usage"]["completion_tokens"] / dt)

    # prompt processing: evaluate a long prompt once
    long_tokens = llm.tokenize(SYSTEM.encode(), add_bos=False, special=True)
    pp: list[float] = []
    for _ in range(args.repeats):
        llm.reset()
        dt, _ = _timed(lambda: llm.eval(long_tokens))
        pp.append(len(long_tokens) / dt)

    # KV prefix reuse: same long system prompt, different question
    def req(q: str) -> list[Message]:
        return [Message(role="system", content=SYSTEM), Message(role="user", content=q)]

    cold: list[float] = []
    warm: list[float] = []
    prompt_len = 0
    for i in range(args.repeats):
        llm.reset()
        provider.complete(req(f"Write is_prime(n), variant {i}."), max_tokens=1)
        warm_c = provider.complete(req(f"Write fib(n), variant {i}."), max_tokens=1)
        llm.reset()
        cold_c = provider.complete(req(f"Write fib(n), variant {i}."), max_tokens=1)
        warm.append(warm_c.latency)
        cold.append(cold_c.latency)
        prompt_len = cold_c.prompt_tokens

    o, r = _median(ours), _median(raw)
    print("| measure | value |")
    print("|---|---|")
    print(
        f"| generation, raw llama-cpp-python (tokens/s, {args.tokens} tokens, end to end) | {r:.2f} |"
    )
    print(f"| generation, LlamaCppProvider (tokens/s, same) | {o:.2f} |")
    print(f"| provider / raw | {o / r:.1%} |")
    print(f"| decode only, provider (tokens/s after the first token) | {_median(decode):.2f} |")
    print(
        f"| time to first token, {c.prompt_tokens}-token prompt, cold cache (s) | {_median(ttft):.2f} |"
    )
    print(f"| prompt processing ({len(long_tokens)} tokens, tokens/s) | {_median(pp):.1f} |")
    print(
        f"| {prompt_len}-token prompt, cold cache: latency to 1 token (s) | {_median(cold):.2f} |"
    )
    print(f"| same prompt, shared system prefix cached (s) | {_median(warm):.2f} |")
    print(f"| prefix reuse speed-up | {_median(cold) / _median(warm):.1f}x |")


if __name__ == "__main__":
    main()
