"""The timeline of a run and what it cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeVar

from pydantic import Field

from selfheal._record import Record
from selfheal.llm.base import Completion, Message

EventKind = Literal["start", "end", "llm", "degraded", "error", "decision", "info", "tool"]
"""``tool``: one of the debugger's tool calls ran (its seconds in the sandbox in
``duration``; the model call that chose it is the ``llm`` event before it)."""


class Event(Record):
    """One entry of the timeline."""

    time: float
    """Unix time."""
    node: str
    """Node (or role) the event belongs to."""
    kind: EventKind
    """``start``/``end`` of a node, an ``llm`` call, a ``degraded`` reply, an ``error``..."""
    duration: float = 0.0
    """Seconds (for ``end`` and ``llm``)."""
    prompt_tokens: int = 0
    """Prompt tokens (``llm``, and summed on ``end``)."""
    completion_tokens: int = 0
    """Completion tokens (``llm``, and summed on ``end``)."""
    cached_tokens: int = 0
    """``llm`` events: prompt tokens the server reused from its prompt cache."""
    model: str = ""
    """Model id used."""
    iteration: int = 0
    """Iteration the event happened in."""
    detail: str = ""
    """A one-line human summary."""
    messages: tuple[Message, ...] = ()
    """``llm`` events: the exact messages sent (empty when ``HealConfig.transcripts`` is off)."""
    reply: str = ""
    """``llm`` events: the model's raw reply text (empty when transcripts are off)."""


_T = TypeVar("_T", bound="Tokens")


class Tokens(Record):
    """Model calls and what they cost: one role's with one model, a run's, a benchmark pair's."""

    calls: int = 0
    """Model calls."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Completion tokens."""
    cached_tokens: int = 0
    """Prompt tokens the server reused from its prompt cache (not processed again)."""
    latency: float = 0.0
    """Seconds spent waiting for the model."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def of(cls, completions: Iterable[Completion]) -> Tokens:
        """The counts of the calls that gave ``completions``."""
        done = list(completions)
        return cls(
            calls=len(done),
            **{f: sum(getattr(c, f) for c in done) for f in _SUMMED if f != "calls"},
        )

    def __add__(self: _T, other: Tokens) -> _T:
        """These counts plus ``other``'s (a ``Usage`` keeps its other fields)."""
        return self.model_copy(update={f: getattr(self, f) + getattr(other, f) for f in _SUMMED})


_SUMMED = tuple(Tokens.model_fields)


class Usage(Tokens):
    """What the run cost: its model calls, and its runs in the sandbox."""

    executions: int = 0
    """Sandbox runs."""
    by_role: dict[str, Tokens] = Field(default_factory=dict)
    """Per ``role@model``."""
