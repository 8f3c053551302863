"""Records the kernel sandbox takes and returns, and the executor Protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from selfheal._record import Record
from selfheal._sync import sync_twin

Outcome = Literal["passed", "failed", "error", "timeout", "crashed"]
"""How one test ended: ``passed``; ``failed`` (an assertion or a wrong value); ``error``
(another exception); ``timeout`` (went over its limit); ``crashed`` (the kernel died)."""


class AssertTest(Record):
    """A test written as Python statements, usually ``assert`` lines."""

    kind: Literal["assert"] = "assert"
    """Discriminator."""
    id: str
    """Stable identifier, reported back in the matching ``TestResult``."""
    code: str
    """The statements to run after the candidate is loaded, e.g. ``assert f(2) == 4``."""


class CallTest(Record):
    """A test as a call and the value it must return, compared on the host."""

    kind: Literal["call"] = "call"
    """Discriminator."""
    id: str
    """Stable identifier, reported back in the matching ``TestResult``."""
    function: str
    """Name of the function to call in the candidate's namespace."""
    args: tuple[Any, ...] = ()
    """Positional arguments (JSON-able or Python literals)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments."""
    expected: Any = None
    """The value the call must return (compared structurally on the host)."""


class ProbeCall(Record):
    """A probe: an expression evaluated after the candidate loads; its value comes back in
    canonical form (``TestResult.value``) so candidates can be compared by behaviour."""

    kind: Literal["probe"] = "probe"
    """Discriminator."""
    id: str
    """Stable identifier, reported back in the matching ``TestResult``."""
    expr: str
    """A Python expression evaluated in the candidate's namespace, e.g. ``f([3, 1], k=2)``."""
    setup: str = ""
    """Import lines run in the probe's own namespace first (``from datetime import date`` for
    ``f(date(2024, 3, 5))``), so an input built from a constructor does not depend on what the
    candidate imported."""


class PytestItem(Record):
    """One item of a pytest module you gave (collected by ``selfheal.usertests``). Run by
    pytest in a separate, trusted process, the candidate's code called in its own process,
    or in the candidate's process (``Limits.pytest_tests``; docs/sandbox.md)."""

    kind: Literal["pytest"] = "pytest"
    """Discriminator."""
    id: str
    """Stable identifier, reported back in the matching ``TestResult``."""
    module: str
    """The module's text (its imports of the code under test read ``candidate``)."""
    nodeid: str
    """pytest's id of the item within the module: ``test_even``, ``TestMedian::test_empty``,
    ``test_many[even]``."""
    cls: str | None = None
    """The item's class, if any."""
    func: str
    """The test function's name."""
    k: int = 0
    """The index of its parameter set (the in-process runner finds it again by it)."""


SandboxTest = AssertTest | CallTest | ProbeCall | PytestItem


class Limits(Record):
    """Resource limits for one run. Defaults suit small utility functions."""

    test_timeout: float = Field(default=5.0, gt=0, le=600, allow_inf_nan=False)
    """Seconds one test may take before it is interrupted and reported as ``timeout``."""
    run_timeout: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    """Seconds the whole run (candidate load plus all tests) may take."""
    load_timeout: float = 10.0
    """Seconds loading the candidate (its top-level code) may take."""
    memory_mb: int = Field(default=2048, ge=64)
    """Address-space / cgroup memory limit of the kernel, in MiB."""
    cpu_seconds: int = 120
    """CPU-time limit of the kernel process (RLIMIT_CPU)."""
    max_processes: int = 64
    """Most processes the kernel's tree may hold (cgroup pids.max, or watched and killed)."""
    max_file_size_mb: int = 64
    """Largest file the candidate may write (RLIMIT_FSIZE), in MiB."""
    max_open_files: int = 256
    """Most open file descriptors (RLIMIT_NOFILE)."""
    output_limit: int = 64 * 1024
    """Bytes of stdout/stderr kept per test; the rest is dropped and marked truncated."""
    disk_mb: int = Field(default=256, ge=1, le=1024 * 1024)
    """Total size of the run's folder in MiB (a tmpfs of this size mounted on it, files
    passed with ``files=`` included): writing past it raises ``OSError`` (``ENOSPC``) in
    the candidate, and the host's disk is not touched. Needs a mount namespace for the
    kernel (the host runs as root); without one only ``max_file_size_mb`` bounds a file."""
    allow_network: bool = False
    """Let candidates open sockets (blocked by default)."""
    allow_subprocess: bool = False
    """Let candidates start processes (blocked by default)."""
    pytest_tests: Literal["separate_process", "in_process"] = "separate_process"
    """Where your pytest-form tests run: ``separate_process``, pytest in a trusted process
    of its own calling the candidate's code in the candidate's process (a candidate cannot
    reach the verdict); ``in_process``, in the candidate's process, as the harness's items
    (cheaper; a candidate that walks stack frames can forge them). docs/sandbox.md."""


