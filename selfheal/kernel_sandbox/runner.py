"""One run: load a candidate and run its tests on kernels from a pool, turning the
harness's signed messages into an ``ExecutionReport``.

The fast path is one execute request for the load plus every test. After a crash or a
test the harness could not stop (the host kills the kernel), the run continues on a fresh
kernel with the candidate re-loaded, from the next test on, until the run budget is spent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.rewrite import decode_value, encode_value, rewrite_test, split_snippet
from selfheal.kernel_sandbox.types import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Limits,
    LoadResult,
    Outcome,
    ProbeCall,
    SandboxTest,
    SnippetResult,
    TestResult,
)

__all__ = ["KernelSource", "normalize_tests", "execute", "execute_snippet", "KILL_GRACE"]

KILL_GRACE = 0.5
"""Seconds past a limit after which the host kills a kernel whose harness did not stop
the code itself (code that swallows the harness's interrupt, or blocks signals)."""


class KernelSource(Protocol):
    """Where a run gets its kernels (``KernelPool``)."""

    def acquire(self, limits: Limits, deadline: float) -> SandboxKernel: ...

    def release(self, kernel: SandboxKernel) -> None: ...


def normalize_tests(tests: Sequence[str | SandboxTest]) -> list[SandboxTest]:
    """Plain strings become ``AssertTest(id=f"t{i}")``; test ids must be unique."""
    out: list[SandboxTest] = []
    for i, t in enumerate(tests):
        if isinstance(t, str):
            out.append(AssertTest(id=f"t{i}", code=t))
        elif isinstance(t, AssertTest | CallTest | ProbeCall):
            out.append(t)
        else:
            raise ConfigError(
                f"test {i} is a {type(t).__name__}; pass a string of assertions, an "
                "AssertTest, a CallTest or a ProbeCall"
            )
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"test ids must be unique, got {ids}; give each test its own id")
    return out


def _wire(t: SandboxTest) -> tuple[Any, ...]:
    if isinstance(t, AssertTest):
        try:
            code, wrapped = rewrite_test(t.code)
        except SyntaxError:
            code, wrapped = t.code, False  # the harness compiles it and reports the error
        return ("assert", t.id, code, wrapped)
    if isinstance(t, ProbeCall):
        return ("probe", t.id, t.expr)
    try:
        args = encode_value(tuple(t.args))
        kwargs = encode_value(dict(t.kwargs))
    except TypeError as e:
        raise ConfigError(f"CallTest {t.id!r}: {e}") from e
    return ("call", t.id, t.function, args, kwargs)


def _check_call(t: CallTest, r: TestResult, value: Any) -> TestResult:
    """Compare a CallTest's returned value with ``expected`` on the host."""
    call = (
        f"{t.function}("
        + ", ".join([repr(a) for a in t.args] + [f"{k}={v!r}" for k, v in t.kwargs.items()])
        + ")"
    )
    if not isinstance(value, tuple) or not value:
        return r.model_copy(update={"outcome": "error", "message": "no value came back"})
    if value[0] == "opaque":
        return r.model_copy(
            update={
                "outcome": "failed",
                "exc_type": "AssertionError",
                "message": f"{call} returned a {value[1]}, not a plain builtin value "
                f"({value[2]}); expected {t.expected!r}",
            }
        )
    actual = decode_value(value[1])
    if _plain_equal(actual, t.expected):
        return r
    return r.model_copy(
        update={
            "outcome": "failed",
            "exc_type": "AssertionError",
            "message": f"{call} returned {_short(actual)}, expected {_short(t.expected)}",
        }
    )


def _plain_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _short(v: Any, n: int = 300) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n] + "..."


def _result_from(m: tuple[Any, ...], test: SandboxTest) -> tuple[TestResult, Any]:
    _, _i, outcome, tn, msg, tb, out, err, trunc, dur, value = m
    r = TestResult(
        test_id=test.id,
        outcome=outcome,
        exc_type=tn,
        message=msg,
        traceback=tb,
        stdout=out,
        stderr=err,
        truncated=bool(trunc),
        duration=float(dur),
    )
    if isinstance(test, ProbeCall) and isinstance(value, tuple) and value and value[0] == "canon":
        r = r.model_copy(update={"value": str(value[1])})
    return r, value


def _load_from(m: tuple[Any, ...]) -> LoadResult:
    _, ok, outcome, tn, msg, line, tb, out, _trunc, _dur = m
    return LoadResult(
        ok=bool(ok),
        outcome=outcome,
        exc_type=tn,
        message=msg,
        line=line,
        traceback=tb,
        stdout=out,
    )


