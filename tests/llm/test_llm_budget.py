"""Budgets that stop work in flight: a run's ``time_budget`` (an ``asyncio.timeout`` around each
node) and its caller's cancellation stop the model call in progress (the transformers
provider's generation at its next token, a server's streamed request by closing the stream),
and the run ends ``exhausted`` saying so."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeServer, Response

from selfheal import HealConfig, aheal, heal
from selfheal.llm.base import Message
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.llm.retry import RetryPolicy

CHAT = [Message(role="user", content="def add ( a b )")]
SPEC = "Write a function double(x) that returns x times two."


class NoSandbox:
    """The run must stop before anything is executed."""

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing should run in the sandbox")

    arun_snippet = arun


@pytest.fixture(autouse=True)
def no_reply_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A code reply may take as many tokens as the config allows (200,000 here), not the size
    its prompt gives it (``_calls.code_tokens``): only the budget can stop the endless model."""
    monkeypatch.setattr("selfheal.roles._calls.CODE_TOKENS_FLOOR", 200_000)


def endless_model(folder: Path) -> Any:
    """A transformers model whose greedy decoding repeats "hello" and never ends."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_model

    from selfheal.llm.hf import HFProvider

    return HFProvider(str(build_model(folder, first_token="hello")), device="cpu")


def slow_config(tmp_path: Path, **changes: Any) -> HealConfig:
    base: dict[str, Any] = dict(
        max_tokens=200_000,
        candidates=1,
        first_sample=1,
        spec_blind_tests=False,
        memory=False,
        runs_dir=str(tmp_path / "runs"),
    )
    return HealConfig(**{**base, **changes})


def test_a_time_budget_stops_a_generation_in_flight(tmp_path: Path) -> None:
    slow = endless_model(tmp_path / "m")  # only the budget can stop it
    generations: list[float] = []
    real = slow.lm.generate

    def timed(**kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return real(**kwargs)
        finally:
            generations.append(time.monotonic() - start)

    slow.lm.generate = timed
    config = slow_config(tmp_path, time_budget=3)
    started = time.monotonic()
    result = heal(SPEC, provider=slow, config=config, executor=NoSandbox())
    took = time.monotonic() - started
    assert result.status == "exhausted"
    reason = result.state.stop_reason
    assert reason.startswith("time budget spent (3s)") and "in flight was stopped" in reason
    assert any(e.kind == "error" and e.detail.startswith("stopped: ") for e in result.timeline)
    assert result.code is None
    assert took < 3 + 15  # the budget ended it, not the 200,000 tokens (generous bound)
    # the generation itself stopped: the model is free again
    assert slow.complete(CHAT, max_tokens=1).completion_tokens == 1
    assert generations[0] < 3 + 15


async def test_cancelling_a_run_stops_its_generation(tmp_path: Path) -> None:
    from selfheal.graph.runner import Run
    from selfheal.request import HealRequest

    slow = endless_model(tmp_path / "m")
    request = HealRequest(SPEC, provider=slow, config=slow_config(tmp_path), executor=NoSandbox())
    run = Run.start(request)
    task = asyncio.create_task(run.arun())
    await asyncio.sleep(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the cancellation stopped the generation and ended the run, saying so
    assert run.state.stop_reason.startswith("the run was stopped by its caller")
    answer = await asyncio.wait_for(slow.acomplete(CHAT, max_tokens=1), timeout=30)
    assert answer.completion_tokens == 1


def endless(served: list[int]) -> Iterator[bytes]:
    """An SSE stream that never ends, counting the chunks the server got to send."""
    yield b'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m",'
    yield b'"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    while True:
        served.append(1)
        yield (
            b'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m",'
            b'"choices":[{"index":0,"delta":{"content":"hello "}}]}\n\n'
        )


def streaming(http_server: Callable[..., FakeServer], served: list[int]) -> OpenAICompatible:
    server = http_server(lambda r: Response(body=endless(served), chunk_delay=0.02))  # type: ignore[arg-type]
    return OpenAICompatible(
        model="m", base_url=server.url + "/v1", api_key="k", policy=RetryPolicy(timeout=10.0)
    )


def stops_the_stream(served: list[int]) -> None:
    """The server stops sending soon after the client went: the stream was closed."""
    at_stop = len(served)
    time.sleep(0.5)
    assert len(served) <= at_stop + 5  # 25 more chunks were due had it kept reading


def test_a_time_budget_closes_a_streamed_request(
    http_server: Callable[..., FakeServer], tmp_path: Path
) -> None:
    served: list[int] = []
    # 3 s: the SDK's first request on a loop loads its lazy parts first (a second on a busy
    # machine), and the stream must have begun when the budget runs out
    config = slow_config(tmp_path, time_budget=3.0)
    started = time.monotonic()
    result = heal(
        SPEC, provider=streaming(http_server, served), config=config, executor=NoSandbox()
    )
    assert time.monotonic() - started < 3.0 + 5  # generous
    assert result.status == "exhausted"
    assert result.state.stop_reason.startswith("time budget spent (3s)")
    assert len(served) > 5  # it was streaming
    stops_the_stream(served)


async def test_cancelling_a_heal_closes_its_streamed_request(
    http_server: Callable[..., FakeServer], tmp_path: Path
) -> None:
    served: list[int] = []
    provider = streaming(http_server, served)
    task = asyncio.create_task(
        aheal(SPEC, provider=provider, config=slow_config(tmp_path), executor=NoSandbox())
    )
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(stops_the_stream, served)


async def test_cancelling_the_caller_cancels_the_call(
    http_server: Callable[..., FakeServer],
) -> None:
    served: list[int] = []
    task = asyncio.create_task(streaming(http_server, served).acomplete(CHAT, max_tokens=100_000))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(stops_the_stream, served)
