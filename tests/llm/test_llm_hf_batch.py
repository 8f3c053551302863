"""The transformers provider's population: ``complete_many`` decodes n answers as one batch.

On a tiny Qwen2 with random weights built inside the test (no download): n sampled answers from
ONE ``generate`` call, stop strings and token counts per sequence, a batch cancelled as a whole,
and callers from different roles served one whole generation after another.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_hf import build_model, cancel_then_ask  # noqa: E402

from selfheal.llm.base import Message  # noqa: E402
from selfheal.llm.hf import HFProvider  # noqa: E402

CHAT = [Message(role="user", content="def add ( a b )")]


class Generations:
    """Wraps a provider's ``lm.generate``: counts the calls, keeps their outputs and when
    each ran."""

    def __init__(self, provider: HFProvider) -> None:
        self.calls: list[dict[str, Any]] = []
        self.outputs: list[Any] = []
        self.spans: list[tuple[float, float]] = []
        self.running = threading.Event()
        self._real = provider.lm.generate
        provider.lm.generate = self  # an instance attribute: this provider only

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        start = time.monotonic()
        self.running.set()
        out = self._real(**kwargs)
        self.spans.append((start, time.monotonic()))
        self.outputs.append(out)
        return out


@pytest.fixture
def sampler(tmp_path_factory: pytest.TempPathFactory) -> HFProvider:
    folder = build_model(tmp_path_factory.mktemp("tiny-qwen2"), first_token="hello", sampling=True)
    return HFProvider(str(folder), device="cpu")


def test_n_sampled_answers_come_from_one_generate(sampler: HFProvider) -> None:
    gen = Generations(sampler)
    answers = sampler.complete_many(CHAT, n=4, temperature=1.0, max_tokens=8, seed=1)
    assert len(gen.calls) == 1
    assert gen.calls[0]["num_return_sequences"] == 4 and gen.calls[0]["do_sample"] is True
    assert len(answers) == 4
    assert len({a.text for a in answers}) == 4  # four distinct samples
    assert all(a.model == sampler.model_id for a in answers)
    # the seed makes the batch reproducible
    again = sampler.complete_many(CHAT, n=4, temperature=1.0, max_tokens=8, seed=1)
    assert [a.text for a in again] == [a.text for a in answers]


def test_greedy_many_is_one_sequence_repeated(sampler: HFProvider) -> None:
    gen = Generations(sampler)
    answers = sampler.complete_many(CHAT, n=3, temperature=0.0, max_tokens=5)
    assert len(gen.calls) == 1 and gen.calls[0]["num_return_sequences"] == 1
    assert len({a.text for a in answers}) == 1 and len(answers) == 3


def test_stop_strings_and_token_counts_hold_per_sequence(sampler: HFProvider) -> None:
    gen = Generations(sampler)
    hello = sampler.tokenizer.convert_tokens_to_ids("hello")
    eos = sampler.tokenizer.eos_token_id
    answers = sampler.complete_many(
        CHAT, n=8, temperature=1.0, max_tokens=12, stop=["hello"], seed=3
    )
    (output,) = gen.outputs
    prompt_len = sampler.count_tokens(sampler.render_prompt(CHAT))
    finishes = set()
    for row, answer in zip(output, answers, strict=True):
        new = row[prompt_len:].tolist()
        ends = [i + 1 for i, t in enumerate(new) if t in (hello, eos)]
        expected = ends[0] if ends else 12  # this sequence's own end, not the batch's
        assert answer.completion_tokens == expected
        assert "hello" not in answer.text
        assert answer.finish_reason == ("stop" if ends else "length")
        assert answer.prompt_tokens == prompt_len
        finishes.add(answer.finish_reason)
    assert finishes == {"stop", "length"}  # the seed gives both kinds in one batch
    assert len({a.completion_tokens for a in answers}) > 1


@dataclass(frozen=True)
class After:
    """A ``stop_when`` that ends a reply at its ``n``-th character, once it is longer."""

    n: int

    def __call__(self, text: str) -> int | None:
        return self.n if len(text) > self.n else None


def test_a_stop_check_ends_each_sequence_where_it_says(sampler: HFProvider) -> None:
    """``stop_when`` (the rule that ends a code reply with its function) is checked per
    sequence after every token: a row ends as soon as it says so, cut there."""
    free = sampler.complete_many(CHAT, n=4, temperature=1.0, max_tokens=12, seed=5)
    gen = Generations(sampler)
    cut = sampler.complete_many(
        CHAT, n=4, temperature=1.0, max_tokens=12, seed=5, stop_when=After(3)
    )
    assert len(gen.calls) == 1
    for whole, answer in zip(free, cut, strict=True):
        assert answer.text == whole.text[:3]
        if len(whole.text) > 3:
            assert answer.completion_tokens < whole.completion_tokens
            assert answer.finish_reason == "stop"
    assert sum(len(a.text) > 3 for a in free) >= 2  # the seed lets rows run on past it


async def test_a_cancelled_batch_stops(sampler: HFProvider) -> None:
    eos = sampler.tokenizer.eos_token_id
    sampler.lm.generation_config.suppress_tokens = [eos]  # no sequence ends by itself
    gen = Generations(sampler)
    task = asyncio.create_task(
        sampler.acomplete_many(CHAT, n=4, temperature=1.0, max_tokens=200_000)
    )
    await asyncio.to_thread(gen.running.wait, 30)
    # the worker stops at its next token and the queue moves on
    answer = await cancel_then_ask(sampler, task, CHAT, max_tokens=2)
    assert answer.completion_tokens == 2
    assert len(gen.spans) == 2
    made = int(gen.outputs[0].shape[1]) - sampler.count_tokens(sampler.render_prompt(CHAT))
    assert made < 200_000


async def test_a_second_caller_waits_for_the_batch(sampler: HFProvider) -> None:
    gen = Generations(sampler)
    batch = asyncio.create_task(
        sampler.acomplete_many(CHAT, n=4, temperature=1.0, max_tokens=40, role="generator")
    )
    await asyncio.to_thread(gen.running.wait, 30)
    other = await sampler.acomplete(CHAT, max_tokens=3, role="critic")
    answers = await batch
    assert len(answers) == 4 and other.completion_tokens <= 3
    (_, first_end), (second_start, _) = gen.spans
    assert gen.calls[0]["num_return_sequences"] == 4  # the batch went first
    assert second_start >= first_end  # queued, not interleaved


def test_prefilled_reply_is_continued(tmp_path: Path) -> None:
    provider = HFProvider(str(build_model(tmp_path, first_token="hello")), device="cpu")
    chat = [*CHAT, Message(role="assistant", content="def add")]
    assert provider.render_prompt(chat) == "<|user|> def add ( a b ) <|assistant|> def add"
    reply = provider.complete(chat, max_tokens=2)
    assert reply.text.split() == ["hello", "hello"]  # the continuation, without the prefill


async def test_concurrent_samples_of_one_prompt_are_decoded_together(sampler: HFProvider) -> None:
    # the pipeline asks for each candidate on its own: the samples that wait together while
    # the model is busy (here with the greedy answer) become one batch
    sampler.lm.generation_config.suppress_tokens = [sampler.tokenizer.eos_token_id]
    gen = Generations(sampler)
    greedy = asyncio.create_task(sampler.acomplete(CHAT, max_tokens=200, temperature=0.0))
    await asyncio.to_thread(gen.running.wait, 30)
    samples = [
        asyncio.create_task(sampler.acomplete(CHAT, max_tokens=8, temperature=1.0, seed=i))
        for i in range(3)
    ]
    other = asyncio.create_task(sampler.acomplete(CHAT, max_tokens=5, temperature=1.0))
    answers = await asyncio.gather(*samples)
    await greedy, await other
    rows = [c["num_return_sequences"] for c in gen.calls]
    assert rows == [1, 3, 1]  # the greedy answer alone, the three samples as one batch
    assert len({a.text for a in answers}) == 3
    assert all(a.completion_tokens == 8 for a in answers)


async def test_a_cancelled_sample_leaves_the_others_waiting(sampler: HFProvider) -> None:
    sampler.lm.generation_config.suppress_tokens = [sampler.tokenizer.eos_token_id]
    gen = Generations(sampler)
    busy = asyncio.create_task(sampler.acomplete(CHAT, max_tokens=200, temperature=0.0))
    await asyncio.to_thread(gen.running.wait, 30)
    gone, kept = (
        asyncio.create_task(sampler.acomplete(CHAT, max_tokens=6, temperature=1.0))
        for _ in range(2)
    )
    await asyncio.sleep(0.05)
    gone.cancel()
    answer = await kept
    await busy
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert answer.completion_tokens == 6
    assert [c["num_return_sequences"] for c in gen.calls] == [1, 1]
