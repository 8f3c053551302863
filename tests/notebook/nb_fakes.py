"""A hand-written in-process ``Executor`` for the view tests.

The view tests check what the notebook shows for a run, not the sandbox (which has its own
tests); on a loaded 2-core machine real sandbox kernels make them slow and flaky. This fake
implements the ``Executor`` protocol for the mock's scripted candidates (known, harmless code)
the way the sandbox does, sharing its parts: the tests are numbered by the sandbox's own
``normalize_tests`` (``t0``, ``t1``...), assertions go through the sandbox's comparison
rewrite (``rewrite_test``) and its kernel-side helpers (a candidate object is never equal to a
plain value), a split test's values and a CallTest's value are judged by the host's own
``verdict.judge``/``check_call``, and the limits'
``load_timeout``/``test_timeout`` stop a runaway (``timeout`` outcome). It is not a sandbox:
no process, no containment. Never use it for untrusted code, nor where a test is about the
user's tests reaching the sandbox (those use the real ``KernelPool``).
``tests/sandbox/test_fakes_conform.py`` holds it to the real sandbox's reports.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from selfheal._sync import sync_twin
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox._canon import canonical, raised
from selfheal.kernel_sandbox._harness.compare import (
    APPROX_EQ,
    assert_,
    assert_cmp,
    cmp,
    truth,
)
from selfheal.kernel_sandbox._harness.pytest_item import pt_install, pt_run
from selfheal.kernel_sandbox._wire import encode_result
from selfheal.kernel_sandbox.execution import in_process, normalize_tests
from selfheal.kernel_sandbox.rewrite import rewrite_test
from selfheal.kernel_sandbox.split import shadowing, split_test
from selfheal.kernel_sandbox.types import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Limits,
    LoadResult,
    ProbeCall,
    SandboxTest,
    SnippetResult,
    TestResult,
)
from selfheal.kernel_sandbox.verdict import check_call, judge


def _pytest_item(op: str, *args: Any) -> None:
    """The harness's pytest-item runner; collection needs the real sandbox (it writes the
    module to the run's folder)."""
    if op != "run":
        raise NotImplementedError("collect pytest modules in the real sandbox (KernelPool)")
    pt_run(*args)


pt_install(APPROX_EQ)
HELPERS = {
    "__sh_cmp__": cmp,
    "__sh_assert__": assert_,
    "__sh_assert_cmp__": assert_cmp,
    "__sh_truth__": truth,
    "__sh_pytest__": _pytest_item,
}
"""The kernel-side helpers the rewritten tests call (as the sandbox's harness gives them)."""


class _Timeout(BaseException):
    """Raised into code that ran past its limit (a BaseException: ``except Exception`` in the
    candidate does not swallow it)."""


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, stopped with :class:`_Timeout` once it has run ``seconds`` (checked on every
    line and call of Python code it runs in this thread)."""
    deadline = time.monotonic() + seconds

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _Timeout
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn()
    finally:
        sys.settrace(previous)


def _failure(tid: str, exc: BaseException, started: float, limit: float) -> TestResult:
    duration = time.perf_counter() - started
    if isinstance(exc, _Timeout):
        return TestResult(
            test_id=tid,
            outcome="timeout",
            exc_type="TimeoutError",
            message=f"the test took over {limit}s and was stopped",
            duration=duration,
        )
    return TestResult(
        test_id=tid,
        outcome="failed" if isinstance(exc, AssertionError) else "error",
        exc_type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception_only(type(exc), exc)),
        duration=duration,
    )


def _assert_test(t: AssertTest, ns: dict[str, Any], code: str) -> Any:
    """Run ``t``; for a split test return its candidate side's values (the host judges)."""
    split = split_test(t.code, shadowing(code))
    if split is not None:
        kept: list[Any] = []

        def keep(thunk: Callable[[], Any]) -> None:
            try:
                kept.append(("v", encode_result(thunk())))
            except Exception as exc:
                kept.append(("x", type(exc).__name__, str(exc), ""))

        tns = dict(ns)
        exec(compile(split.wrapped, f"<test {t.id}>", "exec"), tns)
        tns.pop("__sh_test__")(keep)
        return ("vals", kept)
    try:
        code, wrapped = rewrite_test(t.code)
    except SyntaxError:
        code, wrapped = t.code, False
    tns = {**ns, **HELPERS}
    exec(compile(code, f"<test {t.id}>", "exec"), tns)
    if wrapped:
        tns.pop("__sh_test__")(*HELPERS.values())
    return None


