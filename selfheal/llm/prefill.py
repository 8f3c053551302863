"""A prefilled reply: a conversation whose final ``assistant`` message the model is to continue,
not answer (docs/llm.md, "A prefilled reply"). Every provider returns the continuation alone;
these helpers read the prefill and give the fallback of a backend that cannot continue one."""

from __future__ import annotations

from collections.abc import Sequence

from selfheal.llm.base import Message


def prefill_of(messages: Sequence[Message]) -> str:
    """The prefilled reply of a conversation: the text of its final ``assistant`` message (one
    without tool calls), which the model is to continue, not answer; "" when there is none.
    Every provider returns the continuation alone, without the prefill (as llama-server and
    Anthropic's API do)."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return ""
    return last.content


PREFILL_INSTRUCTION = "Begin your reply with exactly the following text, then continue it:\n\n"
"""Opens the user message that carries a prefill to a backend that cannot continue one."""


def prefill_as_instruction(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The fallback for a backend that answers a final ``assistant`` message instead of
    continuing it: the prefill moves into a last ``user`` message that asks the model to begin
    its reply with it (:func:`continuation` then takes it off the reply)."""
    prefill = prefill_of(messages)
    if not prefill:
        return tuple(messages)
    ask = Message(role="user", content=PREFILL_INSTRUCTION + prefill)
    return (*messages[:-1], ask)


def continuation(text: str, prefill: str) -> str:
    """What follows ``prefill`` in a reply asked to begin with it (leading whitespace aside);
    the whole reply when it did not begin with it."""
    body = text.lstrip()
    if prefill and body.startswith(prefill.lstrip()):
        return body[len(prefill.lstrip()) :]
    return text
