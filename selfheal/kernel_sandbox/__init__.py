"""The kernel sandbox: the one place where candidates and tests execute, in fresh processes
forked from a warm ``KernelPool``, with verdicts only from the harness's signed messages
(docs/sandbox.md)."""

from __future__ import annotations

from selfheal.kernel_sandbox._canon import canonical
from selfheal.kernel_sandbox.pool import KernelPool, get_default_pool
from selfheal.kernel_sandbox.traces import trace_text
from selfheal.kernel_sandbox.types import (
    AssertTest,
    CallTest,
    ExecutionReport,
    Executor,
    Limits,
    LoadResult,
    Outcome,
    ProbeCall,
    PytestItem,
    SandboxTest,
    SnippetResult,
    TestResult,
    TraceLimits,
    TraceResult,
    TraceStep,
    TracingExecutor,
    arun_many,
    run_many,
)

__all__ = [
    "AssertTest",
    "CallTest",
    "ExecutionReport",
    "Executor",
    "KernelPool",
    "Limits",
    "LoadResult",
    "Outcome",
    "ProbeCall",
    "PytestItem",
    "SandboxTest",
    "SnippetResult",
    "TestResult",
    "TraceLimits",
    "TraceResult",
    "TraceStep",
    "TracingExecutor",
    "arun_many",
    "canonical",
    "get_default_pool",
    "run_many",
    "trace_text",
]
