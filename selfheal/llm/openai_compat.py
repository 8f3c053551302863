"""One provider for every OpenAI-compatible chat server, on the official ``openai`` SDK.

The same class reaches llama.cpp's ``llama-server`` (the ``local`` default, supervised by
:mod:`selfheal.llm.local_server`), vLLM, LM Studio, Ollama's ``/v1`` endpoint, TGI and
OpenAI itself::

    from selfheal.llm import OpenAICompatible
    p = OpenAICompatible(model="qwen2.5-coder-1.5b", base_url="http://127.0.0.1:8080/v1")
    p.complete(messages, max_tokens=64, temperature=0.0)              # Completion
    p.complete_many(messages, n=4, max_tokens=64, temperature=0.8)    # list[Completion]

* **Async first.** ``acomplete`` / ``acomplete_many`` are the implementation; ``complete`` /
  ``complete_many`` run them with :func:`selfheal.llm.aio.run_sync` (fine inside Jupyter's
  running event loop).
* **Always streamed** on the wire (``stream_options.include_usage``): ``on_token`` gets each
  fragment, ``time_to_first_token`` is measured, and the read timeout is the longest silence
  between chunks, not the whole generation (llama-server sends SSE pings while it processes a
  long prompt). Token counts come from the server's ``usage`` (``cached_tokens`` from
  ``usage.prompt_tokens_details`` or llama.cpp's ``timings.cache_n``).
* ``schema`` is sent as ``response_format={"type": "json_schema", ...}``; llama-server turns
  it into a grammar (constrained decoding). ``stop``, ``seed`` per request.
* ``complete_many(n=...)`` sends ``n`` requests at once (llama-server rejects ``n > 1`` in one
  chat request) with seeds ``seed, seed + 1, ...`` (a random base when not given); a server
  with parallel slots decodes them together. Results are in index order.
* Retries (429, 5xx, connection errors) are the SDK's own (``max_retries``, with backoff and
  ``Retry-After``); errors are mapped to :mod:`selfheal.errors` with what to do.
* With a supervised server (``server=``), the server starts on the first request, and a request
  that lost its connection because the server died is retried once after a restart.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import openai

from selfheal.errors import (
    AuthenticationFailed,
    ConfigError,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from selfheal.llm.aio import run_sync
from selfheal.llm.base import Completion, Message, TokenCallback, _gather_or_cancel
from selfheal.llm.retry import RetryPolicy
from selfheal.llm.tokens import estimate_tokens

if TYPE_CHECKING:
    from selfheal.llm.local_server import Endpoint, LocalServer

__all__ = ["OpenAICompatible"]

NO_KEY = "sk-no-key"
"""Sent when no key is configured: local servers without ``--api-key`` accept anything, and
the SDK refuses to build a client without one."""


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level exceptions the SDK's HTTP library raises while a stream is read
    (the SDK wraps errors of the request itself, not of the streamed body)."""
    found: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        err = getattr(module, "TransportError", None)
        if isinstance(err, type) and issubclass(err, BaseException):
            found.append(err)
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()


class IncompleteStream(ConnectionError):
    """A streamed reply ended before the server said it was finished."""


