"""``RecordingProvider``: a Provider that keeps every message sent to the model it wraps."""

from __future__ import annotations

import threading
from typing import Any

from selfheal.llm.base import Completion, CompletionRequest, Message, Provider, WrapperProvider
from selfheal.records import Record

__all__ = ["RecordedCall", "RecordingProvider"]


class RecordedCall(Record):
    """One call made through a ``RecordingProvider``."""

    messages: tuple[Message, ...]
    """Everything sent to the model in this call."""
    role: str = ""
    """The agent role that made the call (``CompletionRequest.role``), if any."""
    completion: Completion | None = None
    """The reply (None when the call raised)."""
    error: str = ""
    """``Type: message`` of the exception the wrapped provider raised, if any."""


class RecordingProvider(WrapperProvider):
    """Implements the Provider protocol by delegation, recording each call with the role that
    made it.

    The evaluation harness wraps every provider in one, so the honesty check can prove
    afterwards that no reference test reached the model.
    """

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._calls: list[RecordedCall] = []

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """Every call so far, in order."""
        with self._lock:
            return tuple(self._calls)

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message sent so far, flattened in call order."""
        return tuple(m for call in self.calls for m in call.messages)

    def _record(
        self, request: CompletionRequest, completion: Completion | None, error: str
    ) -> None:
        call = RecordedCall(
            messages=request.messages, role=request.role, completion=completion, error=error
        )
        with self._lock:
            self._calls.append(call)

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        try:
            completion = await super()._acomplete(request)
        except Exception as exc:
            self._record(request, None, f"{type(exc).__name__}: {exc}")
            raise
        self._record(request, completion, "")
        return completion

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the protocol (close(), capabilities, ...) goes to the wrapped provider.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)
