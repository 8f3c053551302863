"""Benchmark of the kernel sandbox against the usual alternatives, measured in one run.

    PYTHONPATH=. python benchmarks/bench_sandbox.py [--runs 20]

Prints a Markdown table: warm-pool latency for a candidate plus 10 assertion tests
(p50/p95), the same work as one fresh ``python`` subprocess per candidate, the same work
by in-process ``exec`` (the floor, no isolation at all), a cold kernel start, and how long
after its limit a runaway test is stopped (plain loop: harness alarm; a loop that swallows
the interrupt and ignores SIGALRM: host kill). Ratios are against the subprocess approach
measured in the same run, never against numbers from elsewhere.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --population [--k 4 --rounds 10 --size 2]

The healing loop's pattern instead: K candidates submitted at once, each with 10 tests and
10 probes, round after round with no pause, against one fresh ``python`` subprocess per
candidate (K started at once), the approaches interleaved round by round.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --boundary [--runs 60]

The cost of the boundary the operating system enforces (docs/sandbox.md): the same
candidate and tests under ``off`` (the audit hook alone), Landlock and the fallback (mount
namespace + seccomp), one pool of one kernel each, interleaved run by run: a warm run's
latency, runs back to back (in blocks, interleaved), and a kernel's start to serving.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --verdict [--runs 60]

The verdict on the host (docs/sandbox.md, "Verdicts on the host") against the verdict in the
candidate's process: the same candidate and 10 assertion tests, as assert lines (split: the
calls run in the candidate's process, the comparisons on the host) and each inside
``if True:`` (not split: the whole test runs in the candidate's process, as before), one
pool of one kernel, interleaved run by run.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --flood [--rounds 5 --seconds 3]

The pool's throughput while a flooding candidate runs beside it (docs/sandbox.md): one
pool of two kernels; normal candidates (10 tests each) back to back, one at a time, for
``--seconds``, alone, then while another thread keeps a candidate that writes junk without
newlines into the result pipe (4 threads, 1 MiB writes) running on the other kernel; the
two phases interleaved round by round.

    PYTHONPATH=. python benchmarks/bench_sandbox.py --pytest [--runs 30]

Your pytest-form tests run by pytest in a separate process against in the candidate's
process, and the same checks as assert lines (``bench_pytest_tests.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from timing import interleaved, machine, p50_table, pct, timed

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox.containment import netns_available
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.zygote import Zygote
from tests.sandbox.test_channel_flood import FLOOD

CANDIDATE = '''
def running_max(xs):
    """Running maximum of a list."""
    out, best = [], None
    for x in xs:
        best = x if best is None or x > best else best
        out.append(best)
    return out
'''
TESTS = [
    "assert running_max([]) == []",
    "assert running_max([1]) == [1]",
    "assert running_max([1, 2, 3]) == [1, 2, 3]",
    "assert running_max([3, 2, 1]) == [3, 3, 3]",
    "assert running_max([1, 3, 2, 4]) == [1, 3, 3, 4]",
    "assert running_max([-1, -2]) == [-1, -1]",
    "assert running_max([0, 0, 0]) == [0, 0, 0]",
    "assert running_max([5, 1, 6, 2]) == [5, 5, 6, 6]",
    "assert running_max(list(range(100)))[-1] == 99",
    "assert len(running_max([2] * 50)) == 50",
]


def kernel_start(**options: Any) -> float:
    """Seconds from nothing to a kernel serving (its kill afterwards is not counted)."""

    async def once() -> float:
        t = time.perf_counter()
        k = await SandboxKernel.start(Limits(), **options)
        took = time.perf_counter() - t
        await k.akill()
        return took

    return asyncio.run(once())


POP_CANDIDATE = '''
def top_k(xs, k=1):
    """The k largest values, largest first (variant {v})."""
    if k <= 0:
        return []
    out = sorted(xs, reverse=True)
    return out[:k]
'''
POP_TESTS = [
    "assert top_k([]) == []",
    "assert top_k([1]) == [1]",
    "assert top_k([3, 1, 2], k=2) == [3, 2]",
    "assert top_k([3, 1, 2], k=0) == []",
    "assert top_k([5, 5, 1], k=2) == [5, 5]",
    "assert top_k([-1, -2], k=5) == [-1, -2]",
    "assert top_k(list(range(100)), k=3) == [99, 98, 97]",
    "assert top_k([0.5, 0.25], k=1) == [0.5]",
    "assert len(top_k([2] * 50, k=10)) == 10",
    "assert top_k(['b', 'a'], k=2) == ['b', 'a']",
]
POP_PROBES = [
    "top_k([3, 1, 2], k=2)",
    "top_k([], k=3)",
    "top_k([1.5, 0.1 + 0.2, 0.3], k=2)",
    "top_k([[2], [1, 5]], k=1)",
    "top_k(list(range(1000)), k=5)",
    "top_k([1], k=-1)",
    "top_k('hello', k=2)",
    "top_k({3, 1, 2}, k=3)",
    "top_k([None, 1])",
    "top_k([True, 2, 0.5], k=3)",
]


def population(k: int, rounds: int, size: int) -> None:
    """The healing loop's pattern: K candidates submitted at once, each with 10 tests and 10
    probes, round after round with no pause; against one fresh ``python`` subprocess per
    candidate (K started at once) running the same tests and probes, in the same run."""
    from selfheal.kernel_sandbox import ProbeCall

    tests: list[Any] = list(POP_TESTS) + [
        ProbeCall(id=f"p{i}", expr=e) for i, e in enumerate(POP_PROBES)
    ]
    tmp = Path(tempfile.mkdtemp(prefix="selfheal-bench-"))

    def script(code: str) -> str:
        lines = [code]
        for t in POP_TESTS:
            lines.append(
                f"try:\n    {t}\n    print('ok')\nexcept Exception as e:\n    print(type(e).__name__)"
            )
        for e in POP_PROBES:
            lines.append(
                f"try:\n    print(repr({e}))\nexcept Exception as e:\n    print('raise', type(e).__name__)"
            )
        return "\n".join(lines) + "\n"

    def sub_round(r: int) -> list[float]:
        t0 = time.perf_counter()
        procs = []
        for i in range(k):
            path = tmp / f"cand_{r}_{i}.py"
            path.write_text(script(POP_CANDIDATE.format(v=f"{r}.{i}")))
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(path)],
                    cwd=tmp,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        done: list[float] = [0.0] * k
        left = set(range(k))
        while left:
            for i in list(left):
                if procs[i].poll() is not None:
                    done[i] = time.perf_counter() - t0
                    left.discard(i)
            time.sleep(0.0005)
        for p in procs:
            out, _ = p.communicate()
            assert out.count(b"ok") == len(POP_TESTS), out
        return done

    def check(reports: list[Any]) -> None:
        for rep in reports:
            assert rep.load.ok, rep
            assert all(x.outcome == "passed" for x in rep.results[: len(POP_TESTS)]), rep

    def items(r: int) -> list[tuple[str, list[Any]]]:
        return [(POP_CANDIDATE.format(v=f"{r}.{i}"), tests) for i in range(k)]

    def many_round(pool: KernelPool, r: int) -> list[float]:
        """``run_many``: every report is there when the call returns."""
        t0 = time.perf_counter()
        reports = pool.run_many(items(r))
        took = time.perf_counter() - t0
        check(reports)
        return [took] * k

    def threads_round(pool: KernelPool, r: int) -> list[float]:
        """K threads each calling ``run``: each candidate's own completion time."""
        t0 = time.perf_counter()
        done: list[float] = [0.0] * k
        work = items(r)

        def one(i: int) -> Any:
            rep = pool.run(*work[i])
            done[i] = time.perf_counter() - t0
            return rep

        with ThreadPoolExecutor(max_workers=k) as ex:
            check(list(ex.map(one, range(k))))
        return done

    approaches: list[tuple[str, Callable[[int], list[float]]]] = []
    lat: dict[str, list[float]] = {}
    spent: dict[str, float] = {}
    with KernelPool(size=size) as pool:
        assert pool.wait_ready(120)
        approaches = [
            ("fresh `python` subprocess per candidate, K at once", sub_round),
            (f"**KernelPool.run_many** (size {size})", lambda r: many_round(pool, r)),
            (f"KernelPool.run from K threads (size {size})", lambda r: threads_round(pool, r)),
        ]
        for _, fn in approaches:  # warm-up round (not timed)
            fn(-1)
        # interleave the approaches round by round, so all see the same machine load
        for r in range(rounds):
            for name, fn in approaches:
                t = time.perf_counter()
                lat.setdefault(name, []).extend(fn(r))
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
        started = pool.kernels_started
    n = k * rounds
    ms = 1000.0
    print(
        f"bench_sandbox --population: K={k} candidates at once, {len(tests)} tests+probes each "
        f"({len(POP_TESTS)} asserts, {len(POP_PROBES)} probes), {rounds} rounds back to back, "
        f"pool size {size} ({started} kernels started in all); {machine()}\n"
    )
    print(
        "| approach | p50 ms per candidate | p95 ms | candidates/s sustained "
        "| time per candidate vs subprocess |"
    )
    print("|---|---:|---:|---:|---:|")
    base = spent[approaches[0][0]] / n
    for name, _ in approaches:
        xs = lat[name]
        print(
            f"| {name} | {pct(xs, 0.5) * ms:.1f} | {pct(xs, 0.95) * ms:.1f} | "
            f"{n / spent[name]:.1f} | {spent[name] / n / base:.2f} |"
        )
    print(
        "\nPer candidate: from the round's start to its report (for run_many, to the end of "
        "the call, when every report is there)."
    )


