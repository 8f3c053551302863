"""Asking until the reply is usable: :func:`aask_structured` (a pydantic record as JSON) and
:func:`aask_code` (code in a fenced block) run one loop that asks again, showing the model its
reply and what was wrong (docs/llm.md, "Structured output"); the blocking twins are derived."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from selfheal._parse import parse_or_none
from selfheal._record import Record
from selfheal.errors import MalformedReply
from selfheal.llm.aio import blocking
from selfheal.llm.base import Completion, CompletionRequest, Message, Provider, asend
from selfheal.llm.parsing.code_extract import (
    CODE_LANGS,
    defines,
    extract_code,
    fences,
    syntax_error,
    was_fenced,
)
from selfheal.llm.parsing.code_stop import FunctionEnds
from selfheal.llm.parsing.json_salvage import StructuredParseError, parse_structured

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

_MAX_FEEDBACK_CHARS = 1500
"""Longest validation-error text shown back to the model on a retry."""
_MAX_SCHEMA_CHARS = 3000
"""Longest schema text shown back to the model on a retry."""
_OPENERS = ("(", "[", "{")
"""A prefill ending in one of these is joined to its continuation without the spaces the model
starts it with (``def name(`` + `` arg)``)."""


class StructuredReply(Record, Generic[T]):
    """The result of :func:`ask_structured`."""

    value: T
    """The validated value."""
    completions: tuple[Completion, ...]
    """Every call made (first try and retries), for usage accounting."""
    degraded: bool = False
    """True when salvage or a retry was needed."""
    repairs: tuple[str, ...] = ()
    """Salvage applied to the reply that was finally used."""


class CodeReply(Record):
    """The result of :func:`ask_code`."""

    code: str
    """Python source that parses (and defines the entry point, when one was asked for)."""
    completions: tuple[Completion, ...]
    """Every call made (first try and retries), for usage accounting."""
    degraded: bool = False
    """True when a retry was needed or the code was not in a fenced block."""
    text: str = ""
    """The full reply the code came from, so prose such as explanations can be shown."""


async def _ask(
    provider: Provider,
    request: CompletionRequest,
    check: Callable[[Completion], tuple[V | None, str, str]],
    *,
    retries: int,
    what: str,
    advice: str,
    again: Callable[[Completion, str, int], CompletionRequest] | None = None,
) -> tuple[V, list[Completion], int]:
    """Ask until ``check`` accepts a reply; returns the value, every completion and the
    attempt that succeeded. ``check`` gives ``(value, "", "")`` for a usable reply, else
    ``(None, problem, feedback)``: what was wrong (for the error) and what to tell the
    model. ``again(reply, feedback, attempt)`` makes the next request (default: the request
    with the reply and the feedback added)."""
    completions: list[Completion] = []
    problem = "no reply"
    convo = request
    for attempt in range(retries + 1):
        completion = await asend(provider, convo)
        completions.append(completion)
        value, problem, feedback = check(completion)
        if value is not None:
            return value, completions, attempt
        # Only the last failed reply is kept, so retries do not grow the prompt.
        convo = (
            again(completion, feedback, attempt + 1)
            if again is not None
            else request.replace(
                messages=(
                    *request.messages,
                    Message(role="assistant", content=completion.text),
                    Message(role="user", content=feedback),
                )
            )
        )
    name, _, model = (getattr(provider, "model_id", "") or "").partition(":")
    raise MalformedReply(
        f"The model gave no usable {what} in {len(completions)} attempts (last problem: "
        f"{problem}). {advice}; the last reply is in `.raw`.",
        raw=completions[-1].text if completions else "",
        provider=name,
        model=model,
        completions=completions,
    )


def _structured_feedback(error: str, completion: Completion, schema: dict[str, Any]) -> str:
    if len(error) > _MAX_FEEDBACK_CHARS:
        error = error[:_MAX_FEEDBACK_CHARS] + "..."
    hint = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    if len(hint) > _MAX_SCHEMA_CHARS:
        hint = hint[:_MAX_SCHEMA_CHARS] + "..."
    cut = ""
    if completion.finish_reason == "length":
        cut = "Your reply was cut off because it was too long; keep every value shorter. "
    return (
        f"{cut}Your reply could not be used: {error}\n"
        "Reply again with only one JSON object (no prose, no code fence) that matches this "
        f"JSON schema:\n{hint}"
    )


async def aask_structured(
    provider: Provider,
    messages: Sequence[Message],
    model: type[T],
    *,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    retries: int = 2,
    **options: Any,
) -> StructuredReply[T]:
    """Ask for a ``model`` as JSON; salvage; on failure ask again (at most ``retries`` times)
    with the error and the schema shown to the model. ``options`` are further
    :class:`~selfheal.llm.base.CompletionRequest` fields (``role``, ``node``, ``on_token``,
    ...). Raises :class:`MalformedReply` with the last reply in ``raw`` when every attempt
    fails."""
    schema = model.model_json_schema()
    request = CompletionRequest.of(
        messages, max_tokens=max_tokens, temperature=temperature, schema=schema, **options
    )
    repairs: tuple[str, ...] = ()

    def check(completion: Completion) -> tuple[T | None, str, str]:
        nonlocal repairs
        try:
            parsed = parse_structured(completion.text, model)
        except StructuredParseError as exc:
            return None, exc.errors, _structured_feedback(exc.errors, completion, schema)
        repairs = parsed.repairs
        return parsed.value, "", ""

    value, completions, attempt = await _ask(
        provider,
        request,
        check,
        retries=retries,
        what=model.__name__,
        advice="Try a larger model, or check the prompt asks for this schema",
    )
    return StructuredReply(
        value=value,
        completions=tuple(completions),
        degraded=bool(repairs) or attempt > 0,
        repairs=repairs,
    )


def _code_check(completion: Completion, entry_point: str | None) -> tuple[str | None, str, str]:
    code = extract_code(completion.text, entry_point=entry_point)
    if code is not None:
        tree = parse_or_none(code)
        if entry_point is None or (tree is not None and defines(tree, entry_point)):
            return code, "", ""
        problem = f"The code does not define `{entry_point}` at the top level"
        ask = f"Reply with the complete code, defining `{entry_point}`, in one ```python block."
    elif completion.finish_reason == "length":
        problem = "Your reply was cut off before the code was complete"
        ask = (
            "Reply with the complete code only, in one ```python block, with no explanation "
            "before or after it."
        )
    else:
        blocks = [f.body for f in fences(completion.text) if f.lang in CODE_LANGS]
        detail = syntax_error(blocks[-1]) if blocks else "there was no ```python block"
        problem = f"Your code could not be used ({detail})"
        ask = "Reply with the complete, corrected code in one ```python block."
    return None, problem, f"{problem}. {ask}"


def with_prefill(completion: Completion, prefill: str) -> Completion:
    """The reply as a whole: the prefilled start, then what the model continued it with
    (most providers return the continuation alone; llama-server returns the prefill with it),
    the code block closed where the stop string ended it. A model that ignored the prefill
    and wrote its own block keeps its reply."""
    text = completion.text
    opener = bool(prefill) and prefill.endswith(_OPENERS)
    if prefill and text.startswith(prefill):  # llama-server returns the prefill with its reply
        rest = text[len(prefill) :]
        text = prefill + (_tidy_opened(rest) if opener else rest)
    elif not text.lstrip().startswith("```"):
        if opener:
            text = _tidy_opened(text)
        text = prefill + text
        if text.count("```") % 2:
            text = text.rstrip("\n") + "\n```"
    return completion.model_copy(update={"text": text})


_CLOSED_HEADER = re.compile(r"[ \t]+\)(?=[ \t]*(?:->[^\n]*)?:[ \t]*(?:#[^\n]*)?$)")
"""Spaces before the bracket that closes a ``def`` line's parameters: ``a ):``, ``a ) -> int:``."""


