"""``RecordingProvider``: a Provider that keeps every message sent to the model it wraps."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from selfheal.llm.base import Completion, Message, Provider, TokenCallback
from selfheal.records import Record

__all__ = ["RecordedCall", "RecordingProvider"]


class RecordedCall(Record):
    """One call made through a ``RecordingProvider``."""

    messages: tuple[Message, ...]
    """Everything sent to the model in this call."""
    role: str = ""
    """The agent role the provider was bound to (``bind_role``), if any."""
    completion: Completion | None = None
    """The reply (None when the call raised)."""
    error: str = ""
    """``Type: message`` of the exception the wrapped provider raised, if any."""


class _Sink:
    """The call list shared by a recorder and its role-bound views."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[RecordedCall] = []


class RecordingProvider:
    """Implements the Provider protocol by delegation, recording each call.

    The evaluation harness wraps every provider in one, so the honesty check can prove
    afterwards that no reference test reached the model. ``bind_role`` (used by the agent
    to give each role its own view of a provider) returns a recording view that writes to
    the same call list.
    """

    def __init__(self, inner: Provider, *, role: str = "", _sink: _Sink | None = None) -> None:
        self._inner = inner
        self._role = role
        self._sink = _sink if _sink is not None else _Sink()

    def bind_role(self, role: str) -> RecordingProvider:
        """A recording view bound to ``role`` (delegates to the inner ``bind_role`` if any)."""
        binder = getattr(self._inner, "bind_role", None)
        inner = binder(role) if callable(binder) else self._inner
        return RecordingProvider(inner, role=role, _sink=self._sink)

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
        with self._sink.lock:
            return tuple(self._sink.calls)

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message sent so far, flattened in call order."""
        return tuple(m for call in self.calls for m in call.messages)

    def _record(
        self, messages: tuple[Message, ...], completion: Completion | None, error: str
    ) -> None:
        call = RecordedCall(messages=messages, role=self._role, completion=completion, error=error)
        with self._sink.lock:
            self._sink.calls.append(call)

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
            self._record(sent, None, f"{type(exc).__name__}: {exc}")
            raise
        self._record(sent, completion, "")
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
            self._record(sent, None, f"{type(exc).__name__}: {exc}")
            raise
        self._record(sent, completion, "")
        return completion

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the protocol (close(), capabilities, ...) goes to the wrapped provider.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)