class TestResult(Record):
    """What happened to one test."""

    __test__ = False  # not a pytest class

    test_id: str
    """The ``id`` of the test."""
    outcome: Outcome
    """How the test ended."""
    exc_type: str | None = None
    """Exception class name, e.g. ``AssertionError``, if any."""
    message: str = ""
    """Exception message, or a description of the mismatch for host-side comparisons."""
    traceback: str = ""
    """Traceback trimmed to the candidate's and the test's frames."""
    stdout: str = ""
    """Captured standard output (capped)."""
    stderr: str = ""
    """Captured standard error (capped)."""
    truncated: bool = False
    """True if output was cut at ``Limits.output_limit``."""
    duration: float = 0.0
    """Seconds the test ran."""
    value: str | None = None
    """For a ``ProbeCall``: the canonical form of the value, for comparing candidates (equal
    values give equal text across implementations; ``raise <ExcType>`` when the call
    raised; ``None`` on a timeout, a crash, or when the candidate did not load)."""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


class LoadResult(Record):
    """Whether the candidate's own code loaded (ran its top level) without error."""

    ok: bool
    """True if the candidate loaded."""
    exc_type: str | None = None
    """``SyntaxError``, ``ImportError``, ``ModuleNotFoundError``, ... when it did not."""
    message: str = ""
    """The exception message."""
    line: int | None = None
    """Line of the candidate where loading failed, when known."""
    traceback: str = ""
    """Trimmed traceback."""
    stdout: str = ""
    """Output printed while loading (capped)."""
    outcome: Outcome = "passed"
    """``passed`` if it loaded; otherwise how loading ended (error, timeout, crashed)."""


class ExecutionReport(Record):
    """The verdict on one candidate against a list of tests."""

    load: LoadResult
    """Whether the candidate itself loaded."""
    results: tuple[TestResult, ...] = ()
    """One result per test, in the order given."""
    kernel_restarts: int = 0
    """How many times the run went on in a fresh process (the candidate re-loaded) after a
    crash or a test the host had to kill."""
    duration: float = 0.0
    """Seconds for the whole run."""
    budget_exhausted: bool = False
    """True if the run's time budget ran out before every test ran (the rest are ``timeout``)."""
    boundary: str = ""
    """The boundary the operating system enforced around the run, as the kernel reported it
    (``landlock (ABI 7)``, ``fallback (mount namespace, seccomp)``, ``off``); empty from an
    executor that does not say."""

    @property
    def passed(self) -> bool:
        """True only if the candidate loaded and every test passed."""
        return self.load.ok and all(r.outcome == "passed" for r in self.results)

    @property
    def failures(self) -> tuple[TestResult, ...]:
        return tuple(r for r in self.results if r.outcome != "passed")

    def result_for(self, test_id: str) -> TestResult | None:
        return next((r for r in self.results if r.test_id == test_id), None)


class SnippetResult(Record):
    """Result of running a code snippet after the candidate (the debugger's tool)."""

    outcome: Outcome
    """``passed`` when the snippet ran without exception."""
    value: str | None = None
    """``repr`` of the last expression's value, if the snippet ended with an expression."""
    stdout: str = ""
    """Captured standard output (capped)."""
    stderr: str = ""
    """Captured standard error (capped)."""
    exc_type: str | None = None
    """Exception class name, if any."""
    message: str = ""
    """Exception message."""
    traceback: str = ""
    """Trimmed traceback."""
    duration: float = 0.0
    """Seconds it ran."""


TraceStepKind = Literal["call", "line", "exception", "return", "raise"]
"""A step of a trace: a candidate function was entered (``call``), a line is about to run
(``line``), an exception reached a frame (``exception``; caught there when a ``line``
follows), a frame returned (``return``) or let an exception out (``raise``)."""


