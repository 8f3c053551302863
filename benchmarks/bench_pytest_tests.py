"""The ``--pytest`` case of ``bench_sandbox.py``: the cost per candidate of your pytest-form
tests run by pytest in a separate process (``Limits.pytest_tests="separate_process"``, the
default) against run in the candidate's process (``"in_process"``), with the same checks as
10 assert lines as the baseline; one pool of one kernel, the three interleaved run by run.
Also the start of the test server (Python and pytest, to ``ready``: once per host process)
and of a test process it forks for a run.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --pytest [--runs 30]
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from timing import interleaved, machine, p50_table, pct

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox.pytest_process import START_TIMEOUT, TestServer
from selfheal.usertests import read_user_tests, user_test_cases


def _module(tests: list[str]) -> str:
    return "".join(f"def test_{i}():\n    {t}\n" for i, t in enumerate(tests))


def _start_ms(n: int) -> tuple[list[float], list[float]]:
    """Milliseconds from starting a test server to its ``ready``, and from asking it for a
    test process to that process's ``ready``."""

    async def once() -> tuple[float, float]:
        t = time.perf_counter()
        srv = TestServer()
        try:
            run = await srv.fork(2048)  # (waits for the server's ready first)
            t1 = time.perf_counter()
            m = await srv.fork(2048)
            assert await m.recv(START_TIMEOUT) is not None
            t2 = time.perf_counter()
            run.kill()
            m.kill()
            return (t1 - t) * 1000, (t2 - t1) * 1000
        finally:
            srv.kill()

    pairs = [asyncio.run(once()) for _ in range(n)]
    return sorted(p[0] for p in pairs), sorted(p[1] for p in pairs)


def _rounds(n: int, candidate: str, tests: list[str], entry: str) -> dict[str, list[float]]:
    """Seconds per round of 4 candidates at once, per form, interleaved."""
    with KernelPool(size=2) as pool:
        assert pool.wait_ready(120)
        text = _module(tests)
        items = [c.to_sandbox() for c in user_test_cases(read_user_tests([text], entry), pool)]
        forms = {
            "10 pytest functions, separate process": Limits(),
            "10 pytest functions, in the candidate's process": Limits(pytest_tests="in_process"),
        }

        def round_of(lim: Limits) -> Callable[[], None]:
            def run() -> None:
                assert all(r.passed for r in pool.run_many([(candidate, items)] * 4, limits=lim))

            return run

        out = interleaved({name: round_of(lim) for name, lim in forms.items()}, n + 1, pause=0.2)
    return {k: v[1:] for k, v in out.items()}  # the first round starts the spares


def pytest_cost(runs: int, candidate: str, tests: list[str], entry: str) -> None:
    """Print the tables (see the module docstring)."""
    with KernelPool(size=1) as pool:
        assert pool.wait_ready(120)
        items = [
            c.to_sandbox() for c in user_test_cases(read_user_tests([_module(tests)], entry), pool)
        ]
        forms: dict[str, tuple[list[Any], Limits]] = {
            "10 assert lines (baseline)": (list(tests), Limits()),
            "10 pytest functions, separate process (default)": (items, Limits()),
            "10 pytest functions, in the candidate's process": (
                items,
                Limits(pytest_tests="in_process"),
            ),
        }
        for ts, lim in forms.values():
            assert pool.run(candidate, ts, limits=lim).passed
        calls = {
            n: functools.partial(pool.run, candidate, ts, limits=lim)
            for n, (ts, lim) in forms.items()
        }
        times = interleaved(calls, runs, pause=0.05)  # (the spare test process is ready too)
    rounds = _rounds(max(3, runs // 3), candidate, tests, entry)
    starts = _start_ms(max(3, runs // 5))
    print(f"bench_sandbox --pytest: {runs} warm runs each, interleaved; {machine()}")
    print("Workload: one candidate function plus 10 tests.\n")
    base = "10 assert lines (baseline)"
    p50_table(times, what="tests of one candidate", base=base, ratio=True, digits=1)
    print("\nA population's round: K=4 candidates at once (`run_many`), pool size 2:\n")
    print("| tests of each candidate | p50 ms per round | candidates/s |")
    print("|---|---:|---:|")
    for name, xs in rounds.items():
        print(f"| {name} | {pct(xs, 0.5) * 1000:.0f} | {4 / pct(xs, 0.5):.1f} |")
    servers, forks = starts
    print(
        f"\nThe test server's start to ready (once per process): p50 "
        f"{servers[len(servers) // 2]:.0f} ms; a test process forked by it, to ready: p50 "
        f"{forks[len(forks) // 2]:.1f} ms ({len(forks)} each)"
    )
