"""Throughput of heal_many on this machine against a local Dask cluster, with the scripted
mock model: what the engine costs, with no model time to hide it.

    PYTHONPATH=. python benchmarks/bench_scale.py [--tasks 24] [--configs local:1,local:2,dask:1,dask:2]

Each task is the scripted demo heal (``provider="mock"``: a first population of two that
fails the spec's even example, a diagnosis, a repair round of three that agrees: 9 model
calls and 4 sandbox rounds), so a task's time is the engine's own work and the sandbox's.
``local:W`` runs W heals at once in this process (one kernel pool of ``--pool-size``
kernels); ``dask:W`` starts a local Dask cluster of W worker processes (one thread each,
each with its own pool) on 127.0.0.1. Prints a Markdown table: start-up (engine start to the
first result: the cluster, its workers' kernel pools, the first heal), tasks per minute over
the whole run, and tasks per minute after the first result (the steady rate).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

from selfheal.config import HealConfig
from selfheal.llm.mock import DEMO_SPEC
from selfheal.scale import Engine, heal_many, make_engine


def measure(engine: Engine, tasks: int) -> dict[str, Any]:
    started = time.monotonic()
    times: list[float] = []
    statuses: list[str] = []
    # the same heal every time: no memory across runs (a recalled solution would change it)
    config = HealConfig(autonomy="full_auto", on_headless="approve", memory=False)
    for outcome in heal_many([DEMO_SPEC] * tasks, provider="mock", config=config, executor=engine):
        times.append(time.monotonic() - started)
        statuses.append(outcome.status)
    total = times[-1]
    steady = (len(times) - 1) / (times[-1] - times[0]) * 60 if len(times) > 1 else float("nan")
    return {
        "tasks": len(times),
        "verified": statuses.count("verified"),
        "startup": times[0],
        "total": total,
        "per_minute": len(times) / total * 60,
        "steady_per_minute": steady,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=24, help="heals per configuration")
    parser.add_argument(
        "--configs",
        default="local:1,local:2,dask:1,dask:2",
        help="comma-separated ENGINE:WORKERS (engine local or dask)",
    )
    parser.add_argument("--pool-size", type=int, default=2, help="kernels per worker's pool")
    args = parser.parse_args()
    rows = []
    for item in args.configs.split(","):
        name, _, workers = item.strip().partition(":")
        engine = make_engine(name, workers=int(workers or 1), pool_size=args.pool_size)
        result = measure(engine, args.tasks)
        rows.append((item.strip(), result))
        print(f"{item}: {result}", flush=True)
    load = os.getloadavg()
    print()
    print(
        f"{args.tasks} scripted demo heals per configuration; kernel pool of {args.pool_size} "
        f"per worker; {os.cpu_count()} logical cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min)"
    )
    print()
    print(
        "| engine:workers | tasks | verified | start-up to first result s | total s | tasks/min | tasks/min after the first |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['tasks']} | {r['verified']} | {r['startup']:.1f} | {r['total']:.1f} "
            f"| {r['per_minute']:.1f} | {r['steady_per_minute']:.1f} |"
        )


if __name__ == "__main__":
    main()
