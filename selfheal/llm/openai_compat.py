"""One provider for every OpenAI-compatible chat server, on the official ``openai`` SDK.

The same class reaches llama.cpp's ``llama-server`` (the ``local`` default, supervised by
:mod:`selfheal.llm.local_server`), vLLM, LM Studio, Ollama's ``/v1`` endpoint, TGI and
OpenAI itself::

    from selfheal.llm import OpenAICompatible
    p = OpenAICompatible(model="qwen2.5-coder-1.5b", base_url="http://127.0.0.1:8080/v1")
    p.complete(messages, max_tokens=64, temperature=0.0)              # Completion
    p.complete_many(messages, n=4, max_tokens=64, temperature=0.8)    # list[Completion]

* **Async first.** ``_acomplete(request)`` is the implementation; ``complete`` /
  ``complete_many`` and the async ``acomplete`` / ``acomplete_many`` come from
  :class:`~selfheal.llm.base.ProviderBase` (the blocking ones are fine inside Jupyter's running
  event loop).
* **Always streamed** on the wire (``stream_options.include_usage``): ``on_token`` gets each
  fragment, ``time_to_first_token`` is measured, and the read timeout is the longest silence
  between chunks, not the whole generation (llama-server sends SSE pings while it processes a
  long prompt). Token counts come from the server's ``usage`` (``cached_tokens`` from
  ``usage.prompt_tokens_details`` or llama.cpp's ``timings.cache_n``).
* ``schema`` is sent as ``response_format={"type": "json_schema", ...}``; llama-server turns
  it into a grammar (constrained decoding). ``stop``, ``seed`` per request.
* **Native tool calling**: ``tools`` go out as ``tools=[{"type": "function", ...}]`` with
  ``tool_choice``; streamed ``tool_calls`` deltas are put back together into
  ``Completion.tool_calls``; ``assistant`` tool calls and ``tool`` results in ``messages``
  are sent in the same wire format. llama-server does this through the model's own chat
  template (``--jinja``, which selfheal passes), constrained by a grammar with
  ``tool_choice="required"``.
* ``complete_many(n=...)`` sends ``n`` requests at once (llama-server rejects ``n > 1`` in one
  chat request) with seeds ``seed, seed + 1, ...`` (a random base when not given); a server
  with parallel slots decodes them together. Results are in index order.
* A final assistant message is a prefilled reply, continued: llama-server does it; for other
  servers (``prefill="instruct"``, their default) it is moved into a user message asking the
  model to begin with it. The reply is the continuation alone.
* Retries (429, 5xx, connection errors) are the SDK's own (``max_retries``, with backoff and
  ``Retry-After``); errors are mapped to :mod:`selfheal.errors` with what to do.
* With a supervised server (``server=``), the server starts on the first request, and a request
  that lost its connection because the server died is retried once after a restart. Its
  requests are pinned to slots by a :class:`~selfheal.llm.slots.SlotRouter`, which processes a
  prompt shared by concurrent requests once and copies it between slots.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any, Literal

import httpx
import openai

from selfheal.errors import ConfigError, ProviderError, ProviderUnavailable
from selfheal.llm.aio import PerLoop, blocking
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Message,
    ProviderBase,
    ReplyStream,
    ToolCall,
)
from selfheal.llm.openai_errors import TRANSPORT_ERRORS, IncompleteStream, is_timeout, map_error
from selfheal.llm.prefill import continuation, prefill_as_instruction, prefill_of
from selfheal.llm.retry import RetryPolicy
from selfheal.llm.slots import SlotRouter, prompt_key
from selfheal.llm.tokens import estimate_tokens

if TYPE_CHECKING:
    from selfheal.llm.local_server import Endpoint, LocalServer

__all__ = ["OpenAICompatible", "wire_message"]

TOOL_PADDING_STOP = "\n\n\n\n"
"""Sent as a stop string with tools to a local server (see ``_body``)."""

NO_KEY = "sk-no-key"
"""Sent when no key is configured: local servers without ``--api-key`` accept anything, and
the SDK refuses to build a client without one."""


class _Dropped(Exception):
    """The connection to a supervised server broke (it may have died)."""

    def __init__(self, cause: BaseException, streamed: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.streamed = streamed


def wire_message(m: Message) -> dict[str, Any]:
    """One message in the chat completions wire format (tool calls and results included)."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
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


