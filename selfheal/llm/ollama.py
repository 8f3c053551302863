"""A provider for a running Ollama server, through the ``ollama`` client library (``schema`` as
``format``, ``num_ctx`` sized per call: docs/llm.md, "Providers")."""

from __future__ import annotations

from typing import Any

import httpx

from selfheal.errors import ConfigError, MissingDependency, ModelNotFound, ProviderUnavailable
from selfheal.llm.aio import OwnedClient, blocking, entered
from selfheal.llm.base import Completion, CompletionRequest, ProviderBase
from selfheal.llm.retry import (
    Failure,
    RetryPolicy,
    acall_with_retry,
    failure_for_status,
    timeout_failure,
)
from selfheal.llm.stream import ReplyStream
from selfheal.llm.tokens import estimate_tokens

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


class OllamaProvider(ProviderBase):
    """A model served by Ollama (``ollama serve``). Implements the Provider protocol."""

    backend = "ollama"
    batch_hint = 1
    """One: the server's ``OLLAMA_NUM_PARALLEL`` cannot be read from this client."""

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
        self._clients: OwnedClient[Any] = OwnedClient()

    def __repr__(self) -> str:
        return f"OllamaProvider(model={self.model!r}, host={self.host!r})"

    def _client(self) -> Any:
        """The provider's ``ollama.AsyncClient`` (on selfheal's loop)."""
        policy = self.policy
        timeout = httpx.Timeout(policy.timeout, connect=min(policy.connect_timeout, policy.timeout))
        return self._clients.get(
            None, lambda: self._ollama.AsyncClient(host=self.host, timeout=timeout)
        )

    def _request(self, request: CompletionRequest) -> dict[str, Any]:
        prompt_estimate = sum(estimate_tokens(m.content) + 4 for m in request.messages)
        if self._fixed_ctx is not None:
            num_ctx = self._fixed_ctx
        else:
            num_ctx = context_size(prompt_estimate, request.max_tokens, floor=self._ctx_floor)
            self._ctx_floor = num_ctx  # never shrink: a change of num_ctx reloads the model
        options: dict[str, Any] = {
            **self._options,
            "num_ctx": num_ctx,
            "temperature": request.temperature,
            "num_predict": request.max_tokens,
        }
        if request.stop:
            options["stop"] = list(request.stop)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "options": options,
        }
        if request.schema is not None:
            body["format"] = request.schema
        if self._keep_alive is not None:
            body["keep_alive"] = self._keep_alive
        return body

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

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        body = self._request(request)
        prompt_estimate = sum(estimate_tokens(m.content) for m in request.messages)
        reply = ReplyStream(request.on_token)

        async def call() -> Completion:
            nonlocal reply
            reply = ReplyStream(request.on_token)
            client = self._client()
            if request.on_token is None:
                final = await client.chat(**body, stream=False)
                text = final.message.content or ""
            else:
                final = None
                async for part in await client.chat(**body, stream=True):
                    reply.add(part.message.content)
                    if part.done:
                        final = part
                text = reply.text
            return reply.completion(
                text=text,
                prompt_tokens=int(getattr(final, "prompt_eval_count", None) or prompt_estimate),
                completion_tokens=int(getattr(final, "eval_count", None) or estimate_tokens(text)),
                model=self.model_id,
                finish_reason=str(getattr(final, "done_reason", None) or "stop"),
            )

        return await acall_with_retry(
            call, lambda exc: self._classify(exc, reply.streamed), self.policy
        )

    @entered
    async def alist_models(self) -> list[str]:
        """The model names the server has (``/api/tags``)."""

        async def call() -> list[str]:
            listing = await self._client().list()
            return [str(m.model) for m in listing.models]

        return await acall_with_retry(call, lambda exc: self._classify(exc, False), self.policy)

    list_models = blocking(alist_models)
