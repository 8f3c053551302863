"""The state of one run across one or more candidate processes: it turns the harness's
signed messages into results and enforces the limits from the host. After a crash, or a
test the harness could not stop, the run goes on from the next test in a fresh process
(docs/sandbox.md, "How a run works", step 4)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from selfheal.kernel_sandbox._harness.capture import NAME_CAP, clip
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.split import SplitTest
from selfheal.kernel_sandbox.types import (
    CallTest,
    ExecutionReport,
    Limits,
    LoadResult,
    Outcome,
    ProbeCall,
    SandboxTest,
    TestResult,
)
from selfheal.kernel_sandbox.verdict import check_call, judge

KILL_GRACE = 0.5
"""Seconds past a limit after which the host kills the process of a run whose harness did
not stop the code itself (code that swallows the harness's interrupt, or blocks signals)."""
EXIT_GRACE = 2.0
"""Seconds the host waits for the harness to report a run's process gone after the host
killed it, before it gives up on the kernel."""
_NO_RESULT = "no verifiable result came back for this test"
_PER_REQUEST = {
    "load_timeout",
    "test_timeout",
    "output_limit",
    "disk_mb",
    "allow_network",
    "allow_subprocess",
}
"""The limits each request carries (the kernel's process carries the others)."""


class KernelSource(Protocol):
    """Where a run gets its kernels (``KernelPool``), on the event loop the run awaits on."""

    async def acquire(self, limits: Limits, deadline: float) -> SandboxKernel: ...

    async def release(self, kernel: SandboxKernel) -> None: ...


_TEXT_CAP = 16000
"""Characters the host keeps of a message, a traceback or a value's text from a kernel
(the kernel cuts them shorter; a line forged with the key is cut here)."""


def _text(s: Any, n: int = _TEXT_CAP) -> str:
    return clip(s, n, n // 2)


def _name(s: Any) -> str | None:
    return None if s is None else clip(s, NAME_CAP)


def _result_from(
    m: tuple[Any, ...], test: SandboxTest, output_limit: int
) -> tuple[TestResult, Any]:
    """A test's result from its message, every string cut to its cap."""
    _, _i, outcome, tn, msg, tb, out, err, trunc, dur, value = m
    canon = None
    if isinstance(test, ProbeCall) and isinstance(value, tuple) and value and value[0] == "canon":
        canon = _text(value[1])
    r = TestResult(
        test_id=test.id,
        outcome=outcome,
        exc_type=_name(tn),
        message=_text(msg),
        traceback=_text(tb),
        stdout=clip(out, output_limit),
        stderr=clip(err, output_limit),
        truncated=bool(trunc),
        duration=float(dur),
        value=canon,
    )
    return r, value


def _load_from(m: tuple[Any, ...], output_limit: int) -> LoadResult:
    _, ok, outcome, tn, msg, line, tb, out, _trunc, _dur = m
    return LoadResult(
        ok=bool(ok),
        outcome=outcome,
        exc_type=_name(tn),
        message=_text(msg),
        line=line,
        traceback=_text(tb),
        stdout=clip(out, output_limit),
    )


async def _gone(kernel: SandboxKernel, seq: int) -> bool:
    """True once the harness says the killed process of run ``seq`` is gone."""
    end = time.monotonic() + EXIT_GRACE
    while (left := end - time.monotonic()) > 0:
        ev = await kernel.next_event(seq, min(left, 0.25))
        if ev.kind in ("dead", "replied"):
            return False
        if ev.kind == "message" and ev.data[0] in ("exit", "done"):
            return True
    return False


class KernelRun:
    """State of one run across one or more candidate processes."""

    def __init__(
        self,
        source: KernelSource,
        code: str,
        tests: list[SandboxTest],
        wire: list[tuple[Any, ...]],
        limits: Limits,
        files: tuple[tuple[str, bytes], ...] = (),
        splits: list[SplitTest | None] | None = None,
    ) -> None:
        self.source = source
        self.splits = splits or [None] * len(tests)  # tests judged on the host (split.py)
        self.files = files  # written into the run's folder before the candidate loads
        self.code = code
        self.tests = tests
        self.wire = wire
        self.limits = limits
        self.results: list[TestResult | None] = [None] * len(tests)
        self.values: list[Any] = [None] * len(tests)
        self.load: LoadResult | None = None
        self.restarts = 0
        self._seq = self._child = 0  # the request in flight: its number, its process id
        self.boundary = ""  # what the kernel that ran it enforced (its report says so)
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

    async def go(self) -> None:
        start = 0
        while True:
            if start >= len(self.tests) and self.load is not None:
                return
            if time.monotonic() >= self.run_deadline:
                self._budget_spent(None)
                return
            first = self.load is None and start == 0 and self.restarts == 0
            kernel = await self.source.acquire(self.limits, self.run_deadline)
            self.boundary = kernel.boundary_text
            if first:
                # the budget covers the candidate's time, not waiting for a free kernel
                self.run_deadline = time.monotonic() + self.limits.run_timeout
            try:
                nxt = await self._drive(kernel, start)
            finally:
                await self.source.release(kernel)
            if nxt is None:
                return
            self.restarts += 1
            start = nxt

    def _budget_spent(self, current: int | None) -> None:
        self.budget_exhausted = True
        budget = self.limits.run_timeout
        if self.load is None:
            self.load = LoadResult(
                ok=False,
                outcome="timeout",
                exc_type="TimeoutError",
                message=f"the run's time budget ({budget}s) was spent while loading the candidate",
            )
        if current is not None:
            why = f"stopped when the run's time budget ({budget}s) ran out"
            self._set(current, "timeout", "TimeoutError", why)
        why = f"the run's time budget ({budget}s) was spent before this test"
        self._fill_rest("timeout", "TimeoutError", why)

    def _not_loaded(self) -> None:
        assert self.load is not None
        where = f" at line {self.load.line}" if self.load.line else ""
        why = f"{self.load.exc_type}{where}: {self.load.message}"
        self._fill_rest(
            "error", "CandidateNotLoaded", f"not run: the candidate did not load ({why})"
        )

    async def _drive(self, kernel: SandboxKernel, start: int) -> int | None:
        """Run from test ``start`` on ``kernel``. Returns the next test index if the run
        must continue in a fresh process, or None when it is finished. Cancelled, it kills
        the run's process and waits (``EXIT_GRACE`` s) for the harness to say it is gone,
        so the kernel serves the next run; else the kernel is retired (killed, replaced)."""
        self._seq = self._child = 0
        try:
            return await self._serve(kernel, start)
        except asyncio.CancelledError:
            if self._child:
                kernel.kill_child(self._child)
            if not self._child or not await _gone(kernel, self._seq):
                kernel.retire()
            raise

    async def _serve(self, kernel: SandboxKernel, start: int) -> int | None:
        lim = self.limits
        req = {"code": self.code, "tests": self.wire, "start": start, "files": self.files}
        req |= lim.model_dump(include=_PER_REQUEST)
        self._seq = seq = await kernel.send_request(req)
        loading = True
        current: int | None = None
        # after the host killed the run's process: (outcome, exc_type, why), or "budget"
        pending: tuple[Outcome, str, str] | str | None = None
        mark = time.monotonic()
        watch_procs = not kernel.cgroups.limits_processes
        while True:
            now = time.monotonic()
            if pending is not None:
                limit_at = mark + EXIT_GRACE
            elif loading:
                limit_at = mark + lim.load_timeout + KILL_GRACE
            else:
                limit_at = mark + lim.test_timeout + KILL_GRACE
            deadline = limit_at if pending is not None else min(limit_at, self.run_deadline)
            ev = await kernel.next_event(seq, max(0.0, min(0.25, deadline - now)))
            if ev.kind == "message":
                m = ev.data
                kind = m[0]
                if kind == "start":
                    self._child = int(m[1])
                elif kind == "load":
                    loading = False
                    mark = time.monotonic()
                    current = start if start < len(self.tests) else None
                    if self.load is None:
                        self.load = _load_from(m, lim.output_limit)
                        if not self.load.ok:
                            self._not_loaded()
                    elif not m[1]:
                        self._fill_rest(
                            "error",
                            "CandidateNotLoaded",
                            "not run: the candidate did not load again in a fresh process "
                            f"({_name(m[3])}: {_text(m[4], 2000)})",
                        )
                elif kind == "result":
                    i = int(m[1])
                    t = self.tests[i]
                    r, value = _result_from(m, t, lim.output_limit)
                    if isinstance(t, CallTest) and r.outcome == "passed":
                        r = check_call(t, r, value)
                    elif (split := self.splits[i]) is not None and r.outcome == "passed":
                        r = judge(split, r, value)
                    self.results[i] = r
                    self.values[i] = value
                    # tests run in order and each result is sent as it ends: the next
                    # one is running now
                    current = i + 1 if i + 1 < len(self.tests) else None
                    mark = time.monotonic()
                elif kind == "done":
                    # every result is in (``report`` marks a missing one); the harness reaps
                    # the process and serves the next request once all of this one is gone
                    return None
                elif kind == "exit":
                    if pending is None:
                        why = f"the candidate's process died (exit status {m[1]})"
                        pending = ("crashed", "KernelDied", why)
                    return self._resolve(pending, current, loading)
                elif kind == "internal":
                    kernel.retire()
                    self._harness_failed(f"harness failure: {_text(m[1], 2000)}")
                    return None
                continue
            if ev.kind == "replied":
                kernel.retire()
                self._harness_failed(_NO_RESULT)
                return None
            if ev.kind == "dead":
                if pending is None:
                    why = f"the kernel died (exit status {kernel.proc.returncode})"
                    pending = ("crashed", "KernelDied", why)
                return self._resolve(pending, current, loading)
            # idle: check limits
            now = time.monotonic()
            if pending is not None:
                if now >= limit_at:  # the harness did not report the process gone
                    kernel.retire()
                    await kernel.akill()
                    return self._resolve(pending, current, loading)
                continue
            if ev.kind == "flooded":  # over the result pipe's caps (``_frames.py``)
                pending = ("error", "ChannelFlood", str(ev.data[0]))
            elif watch_procs and kernel.process_count() > lim.max_processes:
                why = f"the candidate exceeded {lim.max_processes} processes and was killed"
                pending = ("crashed", "ProcessLimit", why)
            elif now >= self.run_deadline:
                pending = "budget"
            elif now >= limit_at:
                if loading:
                    why = f"loading the candidate took over {lim.load_timeout}s and was killed"
                else:
                    why = f"the test took over {lim.test_timeout}s and was killed"
                pending = ("timeout", "TimeoutError", why)
            else:
                continue
            mark = time.monotonic()
            if self._child:
                kernel.kill_child(self._child)
            else:  # it never said which process it is: take the whole kernel down
                kernel.retire()
                await kernel.akill()

    def _harness_failed(self, why: str) -> None:
        if self.load is None:
            self.load = LoadResult(
                ok=False,
                outcome="error",
                exc_type="SandboxError",
                message="the kernel finished without a verifiable load result",
            )
        self._fill_rest("error", "SandboxError", why)

    def _resolve(
        self, pending: tuple[Outcome, str, str] | str | None, current: int | None, loading: bool
    ) -> int | None:
        """The run's process is gone: record why and say where to resume."""
        if pending == "budget":
            self._budget_spent(current)
            return None
        assert isinstance(pending, tuple)
        outcome, exc_type, why = pending
        if loading:
            if self.load is None:
                self.load = LoadResult(ok=False, outcome=outcome, exc_type=exc_type, message=why)
                self._not_loaded()
            else:
                self._fill_rest("error", exc_type, f"not run: {why} while re-loading")
            return None
        if current is None:
            # between tests: blame the next test that has no result
            pending_tests = [i for i, r in enumerate(self.results) if r is None]
            if not pending_tests:
                return None
            current = pending_tests[0]
        self._set(current, outcome, exc_type, why)
        nxt = current + 1
        return nxt if nxt < len(self.tests) else None

    def report(self) -> ExecutionReport:
        assert self.load is not None
        self._fill_rest("error", "SandboxError", _NO_RESULT)
        return ExecutionReport(
            load=self.load,
            results=tuple(r for r in self.results if r is not None),
            kernel_restarts=self.restarts,
            duration=time.monotonic() - self.t0,
            budget_exhausted=self.budget_exhausted,
            boundary=self.boundary,
        )
