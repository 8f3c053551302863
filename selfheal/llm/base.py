"""The Provider protocol and the records it speaks: a call is one :class:`CompletionRequest`;
selfheal's providers derive from :class:`ProviderBase` and implement ``_acomplete``;
:func:`asend` sends a request to any provider. The async entry points run on selfheal's one
event loop whoever awaits them (``selfheal._sync.entered``)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from selfheal._record import Record
from selfheal.llm.aio import blocking, entered

Role = Literal["system", "user", "assistant", "tool"]
_T = TypeVar("_T")


class ToolSpec(Record):
    """A tool a model may call, described the way native tool calling APIs take it."""

    name: str
    """The tool's name, e.g. ``trace_failure``."""
    description: str
    """What it does and when to use it (the model reads this)."""
    parameters: dict[str, Any]
    """JSON schema of its arguments (an object)."""


class ToolCall(Record):
    """A model's call of a tool."""

    id: str = ""
    """The backend's id for the call (a tool result answers it by this id)."""
    name: str
    """The tool called."""
    arguments: str = "{}"
    """The arguments as the model wrote them: JSON text, not yet validated."""


class Message(Record):
    """One chat message."""

    role: Role
    """Who speaks: ``tool`` for the result of a tool call."""
    content: str
    """The text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """An ``assistant`` message's tool calls (native tool calling)."""
    tool_call_id: str = ""
    """A ``tool`` message: the id of the call it answers."""

    def shown(self) -> str:
        """The message as a transcript shows it: the text, then one line per tool call."""
        text = (
            f"[result of {self.tool_call_id}]\n{self.content}"
            if self.tool_call_id
            else self.content
        )
        calls = [f"[tool call] {c.name} {c.arguments}" for c in self.tool_calls]
        return "\n".join([text, *calls] if text else calls)


class Completion(Record):
    """A model's reply and what it cost."""

    text: str
    """The generated text."""
    prompt_tokens: int = 0
    """Tokens in the prompt (the backend's count, or an estimate)."""
    completion_tokens: int = 0
    """Tokens generated."""
    latency: float = 0.0
    """Seconds from request to the last token."""
    model: str = ""
    """Model id as ``provider:model``."""
    finish_reason: str = ""
    """``stop``, ``length``, ... as the backend reports it."""
    time_to_first_token: float | None = None
    """Seconds to the first streamed token, when streaming."""
    cached_tokens: int = 0
    """Prompt tokens the server reused from its prompt cache instead of processing them
    (reported by llama-server and OpenAI; 0 when the backend does not say)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the model called (native tool calling), in order."""

    def shown(self) -> str:
        """The reply as a transcript shows it: the text, then one line per tool call."""
        return Message(role="assistant", content=self.text, tool_calls=self.tool_calls).shown()


TokenCallback = Callable[[str], None]
"""Called with each text fragment as it is generated (streaming)."""
StopCheck = Callable[[str], int | None]
"""Given the reply so far, where it should end, or None (``CompletionRequest.stop_when``)."""