class _Run:
    """State of one run across one or more kernels."""

    def __init__(
        self,
        source: KernelSource,
        code: str,
        tests: list[SandboxTest],
        wire: list[tuple[Any, ...]],
        limits: Limits,
        mode: str,
    ) -> None:
        self.source = source
        self.code = code
        self.tests = tests
        self.wire = wire
        self.limits = limits
        self.mode = mode
        self.results: list[TestResult | None] = [None] * len(tests)
        self.values: list[Any] = [None] * len(tests)
        self.load: LoadResult | None = None
        self.restarts = 0
        self.budget_exhausted = False
        self.t0 = time.monotonic()
        self.run_deadline = self.t0 + limits.run_timeout

    def _set(self, i: int, outcome: Outcome, exc_type: str | None, message: str) -> None:
        if self.results[i] is None:
            self.results[i] = TestResult(
                test_id=self.tests[i].id, outcome=outcome, exc_type=exc_type, message=message
            )

    def _fill_rest(self, outcome: Outcome, exc_type: str | None, message: str) -> None:
        for i in range(len(self.tests)):
            self._set(i, outcome, exc_type, message)

    def go(self) -> None:
        start = 0
        while True:
            if start >= len(self.tests) and self.load is not None:
                return
            if time.monotonic() >= self.run_deadline:
                self._budget_spent(None)
                return
            first = self.load is None and start == 0 and self.restarts == 0
            kernel = self.source.acquire(self.limits, self.run_deadline)
            if first:
                # the budget covers the candidate's time, not waiting for a free kernel
                self.run_deadline = time.monotonic() + self.limits.run_timeout
            try:
                nxt = self._drive(kernel, start)
            finally:
                self.source.release(kernel)
            if nxt is None:
                return
            self.restarts += 1
            start = nxt

    def _budget_spent(self, current: int | None) -> None:
        self.budget_exhausted = True
        msg = f"the run's time budget ({self.limits.run_timeout}s) was spent before this test"
        if self.load is None:
            self.load = LoadResult(
                ok=False,
                outcome="timeout",
                exc_type="TimeoutError",
                message=f"the run's time budget ({self.limits.run_timeout}s) was spent "
                "while loading the candidate",
            )
        if current is not None:
            self._set(
                current,
                "timeout",
                "TimeoutError",
                f"stopped when the run's time budget ({self.limits.run_timeout}s) ran out",
            )
        self._fill_rest("timeout", "TimeoutError", msg)

    def _not_loaded(self) -> None:
        assert self.load is not None
        where = f" at line {self.load.line}" if self.load.line else ""
        self._fill_rest(
            "error",
            "CandidateNotLoaded",
            f"not run: the candidate did not load ({self.load.exc_type}{where}: "
            f"{self.load.message})",
        )

    def _drive(self, kernel: SandboxKernel, start: int) -> int | None:
        """Run from test ``start`` on ``kernel``. Returns the next test index if the run
        must continue on a fresh kernel, or None when it is finished."""
        lim = self.limits
        req = {
            "mode": self.mode,
            "code": self.code,
            "tests": self.wire,
            "start": start,
            "load_timeout": lim.load_timeout,
            "test_timeout": lim.test_timeout,
            "output_limit": lim.output_limit,
            "allow_network": lim.allow_network,
            "allow_subprocess": lim.allow_subprocess,
        }
        msg_id = kernel.send_request(req)
        loading = True
        current: int | None = None
        mark = time.monotonic()
        watch_procs = not kernel.cgroups.limits_processes
        while True:
            now = time.monotonic()
            if loading:
                limit_at = mark + lim.load_timeout + KILL_GRACE
            elif current is not None:
                limit_at = mark + lim.test_timeout + KILL_GRACE
            else:
                limit_at = mark + lim.test_timeout + KILL_GRACE  # harness between tests
            wait = max(0.0, min(0.25, limit_at - now, self.run_deadline - now))
            ev = kernel.next_event(msg_id, wait)
            if ev.kind == "message":
                m = ev.data
                kind = m[0]
                if kind == "load":
                    loading = False
                    mark = time.monotonic()
                    current = start if start < len(self.tests) else None
                    if self.load is None:
                        self.load = _load_from(m)
                        if not self.load.ok:
                            self._not_loaded()
                            return None
                    elif not m[1]:
                        self._fill_rest(
                            "error",
                            "CandidateNotLoaded",
                            "not run: the candidate did not load again after a kernel restart "
                            f"({m[3]}: {m[4]})",
                        )
                        return None
                elif kind == "result":
                    i = int(m[1])
                    r, value = _result_from(m, self.tests[i])
                    t = self.tests[i]
                    if isinstance(t, CallTest) and r.outcome == "passed":
                        r = _check_call(t, r, value)
                    self.results[i] = r
                    self.values[i] = value
                    # tests run in order and each result is sent as it ends: the next
                    # one is running now
                    current = i + 1 if i + 1 < len(self.tests) else None
                    mark = time.monotonic()
                elif kind == "done":
                    self._fill_rest(
                        "error", "SandboxError", "no verifiable result came back for this test"
                    )
                    return None
                elif kind == "internal":
                    self._fill_rest("error", "SandboxError", f"harness failure: {m[1]}")
                    return None
                continue
            if ev.kind == "replied":
                # the harness returned without its final signed message: never a pass
                if self.load is None:
                    self.load = LoadResult(
                        ok=False,
                        outcome="error",
                        exc_type="SandboxError",
                        message="the kernel finished without a verifiable load result",
                    )
                self._fill_rest(
                    "error", "SandboxError", "no verifiable result came back for this test"
                )
                return None
            if ev.kind == "dead":
                code = kernel.proc.returncode
                why = f"the kernel died (exit status {code})"
                return self._lost(current, loading, "crashed", "KernelDied", why)
            # idle: check limits
            now = time.monotonic()
            if watch_procs and kernel.process_count() > lim.max_processes:
                kernel.kill()
                why = f"the candidate exceeded {lim.max_processes} processes and was killed"
                return self._lost(current, loading, "crashed", "ProcessLimit", why)
            if now >= self.run_deadline:
                kernel.kill()
                self._budget_spent(current)
                return None
            if now >= limit_at:
                kernel.kill()
                if loading:
                    why = f"loading the candidate took over {lim.load_timeout}s and was killed"
                else:
                    why = f"the test took over {lim.test_timeout}s and was killed"
                return self._lost(current, loading, "timeout", "TimeoutError", why)

    def _lost(
        self, current: int | None, loading: bool, outcome: Outcome, exc_type: str, why: str
    ) -> int | None:
        """The kernel is gone: record it and say where to resume."""
        if loading:
            if self.load is None:
                self.load = LoadResult(ok=False, outcome=outcome, exc_type=exc_type, message=why)
                self._not_loaded()
            else:
                self._fill_rest("error", exc_type, f"not run: {why} while re-loading")
            return None
        if current is None:
            # between tests: blame the next test that has no result
            pending = [i for i, r in enumerate(self.results) if r is None]
            if not pending:
                return None
            current = pending[0]
        self._set(current, outcome, exc_type, why)
        nxt = current + 1
        return nxt if nxt < len(self.tests) else None

    def report(self) -> ExecutionReport:
        assert self.load is not None
        results = tuple(
            r
            if r is not None
            else TestResult(
                test_id=self.tests[i].id,
                outcome="error",
                exc_type="SandboxError",
                message="no verifiable result came back for this test",
            )
            for i, r in enumerate(self.results)
        )
        return ExecutionReport(
            load=self.load,
            results=results,
            kernel_restarts=self.restarts,
            duration=time.monotonic() - self.t0,
            budget_exhausted=self.budget_exhausted,
        )


