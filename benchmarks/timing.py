"""Timing helpers the sandbox benchmarks share (``bench_sandbox.py``,
``bench_pytest_tests.py``): a percentile, calls timed one by one or in turns, the p50/p95
table of forms against a base, and the machine line every result states."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Mapping
from pathlib import Path


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[i]


def timed(
    fn: Callable[[], object], runs: int, before: Callable[[], object] | None = None
) -> list[float]:
    """Seconds per call of ``fn``, ``runs`` calls (``before`` each, untimed)."""
    out = []
    for _ in range(runs):
        if before is not None:
            before()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def interleaved(
    forms: Mapping[str, Callable[[], object]],
    runs: int,
    *,
    pause: float,
    ready: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each form, ``runs`` calls each, the forms taken in turns (so a
    change in the machine's load falls on all of them); before each call, untimed, the form's
    ``ready`` and a ``pause`` (the next standby is forked and waiting)."""
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(runs):
        for name, fn in forms.items():
            if ready is not None:
                ready[name]()
            time.sleep(pause)
            times[name] += timed(fn, 1)
    return times


def p50_table(
    times: Mapping[str, list[float]], *, what: str, base: str, ratio: bool, digits: int
) -> None:
    """Print ``times`` as a table: each form's p50 and p95 in ms (``digits`` decimals) and its
    p50 against ``base``'s: a ratio, or a difference in ms."""
    ms = 1000.0
    b = pct(list(times[base]), 0.5)
    print(f"| {what} | p50 ms per run | p95 ms | {'p50 ratio' if ratio else 'p50 difference ms'} |")
    print("|---|---:|---:|---:|")
    for name, xs in times.items():
        p50 = pct(xs, 0.5)
        vs = f"{p50 / b:.2f}" if ratio else f"{(p50 - b) * ms:+.2f}"
        print(f"| {name} | {p50 * ms:.{digits}f} | {pct(xs, 0.95) * ms:.{digits}f} | {vs} |")


def machine() -> str:
    """The cores, the CPU, Python and the load average now (at the end of a run)."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load1, load5, _ = os.getloadavg()
    return (
        f"{os.cpu_count()} cores, {cpu}; Python {platform.python_version()}; "
        f"load average {load1:.1f} / {load5:.1f} (1 / 5 min) at the end"
    )
