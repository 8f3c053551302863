"""A provider for a running Ollama server, through the ``ollama`` client library.

``schema`` is passed as Ollama's ``format`` (grammar-constrained JSON). The context size
(``num_ctx``) is computed per call from the prompt's estimated size plus ``max_tokens`` and
rounded up to a power of two, and never shrinks for a provider instance: Ollama reloads a
model whenever ``num_ctx`` changes, and silently drops the start of a prompt that does not
fit, so a too-small default would cut long prompts without telling anyone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from selfheal.errors import ConfigError, MissingDependency, ModelNotFound, ProviderUnavailable
from selfheal.llm.base import Completion, Message, TokenCallback
from selfheal.llm.retry import (
    Failure,
    RetryPolicy,
    acall_with_retry,
    call_with_retry,
    failure_for_status,
    timeout_failure,
)
from selfheal.llm.tokens import estimate_tokens

__all__ = ["OllamaProvider", "context_size"]

MIN_CTX = 2048
"""Smallest ``num_ctx`` requested."""
MAX_CTX = 131072
"""Largest ``num_ctx`` requested; a prompt that needs more is an error, not a silent cut."""


def _import_ollama() -> Any:
    try:
        import ollama
    except ImportError as exc:
        raise MissingDependency("ollama", "ollama", "the Ollama provider") from exc
    return ollama


def context_size(prompt_tokens: int, max_tokens: int, *, floor: int = MIN_CTX) -> int:
    """``num_ctx`` for a call: prompt + reply + 10 % margin, rounded up to a power of two,
    at least ``floor``. Raises :class:`ConfigError` above :data:`MAX_CTX`."""
    needed = int((prompt_tokens + max_tokens) * 1.1) + 64
    size = max(MIN_CTX, floor)
    while size < needed:
        size *= 2
    if size > MAX_CTX:
        raise ConfigError(
            f"The prompt (~{prompt_tokens} tokens) plus max_tokens ({max_tokens}) needs a "
            f"context of {needed} tokens, more than {MAX_CTX}. Shorten the prompt or lower "
            "max_tokens."
        )
    return size


class OllamaProvider:
    """A model served by Ollama (``ollama serve``). Implements the Provider protocol."""

    def __init__(
        self,
        model: str = "qwen2.5-coder:7b",
        *,
        host: str | None = None,
        policy: RetryPolicy | None = None,
        num_ctx: int | None = None,
        keep_alive: str | float | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self._ollama = _import_ollama()
        self.model = model
        self.host = host or "http://127.0.0.1:11434"
        self.policy = policy or RetryPolicy()
        self._fixed_ctx = num_ctx
        self._ctx_floor = MIN_CTX
        self._keep_alive = keep_alive
        self._options = dict(options or {})
        self._client = self._ollama.Client(host=self.host, timeout=self._timeout())

    @property
    def model_id(self) -> str:
        return f"ollama:{self.model}"

    def __repr__(self) -> str:
        return f"OllamaProvider(model={self.model!r}, host={self.host!r})"

    def _timeout(self) -> httpx.Timeout:
        policy = self.policy
        return httpx.Timeout(policy.timeout, connect=min(policy.connect_timeout, policy.timeout))

    # -- request building ---------------------------------------------------------------

    def _request(
        self,
        messages: Sequence[Message],
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        schema: dict[str, Any] | None,
    ) -> dict[str, Any]:
        prompt_estimate = sum(estimate_tokens(m.content) + 4 for m in messages)
        if self._fixed_ctx is not None:
            num_ctx = self._fixed_ctx
        else:
            num_ctx = context_size(prompt_estimate, max_tokens, floor=self._ctx_floor)
            self._ctx_floor = num_ctx  # never shrink: a change of num_ctx reloads the model
        options: dict[str, Any] = {
            **self._options,
            "num_ctx": num_ctx,
            "temperature": temperature,
            "num_predict": max_tokens,
        }
        if stop:
            options["stop"] = list(stop)
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "options": options,
        }
        if schema is not None:
            request["format"] = schema
        if self._keep_alive is not None:
            request["keep_alive"] = self._keep_alive
        return request

    # -- errors -------------------------------------------------------------------------

    def _classify(self, exc: BaseException, streamed: bool) -> Failure | None:
        ollama = self._ollama
        failure: Failure | None = None
        if isinstance(exc, ollama.ResponseError):
            status = int(getattr(exc, "status_code", -1))
            detail = str(getattr(exc, "error", exc))
            if status == 404 or (status == -1 and "not found" in detail.lower()):
                failure = Failure(
                    ModelNotFound(
                        f"Ollama at {self.host} does not have the model {self.model!r} "
                        f"({detail}). Run `ollama pull {self.model}` and try again.",
                        provider="ollama",
                        model=self.model,
                    )
                )
            else:
                failure = failure_for_status(status, detail, provider="ollama", model=self.model)
        elif isinstance(exc, httpx.TimeoutException):
            failure = timeout_failure("ollama", self.model, self.policy.timeout)
        elif isinstance(exc, (ConnectionError, httpx.TransportError)):
            failure = Failure(
                ProviderUnavailable(
                    f"Cannot reach the Ollama server at {self.host} ({type(exc).__name__}: "
                    f"{exc}). Start it with `ollama serve` (or set OLLAMA_HOST to where it "
                    "runs).",
                    provider="ollama",
                    model=self.model,
                ),
                retryable=True,
            )
        if failure is not None and streamed and failure.retryable:
            # Tokens already went to the caller: a retry would repeat them.
            failure = Failure(failure.error, retryable=False)
        return failure

    # -- completion ---------------------------------------------------------------------

    def _completion(
        self, text: str, final: Any, prompt_estimate: int, started: float, ttft: float | None
    ) -> Completion:
        prompt_tokens = getattr(final, "prompt_eval_count", None) or prompt_estimate
        completion_tokens = getattr(final, "eval_count", None) or estimate_tokens(text)
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            latency=time.monotonic() - started,
            model=self.model_id,
            finish_reason=str(getattr(final, "done_reason", None) or "stop"),
            time_to_first_token=ttft,
        )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        request = self._request(messages, max_tokens, temperature, stop, schema)
        prompt_estimate = sum(estimate_tokens(m.content) for m in messages)
        streamed = [False]

        def call() -> Completion:
            started = time.monotonic()
            if on_token is None:
                reply = self._client.chat(**request, stream=False)
                return self._completion(
                    reply.message.content or "", reply, prompt_estimate, started, None
                )
            pieces: list[str] = []
            final: Any = None
            ttft: float | None = None
            for part in self._client.chat(**request, stream=True):
                piece = part.message.content or ""
                if piece:
                    if ttft is None:
                        ttft = time.monotonic() - started
                    streamed[0] = True
                    pieces.append(piece)
                    on_token(piece)
                if part.done:
                    final = part
            return self._completion("".join(pieces), final, prompt_estimate, started, ttft)

        return call_with_retry(call, lambda exc: self._classify(exc, streamed[0]), self.policy)

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        request = self._request(messages, max_tokens, temperature, stop, schema)
        prompt_estimate = sum(estimate_tokens(m.content) for m in messages)
        streamed = [False]

        async def call() -> Completion:
            started = time.monotonic()
            # A client per call: an async HTTP pool belongs to the event loop it was made in.
            async with self._ollama.AsyncClient(host=self.host, timeout=self._timeout()) as client:
                if on_token is None:
                    reply = await client.chat(**request, stream=False)
                    return self._completion(
                        reply.message.content or "", reply, prompt_estimate, started, None
                    )
                pieces: list[str] = []
                final: Any = None
                ttft: float | None = None
                async for part in await client.chat(**request, stream=True):
                    piece = part.message.content or ""
                    if piece:
                        if ttft is None:
                            ttft = time.monotonic() - started
                        streamed[0] = True
                        pieces.append(piece)
                        on_token(piece)
                    if part.done:
                        final = part
                return self._completion("".join(pieces), final, prompt_estimate, started, ttft)

        return await acall_with_retry(
            call, lambda exc: self._classify(exc, streamed[0]), self.policy
        )

    def list_models(self) -> list[str]:
        """The model names the server has (``/api/tags``)."""

        def call() -> list[str]:
            listing = self._client.list()
            return [str(m.model) for m in listing.models]

        return call_with_retry(call, lambda exc: self._classify(exc, False), self.policy)
