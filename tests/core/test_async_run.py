"""One concurrency model: a run is coroutines all the way down, so a time budget is an
``asyncio.timeout`` that cancels the work in flight (a model call or a sandbox run), cancelling
the task that runs ``aheal`` (a notebook cell's interrupt) leaves nothing running, and the
blocking ``heal`` works from inside a running event loop (a notebook cell)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
import scripted as s

from selfheal import Approve, HealConfig, aheal, heal
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.types import ExecutionReport, SandboxTest
from selfheal.llm.base import Completion, CompletionRequest, ProviderBase
from selfheal.llm.mock import MockProvider
from selfheal.state import Decision, HealState, Proposal


class Stalling(ProviderBase):
    """Answers the roles in ``script`` at once; any other call waits until it is cancelled,
    counting the calls in flight and the cancellations it saw."""

    max_concurrency = 1

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        self.script = script or {}
        self.in_flight = 0
        self.cancelled = 0
        self.asked: list[str] = []

    @property
    def model_id(self) -> str:
        return "stalling:fake"

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        self.asked.append(request.role)
        replies = self.script.get(request.role)
        if replies:
            return Completion(text=replies.pop(0), model=self.model_id)
        self.in_flight += 1
        try:
            await asyncio.Event().wait()  # never set: only a cancellation ends it
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        raise AssertionError("unreachable")


class NoSandbox:
    """The run must stop before anything is executed."""

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing should run in the sandbox")

    arun_snippet = arun


class StallingSandbox(NoSandbox):
    """A sandbox whose runs last until they are cancelled."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def arun_many(
        self, items: Sequence[tuple[str, Sequence[SandboxTest]]], **options: Any
    ) -> list[ExecutionReport]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("the budget should have stopped this run")


def config(**changes: Any) -> HealConfig:
    base: dict[str, Any] = dict(
        candidates=1, first_sample=1, spec_blind_tests=False, memory=False, adversarial_tests=False
    )
    return HealConfig(**{**base, **changes})


def test_a_time_budget_cancels_the_model_call_in_flight() -> None:
    fake = Stalling()
    started = time.monotonic()
    result = heal(s.SPEC, provider=fake, config=config(time_budget=0.5), executor=NoSandbox())
    assert time.monotonic() - started < 1.5
    assert result.status == "exhausted"
    assert result.state.stop_reason.startswith("time budget spent (0.5s)")
    assert "generate node in flight was stopped" in result.state.stop_reason
    assert any(e.kind == "error" and e.detail.startswith("stopped: ") for e in result.timeline)
    assert fake.cancelled == 1 and fake.in_flight == 0


def test_a_time_budget_cancels_a_sandbox_run_in_flight() -> None:
    sandbox = StallingSandbox()
    fake = Stalling({"generator": [s.GOOD]})
    started = time.monotonic()
    result = heal(s.SPEC, provider=fake, config=config(time_budget=0.5), executor=sandbox)  # type: ignore[arg-type]
    assert time.monotonic() - started < 1.5
    assert result.status == "unverified"  # code that never ran is no evidence
    assert result.state.stop_reason.startswith("time budget spent (0.5s)")
    assert "execute node in flight was stopped" in result.state.stop_reason
    assert sandbox.cancelled == 1


async def test_cancelling_aheal_leaves_no_request_or_kernel(pool: KernelPool) -> None:
    # the first answer runs in the pool and fails; the debugger's call then waits forever
    fake = Stalling({"generator": [s.BROKEN]})
    task = asyncio.create_task(
        aheal(s.SPEC, provider=fake, config=config(), executor=pool)  # type: ignore[arg-type]
    )
    for _ in range(300):
        if fake.in_flight:
            break
        await asyncio.sleep(0.05)
    assert fake.in_flight == 1 and fake.asked[-1] == "debugger", fake.asked
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the cancellation reached the request before the task ended: nothing is left running
    assert fake.in_flight == 0 and fake.cancelled == 1
    assert await asyncio.to_thread(pool.wait_ready, 5.0)  # every kernel idle again


SLEEPY = s.block("def clamp(x, lo, hi):\n    import time\n    time.sleep(60)\n    return x")


async def test_cancelling_aheal_during_a_sandbox_run_frees_its_kernel(pool: KernelPool) -> None:
    assert await asyncio.to_thread(pool.wait_ready, 30.0)
    seen: list[str] = []
    task = asyncio.create_task(
        aheal(
            s.SPEC,
            provider=Stalling({"generator": [SLEEPY]}),
            config=config(test_timeout=60),
            executor=pool,  # type: ignore[arg-type]
            on_event=lambda e: seen.append(e.node),
        )
    )
    for _ in range(300):
        if task.done() or "execute" in seen:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # the candidate is loaded and its first test sleeps
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the candidate's process was killed: the kernel is back long before the test's 60 s
    assert await asyncio.to_thread(pool.wait_ready, 5.0)


async def test_the_blocking_heal_works_inside_a_running_event_loop(pool: KernelPool) -> None:
    asked: list[str] = []

    async def approver(proposal: Proposal, state: HealState) -> Decision:
        asked.append(proposal.kind)
        await asyncio.sleep(0)
        return Approve("looks right")

    # a notebook cell: a coroutine that calls the blocking API, with an async approver
    result = heal(
        s.SPEC,
        provider=MockProvider({"generator": [s.GOOD]}),
        config=config(autonomy="review_all"),
        executor=pool,  # type: ignore[arg-type]
        approver=approver,
    )
    assert asked == ["initial"]  # the async approver was awaited
    assert result.status == "unverified"  # one candidate: it passes, alone
    assert result.code is not None and "max(lo, min(x, hi))" in result.code
