"""Reliability for every provider call, in one place: :class:`RetryPolicy`, the :class:`Failure`
each provider maps its SDK's exceptions to, and :func:`acall_with_retry`, the one retry loop
for a backend whose SDK does not retry (docs/llm.md, "Reliability")."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from selfheal._record import Record
from selfheal.errors import (
    AuthenticationFailed,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)

R = TypeVar("R")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth another try (rate limits, overload, transient server errors)."""


class RetryPolicy(Record):
    """How long to wait for a call and how to retry it."""

    timeout: float = 120.0
    """Seconds a call may wait for the server (connect, and between streamed chunks)."""
    connect_timeout: float = 10.0
    """Seconds to establish a connection (never more than ``timeout``)."""
    attempts: int = 4
    """Tries in total for transient failures (1 means no retry)."""
    base_delay: float = 0.5
    """Backoff before the first retry, in seconds; doubles each time."""
    max_delay: float = 20.0
    """Longest backoff between two tries, in seconds."""
    jitter: float = 0.25
    """Random spread of each backoff, as a fraction (0.25 → ±25 %)."""
    max_retry_after: float = 60.0
    """Longest ``Retry-After`` honoured, in seconds; a longer one gives up at once."""
    retry_timeouts: bool = False
    """Retry calls that timed out (off: a slow model is rarely faster the second time)."""


@dataclass(frozen=True)
class Failure:
    """How a provider classifies one exception."""

    error: ProviderError
    """The project error to raise if this is final."""
    retryable: bool = False
    """Whether another try can help."""
    retry_after: float | None = None
    """Seconds the server asked to wait, when it said."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    """``retry-after-ms`` or ``retry-after`` from response headers, in seconds."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000.0)
    return parse_retry_after(lowered.get("retry-after"))


def backoff_delay(
    policy: RetryPolicy, attempt: int, retry_after: float | None, rng: random.Random | None = None
) -> float:
    """Seconds to wait before try number ``attempt + 1`` (``attempt`` counts from 0)."""
    if retry_after is not None:
        return min(retry_after, policy.max_retry_after)
    delay = min(policy.max_delay, policy.base_delay * (2**attempt))
    spread = (rng or random).uniform(-policy.jitter, policy.jitter)
    return max(0.0, delay * (1.0 + spread))


def failure_for_status(
    status: int,
    detail: str,
    *,
    provider: str,
    model: str,
    headers: Mapping[str, str] | None = None,
    not_found_hint: str = "",
    auth_hint: str = "",
) -> Failure:
    """Map an HTTP error status to a project error, and whether to retry it."""
    detail = detail.strip()[:500]
    where = f"{provider}:{model}" if model else provider
    who = {"provider": provider, "model": model}
    if status in (401, 403):
        hint = auth_hint or "check the API key"
        return Failure(
            AuthenticationFailed(
                f"{where} refused the credentials (HTTP {status}: {detail}). {hint}.", **who
            )
        )
    if status == 404:
        hint = not_found_hint or "check the model name"
        return Failure(
            ModelNotFound(
                f"{where}: the model {model!r} was not found (HTTP 404: {detail}). {hint}.", **who
            )
        )
    if status in RETRYABLE_STATUS:
        what = "is rate limiting requests" if status == 429 else "returned a server error"
        return Failure(
            ProviderUnavailable(
                f"{where} {what} (HTTP {status}: {detail}) and kept doing so after retries. "
                "Wait a moment and try again, or use another model.",
                **who,
            ),
            retryable=True,
            retry_after=retry_after_from_headers(headers),
        )
    return Failure(
        ProviderError(
            f"{where} rejected the request (HTTP {status}: {detail}). This is not transient; "
            "check the request parameters (model, max_tokens, messages).",
            **who,
        )
    )


def timeout_failure(provider: str, model: str, timeout: float) -> Failure:
    """The failure for a call that went over its timeout."""
    return Failure(
        ProviderTimeout(
            f"{provider}:{model} did not answer within {timeout:g} s. Raise the timeout "
            "(RetryPolicy(timeout=...)), lower max_tokens, or use a faster model.",
            provider=provider,
            model=model,
        ),
        retryable=False,
    )


def gave_up(failure: Failure, attempts: int) -> ProviderError:
    """The error to raise for ``failure``, noting the attempts when retries did not help."""
    error = failure.error
    if failure.retryable and attempts > 1:
        error.add_note(f"Gave up after {attempts} attempts.")
    return error


def should_retry(failure: Failure, policy: RetryPolicy) -> bool:
    """Whether ``policy`` retries ``failure`` (a ``Retry-After`` longer than
    ``max_retry_after`` gives up at once)."""
    retry = failure.retryable or (
        policy.retry_timeouts and isinstance(failure.error, ProviderTimeout)
    )
    too_long = failure.retry_after is not None and failure.retry_after > policy.max_retry_after
    return retry and not too_long


async def acall_with_retry(
    fn: Callable[[], Awaitable[R]],
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> R:
    """Call ``fn``; retry transient failures per ``policy``; raise the mapped error.

    ``classify`` returns None for exceptions that are not the backend's (bugs): those
    propagate untouched. Cancellation propagates at once, also during a backoff sleep."""
    attempt = 0
    while True:
        try:
            return await fn()
        except (ProviderError, asyncio.CancelledError):
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if not should_retry(failure, policy) or attempt + 1 >= policy.attempts:
                raise gave_up(failure, attempt + 1) from exc
            await sleep(backoff_delay(policy, attempt, failure.retry_after))
            attempt += 1