def _tidy_opened(rest: str) -> str:
    """The continuation of an opened bracket (``def name(``) as a person writes it: a
    tokenizer's word boundary makes the local model write `` a ):``; read ``a):``."""
    rest = rest.lstrip(" \t")
    first, newline, after = rest.partition("\n")
    return _CLOSED_HEADER.sub(")", first, count=1) + newline + after


async def aask_code(
    provider: Provider,
    messages: Sequence[Message],
    *,
    entry_point: str | None = None,
    max_tokens: int = 2048,
    temperature: float = 0.0,
    retries: int = 2,
    prefill: str = "",
    retry_temperature: float | None = None,
    **options: Any,
) -> CodeReply:
    """Ask for code in a fenced block; check it parses and defines ``entry_point``; ask again
    (at most ``retries`` times) showing the reply and what was wrong. ``options`` are further
    :class:`~selfheal.llm.base.CompletionRequest` fields. Never returns code that does not
    parse: raises :class:`MalformedReply` after the last attempt. ``prefill``: the start of the
    reply, which the model continues (a retry asks without it); ``retry_temperature``: a retry's
    least temperature, with the next seed; the reply ends with the function (``FunctionEnds``).
    docs/llm.md: "A prefilled reply", "Answers that end with the function"."""
    request = CompletionRequest.of(
        [*messages, Message(role="assistant", content=prefill)] if prefill else messages,
        max_tokens=max_tokens,
        temperature=temperature,
        **{
            "stop_when": FunctionEnds(entry_point, prefill),
            **({"stop": ("\n```",), **options} if prefill else options),
        },
    )
    hotter = max(temperature, retry_temperature or 0.0)
    first: list[Completion] = []

    def whole(reply: Completion) -> Completion:
        """The reply as the model wrote it: the first is a continuation of the prefill."""
        first[:] = first or [reply]
        return with_prefill(reply, prefill) if prefill and reply is first[0] else reply

    def again(reply: Completion, feedback: str, attempt: int) -> CompletionRequest:
        shown = whole(reply).text
        seed = request.seed
        if retry_temperature is not None and seed is not None:
            seed += attempt
        return request.replace(
            messages=(
                *messages,
                Message(role="assistant", content=shown),
                Message(role="user", content=feedback),
            ),
            temperature=hotter,
            seed=seed,
            stop=tuple(options.get("stop") or ()),
            stop_when=options.get("stop_when", FunctionEnds(entry_point)),
        )

    code, completions, attempt = await _ask(
        provider,
        request,
        lambda c: _code_check(whole(c), entry_point),
        retries=retries,
        what="code",
        advice="Try a larger model or a larger max_tokens",
        again=again,
    )
    last = whole(completions[-1])
    return CodeReply(
        code=code,
        completions=tuple(completions),
        degraded=attempt > 0 or not was_fenced(last.text),
        text=last.text,
    )


ask_structured = blocking(aask_structured)
ask_code = blocking(aask_code)
