"""How a role calls a model: render its prompt, ask (the role and the node travel with the
call), and account for the call in the state."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from selfheal.config import RoleName
from selfheal.context import Context
from selfheal.llm.ask import aask_code, aask_structured
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Message,
    Provider,
    ToolSpec,
    WrapperProvider,
    asend,
)
from selfheal.llm.parsing import lenient_block
from selfheal.llm.prompts import load_prompt
from selfheal.llm.tokens import estimate_tokens
from selfheal.state import Event, HealState, Usage
from selfheal.state.candidates import CandidateCost
from selfheal.state.timeline import EventKind, Tokens

T = TypeVar("T", bound=BaseModel)


class _Transcribing(WrapperProvider):
    """Remembers the exact messages behind each completion (retries of the ask loops
    included), so the timeline can show the whole exchange."""

    def __init__(self, inner: Provider, sent: dict[int, tuple[Message, ...]]) -> None:
        super().__init__(inner)
        self._sent = sent

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        c = await super()._acomplete(request)
        self._sent[id(c)] = request.messages
        return c


@dataclass
class CallLog:
    """Events and usage produced by one node's model calls."""

    ctx: Context
    """The run's services (the models, where events go)."""
    node: str
    """The node the calls are made from (``generate``, ``diagnose``, ...)."""
    events: list[Event] = field(default_factory=list)
    completions: list[tuple[str, Completion]] = field(default_factory=list)
    sent: dict[int, tuple[Message, ...]] = field(default_factory=dict)
    """``id(completion)`` -> the messages that produced it (while the node runs)."""
    executions: int = 0
    """Sandbox runs the node made besides its model calls (the debugger's tools)."""

    def apply(self, state: HealState, **update: Any) -> HealState:
        """Return ``state`` with these calls' events and usage added, plus ``update``."""
        usage = state.usage
        if self.executions:
            usage = usage.model_copy(update={"executions": usage.executions + self.executions})
        models = dict(state.models)
        for role, c in self.completions:
            usage = _add_usage(usage, role, c)
            models[role] = c.model or models.get(role, "")
        return state.model_copy(
            update={
                "events": state.events + tuple(self.events),
                "usage": usage,
                "models": models,
                **update,
            }
        )

    def emit(self, state: HealState, kind: EventKind, detail: str, **fields: Any) -> None:
        """One event of this node at ``state``'s iteration, kept for the state and sent to the
        live sinks."""
        fields.setdefault("iteration", state.iteration)
        ev = Event(time=self.ctx.clock(), node=self.node, kind=kind, detail=detail, **fields)
        self.events.append(ev)
        self.ctx.emit(ev)

    def info(self, state: HealState, detail: str) -> None:
        """Note ``detail`` on the timeline."""
        self.emit(state, "info", detail)

    def failure(self, state: HealState, role: RoleName, exc: Exception) -> None:
        """Account for the calls of a reply that could not be used, and note the error."""
        unusable = [c for c in getattr(exc, "completions", ()) or () if isinstance(c, Completion)]
        _llm_events(self, state, role, f"{role} (unusable reply)", unusable)
        self.emit(state, "error", f"{role}: {type(exc).__name__}: {str(exc)[:300]}")


def _add_usage(usage: Usage, role: str, c: Completion) -> Usage:
    key = f"{role}@{c.model}" if c.model else role
    spent = Tokens.of([c])
    by_role = {**usage.by_role, key: usage.by_role.get(key, Tokens()) + spent}
    return (usage + spent).model_copy(update={"by_role": by_role})


CODE_TOKENS_FLOOR = 384
"""The fewest tokens a code reply may take (a short spec's function and its imports)."""
CODE_TOKENS_PER_PROMPT_TOKEN = 2
"""A code reply may take this many tokens per (estimated) prompt token: a longer spec, or a
repair that shows the code, may need a longer answer. In the recorded runs (HumanEval-164 r4
and r5, the built-in suite r5: 3,973 generator calls) one reply went past it (763 tokens for a
344-token prompt, a wrong answer); the median reply is 55-75 tokens."""


