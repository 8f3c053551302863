"""A hand-written in-process ``Executor`` for the view tests.

The view tests check what the notebook shows for a run, not the sandbox (which has its own
tests); on a loaded 2-core machine real sandbox kernels make them slow and flaky. This fake
implements the ``Executor`` protocol faithfully for the mock's scripted candidates (known,
harmless code): load the candidate, run each test in a copy of its namespace, classify the
outcome like the sandbox does. Never use it for untrusted code.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from typing import Any

from selfheal.kernel_sandbox._canon import canonical, raised
from selfheal.kernel_sandbox.types import (
    AssertTest,
    ExecutionReport,
    Limits,
    LoadResult,
    ProbeCall,
    SandboxTest,
    SnippetResult,
    TestResult,
)


class InProcessExecutor:
    """Runs scripted (trusted) candidates in this process. Implements ``Executor``."""

    def __init__(self) -> None:
        self.runs = 0

    def run(
        self,
        code: str,
        tests: Sequence[str | SandboxTest],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> ExecutionReport:
        self.runs += 1
        t0 = time.perf_counter()
        ns: dict[str, Any] = {}
        try:
            exec(compile(code, "<candidate>", "exec"), ns)
        except Exception as exc:
            load = LoadResult(
                ok=False, exc_type=type(exc).__name__, message=str(exc), outcome="error"
            )
            return ExecutionReport(load=load, duration=time.perf_counter() - t0)
        results = []
        for i, t in enumerate(tests, start=1):
            if isinstance(t, str):
                tid, src = f"t{i}", t
            elif isinstance(t, AssertTest):
                tid, src = t.id, t.code
            elif isinstance(t, ProbeCall):
                s0 = time.perf_counter()
                try:
                    value = canonical(eval(compile(t.expr, f"<probe {t.id}>", "eval"), dict(ns)))
                    results.append(TestResult(test_id=t.id, outcome="passed", value=value))
                except Exception as exc:
                    results.append(
                        TestResult(
                            test_id=t.id,
                            outcome="error",
                            exc_type=type(exc).__name__,
                            value=raised(type(exc).__name__),
                        )
                    )
                continue
            else:
                call = f"{t.function}(*{t.args!r}, **{t.kwargs!r})"
                tid, src = t.id, f"assert {call} == {t.expected!r}"
            s0 = time.perf_counter()
            try:
                exec(compile(src, f"<test {tid}>", "exec"), dict(ns))
                results.append(
                    TestResult(test_id=tid, outcome="passed", duration=time.perf_counter() - s0)
                )
            except Exception as exc:
                results.append(
                    TestResult(
                        test_id=tid,
                        outcome="failed" if isinstance(exc, AssertionError) else "error",
                        exc_type=type(exc).__name__,
                        message=str(exc),
                        traceback="".join(traceback.format_exception_only(type(exc), exc)),
                        duration=time.perf_counter() - s0,
                    )
                )
        return ExecutionReport(
            load=LoadResult(ok=True), results=tuple(results), duration=time.perf_counter() - t0
        )

    def run_snippet(
        self,
        code: str,
        *,
        setup: str = "",
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> SnippetResult:
        ns: dict[str, Any] = {}
        try:
            exec(setup, ns)
            exec(code, ns)
        except Exception as exc:
            return SnippetResult(outcome="error", exc_type=type(exc).__name__, message=str(exc))
        return SnippetResult(outcome="passed")
