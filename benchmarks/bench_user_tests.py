"""What your tests cost per candidate in pytest's form, against the assert lines they replace.

    PYTHONPATH=. python benchmarks/bench_user_tests.py --runs 40

One warm ``KernelPool(size=1)``; the same ten checks of a ``median`` candidate as (a) ten
assert-line tests (the path every test took before), (b) ten pytest test functions and (c)
one test function parametrized ten ways (ten items). The three are interleaved run by run,
so they share the machine's load; the report gives p50/p95 milliseconds per candidate run
and each form's ratio to (a), and pytest's collection, which happens once per heal.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.types import AssertTest
from selfheal.usertests import read_user_tests, user_test_cases

CANDIDATE = """
def median(values):
    if not values:
        raise ValueError("empty")
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
"""
CASES = [([i, i + 2, i + 1], i + 1) for i in range(10)]
ASSERTS = [f"assert median({xs}) == {want}" for xs, want in CASES]
FUNCTIONS = "\n".join(
    f"def test_{i}():\n    assert median({xs}) == {want}\n" for i, (xs, want) in enumerate(CASES)
)
PARAMETRIZED = (
    "import pytest\n\n@pytest.mark.parametrize('xs,want', "
    f"{CASES!r})\ndef test_median(xs, want):\n    assert median(xs) == want\n"
)


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(0.95 * (len(ordered) - 1))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    with KernelPool(size=1) as pool:
        assert pool.wait_ready(60)
        forms: dict[str, list[AssertTest]] = {
            "10 assert lines (before)": [
                AssertTest(id=f"t{i}", code=a) for i, a in enumerate(ASSERTS)
            ],
        }
        collect: dict[str, float] = {}
        for name, text in (
            ("10 pytest functions", FUNCTIONS),
            ("1 function x 10 parametrize", PARAMETRIZED),
        ):
            t0 = time.perf_counter()
            cases = user_test_cases(read_user_tests([text], "median"), pool)
            collect[name] = time.perf_counter() - t0
            forms[name] = [t for c in cases if isinstance(t := c.to_sandbox(), AssertTest)]
        times: dict[str, list[float]] = {name: [] for name in forms}
        for name, form in forms.items():  # warm-up, and every form must pass
            assert pool.run(CANDIDATE, form).passed, name
        for _ in range(args.runs):
            for name, form in forms.items():
                t0 = time.perf_counter()
                pool.run(CANDIDATE, form)
                times[name].append(time.perf_counter() - t0)
    base = _ms(times["10 assert lines (before)"])[0]
    load = os.getloadavg()
    print(
        f"bench_user_tests: {args.runs} runs per form, interleaved; {os.cpu_count()} cores, "
        f"{platform.processor() or platform.machine()}; Python {platform.python_version()}; "
        f"load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) at the end\n"
    )
    print(
        "| tests of one candidate | p50 ms per run | p95 ms | p50 ratio | collection, once per heal |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, samples in times.items():
        p50, p95 = _ms(samples)
        once = f"{collect[name] * 1000:.0f} ms" if name in collect else "-"
        print(f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / base:.2f} | {once} |")


if __name__ == "__main__":
    main()