def code_tokens(messages: Sequence[Message]) -> int:
    """``max_tokens`` of a code reply, sized from its prompt: :data:`CODE_TOKENS_PER_PROMPT_TOKEN`
    per estimated prompt token, at least :data:`CODE_TOKENS_FLOOR` (never more than
    ``HealConfig.max_tokens``, which :func:`_call` holds every call to): a reply that runs on
    (a repetition loop) stops sooner."""
    prompt = sum(estimate_tokens(m.content) for m in messages)
    return max(CODE_TOKENS_FLOOR, CODE_TOKENS_PER_PROMPT_TOKEN * prompt)


def _call(
    state: HealState, log: CallLog, role: RoleName, max_tokens: int
) -> tuple[Provider, dict[str, Any]]:
    """The role's provider (transcribing when transcripts are kept) and the options every
    call of the role carries: who asks, the config's temperature, at most ``max_tokens``
    (never more than the config's), and where streamed tokens go."""
    p: Provider = log.ctx.provider(role)
    if state.config.calls.transcripts:
        p = _Transcribing(p, log.sent)
    options: dict[str, Any] = {
        "role": role,
        "node": log.node,
        "max_tokens": min(state.config.calls.max_tokens, max_tokens),
        "temperature": state.config.calls.temperature,
    }
    if log.ctx.on_token is not None:
        sink = log.ctx.on_token

        def on_token(text: str) -> None:
            with contextlib.suppress(Exception):
                sink(role, text)

        on_token.progress_only = getattr(sink, "progress_only", False)  # type: ignore[attr-defined]
        options["on_token"] = on_token
    return p, options


def _llm_events(
    log: CallLog, state: HealState, role: RoleName, label: str, completions: Sequence[Completion]
) -> None:
    """One ``llm`` event per completion (with its transcript when kept), and its usage."""
    keep = state.config.calls.transcripts
    for i, c in enumerate(completions):
        log.completions.append((role, c))
        log.emit(
            state,
            "llm",
            label + (f" (retry {i})" if i else ""),
            duration=c.latency,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            cached_tokens=c.cached_tokens,
            model=c.model,
            messages=log.sent.pop(id(c), ()) if keep else (),
            reply=c.shown() if keep else "",
        )


def _record(
    log: CallLog,
    state: HealState,
    role: RoleName,
    prompt_name: str,
    completions: Sequence[Completion],
    degraded: bool,
    repairs: Sequence[str] = (),
) -> None:
    version = load_prompt(prompt_name).version
    _llm_events(log, state, role, f"{role} via {prompt_name}.yaml v{version}", completions)
    if degraded:
        log.emit(
            state,
            "degraded",
            f"{role} reply needed salvage"
            + (f": {'; '.join(repairs)}" if repairs else " or a retry"),
            model=completions[-1].model if completions else "",
        )


def _messages(state: HealState, prompt: str, variables: dict[str, Any]) -> list[Message]:
    """The prompt rendered with the spec's own variables under the role's: every role's
    messages then open with the same system text and spec block (the server's prompt cache
    reuses that prefix across roles)."""
    spec = state.spec
    shared = {
        "spec": spec.text,
        "signature": spec.signature or "",
        "entry_point": spec.entry_point or "",
    }
    return load_prompt(prompt).render(**{**shared, **variables})


async def ask_for_code(
    state: HealState,
    log: CallLog,
    *,
    role: RoleName,
    prompt: str,
    entry_point: str | None,
    variables: dict[str, Any],
    temperature: float | None = None,
    extra: Sequence[Message] = (),
    seed: int | None = None,
    prefill: str = "",
) -> tuple[str, str, CandidateCost]:
    """Ask ``role`` (with prompt file ``prompt``) for code. Returns ``(code, full_reply,
    cost)``, the cost being the tokens and seconds of the call (and of its retries).
    Raises ``MalformedReply`` when no parseable code came back. ``seed``: the sampling seed,
    where the backend takes one; ``prefill``: the start of the reply, which the model
    continues (``llm.ask.aask_code``). A reply that does not parse is asked again as a repair
    of it, at ``sample_temperature`` with the next seed (never the same greedy request)."""
    messages = [*_messages(state, prompt, variables), *extra]
    provider, options = _call(state, log, role, code_tokens(messages))
    if temperature is not None:
        options["temperature"] = temperature
    reply = await aask_code(
        provider,
        messages,
        entry_point=entry_point,
        prefill=prefill,
        seed=seed,
        retry_temperature=state.config.generation.sample_temperature,
        **options,
    )
    _record(log, state, role, prompt, reply.completions, reply.degraded)
    cost = CandidateCost(
        prompt_tokens=sum(c.prompt_tokens for c in reply.completions),
        completion_tokens=sum(c.completion_tokens for c in reply.completions),
        model_seconds=sum(c.latency for c in reply.completions),
    )
    return reply.code, reply.text, cost


