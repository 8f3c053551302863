"""``trace_failure(test_id)``: a failing test (or a probe input) run again in the sandbox with
the candidate traced line by line (``KernelPool.arun_trace``), as text that fits the model's
context."""

from __future__ import annotations

from selfheal.context import Context
from selfheal.kernel_sandbox.traces import trace_text
from selfheal.kernel_sandbox.types import AssertTest, ProbeCall, TraceResult, TracingExecutor
from selfheal.probes import probe_call
from selfheal.roles.debugtools._common import current, cut
from selfheal.state import HealState
from selfheal.testsuite import limits_for


async def trace_failure(ref: str, state: HealState, ctx: Context, limit: int) -> tuple[str, int]:
    """The observation (see the module docstring), at most ``limit`` characters, and the
    sandbox runs it made."""
    executor = ctx.executor
    if not isinstance(executor, TracingExecutor):
        return (
            f"trace_failure is not available: this sandbox ({type(executor).__name__}) cannot "
            "trace; use run_snippet",
            0,
        )
    t = state.test(ref)
    test: AssertTest | ProbeCall
    if t is not None:
        test = AssertTest(id=t.id, code=t.source)
        shown = t.source.strip()
    else:
        p = next((p for p in state.probes if p.id == ref), None)
        if p is None:
            attempt = state.current
            failing = (
                [r.test_id for r in attempt.report.results if r.outcome != "passed"]
                if attempt is not None and attempt.report is not None
                else []
            )
            return (
                f"there is no test {ref!r}; the failing tests are "
                f"{', '.join(failing[:8]) or 'none'}",
                0,
            )
        test = probe_call(p.id, p.call)
        shown = p.call
    code = current(state)[1]
    result: TraceResult = await executor.arun_trace(
        code,
        test,
        timeout=state.config.limits.test_timeout,
        limits=limits_for(state),
    )
    head = f"trace of {test.id}: `{cut(' '.join(shown.split()), 160)}`\n"
    return head + trace_text(result, code, max_chars=limit - len(head)), 1