def boundary_cost(runs: int) -> None:
    """The ``--boundary`` benchmark (see the module docstring)."""
    from selfheal.kernel_sandbox.boundary import boundary_for, entry_cost

    modes = ["off", "auto", "fallback"]
    pools = {m: KernelPool(size=1, boundary=m).start() for m in modes}  # type: ignore[arg-type]
    try:
        for p in pools.values():
            assert p.wait_ready(120)
            assert p.run(CANDIDATE, TESTS).passed
        warm = interleaved(
            {m: functools.partial(pools[m].run, CANDIDATE, TESTS) for m in modes},
            runs,
            pause=0.02,
            ready={m: functools.partial(pools[m].wait_ready, 120) for m in modes},
        )
        block = max(1, runs // 5)
        spent = dict.fromkeys(modes, 0.0)
        for _ in range(5):
            for m in modes:
                t = time.perf_counter()
                timed(functools.partial(pools[m].run, CANDIDATE, TESTS), block)
                spent[m] += time.perf_counter() - t
        kinds = {m: pools[m].boundary.kind for m in modes}
    finally:
        for p in pools.values():
            p.close()
    netns = netns_available()
    zygote = Zygote()
    starts: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(3):
        for m in modes:
            starts[m].append(
                kernel_start(network_namespace=netns, zygote=zygote, boundary=kinds[m])
            )
    zygote.close()
    ms = 1000.0
    base = 5 * block / spent["off"]
    print(f"bench_sandbox --boundary: {runs} warm runs each, 5 x {block} back to back; {machine()}")
    print("Workload: one candidate function plus 10 assertion tests.\n")
    print(
        "| boundary | warm run p50 ms | p95 ms | back to back runs/s | vs off | "
        "kernel start p50 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for m in modes:
        rate = 5 * block / spent[m]
        label = boundary_for(m).kind  # type: ignore[arg-type]
        print(
            f"| {label} | {pct(warm[m], 0.5) * ms:.1f} | {pct(warm[m], 0.95) * ms:.1f} | "
            f"{rate:.1f} | {rate / base:.2f} | {statistics.median(starts[m]) * ms:.0f} |"
        )
    print(
        "\n| boundary | a run's ruleset, built in the kernel (µs) | forking the run's process, "
        "in the kernel (µs) | the standby's set-up, before its request (µs) | entering it "
        "after the go, in the run's process (µs) |"
    )
    print("|---|---:|---:|---:|---:|")
    for kind in ("landlock", "fallback"):
        built, forked, ready, entered = entry_cost(kind, 50)
        print(f"| {kind} | {built:.0f} | {forked:.0f} | {ready:.0f} | {entered:.0f} |")


def verdict_cost(runs: int) -> None:
    """The ``--verdict`` benchmark (see the module docstring)."""
    from selfheal.kernel_sandbox.split import split_test

    in_process = ["if True:\n    " + t for t in TESTS]
    assert all(split_test(t) for t in TESTS) and not any(split_test(t) for t in in_process)
    forms = {"on the host (split)": TESTS, "in the candidate's process": in_process}
    with KernelPool(size=1) as pool:
        assert pool.wait_ready(120)
        for tests in forms.values():
            assert pool.run(CANDIDATE, tests).passed
        calls = {
            name: functools.partial(pool.run, CANDIDATE, tests) for name, tests in forms.items()
        }
        times = interleaved(calls, runs, pause=0.02)
    print(f"bench_sandbox --verdict: {runs} warm runs each, interleaved; {machine()}")
    print("Workload: one candidate function plus 10 assertion tests.\n")
    base = "in the candidate's process"
    p50_table(times, what="verdict decided", base=base, ratio=False, digits=2)


FLOODER = FLOOD
"""The flooding candidate of ``tests/sandbox/test_channel_flood.py``: junk without newlines
written to the result pipe from four threads."""


def flood_throughput(rounds: int, seconds: float) -> None:
    """The ``--flood`` benchmark (see the module docstring)."""
    lim = Limits(test_timeout=30.0, run_timeout=300.0)
    alone: list[float] = []
    beside: list[float] = []
    rates: dict[str, list[float]] = {"alone": [], "beside": []}
    kills = [0]
    flooding = [0.0]

    def normal_runs(pool: KernelPool, into: list[float]) -> float:
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            t = time.perf_counter()
            report = pool.run(CANDIDATE, TESTS)
            into.append(time.perf_counter() - t)
            assert report.passed, report
            n += 1
        return n / seconds

    def flooder(pool: KernelPool, stop: threading.Event) -> None:
        t = time.perf_counter()
        while not stop.is_set():
            report = pool.run(FLOODER, ["assert flood() == 1"] * 10, limits=lim)
            kills[0] += sum(r.exc_type == "ChannelFlood" for r in report.results)
        flooding[0] += time.perf_counter() - t

    with KernelPool(size=2) as pool:
        assert pool.wait_ready(120)
        assert pool.run(CANDIDATE, TESTS).passed
        for _ in range(rounds):
            pool.wait_ready(120)
            rates["alone"].append(normal_runs(pool, alone))
            stop = threading.Event()
            side = threading.Thread(target=flooder, args=(pool, stop))
            side.start()
            time.sleep(0.2)  # the flooding run has its kernel
            rates["beside"].append(normal_runs(pool, beside))
            stop.set()
            side.join()
        started = pool.kernels_started
    ms = 1000.0
    print(
        f"bench_sandbox --flood: {rounds} rounds of {seconds:.0f} s per phase, interleaved; "
        f"pool size 2 ({started} kernels started in all); {machine()}"
    )
    print("Workload: one candidate function plus 10 assertion tests, one run at a time.\n")
    print("| normal candidates | runs/s (median of rounds) | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for label, xs, key in (
        ("alone", alone, "alone"),
        ("beside a flooding candidate on the other kernel", beside, "beside"),
    ):
        print(
            f"| {label} | {statistics.median(rates[key]):.1f} | {pct(xs, 0.5) * ms:.1f} | "
            f"{pct(xs, 0.95) * ms:.1f} | {max(xs) * ms:.0f} |"
        )
    print(
        f"\nThe flooding candidate: {kills[0]} tests killed as floods in "
        f"{flooding[0]:.1f} s ({kills[0] / max(flooding[0], 1e-9):.1f} per second), each in a "
        "fresh process."
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--population",
        action="store_true",
        help="instead: K candidates at once, round after round (the healing loop's pattern)",
    )
    ap.add_argument("--k", type=int, default=4, help="candidates per round (--population)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds (--population)")
    ap.add_argument("--size", type=int, default=2, help="pool size (--population)")
    ap.add_argument(
        "--humaneval",
        action="store_true",
        help="instead: score every HumanEval canonical solution and an always-equal attack",
    )
    ap.add_argument(
        "--boundary",
        action="store_true",
        help="instead: the cost of the OS boundary (off, Landlock, fallback), interleaved",
    )
    ap.add_argument(
        "--verdict",
        action="store_true",
        help="instead: the verdict on the host against the verdict in the process, interleaved",
    )
    ap.add_argument(
        "--flood",
        action="store_true",
        help="instead: the pool's throughput with and without a flooding candidate beside it",
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per phase (--flood)")
    ap.add_argument(
        "--pytest",
        action="store_true",
        help="instead: pytest-form tests in a separate process against in the candidate's",
    )
    args = ap.parse_args()
    if args.pytest:  # (benchmarks/bench_pytest_tests.py)
        from bench_pytest_tests import pytest_cost

        pytest_cost(args.runs, CANDIDATE, TESTS, "running_max")
        return
    if args.verdict:
        verdict_cost(args.runs)
        return
    if args.boundary:
        boundary_cost(args.runs)
        return
    if args.flood:
        flood_throughput(args.rounds, args.seconds)
        return
    if args.humaneval:
        humaneval()
        return
    if args.population:
        population(args.k, args.rounds, args.size)
        return
    n = args.runs
    rows: list[tuple[str, str, str, str]] = []
    source = CANDIDATE + "\n" + "\n".join(TESTS) + "\n"

    # the floor: in-process exec, no isolation
    def in_process() -> None:
        exec(compile(source, "<bench>", "exec"), {"__name__": "bench"})

    floor = timed(in_process, n * 5)

    # what most agents do: one fresh interpreter per candidate
    tmp = Path(tempfile.mkdtemp(prefix="selfheal-bench-"))
    script = tmp / "candidate_test.py"
    script.write_text(source)

    def fresh_python() -> None:
        r = subprocess.run([sys.executable, str(script)], capture_output=True, cwd=tmp, check=False)
        assert r.returncode == 0, r.stderr

    sub = timed(fresh_python, n)

    with KernelPool(size=2) as pool:
        assert pool.wait_ready(120)
        report = pool.run(CANDIDATE, TESTS)
        assert report.passed, report
        warm = timed(lambda: pool.run(CANDIDATE, TESTS), n, before=lambda: pool.wait_ready(120))
        # back to back, one at a time: no pause between runs
        t = time.perf_counter()
        back = timed(lambda: pool.run(CANDIDATE, TESTS), n)
        sustained = n / (time.perf_counter() - t)

        lim = Limits(test_timeout=1.0)
        pool.wait_ready(120)
        r = pool.run("def spin():\n    while True:\n        pass\n", ["spin()"], limits=lim)
        alarm_over = r.results[0].duration - lim.test_timeout
        assert r.results[0].outcome == "timeout"
        stubborn = (
            "import signal\n"
            "def spin():\n"
            "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            "    while True:\n"
            "        try:\n"
            "            pass\n"
            "        except BaseException:\n"
            "            pass\n"
        )
        pool.wait_ready(120)
        t = time.perf_counter()
        r = pool.run(stubborn, ["spin()"], limits=lim)
        kill_over = (time.perf_counter() - t) - lim.test_timeout
        assert r.results[0].outcome == "timeout"

        # a 100 MB output flood, capped: how long the test takes (the unit tests only check
        # that it is capped and passes, with a generous limit)
        flood = "def f():\n    for _ in range(1000):\n        print('y' * 100_000)\n    return 1\n"
        pool.wait_ready(120)
        floods = []
        for _ in range(3):
            r = pool.run(flood, ["assert f() == 1"], limits=Limits(test_timeout=30.0))
            assert r.passed and r.results[0].truncated, r
            floods.append(r.results[0].duration)

    netns = netns_available()

    cold = [kernel_start(network_namespace=netns) for _ in range(3)]
    zygote = Zygote()
    forked = [kernel_start(network_namespace=netns, zygote=zygote) for _ in range(5)]
    zygote.close()

    ms = 1000.0
    sub50 = statistics.median(sub)
    rows.append(
        (
            "in-process `exec` (floor, no isolation)",
            f"{pct(floor, 0.5) * ms:.2f}",
            f"{pct(floor, 0.95) * ms:.2f}",
            f"{pct(floor, 0.5) / sub50:.3f}",
        )
    )
    rows.append(
        (
            "fresh `python` subprocess per candidate",
            f"{pct(sub, 0.5) * ms:.1f}",
            f"{pct(sub, 0.95) * ms:.1f}",
            "1.000",
        )
    )
    rows.append(
        (
            "**warm KernelPool.run** (kernel ready)",
            f"{pct(warm, 0.5) * ms:.1f}",
            f"{pct(warm, 0.95) * ms:.1f}",
            f"{pct(warm, 0.5) / sub50:.3f}",
        )
    )
    rows.append(
        (
            f"KernelPool.run back to back, one at a time ({sustained:.1f} runs/s)",
            f"{pct(back, 0.5) * ms:.1f}",
            f"{pct(back, 0.95) * ms:.1f}",
            f"{pct(back, 0.5) / sub50:.3f}",
        )
    )
    rows.append(
        (
            "cold kernel start, `python -m ipykernel_launcher` (to serving)",
            f"{pct(cold, 0.5) * ms:.0f}",
            f"{max(cold) * ms:.0f}",
            f"{pct(cold, 0.5) / sub50:.1f}",
        )
    )
    rows.append(
        (
            "cold kernel start, forked by the fork server (to serving)",
            f"{pct(forked, 0.5) * ms:.0f}",
            f"{pct(forked, 0.95) * ms:.0f}",
            f"{pct(forked, 0.5) / sub50:.1f}",
        )
    )

    print(f"bench_sandbox: {n} runs each; {machine()}")
    print("Workload: one candidate function plus 10 assertion tests.\n")
    print("| approach | p50 ms | p95 ms | p50 ratio vs subprocess |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("| runaway test (limit 1.0 s) | stopped after its limit |")
    print("|---|---:|")
    print(f"| `while True: pass` (harness alarm) | +{alarm_over * ms:.0f} ms |")
    print(
        f"| swallows the interrupt, ignores SIGALRM (host kills the run's process) | "
        f"+{kill_over * ms:.0f} ms (whole run incl. load) |"
    )
    print()
    print(
        f"100 MB of output in 1000 prints, capped: the test takes {pct(floods, 0.5):.2f} s (median of 3)"
    )


ALWAYS_EQUAL = """
class Y:
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    def __lt__(self, o): return True
    def __le__(self, o): return True
    def __gt__(self, o): return True
    def __ge__(self, o): return True
    def __bool__(self): return True
    def __hash__(self): return 0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __sub__(self, o): return Y()
    def __rsub__(self, o): return Y()
    def __abs__(self): return Y()
    def __round__(self, n=0): return Y()
    def __contains__(self, x): return True
    def __getitem__(self, i): return Y()
def ENTRY(*a, **k):
    return Y()
"""


def humaneval() -> None:
    """Every HumanEval canonical solution must pass; an object that claims to equal
    everything, returned by every entry point, must pass none."""
    from evaluation.scoring import score
    from evaluation.suites import HumanEvalSuite

    tasks = HumanEvalSuite().tasks()
    t = time.perf_counter()
    with KernelPool(size=2) as pool:
        good = sum(score(task, task.canonical_solution, pool).passed for task in tasks)
        fooled = [
            task.id
            for task in tasks
            if score(task, ALWAYS_EQUAL.replace("ENTRY", task.entry_point), pool).passed
        ]
    took = time.perf_counter() - t
    print(f"HumanEval: {len(tasks)} tasks, {2 * len(tasks)} runs in {took:.1f} s")
    print(f"canonical solutions passing: {good}/{len(tasks)}")
    print(f"always-equal attack passing: {len(fooled)}/{len(tasks)} {fooled}")


if __name__ == "__main__":
    main()