class OpenAICompatible(ProviderBase):
    """A chat model behind an OpenAI-compatible HTTP API. Implements the Provider protocol,
    plus ``complete_many`` / ``acomplete_many``.

    ``base_url`` defaults to ``$OPENAI_BASE_URL`` (else the SDK's default, OpenAI's API),
    ``api_key`` to ``$OPENAI_API_KEY`` (else a dummy, fine for local servers). ``policy``
    sets the timeout (longest silence while streaming) and the SDK's retries
    (``attempts - 1``). ``server`` is a supervised :class:`LocalServer` to start on first
    use instead of a fixed URL. ``local=True`` marks a llama.cpp server: requests then ask
    for its prompt cache (``cache_prompt``) explicitly. ``extra_body`` is merged into every
    request. ``max_concurrency`` tells callers how many requests to have in flight at once
    (a supervised server's slots; None: no limit). ``router`` pins requests to a llama-server's
    slots and copies prompts between them (a supervised server brings its own; give one for a
    llama-server started with ``--slot-save-path`` and ``-np`` slots).
    """

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        policy: RetryPolicy | None = None,
        server: LocalServer | None = None,
        model_id: str | None = None,
        local: bool = False,
        extra_body: dict[str, Any] | None = None,
        max_concurrency: int | None = None,
        router: SlotRouter | None = None,
        prefill: Literal["continue", "instruct"] | None = None,
    ) -> None:
        if server is None and not model:
            raise ConfigError(
                "OpenAICompatible needs a model name (the server's name for it), e.g. "
                "OpenAICompatible(model='qwen2.5-coder-1.5b', base_url='http://127.0.0.1:8080/v1') "
                "or the model string 'openai:MODEL'."
            )
        self.model = model
        self.server = server
        self._base_url = (
            None if server is not None else (base_url or os.environ.get("OPENAI_BASE_URL") or None)
        )
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
        self.policy = policy or RetryPolicy(timeout=300.0 if (local or server) else 120.0)
        self._model_id = model_id or f"openai:{model}"
        self.local = local or server is not None
        self._extra_body = dict(extra_body or {})
        if self.local:
            self._extra_body.setdefault("cache_prompt", True)
        self._max_concurrency = max_concurrency
        self._router = router
        self.prefill: Literal["continue", "instruct"] = prefill or (
            "continue" if self.local else "instruct"
        )
        """How a final assistant message (a prefilled reply) is sent: ``continue``, as it is,
        for a server that continues it (llama-server; vLLM and SGLang with
        ``extra_body={"continue_final_message": True, "add_generation_prompt": False}``);
        ``instruct``, moved into a user message asking the model to begin with it, for a
        server that would answer it instead (the default for servers other than llama-server).
        Either way the reply is the continuation alone."""
        self._clients: PerLoop[openai.AsyncOpenAI] = PerLoop()
        self._http: PerLoop[httpx.AsyncClient] = PerLoop()

    supports_tools = True
    """Native tool calling through ``tools`` / ``tool_calls`` (see the module docs)."""

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def max_concurrency(self) -> int | None:  # type: ignore[override]
        """Requests worth having in flight at once: a supervised server's slots (more would
        wait in its queue), else what was given; None when unknown (no limit)."""
        if self.server is not None:
            return self.server.settings.slots
        return self._max_concurrency

    @property
    def batch_hint(self) -> int | None:  # type: ignore[override]
        """Answers decoded at once: the server's parallel slots (``max_concurrency``)."""
        return self.max_concurrency

    @property
    def base_url(self) -> str | None:
        """The server's URL (for a supervised server: once it has started)."""
        if self.server is not None:
            return self.server.base_url
        return self._base_url

    def __repr__(self) -> str:
        where = self.base_url or ("(starts on first use)" if self.server else "(SDK default)")
        return f"OpenAICompatible(model={self.model!r}, base_url={where!r})"

    # -- clients --------------------------------------------------------------------------

    def _client(self, base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
        """An SDK client for the running event loop (an HTTP pool belongs to its loop)."""
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

    async def _endpoint(self) -> Endpoint | None:
        if self.server is None:
            return None
        endpoint = self.server.current()
        if endpoint is None:  # not started yet (or died): start it off the event loop
            endpoint = await asyncio.to_thread(self.server.ensure)
        return endpoint

    # -- requests -------------------------------------------------------------------------

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
            # a small model on llama-server may write its call as a fenced JSON block the
            # server neither parses nor holds to a grammar, then pad the reply with blank lines
            # up to max_tokens (Qwen2.5-Coder-1.5B, measured): this stop ends the padding, and
            # the caller reads the written call (selfheal.roles.investigate.salvage)
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

    def router(self) -> SlotRouter | None:
        """The slot router of this provider's llama-server (None: requests go unpinned)."""
        if self.server is not None:
            return self.server.router
        return self._router

    async def aforget_prompts(self) -> None:
        """Erase every slot's cached prompt on the llama-server this provider routes for (its
        supervised server, or the one given a ``router``), so the next request starts cold.
        The benchmark runner calls it before each (task, mode) run, so that no mode is served
        prompts another mode processed. Does nothing for other servers."""
        router = self.router()
        if router is None:
            return
        endpoint = self.server.current() if self.server is not None else None
        if self.server is not None and endpoint is None:
            return  # not started (or died): nothing is cached
        api = _HTTPSlots(self, {}, endpoint)
        for slot in range(len(router.slots)):
            await api.erase(slot)
        router.forget()

    forget_prompts = blocking(aforget_prompts)
    """Blocking twin of :meth:`aforget_prompts`."""

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        """Generate a reply (see the module docs). Never blocks the event loop."""
        prefill = prefill_of(request.messages)
        if not prefill or self.prefill == "continue":
            return await self._send(request)
        asked = request.replace(messages=prefill_as_instruction(request.messages))
        done = await self._send(asked)
        return done.model_copy(update={"text": continuation(done.text, prefill)})

    async def _send(self, request: CompletionRequest) -> Completion:
        body = self._body(request)
        endpoint = await self._endpoint()
        router = self.router()
        if router is None:
            return await self._request(body, request, endpoint)
        started = time.monotonic()
        lease = await router.acquire(prompt_key(body), _HTTPSlots(self, body, endpoint))
        before = time.monotonic() - started  # the prefill, a restore or a wait: this request's
        ok = False
        try:
            if lease.slot is not None:
                body = {**body, "extra_body": {**body.get("extra_body", {}), "id_slot": lease.slot}}
            done = await self._request(body, request, endpoint)
            ok = True
        finally:
            router.release(lease, ok=ok)
        update: dict[str, Any] = {"latency": done.latency + before}
        if done.time_to_first_token is not None:
            update["time_to_first_token"] = done.time_to_first_token + before
        if lease.prefilled:  # the prefill processed the prompt: report what it found cached
            update["cached_tokens"] = lease.cached_before
        return done.model_copy(update=update)

    async def _request(
        self, body: dict[str, Any], request: CompletionRequest, endpoint: Endpoint | None
    ) -> Completion:
        try:
            return await self._stream(body, request, endpoint)
        except _Dropped as first:
            server = self.server
            assert server is not None and endpoint is not None
            dropped = first
            # The server may have died: restart it once (or join a restart another request
            # made) and send the request again, unless tokens already reached on_token.
            if not dropped.streamed and await asyncio.to_thread(server.recover, endpoint):
                try:
                    return await self._stream(body, request, await self._endpoint())
                except _Dropped as again:
                    dropped = again
            await asyncio.to_thread(server.settle)
            raise self._dropped_error(dropped) from dropped.cause

    async def _stream(
        self, body: dict[str, Any], request: CompletionRequest, endpoint: Endpoint | None
    ) -> Completion:
        base_url = endpoint.base_url if endpoint else self._base_url
        api_key = endpoint.api_key if endpoint else self._api_key
        client = self._client(base_url, api_key)
        reply = ReplyStream(request.on_token)
        tool_calls = _ToolCalls()
        finish = ""
        usage: Any = None
        timings: dict[str, Any] = {}
        try:
            stream = await client.chat.completions.create(**body)
            async with stream:
                async for chunk in stream:
                    if chunk.choices:
                        choice = chunk.choices[0]
                        reply.add(choice.delta.content if choice.delta else None)
                        if choice.delta is not None and choice.delta.tool_calls:
                            tool_calls.add(choice.delta.tool_calls)
                        if choice.finish_reason:
                            finish = str(choice.finish_reason)
                    if chunk.usage is not None:
                        usage = chunk.usage
                    extra = chunk.model_extra or {}
                    if isinstance(extra.get("timings"), dict):
                        timings = extra["timings"]
            if not finish:
                # every OpenAI-compatible server ends a reply with a finish_reason; a stream
                # that stops without one was cut (the server died, a proxy hung up)
                raise IncompleteStream(
                    f"the stream ended after {len(reply.pieces)} fragment(s) without a "
                    "finish_reason"
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            dropped = isinstance(
                exc, (openai.APIConnectionError, IncompleteStream, *TRANSPORT_ERRORS)
            ) and not is_timeout(exc)
            if dropped and self.server is not None:
                raise _Dropped(exc, streamed=reply.streamed) from exc
            raise self._map_error(exc, base_url) from exc
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is None:
            cached = timings.get("cache_n")
        return reply.completion(
            prompt_tokens=int(prompt_tokens)
            if prompt_tokens is not None
            else sum(estimate_tokens(m.content) for m in request.messages),
            completion_tokens=int(completion_tokens)
            if completion_tokens is not None
            else estimate_tokens(reply.text + "".join(c.arguments for c in tool_calls.calls())),
            model=self.model_id,
            finish_reason=finish or "stop",
            cached_tokens=int(cached or 0),
            tool_calls=tool_calls.calls(),
        )

    # -- errors ---------------------------------------------------------------------------

    def _where(self, base_url: str | None) -> str:
        return base_url or "the OpenAI API (no base_url / OPENAI_BASE_URL set)"

    def _map_error(self, exc: BaseException, base_url: str | None) -> ProviderError:
        return map_error(
            exc,
            where=self._where(base_url),
            model_id=self.model_id,
            model=self.model,
            policy=self.policy,
            local=self.local,
            server=self.server,
        )

    def _dropped_error(self, dropped: _Dropped) -> ProviderError:
        assert self.server is not None
        if self.server.alive:
            return self._map_error(dropped.cause, self.server.base_url)
        cut = (
            " after tokens were already streamed to on_token (not retried)"
            if dropped.streamed
            else ""
        )
        return ProviderUnavailable(
            f"The connection to the local model server broke{cut}. " + self.server.describe_exit(),
            provider="local",
            model=self.model,
        )


class _HTTPSlots:
    """The :class:`~selfheal.llm.slots.SlotAPI` of one request: llama-server's ``/slots``
    actions, and a one-token prefill of the request's own prompt."""

    def __init__(
        self, provider: OpenAICompatible, body: dict[str, Any], endpoint: Endpoint | None
    ) -> None:
        self.provider = provider
        self.body = body
        base_url = endpoint.base_url if endpoint else provider._base_url
        self.api_key = endpoint.api_key if endpoint else provider._api_key
        self.base_url = base_url
        root = (base_url or "").rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root

    def _http(self) -> httpx.AsyncClient:
        return self.provider._http.get(
            (self.root, self.api_key),
            lambda: httpx.AsyncClient(
                base_url=self.root,
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=httpx.Timeout(60.0, connect=5.0),
            ),
        )

    async def _action(self, slot: int, action: str, filename: str) -> None:
        r = await self._http().post(
            f"/slots/{slot}", params={"action": action}, json={"filename": filename}
        )
        r.raise_for_status()

    async def save(self, slot: int, filename: str) -> None:
        await self._action(slot, "save", filename)

    async def erase(self, slot: int) -> None:
        r = await self._http().post(f"/slots/{slot}", params={"action": "erase"})
        r.raise_for_status()

    async def restore(self, slot: int, filename: str) -> None:
        await self._action(slot, "restore", filename)

    async def prefill(self, slot: int) -> int:
        body = {
            k: v
            for k, v in self.body.items()
            if k not in ("stream", "stream_options", "response_format", "stop")
        }
        body.update(max_tokens=1, temperature=0.0)
        body["extra_body"] = {**body.get("extra_body", {}), "id_slot": slot}
        client = self.provider._client(self.base_url, self.api_key)
        reply = await client.chat.completions.create(**body)
        details = getattr(reply.usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is None:
            timings = (reply.model_extra or {}).get("timings")
            cached = timings.get("cache_n") if isinstance(timings, dict) else 0
        return int(cached or 0)
