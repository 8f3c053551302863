"""One reply as it arrives from a streaming backend (:class:`ReplyStream`): each fragment to the
caller's ``on_token``, latency and time to first token, and the request's ``stop_when`` checked
as the text grows, so the provider can stop reading (and the backend decoding) where the reply
is done."""

from __future__ import annotations

import time
from typing import Any

from selfheal.llm.base import Completion, StopCheck, TokenCallback


class ReplyStream:
    """One reply as it arrives: each fragment goes to ``on_token``; latency and time to first
    token are measured. ``streamed`` says whether fragments reached the caller (such a call is
    never retried: the caller would see them twice). With ``stop_when``, :meth:`add` says when
    the reply is done, and :attr:`text` ends there."""

    def __init__(self, on_token: TokenCallback | None, stop_when: StopCheck | None = None) -> None:
        self.on_token = on_token
        self.stop_when = stop_when
        self.started = time.monotonic()
        self.first: float | None = None
        self.pieces: list[str] = []
        self.end: int | None = None
        """Where ``stop_when`` ended the reply, once it did."""

    def add(self, piece: str | None) -> bool:
        """Take one fragment (empty ones are ignored); True once the reply is done (stop
        reading)."""
        if not piece or self.end is not None:
            return self.end is not None
        if self.first is None:
            self.first = time.monotonic() - self.started
        self.pieces.append(piece)
        if self.on_token is not None:
            self.on_token(piece)
        if self.stop_when is not None:
            self.end = self.stop_when("".join(self.pieces))
        return self.end is not None

    @property
    def streamed(self) -> bool:
        """Fragments reached a caller that shows them (a sink that only counts them, as a
        progress line does, is marked ``progress_only`` and does not stop a retry)."""
        shown = self.on_token is not None and not getattr(self.on_token, "progress_only", False)
        return bool(self.pieces) and shown

    @property
    def text(self) -> str:
        return "".join(self.pieces)[: self.end]

    def completion(self, **fields: Any) -> Completion:
        """The :class:`Completion`: the text so far (unless given), latency, time to first
        token, and ``fields``."""
        fields.setdefault("text", self.text)
        return Completion(
            latency=time.monotonic() - self.started, time_to_first_token=self.first, **fields
        )
