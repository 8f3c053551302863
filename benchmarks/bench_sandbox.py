"""Benchmark of the kernel sandbox against the usual alternatives, measured in one run.

    PYTHONPATH=. python benchmarks/bench_sandbox.py [--runs 20]

Prints a Markdown table: warm-pool latency for a candidate plus 10 assertion tests
(p50/p95), the same work as one fresh ``python`` subprocess per candidate, the same work
by in-process ``exec`` (the floor, no isolation at all), a cold kernel start, and how long
after its limit a runaway test is stopped (plain loop: harness alarm; a loop that swallows
the interrupt and ignores SIGALRM: host kill). Ratios are against the subprocess approach
measured in the same run, never against numbers from elsewhere.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox.containment import netns_available
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.zygote import Zygote

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


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[i]


def timed(
    fn: Callable[[], object], runs: int, before: Callable[[], object] | None = None
) -> list[float]:
    out = []
    for _ in range(runs):
        if before is not None:
            before()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--humaneval",
        action="store_true",
        help="instead: score every HumanEval canonical solution and an always-equal attack",
    )
    args = ap.parse_args()
    if args.humaneval:
        humaneval()
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
        # back to back: every run also pays for starting its replacement kernel
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

    netns = netns_available()
    cold = timed(lambda: SandboxKernel(Limits(), network_namespace=netns).kill(), 3)
    zygote = Zygote()
    forked = timed(
        lambda: SandboxKernel(Limits(), network_namespace=netns, zygote=zygote).kill(), 5
    )
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
            f"KernelPool.run back to back ({sustained:.2f} runs/s sustained)",
            f"{pct(back, 0.5) * ms:.1f}",
            f"{pct(back, 0.95) * ms:.1f}",
            f"{pct(back, 0.5) / sub50:.3f}",
        )
    )
    rows.append(
        (
            "cold kernel start, `python -m ipykernel_launcher` (to harness armed)",
            f"{pct(cold, 0.5) * ms:.0f}",
            f"{max(cold) * ms:.0f}",
            f"{pct(cold, 0.5) / sub50:.1f}",
        )
    )
    rows.append(
        (
            "cold kernel start, forked by the fork server (to harness armed)",
            f"{pct(forked, 0.5) * ms:.0f}",
            f"{pct(forked, 0.95) * ms:.0f}",
            f"{pct(forked, 0.5) / sub50:.1f}",
        )
    )

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load1, load5, _ = os.getloadavg()
    print(
        f"bench_sandbox: {n} runs each; {os.cpu_count()} cores, {cpu}; "
        f"Python {platform.python_version()}; load average {load1:.1f} / {load5:.1f} "
        "(1 / 5 min) at the end"
    )
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
        f"| swallows the interrupt, ignores SIGALRM (host kills the kernel) | "
        f"+{kill_over * ms:.0f} ms (whole run incl. load) |"
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