@dataclass(frozen=True, kw_only=True)
class CompletionRequest:
    """One call to a model: what to send, how to decode, and who asks."""

    messages: tuple[Message, ...]
    """The conversation."""
    max_tokens: int = 1024
    """Most tokens to generate."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy)."""
    stop: tuple[str, ...] = ()
    """Strings that end the reply (not included in it)."""
    schema: dict[str, Any] | None = None
    """A JSON schema the reply must match, where the backend can constrain decoding to it."""
    seed: int | None = None
    """Sampling seed, where the backend takes one."""
    on_token: TokenCallback | None = None
    """Receives each fragment as it is generated, where the backend can stream."""
    stop_when: StopCheck | None = None
    """Where the reply so far should end (an index), or None to go on; a backend that
    streams stops decoding there, and every reply is cut there (``asend``). A value compared
    by its fields (``parsing.code_stop.FunctionEnds``), so equal requests can be batched."""
    role: str = ""
    """Call context: the pipeline role that asks (``generator``, ``debugger``, ...). Backends
    ignore it; fakes script their replies by it and recorders record it."""
    node: str = ""
    """Call context: the pipeline node the call is made from (``generate``, ``diagnose``, ...)."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call, for a provider with native tool calling
    (``supports_tools``); others never get them."""
    tool_choice: Literal["auto", "required"] = "auto"
    """``required``: the reply must be a tool call (with ``tools``)."""

    @classmethod
    def of(cls, messages: Sequence[Message], /, **options: Any) -> CompletionRequest:
        """A request for ``messages`` with ``options`` (the fields above, by name)."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"unknown completion option(s) {', '.join(unknown)}; "
                f"the options are {', '.join(sorted(_OPTIONS))}"
            )
        stop = options.pop("stop", None)
        tools = options.pop("tools", None)
        return cls(
            messages=tuple(messages), stop=tuple(stop or ()), tools=tuple(tools or ()), **options
        )

    def replace(self, **changes: Any) -> CompletionRequest:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def protocol_options(self) -> dict[str, Any]:
        """The keywords of the ``Provider`` protocol, for a provider that is not a
        :class:`ProviderBase` (no seed, no call context: it may not accept them)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": list(self.stop) or None,
            "schema": self.schema,
            "on_token": self.on_token,
        }


_OPTIONS = frozenset(f.name for f in dataclasses.fields(CompletionRequest)) - {"messages"}


@runtime_checkable
class Provider(Protocol):
    """A language model.

    ``options`` are the fields of :class:`CompletionRequest` by name; the protocol guarantees
    ``max_tokens``, ``temperature``, ``stop``, ``schema`` and ``on_token``. ``schema`` asks
    for JSON matching it where the backend can constrain decoding; ``on_token`` receives
    streamed fragments where it can stream."""

    @property
    def model_id(self) -> str:
        """``provider:model``, e.g. ``ollama:qwen2.5-coder:7b``."""
        ...

    def complete(self, messages: Sequence[Message], /, **options: Any) -> Completion:
        """Generate a reply."""
        ...

    async def acomplete(self, messages: Sequence[Message], /, **options: Any) -> Completion:
        """Async twin of ``complete``; never blocks the event loop."""
        ...


class ProviderBase:
    """selfheal's providers: set ``backend`` and ``model`` (or implement ``model_id``) and
    implement ``_acomplete(request)``; everything else is derived. ``_acomplete_many`` may be
    overridden (the scripted mock answers in order)."""

    backend: ClassVar[str] = ""
    """The ``provider`` part of ``model_id`` (``ollama``, ``hf``, ...)."""
    model: str
    """The backend's name for the model: the rest of ``model_id``."""
    max_concurrency: int | None = None
    """Requests worth having in flight at once (the pipeline's ``fan_out`` reads it);
    None when there is no limit."""
    batch_hint: int | None = None
    """Answers this backend decodes at once: llama-server's slots, a GPU batch, 1 for an API
    with strict rate limits; None when it does not say. ``HealConfig(candidates="auto")`` sizes
    the first round's population from it (:func:`selfheal.config.population_size`)."""
    batch_free: bool = False
    """True when a batch of ``batch_hint`` answers costs about what one answer costs (a GPU):
    the first round then asks its whole population at once (docs/gpu.md)."""
    supports_tools: bool = False
    """True when the backend has native tool calling: requests with ``tools`` get replies
    with ``Completion.tool_calls``, and ``assistant`` tool calls and ``tool`` results may be
    sent back in ``messages``."""

    @property
    def model_id(self) -> str:
        return f"{self.backend}:{self.model}"

    def check_spec(self, spec: str) -> None:
        """Refuse, before a run starts, a spec this provider cannot answer for: raise
        ``ConfigError`` saying what to use instead. A model answers any spec (this default);
        the scripted demo knows one."""

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        """Answer one request."""
        raise NotImplementedError

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        """``n`` answers at once, with seeds ``seed, seed + 1, ...`` (a random base when the
        request has none), in index order; one failure cancels the others."""
        base = random.randrange(2**31 - n) if request.seed is None else request.seed
        return await gather_or_cancel(
            [self._acomplete(request.replace(seed=base + i)) for i in range(n)]
        )

    @entered
    async def acomplete(self, messages: Sequence[Message], /, **options: Any) -> Completion:
        """Generate a reply; ``options`` are :class:`CompletionRequest` fields."""
        return await self._acomplete(CompletionRequest.of(messages, **options))

    async def acomplete_many(
        self, messages: Sequence[Message], /, *, n: int, **options: Any
    ) -> list[Completion]:
        """``n`` answers to one prompt, in index order (see :func:`acomplete_many`)."""
        return await acomplete_many(self, messages, n=n, **options)

    complete = blocking(acomplete)
    complete_many = blocking(acomplete_many)


