"""One run: load a candidate and run its tests on kernels from a pool (see ``_run.py``),
and the host-side preparation of tests (normalising, rewriting, encoding)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox._harness.capture import clip
from selfheal.kernel_sandbox._run import KernelRun, KernelSource
from selfheal.kernel_sandbox._wire import encode_value
from selfheal.kernel_sandbox.candidate_calls import CandidateCalls
from selfheal.kernel_sandbox.pytest_process import PytestRun, not_loaded
from selfheal.kernel_sandbox.rewrite import pytest_item_test, rewrite_test, split_snippet
from selfheal.kernel_sandbox.split import shadowing, split_test
from selfheal.kernel_sandbox.traces import read_steps
from selfheal.kernel_sandbox.types import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Limits,
    LoadResult,
    ProbeCall,
    PytestItem,
    SandboxTest,
    SnippetResult,
    TestResult,
    TraceLimits,
    TraceResult,
)


def normalize_tests(tests: Sequence[str | SandboxTest]) -> list[SandboxTest]:
    """Plain strings become ``AssertTest(id=f"t{i}")``; test ids must be unique."""
    out: list[SandboxTest] = []
    for i, t in enumerate(tests):
        if isinstance(t, str):
            out.append(AssertTest(id=f"t{i}", code=t))
        elif isinstance(t, AssertTest | CallTest | ProbeCall | PytestItem):
            out.append(t)
        else:
            raise ConfigError(
                f"test {i} is a {type(t).__name__}; pass a string of assertions, an "
                "AssertTest, a CallTest, a ProbeCall or a PytestItem"
            )
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"test ids must be unique, got {ids}; give each test its own id")
    return out


def in_process(t: SandboxTest) -> SandboxTest:
    """A pytest item as a test run whole in the candidate's process by the harness's own
    runner (``Limits.pytest_tests="in_process"``); any other test as it is."""
    if isinstance(t, PytestItem):
        return AssertTest(id=t.id, code=pytest_item_test(t.module, t.cls, t.func, t.k))
    return t


def _wire(t: SandboxTest, shadowed: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    assert not isinstance(t, PytestItem)  # (run by ``pytest_process.py``, or in_process)
    if isinstance(t, AssertTest):
        split = split_test(t.code, shadowed)
        if split is not None:
            return ("values", t.id, split.wrapped)
        try:
            code, wrapped = rewrite_test(t.code)
        except SyntaxError:
            code, wrapped = t.code, False  # the harness compiles it and reports the error
        return ("assert", t.id, code, wrapped)
    if isinstance(t, ProbeCall):
        return ("probe", t.id, t.expr, t.setup)
    try:
        args = encode_value(tuple(t.args))
        kwargs = encode_value(dict(t.kwargs))
    except TypeError as e:
        raise ConfigError(f"CallTest {t.id!r}: {e}") from e
    return ("call", t.id, t.function, args, kwargs)


InputFiles = Mapping[str, "str | os.PathLike[str] | bytes"]
"""Files for a run's folder: a plain file name -> a host path to copy, or the bytes."""


