"""Fakes for the scale-out tests: an OpenAI-compatible server on 127.0.0.1 that answers
every task of a suite with its reference solution and counts requests in flight, and a heal
that hangs once (so a test can kill the worker running it).

Everything here that a cluster worker runs is module-level, so it pickles by reference; the
workers import this module (the test's ``sys.path`` travels to them)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_fakes import oracle_provider
from llm_fakes import FakeServer, Request, Response

import selfheal
from evaluation.suites import BuiltinSuite, Task
from selfheal.config import HealConfig
from selfheal.llm.base import Message
from selfheal.llm.mock import MockProvider
from selfheal.scale import current


def builtin_oracle(count: int) -> MockProvider:
    """The evaluation tests' oracle mock over the first ``count`` builtin tasks (a function a
    worker can call to build its own)."""
    return oracle_provider(BuiltinSuite().tasks()[:count])


def _sse(text: str) -> Response:
    """A streamed chat completion with usage, as an OpenAI-compatible server sends it."""

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    usage = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    events = [chunk({"content": text}, None), chunk({}, "stop"), usage]
    body = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    return Response(status=200, body=body, headers={"content-type": "text/event-stream"})


class OracleServer:
    """An OpenAI-compatible chat server that answers like ``oracle_provider`` does (the task's
    reference solution as code) and records the most requests it ever had in flight. Each
    answer takes ``delay`` seconds, so requests that are allowed to overlap do."""

    def __init__(self, tasks: Sequence[Task], *, delay: float = 0.05) -> None:
        self._oracle = oracle_provider(tasks)
        self._delay = delay
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.answered = 0
        self.server = FakeServer(self._handle)
        self.url = self.server.url + "/v1"

    def _handle(self, request: Request) -> Response:
        body = request.json()
        messages = [Message(role=m["role"], content=m["content"]) for m in body["messages"]]
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self._delay)
            # the generator's answer for code, the test writer's for anything else
            text = self._oracle.complete(messages, role="generator").text
        finally:
            with self._lock:
                self.in_flight -= 1
                self.answered += 1
        return _sse(text)

    def close(self) -> None:
        self.server.close()


@dataclass(frozen=True)
class HangOnce:
    """``selfheal.heal``, logging each call to ``log``; the first call for ``entry_point``
    writes the address of the worker running it to ``marker`` and then hangs (until that
    worker is killed; it gives up after ``limit`` seconds so nothing waits forever)."""

    marker: str
    log: str
    entry_point: str
    limit: float = 300.0

    def __call__(
        self, spec: str, *, provider: Any, config: HealConfig, entry_point: str | None
    ) -> Any:
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{entry_point} {config.generation.candidates}\n")
        if entry_point == self.entry_point:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass  # the retry on another worker heals as usual
            else:
                os.write(fd, current().where.encode())
                os.close(fd)
                deadline = time.monotonic() + self.limit
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                raise TimeoutError("HangOnce: the worker was not killed")
        return selfheal.heal(spec, provider=provider, config=config, entry_point=entry_point)


def calls(log: str | Path) -> list[str]:
    """The heal calls ``HangOnce`` logged."""
    path = Path(log)
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def set_env(name: str, value: str | None) -> None:
    """Set (or with None, unset) an environment variable of the process that runs this (a
    worker, through ``client.run``: how a cluster's workers get their configuration)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def rate_grants(name: str, window: float, requests_per_minute: float, n: int) -> list[float]:
    """On a worker: take ``n`` slots, one after another, from the cluster-wide gate ``name``
    with a rate window of ``window`` seconds (instead of a minute); return when each was
    granted (``time.monotonic``, one clock for every process of this machine)."""
    import asyncio

    import distributed

    import selfheal.llm.limits as limits
    from selfheal.scale.dask_engine import DaskGate

    limits.WINDOW = window  # this worker process only: a test's short minute
    gate = DaskGate(
        distributed.get_worker(), name, limits.ModelLimits(requests_per_minute=requests_per_minute)
    )

    async def take() -> list[float]:
        times = []
        for _ in range(n):
            async with gate.slot():
                times.append(time.monotonic())
        return times

    return asyncio.run(take())
