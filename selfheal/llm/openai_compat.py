"""One provider for every OpenAI-compatible chat server (llama-server, vLLM, LM Studio, Ollama's
``/v1``, TGI, OpenAI itself), on the official ``openai`` SDK; what is sent and how each option
maps: docs/llm.md ("Providers", "A prefilled reply", "Native tool calling", "Reliability")."""

from __future__ import annotations

import asyncio
import logging
import os
import random
from typing import Any, Literal

import openai

from selfheal.errors import ConfigError, ProviderError
from selfheal.llm.aio import OwnedClient
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Message,
    ProviderBase,
    TokenCallback,
    ToolCall,
    gather_or_cancel,
)
from selfheal.llm.openai_errors import IncompleteStream, map_error
from selfheal.llm.prefill import continuation, prefill_as_instruction, prefill_of
from selfheal.llm.retry import RetryPolicy
from selfheal.llm.stream import Choices, ReplyStream
from selfheal.llm.together import Together
from selfheal.llm.tokens import estimate_tokens

log = logging.getLogger(__name__)

TOOL_PADDING_STOP = "\n\n\n\n"
"""Sent as a stop string with tools to a local server (see ``_body``)."""

NO_KEY = "sk-no-key"
"""Sent when no key is configured: local servers without ``--api-key`` accept anything, and
the SDK refuses to build a client without one."""


def wire_message(m: Message) -> dict[str, Any]:
    """One message in the chat completions wire format (tool calls and results included)."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out


class _ToolCalls:
    """Streamed ``tool_calls`` deltas put back together, by index."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, str]] = {}

    def add(self, deltas: Any) -> None:
        for d in deltas or ():
            index = int(getattr(d, "index", 0) or 0)
            part = self.parts.setdefault(index, {"id": "", "name": "", "arguments": ""})
            if getattr(d, "id", None):
                part["id"] = str(d.id)
            fn = getattr(d, "function", None)
            if fn is not None:
                if getattr(fn, "name", None):
                    part["name"] += str(fn.name)
                if getattr(fn, "arguments", None):
                    part["arguments"] += str(fn.arguments)

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=p["id"], name=p["name"], arguments=p["arguments"] or "{}")
            for _, p in sorted(self.parts.items())
            if p["name"]
        )


