"""Request concurrency and rate limits per model id, shared by every run in the process (on a
Dask cluster, by every worker): :func:`configure_limits` or ``$SELFHEAL_MODEL_LIMITS``; a
provider for a model with limits goes through its gate (:class:`LimitedProvider`; docs/scale.md)."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import Field, ValidationError

from selfheal._record import Record
from selfheal.errors import ConfigError
from selfheal.llm.base import Completion, CompletionRequest, Provider, WrapperProvider

ENV_VAR = "SELFHEAL_MODEL_LIMITS"
"""Environment variable with the limits per model (YAML/JSON mapping, or a path to a file)."""

WINDOW = 60.0
"""Seconds of the rate window: ``requests_per_minute`` slots are granted in any such window."""


class ModelLimits(Record):
    """How hard one model may be asked."""

    max_concurrency: int | None = Field(default=None, ge=1)
    """Requests to this model in flight at once (None: no limit). Also caps how many answers
    one heal asks for at once (the pipeline reads it as the provider's ``max_concurrency``)."""
    requests_per_minute: float | None = Field(default=None, gt=0)
    """Requests started in any 60-second window (None: no limit)."""

    def window(self) -> tuple[int, float] | None:
        """``(permits, seconds)``: at most ``permits`` grants in any ``seconds``; None when
        there is no rate limit."""
        rate = self.requests_per_minute
        if rate is None:
            return None
        permits = max(1, math.floor(rate))
        return permits, WINDOW * permits / rate


class Gate(Protocol):
    """Grants request slots for one model."""

    def slot(self) -> Any:
        """An async context manager: a slot held for the duration of one request."""
        ...


GateFactory = Callable[[str, ModelLimits], Gate]
"""Makes the gate of a model id with its limits (local by default, the cluster's on a
Dask worker)."""


class LocalGate:
    """The limits of one model within this process. Requests run on selfheal's one event loop
    (a provider's async calls enter it: ``selfheal._sync``), so the gate's state and its
    waiters live there too: no lock, nothing woken across threads.

    ``clock`` and ``sleep`` are injectable so the rate logic can be tested without waiting."""

    def __init__(
        self,
        limits: ModelLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.limits = limits
        self._window = limits.window()
        self._clock = clock
        self._sleep = sleep
        self._in_flight = 0
        self._granted: deque[float] = deque()
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def in_flight(self) -> int:
        """Slots held now."""
        return self._in_flight

    def _try(self) -> tuple[bool, float | None]:
        """Grant a slot, or say how long to wait: seconds until the rate window frees one, or
        None to wait for a release."""
        now = self._clock()
        cap = self.limits.max_concurrency
        if cap is not None and self._in_flight >= cap:
            return False, None
        if self._window is not None:
            permits, seconds = self._window
            while self._granted and self._granted[0] <= now - seconds:
                self._granted.popleft()
            if len(self._granted) >= permits:
                return False, self._granted[0] + seconds - now
            self._granted.append(now)
        self._in_flight += 1
        return True, None

    async def acquire(self) -> None:
        """Wait for a slot (never blocks the event loop)."""
        while True:
            granted, wait = self._try()
            if granted:
                return
            if wait is not None:
                await self._sleep(max(wait, 0.0))
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def release(self) -> None:
        """Give a slot back and wake the waiters (each checks again)."""
        self._in_flight -= 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


class LimitedProvider(WrapperProvider):
    """A provider whose every request holds a slot of ``gate``."""

    def __init__(self, inner: Provider, gate: Gate, limits: ModelLimits) -> None:
        super().__init__(inner)
        self.gate = gate
        self.limits = limits

    @property
    def max_concurrency(self) -> int | None:  # type: ignore[override]
        limits = (super().max_concurrency, self.limits.max_concurrency)
        return min((n for n in limits if n is not None), default=None)

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        async with self.gate.slot():
            return await super()._acomplete(request)


def local_gate(model_id: str, limits: ModelLimits) -> Gate:
    """The default :data:`GateFactory`: a :class:`LocalGate` (this process only)."""
    return LocalGate(limits)


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.limits: dict[str, ModelLimits] | None = None
        self.factory: GateFactory = local_gate
        self.gates: dict[tuple[str, ModelLimits], Gate] = {}


_registry = _Registry()


def parse_limits(text: str, *, source: str = ENV_VAR) -> dict[str, ModelLimits]:
    """Limits per model id from YAML or JSON text (or a path to a file holding it)."""
    example = '{"openai:qwen2.5-coder-7b": {"max_concurrency": 16, "requests_per_minute": 600}}'
    raw_text = text.strip()
    if raw_text and not raw_text.startswith(("{", "[")) and Path(raw_text).expanduser().is_file():
        source = raw_text
        raw_text = Path(raw_text).expanduser().read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(raw_text) if raw_text else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML/JSON ({exc}). Example: {example}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source} must map model ids to limits. Example: {example}")
    out: dict[str, ModelLimits] = {}
    for model, fields in raw.items():
        try:
            out[str(model)] = ModelLimits.model_validate(fields or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(
                f"{source}: the limits of {model!r} are invalid ({problems}). The fields are "
                f"max_concurrency (an integer >= 1) and requests_per_minute (> 0). Example: "
                f"{example}"
            ) from exc
    return out


def configure_limits(
    limits: Mapping[str, ModelLimits] | None, *, gates: GateFactory | None = None
) -> None:
    """Set this process's limits per model id (None: read ``$SELFHEAL_MODEL_LIMITS`` again on
    next use) and how gates are made (default: :func:`local_gate`). Providers built after this
    use the new limits; gates already handed out keep theirs."""
    with _registry.lock:
        _registry.limits = None if limits is None else dict(limits)
        _registry.factory = gates or local_gate
        _registry.gates = {}


def configured_limits(env: Mapping[str, str] | None = None) -> dict[str, ModelLimits]:
    """This process's limits per model id: those configured, else ``$SELFHEAL_MODEL_LIMITS``."""
    with _registry.lock:
        if _registry.limits is not None:
            return dict(_registry.limits)
    text = (os.environ if env is None else env).get(ENV_VAR, "")
    return parse_limits(text) if text.strip() else {}


def apply_limits(provider: Provider, *, env: Mapping[str, str] | None = None) -> Provider:
    """``provider`` behind its model's gate when limits are set for its ``model_id`` (the
    gate is shared by every provider of that model in the process), else ``provider``."""
    if isinstance(provider, LimitedProvider):
        return provider
    model_id = provider.model_id
    limits = configured_limits(env).get(model_id)
    if limits is None or (limits.max_concurrency is None and limits.requests_per_minute is None):
        return provider
    with _registry.lock:
        gate = _registry.gates.get((model_id, limits))
        if gate is None:
            gate = _registry.factory(model_id, limits)
            _registry.gates[(model_id, limits)] = gate
    return LimitedProvider(provider, gate, limits)