def execute(
    source: KernelSource, code: str, tests: Sequence[str | SandboxTest], limits: Limits
) -> ExecutionReport:
    """Load ``code`` and run ``tests`` on kernels from ``source``."""
    norm = normalize_tests(tests)
    run = _Run(source, code, norm, [_wire(t) for t in norm], limits, "run")
    run.go()
    if run.load is None:  # no tests and nothing ran
        run.load = LoadResult(ok=True)
    return run.report()


def execute_snippet(source: KernelSource, code: str, setup: str, limits: Limits) -> SnippetResult:
    """Run ``setup`` as the candidate, then ``code``; report the last expression's value."""
    try:
        body, last = split_snippet(code)
    except SyntaxError as e:
        return SnippetResult(
            outcome="error",
            exc_type="SyntaxError",
            message=f"{e.msg} (line {e.lineno})",
        )
    test = AssertTest(id="snippet", code=code)
    run = _Run(source, setup, [test], [("snippet", "snippet", body, last)], limits, "run")
    run.go()
    assert run.load is not None
    if not run.load.ok:
        return SnippetResult(
            outcome="error" if run.load.outcome == "passed" else run.load.outcome,
            exc_type=run.load.exc_type,
            message=f"the setup code did not load: {run.load.message}",
            traceback=run.load.traceback,
            stdout=run.load.stdout,
        )
    r = run.report().results[0]
    value = run.values[0]
    shown = value[1] if isinstance(value, tuple) and value and value[0] == "repr" else None
    return SnippetResult(
        outcome=r.outcome,
        value=shown,
        stdout=r.stdout,
        stderr=r.stderr,
        exc_type=r.exc_type,
        message=r.message,
        traceback=r.traceback,
        duration=r.duration,
    )
