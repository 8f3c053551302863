"""The kernel sandbox: the one place where candidates and tests execute.

Each run loads untrusted candidate code into a fresh ipykernel (its own process group,
cgroup and network namespace where the host allows them) from a warm ``KernelPool`` and
runs the tests there; verdicts come only from HMAC-signed messages of a harness installed
before the candidate existed. ``canonical`` is the text probe values are compared by (the
host compares a spec oracle's literal the same way). See ``docs/sandbox.md``.
"""

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
