"""Executor: run the current candidate against every test in the kernel sandbox."""

from __future__ import annotations

import time

from selfheal.graph.context import Context
from selfheal.kernel_sandbox.types import Limits
from selfheal.roles.testcode import summarize_report
from selfheal.state import Event, HealState

NODE = "execute"


def limits_for(state: HealState) -> Limits:
    cfg = state.config
    return Limits(
        test_timeout=cfg.test_timeout, run_timeout=cfg.run_timeout, memory_mb=cfg.memory_mb
    )


def execute(state: HealState, ctx: Context) -> HealState:
    """Run all tests (old ones too: a test is never silently dropped) on the latest attempt."""
    current = state.current
    assert current is not None, "execute needs a candidate"
    started = time.perf_counter()
    report = ctx.executor.run(
        current.code,
        [t.to_sandbox() for t in state.tests],
        timeout=state.config.test_timeout,
        limits=limits_for(state),
    )
    attempt = current.model_copy(update={"report": report})
    state = state.model_copy(
        update={
            "attempts": state.attempts[:-1] + (attempt,),
            "usage": state.usage.model_copy(update={"executions": state.usage.executions + 1}),
        }
    )
    ev = Event(
        time=ctx.clock(),
        node=NODE,
        kind="info",
        iteration=state.iteration,
        duration=time.perf_counter() - started,
        detail=summarize_report(state, report),
    )
    ctx.emit(ev)
    return state.model_copy(update={"events": state.events + (ev,)})
