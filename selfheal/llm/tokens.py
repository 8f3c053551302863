"""Counting and trimming tokens so prompts fit a model's context.

:func:`count_tokens` uses a provider's real tokenizer when it has one (a ``count_tokens``
method, as the transformers and llama.cpp providers offer) and otherwise estimates
(about 3.5 characters per token for code and English; rounded up, so estimates err long)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from selfheal.llm.base import Message

CHARS_PER_TOKEN = 3.5
"""Characters per token assumed by :func:`estimate_tokens`."""

MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds around each message (role markers), estimated."""

ELLIPSIS = "\n[... {n} characters cut ...]\n"

Keep = Literal["end", "start", "both"]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that can count tokens exactly (usually a provider with a tokenizer)."""

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes for this model."""
        ...


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: ``ceil(len(text) / 3.5)``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count_tokens(text: str, provider: object | None = None) -> int:
    """Tokens in ``text``: the provider's real count when it exposes ``count_tokens``,
    else :func:`estimate_tokens`."""
    if provider is not None and isinstance(provider, TokenCounter):
        return int(provider.count_tokens(text))
    return estimate_tokens(text)


def trim_text(
    text: str, budget_tokens: int, *, keep: Keep = "end", provider: object | None = None
) -> str:
    """``text`` shortened to about ``budget_tokens`` tokens, with a marker where it was cut.

    ``keep="end"`` keeps the tail (logs, tracebacks), ``"start"`` the head, ``"both"`` the
    head and the tail. Text that fits is returned unchanged. Cuts fall on line breaks when
    one is near, so lines are not split needlessly."""
    if budget_tokens <= 0:
        return ""
    if count_tokens(text, provider) <= budget_tokens:
        return text
    # Work in characters, scaled by the text's own chars-per-token ratio.
    ratio = len(text) / max(1, count_tokens(text, provider))
    budget_chars = max(1, int(budget_tokens * ratio) - len(ELLIPSIS.format(n=len(text))))
    if keep == "start":
        head = _cut_at_line(text[:budget_chars], from_end=False)
        return head + ELLIPSIS.format(n=len(text) - len(head))
    if keep == "end":
        tail = _cut_at_line(text[len(text) - budget_chars :], from_end=True)
        return ELLIPSIS.format(n=len(text) - len(tail)) + tail
    half = budget_chars // 2
    head = _cut_at_line(text[:half], from_end=False)
    tail = _cut_at_line(text[len(text) - half :], from_end=True)
    return head + ELLIPSIS.format(n=len(text) - len(head) - len(tail)) + tail


def _cut_at_line(piece: str, *, from_end: bool) -> str:
    """Drop a partial first (``from_end``) or last line when a line break is near."""
    if len(piece) < 40:
        return piece
    if from_end:
        nl = piece.find("\n")
        return piece[nl + 1 :] if 0 <= nl < len(piece) // 4 else piece
    nl = piece.rfind("\n")
    return piece[:nl] if nl > len(piece) * 3 // 4 else piece


_ASSERT_LINE = re.compile(r"^\s*(assert\b.*|>\s.*|E\s+.*)$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)\b.*$", re.M)


def trim_traceback(tb: str, budget_tokens: int, *, provider: object | None = None) -> str:
    """A traceback cut to ``budget_tokens``, keeping what a debugger needs most: the end
    (the innermost frames and the exception line) and the failing ``assert`` line, even
    when that line was earlier in the text."""
    if count_tokens(tb, provider) <= budget_tokens:
        return tb
    keep = list(dict.fromkeys(m.group(0).strip() for m in _ASSERT_LINE.finditer(tb)))[-3:]
    error_lines = [m.group(0) for m in _ERROR_LINE.finditer(tb)]
    header = "Failing line(s):\n" + "\n".join(keep) + "\n" if keep else ""
    if count_tokens(header, provider) > budget_tokens // 2:
        header = trim_text(header, budget_tokens // 2, keep="end", provider=provider)
    rest = max(1, budget_tokens - count_tokens(header, provider))
    tail = trim_text(tb, rest, keep="end", provider=provider)
    if error_lines and error_lines[-1] not in tail:
        tail += "\n" + error_lines[-1]
    return header + tail


def message_tokens(messages: Sequence[Message], provider: object | None = None) -> int:
    """Tokens a conversation takes, with a small per-message template overhead."""
    return sum(count_tokens(m.content, provider) + MESSAGE_OVERHEAD for m in messages)


def trim_history(
    messages: Sequence[Message], budget_tokens: int, *, provider: object | None = None
) -> list[Message]:
    """The conversation cut to ``budget_tokens``: system messages and the last message are
    kept; the oldest other messages are dropped first; if the kept ones still do not fit,
    the last message is trimmed (keeping its start and end)."""
    msgs = list(messages)
    if message_tokens(msgs, provider) <= budget_tokens or not msgs:
        return msgs
    system = [m for m in msgs[:-1] if m.role == "system"]
    middle = [m for m in msgs[:-1] if m.role != "system"]
    last = msgs[-1]
    while middle and message_tokens([*system, *middle, last], provider) > budget_tokens:
        middle.pop(0)
    kept = [*system, *middle, last]
    over = message_tokens(kept, provider) - budget_tokens
    if over > 0:
        own = count_tokens(last.content, provider)
        target = max(1, own - over)
        last = last.model_copy(
            update={"content": trim_text(last.content, target, keep="both", provider=provider)}
        )
        kept = [*system, *middle, last]
    return kept
