"""heal() on a GPU through the transformers provider, on a model with random weights (the
text is noise: only the engine's behaviour is checked, not its answers).

    PYTHONPATH=. python benchmarks/gpu_heal_check.py [--preset 1.5b] [--tokenizer DIR]
        [--budget 45] [--json OUT.json]

Shows three things on the card: ``candidates="auto"`` resolved from the provider's
``batch_hint``; which ``generate`` calls the run made (the number of sequences of each); that
``time_budget`` stops the generation in flight (the run ends ``exhausted`` near its budget and
the provider answers the next request at once, no generation left running).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_gpu import PRESETS, make_model

import selfheal
from selfheal.llm.base import Message
from selfheal.llm.hf import HFProvider

SPEC = "Write a function add(a, b) that returns the sum of a and b. Example: add(2, 3) -> 5"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="1.5b")
    ap.add_argument("--tokenizer", help="a tokenizer folder (default: a character tokenizer)")
    ap.add_argument("--budget", type=int, default=45, help="the run's time_budget, seconds")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpu-heal-") as tmp:
        provider = HFProvider(str(make_model(Path(tmp), PRESETS[args.preset], args.tokenizer)))
    sequences: list[int] = []
    generate = provider.lm.generate

    def counted(*a: Any, **kw: Any) -> Any:
        sequences.append(int(kw.get("num_return_sequences", 1)))
        return generate(*a, **kw)

    provider.lm.generate = counted
    hello = [Message(role="user", content="hi")]
    provider.complete(hello, max_tokens=4)  # warm-up
    start = time.perf_counter()
    provider.complete(hello, max_tokens=4)
    idle_request_s = time.perf_counter() - start
    sequences.clear()
    start = time.perf_counter()
    result = selfheal.heal(
        SPEC, provider=provider, config=selfheal.HealConfig(time_budget=args.budget)
    )
    heal_s = time.perf_counter() - start
    start = time.perf_counter()
    provider.complete(hello, max_tokens=4)
    out = {
        "device": provider.device,
        "batch_hint": provider.batch_hint,
        "candidates": result.config.generation.candidates,
        "auto": [e.detail for e in result.timeline if e.detail.startswith("candidates=auto")],
        "time_budget": args.budget,
        "heal_s": round(heal_s, 1),
        "status": str(result.status),
        "stop_reason": result.state.stop_reason,
        "generate_sequences": sequences,
        "next_request_s": round(time.perf_counter() - start, 2),
        "idle_request_s": round(idle_request_s, 2),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
