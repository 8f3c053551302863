"""The Provider protocol and the records it speaks."""

from __future__ import annotations

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