async def ask_for_tests(
    state: HealState,
    log: CallLog,
    *,
    role: RoleName,
    prompt: str,
    variables: dict[str, Any],
    max_tokens: int = 400,
) -> str:
    """Ask ``role`` for a block of tests. One call, lenient: complete statements of a cut-off
    reply are kept (tests are optional evidence; a retry would cost more than it brings)."""
    provider, options = _call(state, log, role, max_tokens)
    request = CompletionRequest.of(_messages(state, prompt, variables), **options)
    completion = await asend(provider, request)
    code, salvaged = lenient_block(completion.text)
    repairs = ["kept the complete statements of a cut-off block"] if salvaged else []
    _record(log, state, role, prompt, [completion], salvaged, repairs)
    return code


async def ask_for_json(
    state: HealState,
    log: CallLog,
    model: type[T],
    *,
    role: RoleName,
    prompt: str,
    variables: dict[str, Any],
    max_tokens: int = 768,
) -> T:
    """Ask ``role`` for a JSON reply validated as ``model``, in at most ``max_tokens``
    completion tokens (a small model sometimes runs on past the JSON; a tight cap per role
    bounds the cost, and a cut-off reply is salvaged). Raises ``MalformedReply``."""
    provider, options = _call(state, log, role, max_tokens)
    reply = await aask_structured(provider, _messages(state, prompt, variables), model, **options)
    _record(log, state, role, prompt, reply.completions, reply.degraded, reply.repairs)
    return reply.value


async def ask_with_tools(
    state: HealState,
    log: CallLog,
    tools: Sequence[ToolSpec],
    *,
    role: RoleName,
    prompt: str,
    variables: dict[str, Any],
    extra: Sequence[Message] = (),
    max_tokens: int = 384,
) -> Completion:
    """One call offering ``tools`` through the provider's native tool calling, a tool call
    required (``Completion.tool_calls``): the prompt, then ``extra`` (the calls so far and
    their results); recorded like every call. No retry: the caller decides what a reply
    without a tool call means."""
    provider, options = _call(state, log, role, max_tokens)
    request = CompletionRequest.of(
        [*_messages(state, prompt, variables), *extra],
        tools=tuple(tools),
        tool_choice="required",
        **options,
    )
    completion = await asend(provider, request)
    version = load_prompt(prompt).version
    label = f"{role} via {prompt}.yaml v{version} (native tool call)"
    _llm_events(log, state, role, label, [completion])
    return completion


R = TypeVar("R")


async def fan_out(
    ctx: Context, role: RoleName, jobs: Sequence[Callable[[], Awaitable[R]]]
) -> list[R | Exception]:
    """Run ``jobs`` (each makes model calls) at once in one ``asyncio.TaskGroup``, as many in
    flight as the role's provider allows (its ``max_concurrency``; the scripted mock's 1 keeps
    scripted runs in order). Results (or the exception a job raised) come back in the order of
    ``jobs``; cancelling the caller cancels every job."""
    limit = getattr(ctx.llm.for_role(role), "max_concurrency", None)
    width = len(jobs) if not isinstance(limit, int) or limit < 1 else min(limit, len(jobs))
    gate = asyncio.Semaphore(max(width, 1))

    async def guarded(job: Callable[[], Awaitable[R]]) -> R | Exception:
        async with gate:
            try:
                return await job()
            except Exception as exc:  # reported to the caller, which decides
                return exc

    if width <= 1:
        return [await guarded(j) for j in jobs]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(guarded(j)) for j in jobs]
    return [t.result() for t in tasks]
