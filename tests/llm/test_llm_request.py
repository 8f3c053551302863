"""One request record per call: options by name, the call context (role, node) reaching
selfheal's providers and never a foreign one, sync twins derived from async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from selfheal.llm import (
    CompletionRequest,
    Message,
    WrapperProvider,
    ask_code,
    complete_many,
    send,
)
from selfheal.llm.mock import MockProvider

HI = (Message(role="user", content="hi"),)


def test_options_are_the_record_fields() -> None:
    request = CompletionRequest.of(list(HI), max_tokens=8, stop=["x"], role="critic")
    assert (request.messages, request.max_tokens, request.stop, request.role) == (
        HI,
        8,
        ("x",),
        "critic",
    )
    with pytest.raises(TypeError, match=r"max_token.*the options are"):
        CompletionRequest.of(HI, max_token=8)


def test_the_mock_answers_by_the_role_of_the_call() -> None:
    mock = MockProvider({"critic": ["c"], "any": ["unbound"]})
    assert mock.complete(HI, role="critic", node="critic").text == "c"
    assert mock.complete(HI).text == "unbound"
    assert [(c.role, c.node) for c in mock.calls] == [("critic", "critic"), ("any", "")]
    assert mock.calls_for("critic")[0].reply == "c"


def test_a_foreign_provider_gets_the_protocol_keywords_only(scripted: Any) -> None:
    fake = scripted(["```python\ndef f():\n    return 1\n```"])
    reply = ask_code(fake, HI, entry_point="f", role="generator", node="generate", seed=3)
    assert reply.code.startswith("def f")
    assert set(fake.calls[0]["options"]) == {
        "max_tokens",
        "temperature",
        "stop",
        "schema",
        "on_token",
    }


def test_a_wrapper_passes_the_context_and_the_concurrency_through() -> None:
    seen: list[CompletionRequest] = []

    class Spy(WrapperProvider):
        async def _acomplete(self, request: CompletionRequest) -> Any:
            seen.append(request)
            return await super()._acomplete(request)

    spy = Spy(MockProvider({"oracle": ["42"]}))
    assert spy.max_concurrency == 1 and spy.model_id == "mock:scripted"
    assert send(spy, CompletionRequest.of(HI, role="oracle")).text == "42"
    assert seen[0].role == "oracle"


async def test_blocking_twins_work_inside_a_running_loop() -> None:
    mock = MockProvider({"generator": ["a", "b"]})
    assert asyncio.get_running_loop().is_running()
    assert [c.text for c in complete_many(mock, HI, n=2, role="generator")] == ["a", "b"]