def input_files(files: InputFiles | None, limits: Limits) -> tuple[tuple[str, bytes], ...]:
    """``files`` read on the host, checked (plain names, existing files, each within the
    file-size limit, all within the run folder's size); ``ConfigError`` otherwise."""
    out = []
    total = 0  # what they take in the run's folder: whole 4 KiB pages
    for name, src in (files or {}).items():
        if not name or "/" in name or "\\" in name or name in (".", "..", ".tmp"):
            raise ConfigError(
                f"input file name {name!r}: use a plain file name (it lands in the run's folder)"
            )
        try:
            data = src if isinstance(src, bytes) else Path(src).read_bytes()
        except OSError as e:
            raise ConfigError(f"input file {name!r}: cannot read {src!s} ({e})") from e
        if len(data) > limits.max_file_size_mb * 1024 * 1024:
            raise ConfigError(
                f"input file {name!r} is larger than max_file_size_mb={limits.max_file_size_mb}"
            )
        total += -(-len(data) // 4096) * 4096
        if total > limits.disk_mb * 1024 * 1024:
            raise ConfigError(
                f"the input files take more than disk_mb={limits.disk_mb} MiB, the size of "
                "the run's folder: pass fewer or smaller files, or a larger Limits.disk_mb"
            )
        out.append((name, data))
    return tuple(out)


async def run_candidate(
    source: KernelSource,
    code: str,
    tests: Sequence[str | SandboxTest],
    limits: Limits,
    files: tuple[tuple[str, bytes], ...] = (),
) -> ExecutionReport:
    """Load ``code`` and run ``tests`` on kernels from ``source``, with ``files`` (from
    ``input_files``) in the run's folder; cancelled, the candidate's process is killed."""
    norm = normalize_tests(tests)
    if limits.pytest_tests == "in_process":
        norm = [in_process(t) for t in norm]
    items = [t for t in norm if isinstance(t, PytestItem)]
    rest: list[SandboxTest] = [t for t in norm if not isinstance(t, PytestItem)]
    shadowed = shadowing(code)
    splits = [split_test(t.code, shadowed) if isinstance(t, AssertTest) else None for t in rest]
    run = KernelRun(source, code, rest, [_wire(t, shadowed) for t in rest], limits, files, splits)
    if rest or not items:
        await run.go()
    if run.load is None:  # no tests and nothing ran
        run.load = LoadResult(ok=True)
    report = run.report()
    if not items:
        return report
    return await with_pytest_items(source, code, items, norm, report, limits, files)


async def with_pytest_items(
    source: KernelSource,
    code: str,
    items: list[PytestItem],
    order: list[SandboxTest],
    report: ExecutionReport,
    limits: Limits,
    files: tuple[tuple[str, bytes], ...],
) -> ExecutionReport:
    """``report`` (of the other tests) with the pytest ``items`` run in a separate process
    (``pytest_process.py``), the results in the order of ``order``."""
    t0 = time.monotonic()
    calls = CandidateCalls(source, code, limits, files)
    results: dict[str, TestResult] = {r.test_id: r for r in report.results}
    load, exhausted, boundary = report.load, report.budget_exhausted, report.boundary
    try:
        if report.load.ok:
            first = await calls.start(t0 + limits.run_timeout)
            if not report.results:  # the items alone: this is the run's load
                load = first
            boundary = calls.boundary or boundary
            if first.ok:
                prun = PytestRun(source, items, calls, t0 + limits.run_timeout)
                await prun.go()
                results |= prun.results
                exhausted = exhausted or prun.budget_exhausted
            else:
                results |= {r.test_id: r for r in not_loaded(items, first)}
        else:
            results |= {r.test_id: r for r in not_loaded(items, report.load)}
    finally:
        await calls.close()
    return ExecutionReport(
        load=load,
        results=tuple(results[t.id] for t in order),
        kernel_restarts=report.kernel_restarts + calls.restarts,
        duration=report.duration + time.monotonic() - t0,
        budget_exhausted=exhausted,
        boundary=boundary,
    )


async def run_snippet(source: KernelSource, code: str, setup: str, limits: Limits) -> SnippetResult:
    """Run ``setup`` as the candidate, then ``code``; report the last expression's value."""
    try:
        body, last = split_snippet(code)
    except SyntaxError as e:
        return SnippetResult(
            outcome="error", exc_type="SyntaxError", message=f"{e.msg} (line {e.lineno})"
        )
    test = AssertTest(id="snippet", code=code)
    run = KernelRun(source, setup, [test], [("snippet", "snippet", body, last)], limits)
    await run.go()
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
    ok = isinstance(value, tuple) and value and value[0] == "repr"
    shown = clip(value[1], 16000, 8000) if ok else None  # (cut in the kernel at 4,000)
    copied = {"outcome", "stdout", "stderr", "exc_type", "message", "traceback", "duration"}
    return SnippetResult(value=shown, **r.model_dump(include=copied))


async def run_trace(
    source: KernelSource,
    code: str,
    test: str | AssertTest | ProbeCall,
    limits: Limits,
    trace: TraceLimits,
) -> TraceResult:
    """Load ``code``, then run ``test`` (statements, or a probe's expression) with the
    candidate's lines traced; see ``_harness/trace.py``."""
    if isinstance(test, str):
        test = AssertTest(id="t0", code=test)
    body = test.code if isinstance(test, AssertTest) else f"{test.setup}\n{test.expr}".strip()
    try:
        wired, wrapped = rewrite_test(body)
    except SyntaxError as e:
        return TraceResult(
            test_id=test.id,
            outcome="error",
            exc_type="SyntaxError",
            message=f"{e.msg} (line {e.lineno})",
        )
    settings = (trace.head, trace.tail, trace.value_chars, trace.max_values, trace.max_total)
    stand_in = AssertTest(id=test.id, code=body)
    run = KernelRun(
        source, code, [stand_in], [("trace", test.id, wired, wrapped, settings)], limits
    )
    await run.go()
    assert run.load is not None
    if not run.load.ok:
        return TraceResult(
            test_id=test.id,
            outcome="error" if run.load.outcome == "passed" else run.load.outcome,
            exc_type=run.load.exc_type,
            message=f"the candidate did not load: {run.load.message}",
            loaded=False,
        )
    r = run.report().results[0]
    copied = {"outcome", "exc_type", "message", "stdout", "duration"}
    return TraceResult(test_id=test.id, **r.model_dump(include=copied), **read_steps(run.values[0]))
