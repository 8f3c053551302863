"""``RecordingProvider``: a Provider that keeps every message sent to the model it wraps."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from selfheal._record import Record
from selfheal.llm.base import Completion, Message, Provider, TokenCallback

__all__ = ["RecordedCall", "RecordingProvider"]


class RecordedCall(Record):
    """One call made through a ``RecordingProvider``."""

    messages: tuple[Message, ...]
    """Everything sent to the model in this call."""
    completion: Completion | None = None
    """The reply (None when the call raised)."""
    error: str = ""
    """``Type: message`` of the exception the wrapped provider raised, if any."""


class RecordingProvider:
    """Implements the Provider protocol by delegation, recording each call.

    The evaluation harness wraps every provider in one, so the honesty check can prove
    afterwards that no reference test reached the model.
    """

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._calls: list[RecordedCall] = []

    @property
    def inner(self) -> Provider:
        """The wrapped provider."""
        return self._inner

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """Every call so far, in order."""
        with self._lock:
            return tuple(self._calls)

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message sent so far, flattened in call order."""
        return tuple(m for call in self.calls for m in call.messages)

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)

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
        sent = tuple(messages)
        try:
            completion = self._inner.complete(
                sent,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                schema=schema,
                on_token=on_token,
            )
        except Exception as exc:
            self._record(RecordedCall(messages=sent, error=f"{type(exc).__name__}: {exc}"))
            raise
        self._record(RecordedCall(messages=sent, completion=completion))
        return completion

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
        sent = tuple(messages)
        try:
            completion = await self._inner.acomplete(
                sent,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                schema=schema,
                on_token=on_token,
            )
        except Exception as exc:
            self._record(RecordedCall(messages=sent, error=f"{type(exc).__name__}: {exc}"))
            raise
        self._record(RecordedCall(messages=sent, completion=completion))
        return completion

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the protocol (close(), capabilities, ...) goes to the wrapped provider.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)
