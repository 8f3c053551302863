"""The GPU path measured through selfheal's own providers: one answer, the population decoded
as one batch, and (when built) the llama.cpp CUDA server.

    PYTHONPATH=. python benchmarks/bench_gpu.py [--preset 1.5b] [--tokenizer DIR]
        [--tokens 256] [--sizes 4 8 16] [--gguf MODEL.gguf] [--json OUT.json]

A model with random weights is made from a config (speed does not depend on the weights, and
no download is needed): ``--preset 1.5b`` is the Qwen2.5-Coder-1.5B architecture (28 layers,
hidden 1536, the GPU check's model), ``--preset small`` (the default) a 4-layer Qwen2 of hidden
256 that a CPU runs in minutes; ``--hidden``/``--layers``/... change either. ``--tokenizer``
is a tokenizer folder (e.g. the local model's, extracted from its GGUF); without one a
character-level tokenizer is built. Every answer is held to exactly ``--tokens`` new tokens
(``min_new_tokens``), so the rows compare equal work. On the transformers provider
(:class:`~selfheal.llm.hf.HFProvider`, float16 on CUDA, float32 on CPU):

* ``one``: ``complete`` (one sampled answer), the baseline;
* ``n one after another``: ``n`` such answers in turn (what the provider did before it batched);
* ``complete_many(n)``: the population's request, one ``generate`` of ``n`` sequences, for
  each ``--sizes`` n.

With ``--first-round`` (issue 45), the first round as the pipeline asks it, all requests at once
(the greedy answer in both forms, the samples taking turns across them; sampled answers to one
prompt are joined into one batch): ``first round, 2 greedy`` (``first_sample=2``, today's CPU
default) and ``first round, all K`` (``first_sample=K``, what a GPU backend now asks), for each
``--sizes`` K of at least 2; time to every answer.

With ``--first-calls``, before anything else: the first and the second call of each
``complete_many(K)`` in this process, so the cost of a batch size's first call shows; with
``--warm load`` the provider warms every size up first (``HFProvider.warm_up``, timed), as it
does when it loads on CUDA. Run ``--warm none`` and ``--warm load`` as two processes: the set-up a
warm-up saves is per process. ``--model-dir`` keeps the random model there for the next run.

With ``--gguf`` and a llama-server built with CUDA (``SELFHEAL_LLAMA_CUDA=1 make install``), the
same on the server: one answer with 1 slot, 4 answers at once with 4 slots. Prints seconds and
ratios to ``one`` (the median of ``--repeat`` rounds, each round measuring every row in turn, after
one untimed call of each row: a batch shape's first call sets up its kernels);
``--json`` writes them too.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHAPE = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)
PRESETS: dict[str, dict[str, Any]] = {
    "small": dict(zip(SHAPE, (256, 1024, 4, 4, 2), strict=True)),
    "1.5b": dict(zip(SHAPE, (1536, 8960, 28, 12, 2), strict=True)),
}
"""Model shapes (Qwen2 architecture)."""

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PROMPT = "Write a function add(a, b) that returns the sum of a and b. Reply with code only."


def char_tokenizer() -> Any:
    """A character-level tokenizer (printable ASCII and the chat markers), built here."""
    import tokenizers
    import transformers

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r"[\s\S]"), behavior="isolated"
    )
    core.decoder = tokenizers.decoders.Fuse()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def make_model(folder: Path, shape: dict[str, Any], tokenizer_dir: str | None) -> Path:
    """Save a Qwen2 of ``shape`` with random weights and its tokenizer in ``folder``."""
    import torch
    import transformers

    if tokenizer_dir:
        tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        tok = char_tokenizer()
    config = transformers.Qwen2Config(
        vocab_size=len(tok),
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **shape,
    )
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _one_by_one(one: Callable[..., Any], n: int) -> list[Any]:
    """``n`` answers, one after another (each its own seed)."""
    return [one(seed) for seed in range(n)]


def sampling(provider: Any, messages: Any, n: int, tokens: int) -> Callable[[], Any]:
    """``n`` sampled answers of ``tokens`` tokens to ``messages`` (temperature 0.8, seed 1)."""
    return functools.partial(
        provider.complete_many, messages, n=n, max_tokens=tokens, temperature=0.8, seed=1
    )


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - start, out


def load(args: argparse.Namespace, shape: dict[str, Any]) -> Any:
    """The provider on a random model of ``shape`` (made in ``--model-dir`` when it has none
    yet, else in a temporary folder), not warmed up at load (``--warm`` decides)."""
    from selfheal.llm.hf import HFProvider

    kept = Path(args.model_dir) if args.model_dir else None
    if kept is not None and (kept / "config.json").exists():
        return HFProvider(str(kept), device=args.device, warm=False)
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
        return HFProvider(
            str(make_model(kept, shape, args.tokenizer)), device=args.device, warm=False
        )
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        folder = make_model(Path(tmp), shape, args.tokenizer)
        return HFProvider(str(folder), device=args.device, warm=False)


def first_calls(args: argparse.Namespace, provider: Any, rows: dict[str, float], sync: Any) -> None:
    """The first and second call of each ``complete_many(K)`` in this process (``--warm load``:
    after the provider warmed every size up, timed)."""
    from selfheal.llm.base import Message

    messages = [Message(role="user", content=PROMPT)]
    if args.warm == "load":
        sizes = sorted({1, *args.sizes})
        start = time.perf_counter()
        provider.warm_up(sizes)
        provider.wait_warm()
        rows[f"warm-up of sizes {sizes} (16 tokens each)"] = time.perf_counter() - start
    for n in args.sizes:
        for call in ("first", "second"):
            secs, _ = timed(sampling(provider, messages, n, args.tokens), sync)
            rows[f"{call} complete_many({n}), warm={args.warm}"] = secs
            print(f"  {call} complete_many({n}): {secs:.2f}s", file=sys.stderr, flush=True)


def first_round(provider: Any, k: int, n_tokens: int) -> list[Any]:
    """The first round as the pipeline asks it, all at once: the greedy answer completing a
    prefilled header and instructed, then ``k - 2`` samples taking turns across the two."""
    from selfheal.llm.base import Message

    asked = [Message(role="user", content=PROMPT)]
    completing = [*asked, Message(role="assistant", content="```python\ndef add(")]
    forms = [completing, asked]
    calls = [(form, 0.0) for form in forms][:k]
    calls += [(forms[i % 2], 0.8) for i in range(max(0, k - 2))]

    async def ask_all() -> list[Any]:
        return list(
            await asyncio.gather(
                *(
                    provider.acomplete(m, max_tokens=n_tokens, temperature=t, seed=i)
                    for i, (m, t) in enumerate(calls)
                )
            )
        )

    answers = asyncio.run(ask_all())
    assert [a.completion_tokens for a in answers] == [n_tokens] * k
    return answers


def bench_hf(args: argparse.Namespace, rows: dict[str, float]) -> dict[str, Any]:
    """The transformers provider's rows; returns what was measured on."""
    import torch

    from selfheal.llm.base import Message

    shape = {**PRESETS[args.preset], **{k: v for k, v in vars(args).items() if k in SHAPE and v}}
    provider = load(args, shape)
    n_tokens = args.tokens
    cuda = provider.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    messages = [Message(role="user", content=PROMPT)]
    options = dict(max_tokens=n_tokens, temperature=0.8)
    provider.lm.generation_config.min_new_tokens = n_tokens  # every answer the same length
    if args.first_calls:
        first_calls(args, provider, rows, sync)
        return machine_of(provider, shape, cuda)

    def one(seed: int = 0) -> Any:
        return provider.complete(messages, seed=seed, **options)

    def many(n: int) -> list[Any]:
        answers = provider.complete_many(messages, n=n, seed=1, **options)
        assert [a.completion_tokens for a in answers] == [n_tokens] * n
        return answers

    assert one().completion_tokens == n_tokens  # warm-up at full length, not reported
    work: dict[str, Callable[[], Any]] = {"one": one}
    for n in args.sizes:
        if args.sequential:
            work[f"{n} one after another"] = functools.partial(_one_by_one, one, n)
        work[f"complete_many({n})"] = functools.partial(many, n)
    if args.first_round:
        work["first round, 2 greedy (first_sample=2)"] = functools.partial(
            first_round, provider, 2, n_tokens
        )
        for k in (k for k in args.sizes if k > 2):
            work[f"first round, all {k} (first_sample={k})"] = functools.partial(
                first_round, provider, k, n_tokens
            )
    for fn in work.values():  # each batch shape once, untimed: its first call sets up
        fn()  # kernels (on an H100 the first complete_many(n) of a shape took ~3x the next)
    samples: dict[str, list[float]] = {label: [] for label in work}
    for _ in range(args.repeat):  # rounds, so a busy moment spreads over every row
        for label, fn in work.items():
            samples[label].append(timed(fn, sync)[0])
            print(f"  {label}: {samples[label][-1]:.2f}s", file=sys.stderr, flush=True)
    rows.update({label: statistics.median(secs) for label, secs in samples.items()})
    return machine_of(provider, shape, cuda)


