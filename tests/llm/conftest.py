"""Shared pieces of the LLM tests: a hand-written scripted Provider."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from selfheal.llm.base import Completion, Message, TokenCallback


class ScriptedProvider:
    """Implements the Provider protocol; each call pops the next scripted reply.

    A reply is a text, or ``(text, finish_reason)``. Every call's messages and keyword
    arguments are recorded in ``calls``.
    """

    def __init__(self, replies: Sequence[str | tuple[str, str]], name: str = "fake:scripted"):
        self._replies = list(replies)
        self._name = name
        self.calls: list[dict[str, Any]] = []

    @property
    def model_id(self) -> str:
        return self._name

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        self.calls.append(
            {
                "messages": list(messages),
                "max_tokens": max_tokens,
                "temperature": temperature,
                "stop": stop,
                "schema": schema,
            }
        )
        if not self._replies:
            raise AssertionError("ScriptedProvider ran out of replies")
        reply = self._replies.pop(0)
        text, finish = (reply, "stop") if isinstance(reply, str) else reply
        if on_token is not None:
            on_token(text)
        return Completion(
            text=text,
            prompt_tokens=sum(len(m.content) for m in messages) // 4,
            completion_tokens=len(text) // 4,
            model=self._name,
            finish_reason=finish,
        )

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        return self.complete(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            schema=schema,
            on_token=on_token,
        )


@pytest.fixture
def scripted() -> type[ScriptedProvider]:
    """The ScriptedProvider class, to build fakes with their replies."""
    return ScriptedProvider
