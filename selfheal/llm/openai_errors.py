"""What went wrong on an OpenAI-compatible server, as a project error that says what to do
(the ``openai`` SDK has already retried what it retries)."""

from __future__ import annotations

import httpx
import openai

from selfheal.errors import (
    AuthenticationFailed,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from selfheal.llm.retry import RetryPolicy

TRANSPORT_ERRORS = (httpx.TransportError,)
"""Connection-level exceptions the SDK's HTTP library raises while a stream is read
(the SDK wraps errors of the request itself, not of the streamed body)."""


class IncompleteStream(ConnectionError):
    """A streamed reply ended before the server said it was finished."""


def map_error(
    exc: BaseException,
    *,
    where: str,
    model_id: str,
    model: str,
    policy: RetryPolicy,
    local: bool,
    died: str = "",
    log: str = "",
) -> ProviderError:
    """The project error for what the ``openai`` SDK raised (after its own retries), saying
    what to do: ``where`` names the server; for a supervised one, ``died`` says how it ended
    (when it is dead) and ``log`` is where its log is."""
    provider = model_id.partition(":")[0]
    who = {"provider": provider, "model": model}
    tail = "\n" + died if died else ""
    if is_timeout(exc):
        return ProviderTimeout(
            f"{model_id} at {where} sent nothing for {policy.timeout:g} s. Raise "
            "the timeout (RetryPolicy(timeout=...)), lower max_tokens, or give the server "
            "fewer parallel requests." + tail,
            **who,
        )
    if isinstance(exc, IncompleteStream):
        return ProviderUnavailable(
            f"The reply from {where} was cut off: {exc}. The server may have stopped; "
            "check it and try again." + tail,
            **who,
        )
    if isinstance(exc, (openai.APIConnectionError, *TRANSPORT_ERRORS)):
        how = (
            "Is the server running? For the local model run `selfheal serve` (or unset "
            "SELFHEAL_LOCAL_URL to let selfheal start one); otherwise start your server or "
            "set OPENAI_BASE_URL / base_url to where it listens."
        )
        return ProviderUnavailable(
            f"Cannot reach {where} ({type(exc).__name__}: {exc}), even after "
            f"{max(0, policy.attempts - 1)} retries. {how}" + tail,
            **who,
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _detail(exc)
        if status in (401, 403):
            return AuthenticationFailed(
                f"{where} refused the API key (HTTP {status}: {detail}). Set OPENAI_API_KEY "
                "or api_key= to the server's key (for `selfheal serve`: the "
                "OPENAI_API_KEY / SELFHEAL_LOCAL_KEY it printed).",
                **who,
            )
        if status == 404:
            return ModelNotFound(
                f"{where} does not serve the model {model!r} (HTTP 404: {detail}). "
                "Check the model name (GET /v1/models lists what it serves) and base_url "
                "(it usually ends in /v1).",
                **who,
            )
        low = detail.lower()
        if status in (400, 413) and ("context" in low or "exceed" in low or "too long" in low):
            return ProviderError(
                f"The prompt does not fit the model's context at {where} (HTTP {status}: "
                f"{detail}). Shorten the prompt or lower max_tokens"
                + (
                    ", or give each slot more context (SELFHEAL_LOCAL_CTX, tokens per "
                    "slot) or fewer slots (SELFHEAL_LOCAL_SLOTS)."
                    if local
                    else "."
                ),
                **who,
            )
        if status == 429:
            return ProviderUnavailable(
                f"{where} kept rate limiting requests (HTTP 429: {detail}) after "
                f"{max(0, policy.attempts - 1)} retries with backoff. Wait and try "
                "again, send fewer requests at once, or use another model.",
                **who,
            )
        if status >= 500:
            return ProviderUnavailable(
                f"{where} returned a server error (HTTP {status}: {detail}) after "
                f"{max(0, policy.attempts - 1)} retries. Check the server's log"
                + (f" ({log})" if log else "")
                + "."
                + tail,
                **who,
            )
        return ProviderError(
            f"{where} rejected the request (HTTP {status}: {detail}). This is not "
            "transient; check the request (model, max_tokens, messages, schema).",
            **who,
        )
    if isinstance(exc, openai.APIError):  # e.g. an error event inside the stream
        return ProviderError(f"{where} reported an error while streaming: {exc}.", **who)
    return ProviderError(f"{model_id} at {where} failed: {type(exc).__name__}: {exc}", **who)


def is_timeout(exc: BaseException) -> bool:
    """A timeout: the SDK's, or httpx's while a stream is read."""
    return isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException))


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(exc.message)[:500]