class _Dropped(Exception):
    """The connection to a supervised server broke (it may have died)."""

    def __init__(self, cause: BaseException, streamed: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.streamed = streamed


class OpenAICompatible:
    """A chat model behind an OpenAI-compatible HTTP API. Implements the Provider protocol,
    plus ``complete_many`` / ``acomplete_many``.

    ``base_url`` defaults to ``$OPENAI_BASE_URL`` (else the SDK's default, OpenAI's API),
    ``api_key`` to ``$OPENAI_API_KEY`` (else a dummy, fine for local servers). ``policy``
    sets the timeout (longest silence while streaming) and the SDK's retries
    (``attempts - 1``). ``server`` is a supervised :class:`LocalServer` to start on first
    use instead of a fixed URL. ``local=True`` marks a llama.cpp server: requests then ask
    for its prompt cache (``cache_prompt``) explicitly. ``extra_body`` is merged into every
    request. ``max_concurrency`` tells callers how many requests to have in flight at once
    (a supervised server's slots; None: no limit).
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
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[str | None, str, openai.AsyncOpenAI]
        ] = weakref.WeakKeyDictionary()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def max_concurrency(self) -> int | None:
        """Requests worth having in flight at once: a supervised server's slots (more would
        wait in its queue), else what was given; None when unknown (no limit)."""
        if self.server is not None:
            return self.server.settings.slots
        return self._max_concurrency

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
        loop = asyncio.get_running_loop()
        cached = self._clients.get(loop)
        if cached is not None and cached[0] == base_url and cached[1] == api_key:
            return cached[2]
        policy = self.policy
        client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=openai.Timeout(
                policy.timeout, connect=min(policy.connect_timeout, policy.timeout)
            ),
            max_retries=max(0, policy.attempts - 1),
        )
        self._clients[loop] = (base_url, api_key, client)
        return client

    async def _endpoint(self) -> Endpoint | None:
        if self.server is None:
            return None
        endpoint = self.server.current()
        if endpoint is None:  # not started yet (or died): start it off the event loop
            endpoint = await asyncio.to_thread(self.server.ensure)
        return endpoint

    # -- requests -------------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[Message],
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        schema: dict[str, Any] | None,
        seed: int | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model or "local",
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if stop:
            body["stop"] = list(stop)
        if seed is not None:
            body["seed"] = int(seed)
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema, "strict": False},
            }
        if self._extra_body:
            body["extra_body"] = dict(self._extra_body)
        return body

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        seed: int | None = None,
    ) -> Completion:
        """Generate a reply (see the module docs). Never blocks the event loop."""
        body = self._body(messages, max_tokens, temperature, stop, schema, seed)
        endpoint = await self._endpoint()
        try:
            return await self._stream(body, messages, endpoint, on_token)
        except _Dropped as first:
            server = self.server
            assert server is not None and endpoint is not None
            dropped = first
            # The server may have died: restart it once (or join a restart another request
            # made) and send the request again, unless tokens already reached on_token.
            if not dropped.streamed and await asyncio.to_thread(server.recover, endpoint):
                try:
                    return await self._stream(body, messages, await self._endpoint(), on_token)
                except _Dropped as again:
                    dropped = again
            await asyncio.to_thread(server.settle)
            raise self._dropped_error(dropped) from dropped.cause

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        seed: int | None = None,
    ) -> Completion:
        """Blocking twin of :meth:`acomplete`."""
        return run_sync(
            self.acomplete(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                schema=schema,
                on_token=on_token,
                seed=seed,
            )
        )

    async def acomplete_many(
        self,
        messages: Sequence[Message],
        *,
        n: int,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:
        """``n`` completions of one prompt as ``n`` concurrent requests with seeds ``seed``,
        ``seed + 1``, ... (a random base when None), in index order. One failure cancels the
        others and is raised."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        base = random.randrange(2**31 - n) if seed is None else int(seed)
        calls = [
            self.acomplete(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                schema=schema,
                seed=base + i,
            )
            for i in range(n)
        ]
        return await _gather_or_cancel(calls)

    def complete_many(
        self,
        messages: Sequence[Message],
        *,
        n: int,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:
        """Blocking twin of :meth:`acomplete_many`."""
        return run_sync(
            self.acomplete_many(
                messages,
                n=n,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop,
                schema=schema,
            )
        )

    async def _stream(
        self,
        body: dict[str, Any],
        messages: Sequence[Message],
        endpoint: Endpoint | None,
        on_token: TokenCallback | None,
    ) -> Completion:
        base_url = endpoint.base_url if endpoint else self._base_url
        api_key = endpoint.api_key if endpoint else self._api_key
        client = self._client(base_url, api_key)
        started = time.monotonic()
        pieces: list[str] = []
        ttft: float | None = None
        finish = ""
        usage: Any = None
        timings: dict[str, Any] = {}
        try:
            stream = await client.chat.completions.create(**body)
            async with stream:
                async for chunk in stream:
                    if chunk.choices:
                        choice = chunk.choices[0]
                        piece = choice.delta.content if choice.delta else None
                        if piece:
                            if ttft is None:
                                ttft = time.monotonic() - started
                            pieces.append(piece)
                            if on_token is not None:
                                on_token(piece)
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
                    f"the stream ended after {len(pieces)} fragment(s) without a finish_reason"
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            dropped = isinstance(
                exc, (openai.APIConnectionError, IncompleteStream, *_TRANSPORT_ERRORS)
            ) and not _is_timeout(exc)
            if dropped and self.server is not None:
                raise _Dropped(exc, streamed=bool(pieces) and on_token is not None) from exc
            raise self._map_error(exc, base_url) from exc
        text = "".join(pieces)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is None:
            cached = timings.get("cache_n")
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens)
            if prompt_tokens is not None
            else sum(estimate_tokens(m.content) for m in messages),
            completion_tokens=int(completion_tokens)
            if completion_tokens is not None
            else estimate_tokens(text),
            latency=time.monotonic() - started,
            model=self.model_id,
            finish_reason=finish or "stop",
            time_to_first_token=ttft,
            cached_tokens=int(cached or 0),
        )

    # -- errors ---------------------------------------------------------------------------

    def _where(self, base_url: str | None) -> str:
        return base_url or "the OpenAI API (no base_url / OPENAI_BASE_URL set)"

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

    def _map_error(self, exc: BaseException, base_url: str | None) -> ProviderError:
        where = self._where(base_url)
        provider, model = self.model_id.partition(":")[0], self.model
        if self.server is not None and not self.server.alive and self.server.pid is not None:
            tail = "\n" + self.server.describe_exit()
        else:
            tail = ""
        if isinstance(exc, openai.APITimeoutError) or _is_timeout(exc):
            return ProviderTimeout(
                f"{self.model_id} at {where} sent nothing for {self.policy.timeout:g} s. Raise "
                "the timeout (RetryPolicy(timeout=...)), lower max_tokens, or give the server "
                "fewer parallel requests." + tail,
                provider=provider,
                model=model,
            )
        if isinstance(exc, IncompleteStream):
            return ProviderUnavailable(
                f"The reply from {where} was cut off: {exc}. The server may have stopped; "
                "check it and try again." + tail,
                provider=provider,
                model=model,
            )
        if isinstance(exc, (openai.APIConnectionError, *_TRANSPORT_ERRORS)):
            how = (
                "Is the server running? For the local model run `selfheal serve` (or unset "
                "SELFHEAL_LOCAL_URL to let selfheal start one); otherwise start your server or "
                "set OPENAI_BASE_URL / base_url to where it listens."
            )
            return ProviderUnavailable(
                f"Cannot reach {where} ({type(exc).__name__}: {exc}), even after "
                f"{max(0, self.policy.attempts - 1)} retries. {how}" + tail,
                provider=provider,
                model=model,
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _detail(exc)
            if status in (401, 403):
                return AuthenticationFailed(
                    f"{where} refused the API key (HTTP {status}: {detail}). Set OPENAI_API_KEY "
                    "or api_key= to the server's key (for `selfheal serve`: the "
                    "OPENAI_API_KEY / SELFHEAL_LOCAL_KEY it printed).",
                    provider=provider,
                    model=model,
                )
            if status == 404:
                return ModelNotFound(
                    f"{where} does not serve the model {self.model!r} (HTTP 404: {detail}). "
                    "Check the model name (GET /v1/models lists what it serves) and base_url "
                    "(it usually ends in /v1).",
                    provider=provider,
                    model=model,
                )
            low = detail.lower()
            if status in (400, 413) and ("context" in low or "exceed" in low or "too long" in low):
                return ProviderError(
                    f"The prompt does not fit the model's context at {where} (HTTP {status}: "
                    f"{detail}). Shorten the prompt or lower max_tokens"
                    + (
                        ", or give each slot more context (SELFHEAL_LOCAL_CTX, tokens per "
                        "slot) or fewer slots (SELFHEAL_LOCAL_SLOTS)."
                        if self.local
                        else "."
                    ),
                    provider=provider,
                    model=model,
                )
            if status == 429:
                return ProviderUnavailable(
                    f"{where} kept rate limiting requests (HTTP 429: {detail}) after "
                    f"{max(0, self.policy.attempts - 1)} retries with backoff. Wait and try "
                    "again, send fewer requests at once, or use another model.",
                    provider=provider,
                    model=model,
                )
            if status >= 500:
                return ProviderUnavailable(
                    f"{where} returned a server error (HTTP {status}: {detail}) after "
                    f"{max(0, self.policy.attempts - 1)} retries. Check the server's log"
                    + (f" ({self.server.log_path})" if self.server is not None else "")
                    + "."
                    + tail,
                    provider=provider,
                    model=model,
                )
            return ProviderError(
                f"{where} rejected the request (HTTP {status}: {detail}). This is not "
                "transient; check the request (model, max_tokens, messages, schema).",
                provider=provider,
                model=model,
            )
        if isinstance(exc, openai.APIError):  # e.g. an error event inside the stream
            return ProviderError(
                f"{where} reported an error while streaming: {exc}.",
                provider=provider,
                model=model,
            )
        return ProviderError(
            f"{self.model_id} at {where} failed: {type(exc).__name__}: {exc}",
            provider=provider,
            model=model,
        )


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError):
        return True
    return any(c.__name__ == "TimeoutException" for c in type(exc).__mro__)  # httpx's timeouts


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(exc.message)[:500]
