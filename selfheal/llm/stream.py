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


class Choices:
    """The replies of one request for several answers (``n``), read from one stream whose
    chunks each carry one choice (its ``index``): each choice has its own :class:`ReplyStream`
    (its own ``on_token``, the shared ``stop_when``), finish reason and usage. llama-server
    sends a choice's usage in the chunk right after that choice's last one; a server that
    sends one usage for all (OpenAI) leaves the others to :meth:`completions`' estimates."""

    def __init__(self, on_tokens: list[TokenCallback | None], stop_when: StopCheck | None) -> None:
        self.replies = [ReplyStream(t, stop_when) for t in on_tokens]
        self.finish = [""] * len(on_tokens)
        self.usage: list[Any] = [None] * len(on_tokens)
        self.timings: list[dict[str, Any]] = [{} for _ in on_tokens]
        self._last = 0

    def add(self, chunk: Any) -> bool:
        """Take one chunk; True once every choice is done (ended by ``stop_when``, or finished
        with its usage read): stop reading."""
        extra = chunk.model_extra or {}
        for choice in chunk.choices or ():
            i = int(getattr(choice, "index", 0) or 0)
            if not 0 <= i < len(self.replies):
                continue
            self._last = i
            if self.replies[i].add(choice.delta.content if choice.delta else None):
                self.finish[i] = self.finish[i] or "stop"
            if choice.finish_reason and not self.finish[i]:
                self.finish[i] = str(choice.finish_reason)
        if chunk.usage is not None and self.usage[self._last] is None:
            self.usage[self._last] = chunk.usage
        if isinstance(extra.get("timings"), dict):
            self.timings[self._last] = extra["timings"]
        return all(
            r.end is not None or (f and u is not None)
            for r, f, u in zip(self.replies, self.finish, self.usage, strict=True)
        )