def machine_of(provider: Any, shape: dict[str, Any], cuda: bool) -> dict[str, Any]:
    """What was measured on."""
    import torch

    params = sum(p.numel() for p in provider.lm.parameters())
    return {
        "device": torch.cuda.get_device_name(0) if cuda else f"CPU, {os.cpu_count()} cores",
        "dtype": str(provider.lm.dtype),
        "parameters": params,
        "shape": shape,
        "vocab": provider.lm.config.vocab_size,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def bench_llama(args: argparse.Namespace, rows: dict[str, float]) -> str:
    """The CUDA llama-server's rows, or why they were skipped."""
    from selfheal.llm.base import Message
    from selfheal.local.provider import LocalProvider
    from selfheal.local.server import LocalServer
    from selfheal.local.settings import (
        build_info,
        find_server_binary,
        is_cuda_build,
        server_settings,
    )

    if not args.gguf:
        return "skipped: no --gguf"
    binary = find_server_binary()
    if binary is None or not is_cuda_build(build_info(binary)):
        return "skipped: no llama-server built with CUDA (SELFHEAL_LLAMA_CUDA=1 make install)"
    messages = [Message(role="user", content=PROMPT)]
    for slots, n in ((1, 1), (4, 4)):
        server = LocalServer(server_settings(args.gguf, slots=slots, binary=binary))
        try:
            provider = LocalProvider(server=server)
            provider.complete(messages, max_tokens=4)  # start and warm up
            rows[f"llama-server CUDA, {slots} slot(s), {n} at once"], _ = timed(
                sampling(provider, messages, n, args.tokens), lambda: None
            )
        finally:
            server.stop()
    return "measured"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--hidden", dest="hidden_size", type=int)
    ap.add_argument("--intermediate", dest="intermediate_size", type=int)
    ap.add_argument("--layers", dest="num_hidden_layers", type=int)
    ap.add_argument("--heads", dest="num_attention_heads", type=int)
    ap.add_argument("--tokenizer", help="a tokenizer folder (default: a character tokenizer)")
    ap.add_argument("--device", help="cuda, mps or cpu (default: the best there is)")
    ap.add_argument("--tokens", type=int, default=256, help="new tokens per answer (256)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument(
        "--no-sequential",
        dest="sequential",
        action="store_false",
        help="skip the n-answers-in-turn rows (n times one answer, the slow part on a CPU)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the median is shown (1)")
    ap.add_argument("--first-round", action="store_true", help="the first round's rows")
    ap.add_argument(
        "--first-calls", action="store_true", help="only each size's first and second call"
    )
    ap.add_argument("--warm", choices=["none", "load"], default="none", help="with --first-calls")
    ap.add_argument("--model-dir", help="make the random model here, or reuse the one there")
    ap.add_argument("--gguf", help="a GGUF model for the llama.cpp CUDA server rows")
    ap.add_argument("--json", help="write the results here too")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    rows: dict[str, float] = {}
    started = time.time()
    machine = bench_hf(args, rows)
    llama = bench_llama(args, rows)
    base = rows.get("one") or min(rows.values())
    print(
        f"# bench_gpu: {machine['device']}, {machine['dtype']}, torch {machine['torch']}, "
        f"{machine['threads']} threads; median of {args.repeat} round(s)"
    )
    print(
        f"# model: Qwen2 random weights, {machine['parameters']:,} parameters "
        f"{machine['shape']}, vocab {machine['vocab']}; {args.tokens} new tokens per answer"
    )
    print(f"{'what':<44} {'seconds':>9} {'x one':>7} {'per answer':>11}")
    for label, secs in rows.items():
        n = int(label.split("(")[1].split(")")[0]) if "complete_many(" in label else 1
        if "one after another" in label:
            n = int(label.split()[0])
        elif label.startswith("first round, "):
            n = int(label.split("(first_sample=")[1].rstrip(")"))
        elif label.startswith("warm-up"):
            n = 1
        print(f"{label:<44} {secs:9.2f} {secs / base:7.2f} {secs / n / base:11.2f}")
    print(f"# llama.cpp CUDA server: {llama}")
    result = {
        "argv": sys.argv[1:] if argv is None else argv,
        "machine": {**machine, "cpus": os.cpu_count(), "python": platform.python_version()},
        "seconds": rows,
        "llama_server": llama,
        "wall_s": round(time.time() - started, 1),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
