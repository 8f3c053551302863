"""The Provider protocol and the records it speaks, and :func:`complete_many`: ``n`` answers
to one prompt from any provider (concurrent where the provider can serve them at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from selfheal._record import Record

Role = Literal["system", "user", "assistant"]


class Message(Record):
    """One chat message."""

    role: Role
    """Who speaks."""
    content: str
    """The text."""


class Completion(Record):
    """A model's reply and what it cost."""

    text: str
    """The generated text."""
    prompt_tokens: int = 0
    """Tokens in the prompt (the backend's count, or an estimate)."""
    completion_tokens: int = 0
    """Tokens generated."""
    latency: float = 0.0
    """Seconds from request to the last token."""
    model: str = ""
    """Model id as ``provider:model``."""
    finish_reason: str = ""
    """``stop``, ``length``, ... as the backend reports it."""
    time_to_first_token: float | None = None
    """Seconds to the first streamed token, when streaming."""
    cached_tokens: int = 0
    """Prompt tokens the server reused from its prompt cache instead of processing them
    (reported by llama-server and OpenAI; 0 when the backend does not say)."""


TokenCallback = Callable[[str], None]
"""Called with each text fragment as it is generated (streaming)."""


@runtime_checkable
class Provider(Protocol):
    """A language model. Blocking backends implement ``acomplete`` with a worker thread."""

    @property
    def model_id(self) -> str:
        """``provider:model``, e.g. ``ollama:qwen2.5-coder:7b``."""
        ...

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
        """Generate a reply. ``schema`` asks for JSON matching it where the backend can
        constrain decoding; ``on_token`` receives streamed fragments where it can stream."""
        ...

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
        """Async twin of ``complete``; never blocks the event loop."""
        ...


# ----------------------------------------------------------------------- n answers at once


async def acomplete_many(
    provider: Provider,
    messages: Sequence[Message],
    *,
    n: int,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
    schema: dict[str, Any] | None = None,
) -> list[Completion]:
    """``n`` completions of one prompt, in index order.

    A provider with its own ``acomplete_many`` (the OpenAI-compatible provider: ``n``
    concurrent requests with seeds ``seed, seed + 1, ...``; the scripted mock: its replies in
    order) answers itself; any other provider gets ``n`` concurrent ``acomplete`` calls
    (``seed`` is then not sent: the Provider protocol has none). An error in any of the
    ``n`` calls is raised (the others are cancelled).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    own = getattr(provider, "acomplete_many", None)
    if own is not None:
        return list(
            await own(
                messages,
                n=n,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                stop=stop,
                schema=schema,
            )
        )
    calls = [
        provider.acomplete(
            messages, max_tokens=max_tokens, temperature=temperature, stop=stop, schema=schema
        )
        for _ in range(n)
    ]
    return list(await _gather_or_cancel(calls))


def complete_many(
    provider: Provider,
    messages: Sequence[Message],
    *,
    n: int,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
    schema: dict[str, Any] | None = None,
) -> list[Completion]:
    """Blocking twin of :func:`acomplete_many` (works inside a running event loop too)."""
    own = getattr(provider, "complete_many", None)
    if own is not None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        return list(
            own(
                messages,
                n=n,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                stop=stop,
                schema=schema,
            )
        )
    from selfheal.llm.aio import run_sync

    return run_sync(
        acomplete_many(
            provider,
            messages,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            stop=stop,
            schema=schema,
        )
    )


async def _gather_or_cancel(calls: Sequence[Any]) -> list[Completion]:
    """``asyncio.gather`` that cancels the other calls when one fails."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