class InProcessExecutor:
    """Runs scripted (trusted) candidates in this process. Implements ``Executor``."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.runs = 0

    _limits = KernelPool._limits
    """The pool's own rule: ``limits`` or the executor's, ``timeout`` the per-test limit."""

    def _load(self, code: str, limit: float) -> tuple[dict[str, Any], LoadResult]:
        ns: dict[str, Any] = {}
        try:
            _within(limit, lambda: exec(compile(code, "<candidate>", "exec"), ns))
        except _Timeout:
            return ns, LoadResult(
                ok=False,
                exc_type="TimeoutError",
                message=f"loading took over {limit}s",
                outcome="timeout",
            )
        except Exception as exc:
            return ns, LoadResult(
                ok=False, exc_type=type(exc).__name__, message=str(exc), outcome="error"
            )
        return ns, LoadResult(ok=True)

    async def arun(
        self,
        code: str,
        tests: Sequence[str | SandboxTest],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> ExecutionReport:
        """The ``Executor`` protocol: trusted scripted code, run here (awaiting nothing)."""
        self.runs += 1
        lim = self._limits(timeout, limits)
        norm = [in_process(t) for t in normalize_tests(tests)]  # (pytest items: in its process)
        t0 = time.perf_counter()
        ns, load = self._load(code, lim.load_timeout)
        if not load.ok:  # every test reported as not run, as the sandbox does
            why = f"not run: the candidate did not load ({load.exc_type}: {load.message})"
            results = tuple(
                TestResult(
                    test_id=t.id, outcome="error", exc_type="CandidateNotLoaded", message=why
                )
                for t in norm
            )
            return ExecutionReport(load=load, results=results, duration=time.perf_counter() - t0)
        results = [self._one(t, ns, lim.test_timeout, code) for t in norm]
        return ExecutionReport(load=load, results=tuple(results), duration=time.perf_counter() - t0)

    run = sync_twin(arun)

    def _one(self, t: SandboxTest, ns: dict[str, Any], limit: float, code: str) -> TestResult:
        started = time.perf_counter()
        try:
            if isinstance(t, ProbeCall):
                expr = compile(t.expr, f"<test {t.id}>", "eval")
                value = _within(limit, lambda: canonical(eval(expr, dict(ns))))
                return TestResult(test_id=t.id, outcome="passed", value=value)
            if isinstance(t, CallTest):
                fn = ns.get(t.function)
                if fn is None:
                    raise NameError(f"the candidate defines no {t.function!r}")
                value = ("enc", encode_result(_within(limit, lambda: fn(*t.args, **t.kwargs))))
                passed = TestResult(
                    test_id=t.id, outcome="passed", duration=time.perf_counter() - started
                )
                return check_call(t, passed, value)
            values = _within(limit, lambda: _assert_test(t, ns, code))
            if values is not None:
                passed = TestResult(
                    test_id=t.id, outcome="passed", duration=time.perf_counter() - started
                )
                split = split_test(t.code, shadowing(code))
                assert split is not None
                return judge(split, passed, values)
        except BaseException as exc:
            result = _failure(t.id, exc, started, limit)
            if isinstance(t, ProbeCall) and result.outcome != "timeout":
                return result.model_copy(
                    update={"outcome": "error", "value": raised(type(exc).__name__)}
                )
            return result
        return TestResult(test_id=t.id, outcome="passed", duration=time.perf_counter() - started)

    async def arun_snippet(
        self,
        code: str,
        *,
        setup: str = "",
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> SnippetResult:
        lim = self._limits(timeout, limits)
        ns: dict[str, Any] = {}
        try:
            _within(lim.load_timeout, lambda: exec(setup, ns))
            _within(lim.test_timeout, lambda: exec(code, ns))
        except _Timeout:
            return SnippetResult(outcome="timeout", exc_type="TimeoutError")
        except Exception as exc:
            return SnippetResult(outcome="error", exc_type=type(exc).__name__, message=str(exc))
        return SnippetResult(outcome="passed")