class TraceLimits(Record):
    """How much of a traced run is kept: the first ``head`` and last ``tail`` steps, values
    cut at ``value_chars``, at most ``max_values`` changed locals per step; tracing stops
    after ``max_total`` steps."""

    head: int = Field(default=100, ge=0, le=10_000)
    """Steps kept from the start."""
    tail: int = Field(default=200, ge=1, le=10_000)
    """Steps kept from the end (where a failing run fails)."""
    value_chars: int = Field(default=60, ge=8, le=1000)
    """Longest value shown, in characters (longer ones end with ``…``)."""
    max_values: int = Field(default=8, ge=1, le=50)
    """Most locals shown per step (the rest are counted)."""
    max_total: int = Field(default=200_000, ge=1)
    """Steps after which tracing stops (the test runs on untraced)."""


class TraceStep(Record):
    """One step of a traced run of the candidate."""

    kind: TraceStepKind
    """What happened (:data:`TraceStepKind`)."""
    frame: int
    """Which call it belongs to: 1 for the first candidate call, then in call order."""
    depth: int
    """Candidate frames on the stack (1: called from the test; more: recursion or calls
    between candidate functions)."""
    function: str
    """The function's name."""
    line: int
    """The candidate's line."""
    values: tuple[tuple[str, str], ...] = ()
    """``call``: the arguments; other steps: the locals whose value changed since the
    frame's previous step (the effect of the line before), as ``(name, short repr)``."""
    value: str = ""
    """``return``: the value returned; ``exception``/``raise``: ``Type: arguments``."""


class TraceResult(Record):
    """A failing test run again with line-level tracing of the candidate (the debugger's
    ``trace_failure``). Informative only: no verdict is taken from it."""

    test_id: str
    """The test traced."""
    outcome: Outcome
    """How the test ended under the trace."""
    exc_type: str | None = None
    """Exception class name, if any."""
    message: str = ""
    """Exception message (for a failed comparison: both sides)."""
    stdout: str = ""
    """Captured standard output (capped)."""
    duration: float = 0.0
    """Seconds the traced test ran (tracing slows a run down)."""
    loaded: bool = True
    """False when the candidate did not load (then no step ran)."""
    steps: tuple[TraceStep, ...] = ()
    """The kept steps, in order: the first ``head``, then the last ones."""
    total_steps: int = 0
    """Every step of the candidate, kept or not."""
    omitted: int = 0
    """Steps not kept, between the first ``gap_at`` steps and the rest."""
    gap_at: int = 0
    """Index in ``steps`` where the ``omitted`` steps were."""
    notes: tuple[str, ...] = ()
    """What else happened to the trace: what the candidate tried against the tracer and was
    refused, tracing stopped early, the tracer switched off."""


@runtime_checkable
class Executor(Protocol):
    """Runs untrusted candidates against tests, awaited on selfheal's loop. ``KernelPool`` is
    the real one (its blocking twins ``run``/``run_snippet`` are for plain code); a fake
    implements these two coroutines."""

    async def arun(
        self,
        code: str,
        tests: Sequence[str | SandboxTest],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> ExecutionReport:
        """Load ``code`` in a fresh interpreter and run each test; ``timeout`` is per test."""
        ...

    async def arun_snippet(
        self,
        code: str,
        *,
        setup: str = "",
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> SnippetResult:
        """Run ``setup`` (usually the candidate), then ``code``; report the last value."""
        ...


@runtime_checkable
class BatchExecutor(Protocol):
    """An executor that runs a batch itself, in parallel (``KernelPool``)."""

    async def arun_many(
        self,
        items: Sequence[tuple[str, Sequence[str | SandboxTest]]],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> list[ExecutionReport]:
        """Run many ``(code, tests)`` pairs; reports in the order given."""
        ...


async def arun_many(
    executor: Executor,
    items: Sequence[tuple[str, Sequence[str | SandboxTest]]],
    *,
    timeout: float | None = None,
    limits: Limits | None = None,
) -> list[ExecutionReport]:
    """Run many ``(code, tests)`` pairs on any ``Executor``: in parallel through its own
    ``arun_many`` when it is a ``BatchExecutor`` (``KernelPool``), else one after the other."""
    if isinstance(executor, BatchExecutor):
        return list(await executor.arun_many(items, timeout=timeout, limits=limits))
    return [
        await executor.arun(code, tests, timeout=timeout, limits=limits) for code, tests in items
    ]


run_many = sync_twin(arun_many)


@runtime_checkable
class TracingExecutor(Protocol):
    """An executor that can also trace a test (``KernelPool``): the debugger's
    ``trace_failure`` needs one."""

    async def arun_trace(
        self,
        code: str,
        test: str | AssertTest | ProbeCall,
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
        trace: TraceLimits | None = None,
    ) -> TraceResult:
        """Load ``code``, run ``test`` with the candidate's lines traced."""
        ...
