"""The provider fakes conform to the ``Provider`` protocol the way the real providers do:
``complete(messages, /, **options)`` and its async twin take every ``CompletionRequest``
option by name, refuse an unknown one with ``TypeError`` (as ``CompletionRequest.of`` does for
every real provider), stream the reply's text to ``on_token``, and name their model
``provider:model``. Every fake the suite stands in for a model with is listed here."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from llm_fakes import ScriptedProvider

from selfheal.llm.base import Completion, CompletionRequest, Message, Provider, ToolSpec
from selfheal.llm.mock import MockProvider
from selfheal.llm.parsing.code_stop import FunctionEnds

REPLY = "```python\ndef f(x):\n    return x\n```"

FAKES: dict[str, Callable[[], Any]] = {
    "ScriptedProvider": lambda: ScriptedProvider([REPLY, REPLY]),
    "MockProvider": lambda: MockProvider(default=REPLY),
}
"""Every Provider fake of the suite, built with two replies."""

MESSAGES = [Message(role="user", content="Write f.")]


def every_option(pieces: list[str]) -> dict[str, Any]:
    """A value for each ``CompletionRequest`` option (the protocol's keywords and the rest)."""
    values: dict[str, Any] = {
        "max_tokens": 64,
        "temperature": 0.5,
        "stop": ["\n\n\n"],
        "schema": None,
        "seed": 7,
        "on_token": pieces.append,
        "stop_when": FunctionEnds("f"),
        "role": "generator",
        "node": "generate",
        "tools": [ToolSpec(name="run", description="run code", parameters={"type": "object"})],
        "tool_choice": "auto",
    }
    fields = {f.name for f in dataclasses.fields(CompletionRequest)} - {"messages"}
    assert set(values) == fields, "a new CompletionRequest option: give it a value here"
    return values


@pytest.fixture(params=list(FAKES))
def fake(request: pytest.FixtureRequest) -> Any:
    return FAKES[request.param]()


def test_is_a_provider_with_a_model_id(fake: Any) -> None:
    assert isinstance(fake, Provider)
    provider, _, model = fake.model_id.partition(":")
    assert provider and model, fake.model_id


def test_complete_takes_the_protocols_signature(fake: Any) -> None:
    for name in ("complete", "acomplete"):
        params = list(inspect.signature(getattr(fake, name)).parameters.values())
        kinds = [p.kind for p in params]
        assert kinds == [inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_KEYWORD], (
            name,
            params,
        )


def test_complete_takes_every_option_and_streams_its_text(fake: Any) -> None:
    pieces: list[str] = []
    reply = fake.complete(MESSAGES, **every_option(pieces))
    assert isinstance(reply, Completion) and reply.text
    assert "".join(pieces) == reply.text
    pieces.clear()
    again = asyncio.run(fake.acomplete(MESSAGES, **every_option(pieces)))
    assert isinstance(again, Completion) and "".join(pieces) == again.text


def test_an_unknown_option_is_refused_as_the_real_providers_refuse_it(fake: Any) -> None:
    with pytest.raises(TypeError, match="unknown completion option"):
        fake.complete(MESSAGES, max_token=64)  # a typo of max_tokens