def cached_tokens(usage: Any, timings: Any) -> int:
    """The prompt tokens the server had cached: ``usage.prompt_tokens_details.cached_tokens``,
    else llama.cpp's ``timings.cache_n``, else 0."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if cached is None and isinstance(timings, dict):
        cached = timings.get("cache_n")
    return int(cached or 0)


class OpenAICompatible(ProviderBase):
    """A chat model behind an OpenAI-compatible HTTP API. Implements the Provider protocol,
    plus ``complete_many`` / ``acomplete_many``; the arguments are in docs/llm.md
    ("Providers", "Reliability"). ``base_url`` and ``api_key`` default to ``$OPENAI_BASE_URL``
    (else OpenAI's API) and ``$OPENAI_API_KEY`` (else a dummy); ``extra_body`` is merged into
    every request. A supervised llama-server and its slot routing are
    :class:`selfheal.local.provider.LocalProvider`, a subclass."""

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        policy: RetryPolicy | None = None,
        model_id: str | None = None,
        local: bool = False,
        extra_body: dict[str, Any] | None = None,
        max_concurrency: int | None = None,
        prefill: Literal["continue", "instruct"] | None = None,
        one_request: bool | None = None,
    ) -> None:
        if not model:
            raise ConfigError(
                "OpenAICompatible needs a model name (the server's name for it), e.g. "
                "OpenAICompatible(model='qwen2.5-coder-1.5b', base_url='http://127.0.0.1:8080/v1') "
                "or the model string 'openai:MODEL'."
            )
        self.model = model
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
        self.policy = policy or RetryPolicy(timeout=300.0 if local else 120.0)
        self._model_id = model_id or f"openai:{model}"
        self.local = local
        self._extra_body = dict(extra_body or {})
        if self.local:
            self._extra_body.setdefault("cache_prompt", True)
        self._max_concurrency = max_concurrency
        self.prefill: Literal["continue", "instruct"] = prefill or (
            "continue" if self.local else "instruct"
        )
        """How a prefilled reply is sent: ``continue``, as it is, or ``instruct``, moved into a
        user message (docs/llm.md, "A prefilled reply")."""
        self.one_request = bool(one_request)
        """Several answers to one prompt go out as one request for ``n`` (the server processes
        the prompt once): ``complete_many``, and concurrent sampled requests that differ only
        in their seed (:class:`~selfheal.llm.together.Together`). Off unless asked (the local
        provider asks): not every server takes ``n`` (answers a server leaves out are then
        asked one by one; a server that refuses ``n`` turns it off); docs/llm.md, "One request
        for a population"."""
        self._together = Together(self._ask, lambda: self.max_concurrency)
        self._clients: OwnedClient[openai.AsyncOpenAI] = OwnedClient()

    supports_tools = True
    """Native tool calling through ``tools`` / ``tool_calls`` (see the module docs)."""

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def max_concurrency(self) -> int | None:  # type: ignore[override]
        """Requests worth having in flight at once: what was given; None: no limit."""
        return self._max_concurrency

    @property
    def batch_hint(self) -> int | None:  # type: ignore[override]
        """Answers decoded at once: the server's parallel slots (``max_concurrency``)."""
        return self.max_concurrency

    @property
    def base_url(self) -> str | None:
        """The server's URL."""
        return self._base_url

    def __repr__(self) -> str:
        where = self.base_url or "(SDK default)"
        return f"OpenAICompatible(model={self.model!r}, base_url={where!r})"

    def _client(self, base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
        """The SDK client for ``base_url`` and ``api_key`` (one, on selfheal's loop)."""
        policy = self.policy
        return self._clients.get(
            (base_url, api_key),
            lambda: openai.AsyncOpenAI(
                base_url=base_url,
                api_key=api_key,
                timeout=openai.Timeout(
                    policy.timeout, connect=min(policy.connect_timeout, policy.timeout)
                ),
                max_retries=max(0, policy.attempts - 1),
            ),
        )

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model or "local",
            "messages": [wire_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        stop = list(request.stop)
        if request.tools and self.local and TOOL_PADDING_STOP not in stop:
            # ends the blank lines a small model pads a call written as text with (docs/loop.md)
            stop.append(TOOL_PADDING_STOP)
        if stop:
            body["stop"] = stop
        if request.seed is not None:
            body["seed"] = int(request.seed)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            body["tool_choice"] = request.tool_choice
        elif request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.schema, "strict": False},
            }
        if self._extra_body:
            body["extra_body"] = dict(self._extra_body)
        return body

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        """Generate a reply (see the module docs). Never blocks the event loop."""
        if self.one_request and Together.joins(request):
            return await self._together.ask(request)
        return (await self._ask(request, [request.on_token]))[0]

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        """``n`` answers with seeds ``seed, seed + 1, ...``: one request for ``n`` with
        ``one_request`` (the prompt processed once), else ``n`` concurrent requests."""
        if n == 1 or not self.one_request:
            return await super()._acomplete_many(request, n)
        seed = random.randrange(2**31 - n) if request.seed is None else request.seed
        return await self._ask(request.replace(seed=seed), [request.on_token] * n)

    async def _ask(
        self, request: CompletionRequest, on_tokens: list[TokenCallback | None]
    ) -> list[Completion]:
        """``len(on_tokens)`` answers to ``request`` (a prefilled reply sent as ``prefill``
        says), in requests of at most ``max_concurrency`` answers (llama-server refuses ``n``
        above its slots), any answer a server left out asked on its own."""
        prefill = prefill_of(request.messages)
        asked = request
        if prefill and self.prefill == "instruct":
            asked = request.replace(messages=prefill_as_instruction(request.messages))
        if len(on_tokens) == 1:
            done = [await self._send(asked.replace(on_token=on_tokens[0]))]
        else:
            seed = random.randrange(2**31 - 64) if asked.seed is None else asked.seed
            most = max(1, self.max_concurrency or len(on_tokens))
            parts = [on_tokens[i : i + most] for i in range(0, len(on_tokens), most)]
            answers = await gather_or_cancel(
                [self._part(asked.replace(seed=seed + i * most), p) for i, p in enumerate(parts)]
            )
            done = [c for part in answers for c in part]
        if asked is request:
            return done
        return [c.model_copy(update={"text": continuation(c.text, prefill)}) for c in done]

    async def _part(
        self, request: CompletionRequest, on_tokens: list[TokenCallback | None]
    ) -> list[Completion]:
        if len(on_tokens) == 1:
            return [await self._send(request.replace(on_token=on_tokens[0]))]
        try:
            got = await self._send_many(request, on_tokens)
        except ProviderError as exc:
            refused = exc.__cause__
            if not isinstance(refused, openai.BadRequestError) or "context" in str(exc).lower():
                raise
            # a server that does not take n (an older llama-server: "Only one completion
            # choice is allowed"): ask one answer a request from now on
            log.warning("%s refused n=%d (%s); one answer a request from now on",
                        self.model_id, len(on_tokens), refused)  # fmt: skip
            self.one_request, got = False, []
        seed = request.seed or 0
        rest = [
            self._send(request.replace(seed=seed + i, on_token=on_tokens[i]))
            for i in range(len(got), len(on_tokens))
        ]
        return [*got, *(await gather_or_cancel(rest))]

    async def _send_many(
        self, request: CompletionRequest, on_tokens: list[TokenCallback | None]
    ) -> list[Completion]:
        """One request for ``len(on_tokens)`` answers (``n``); the answers it brought."""
        body = {**self._body(request), "n": len(on_tokens)}
        return await self._stream(body, request, self._base_url, self._api_key, on_tokens)

    async def _send(self, request: CompletionRequest) -> Completion:
        body = self._body(request)
        return (await self._stream(body, request, self._base_url, self._api_key))[0]

    async def _stream(
        self,
        body: dict[str, Any],
        request: CompletionRequest,
        base_url: str | None,
        api_key: str,
        on_tokens: list[TokenCallback | None] | None = None,
    ) -> list[Completion]:
        """Send ``body`` to ``base_url`` and read the streamed replies: one, or one per entry
        of ``on_tokens`` (a request for ``n`` answers, each choice's fragments to its own
        callback). A choice the server never answered is left out (a server that ignores
        ``n`` answers one)."""
        client = self._client(base_url, api_key)
        choices = Choices(on_tokens or [request.on_token], request.stop_when)
        tool_calls = _ToolCalls()
        try:
            stream = await client.chat.completions.create(**body)
            try:
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta is not None:
                        tool_calls.add(chunk.choices[0].delta.tool_calls)
                    if choices.add(chunk):
                        break  # every reply is done: closing the stream ends decoding
            finally:
                await _close(stream)
            cut = [i for i, r in enumerate(choices.replies) if r.pieces and not choices.finish[i]]
            if cut or not any(choices.finish):
                # a stream that stops without a finish_reason was cut (docs/llm.md)
                pieces = choices.replies[cut[0] if cut else 0].pieces
                raise IncompleteStream(
                    f"the stream ended after {len(pieces)} fragment(s) without a finish_reason"
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            streamed = any(r.streamed for r in choices.replies)
            raise self._failure(exc, streamed, base_url) from exc
        calls = tool_calls.calls()
        done = [
            self._completion(request, reply, finish, usage, timings, calls if i == 0 else ())
            for i, (reply, finish, usage, timings) in enumerate(
                zip(choices.replies, choices.finish, choices.usage, choices.timings, strict=True)
            )
            if finish
        ]
        # llama-server processes the prompt once, for the first choice: the others' was cached
        return [
            c.model_copy(update={"cached_tokens": c.prompt_tokens}) if i else c
            for i, c in enumerate(done)
        ]

    def _completion(
        self,
        request: CompletionRequest,
        reply: ReplyStream,
        finish: str,
        usage: Any,
        timings: dict[str, Any],
        tool_calls: tuple[ToolCall, ...],
    ) -> Completion:
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        return reply.completion(
            prompt_tokens=int(prompt_tokens)
            if prompt_tokens is not None
            else sum(estimate_tokens(m.content) for m in request.messages),
            completion_tokens=int(completion_tokens)
            if completion_tokens is not None
            else len(reply.pieces)  # stopped early: llama-server streams a token a fragment
            if reply.end is not None
            else estimate_tokens(reply.text + "".join(c.arguments for c in tool_calls)),
            model=self.model_id,
            finish_reason=finish,
            cached_tokens=cached_tokens(usage, timings),
            tool_calls=tool_calls,
        )

    def _failure(self, exc: Exception, streamed: bool, base_url: str | None) -> Exception:
        """What to raise for ``exc`` from a stream (``streamed``: tokens reached on_token)."""
        return self._map_error(exc, base_url)

    def _map_error(
        self, exc: BaseException, base_url: str | None, *, died: str = "", log: str = ""
    ) -> ProviderError:
        return map_error(
            exc,
            where=base_url or "the OpenAI API (no base_url / OPENAI_BASE_URL set)",
            model_id=self.model_id,
            model=self.model,
            policy=self.policy,
            local=self.local,
            died=died,
            log=log,
        )


async def _close(stream: openai.AsyncStream[Any]) -> None:
    """Close ``stream`` and the SDK's reader of it (which holds it in a reference cycle) on this
    loop, not in whichever thread the cyclic collector runs (docs/llm.md)."""
    await stream.close()
    if (iterator := getattr(stream, "_iterator", None)) is not None:
        await iterator.aclose()