class WrapperProvider(ProviderBase):
    """A provider that delegates to ``inner`` (override ``_acomplete`` to add to it)."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner

    @property
    def inner(self) -> Provider:
        """The wrapped provider."""
        return self._inner

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def max_concurrency(self) -> int | None:  # type: ignore[override]
        limit = getattr(self._inner, "max_concurrency", None)
        return limit if isinstance(limit, int) else None

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]
        return supports_tools(self._inner)

    @property
    def batch_hint(self) -> int | None:  # type: ignore[override]
        return batch_hint(self._inner)

    @property
    def batch_free(self) -> bool:  # type: ignore[override]
        return batch_free(self._inner)

    def check_spec(self, spec: str) -> None:
        check = getattr(self._inner, "check_spec", None)
        if callable(check):
            check(spec)

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        return await asend(self._inner, request)


def batch_hint(provider: Provider) -> int | None:
    """How many answers ``provider`` decodes at once (its ``batch_hint``), or None when it
    does not say (a foreign provider, the scripted mock)."""
    hint = getattr(provider, "batch_hint", None)
    return hint if isinstance(hint, int) and not isinstance(hint, bool) and hint >= 1 else None


def innermost(provider: Provider) -> Provider:
    """The provider inside every :class:`WrapperProvider` around ``provider``."""
    while isinstance(provider, WrapperProvider):
        provider = provider.inner
    return provider


def batch_free(provider: Provider) -> bool:
    """True when ``provider`` decodes its ``batch_hint`` answers for the cost of one."""
    return getattr(provider, "batch_free", False) is True


def supports_tools(provider: Provider) -> bool:
    """True when ``provider`` has native tool calling (``ProviderBase.supports_tools``)."""
    return getattr(provider, "supports_tools", False) is True


@entered
async def asend(provider: Provider, request: CompletionRequest) -> Completion:
    """Send ``request`` to any provider: the whole record to a :class:`ProviderBase`, the
    protocol's keywords to any other; the reply cut where its ``stop_when`` says."""
    if isinstance(provider, ProviderBase):
        done = await provider._acomplete(request)
    else:
        done = await provider.acomplete(request.messages, **request.protocol_options())
    end = request.stop_when(done.text) if request.stop_when is not None else None
    if end is None or end >= len(done.text):
        return done
    return done.model_copy(update={"text": done.text[:end], "finish_reason": "stop"})


send = blocking(asend)


@entered
async def acomplete_many(
    provider: Provider, messages: Sequence[Message], /, *, n: int, **options: Any
) -> list[Completion]:
    """``n`` completions of one prompt, in index order, from any provider (a foreign one
    without ``acomplete_many``: ``n`` concurrent ``acomplete`` calls, no seed); an error in any
    is raised, the others cancelled (docs/llm.md, "n answers to one prompt")."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    request = CompletionRequest.of(messages, **options)
    if isinstance(provider, ProviderBase):
        return list(await provider._acomplete_many(request, n))
    own = getattr(provider, "acomplete_many", None)
    if own is not None:
        kw = {k: v for k, v in request.protocol_options().items() if k != "on_token"}
        return list(await own(request.messages, n=n, seed=request.seed, **kw))
    return await gather_or_cancel([asend(provider, request) for _ in range(n)])


complete_many = blocking(acomplete_many)


async def gather_or_cancel(calls: Sequence[Awaitable[_T]]) -> list[_T]:
    """``asyncio.gather`` that cancels the other calls when one fails."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
