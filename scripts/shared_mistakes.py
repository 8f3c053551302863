"""Where a benchmark run's wrong results show on its own probe inputs, without a model: for
each heal run, the probe inputs on which the chosen code's output differs from the task's
reference solution (run in the sandbox, as the simulated user runs it), split by whether the
candidates passing the trusted tests all agreed there. A question picked by disagreement can
reach a difference only where they split; one where they agreed is a mistake they share.

    PYTHONPATH=. python scripts/shared_mistakes.py evaluation/results/notebook-local-r8
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from evaluation.scoring import DEFAULT_LIMITS
from evaluation.simulated_user import reference_output
from evaluation.suites import get_suite
from evaluation.task import Task
from selfheal.agreement import select
from selfheal.graph.checkpoint import read_states
from selfheal.kernel_sandbox import KernelPool
from selfheal.state import Candidate, HealState

Json = dict[str, Any]


def differences(
    task: Task, chosen: Candidate, passing: list[Candidate], state: HealState, pool: KernelPool
) -> list[Json]:
    """The probe inputs where the chosen code's output is not the reference's."""
    rows = []
    for p in state.probes:
        mine = chosen.behaviour.get(p.id)
        if mine is None or mine.startswith("<"):
            continue  # no value (a timeout)
        want = reference_output(task, p.call, pool, DEFAULT_LIMITS)
        if want is None or want == mine:
            continue
        outputs = {c.behaviour.get(p.id) for c in passing}
        agreed = len(passing) >= 2 and len(outputs) == 1
        rows.append({"call": p.call, "origin": p.origin, "agreed": agreed, "chosen": mine})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a benchmark output folder (results.jsonl, runs/)")
    parser.add_argument("--mode", default="heal", help="the mode whose runs to read (heal)")
    args = parser.parse_args()
    counts: Counter[tuple[str, str]] = Counter()
    records = [json.loads(line) for line in (args.run / "results.jsonl").open()]
    tasks = {
        (suite, t.id): t
        for suite in {r["suite"] for r in records}
        for t in get_suite(suite).tasks()
    }
    with KernelPool(size=2) as pool:
        for record in records:
            if record["mode"] != args.mode:
                continue
            log = args.run / "runs" / f"{record['run_id']}.jsonl.xz"
            verdict = "right" if record["passed"] else "wrong"
            status = "verified" if record["verified"] else "not verified"
            if not log.exists() or record["passed"]:
                counts[(f"{verdict}, {status}", "")] += 1
                continue
            state = read_states(log)[-1]
            chosen_id = next((c["id"] for c in record["candidates"] if c.get("chosen")), None)
            chosen = next((c for c in state.candidates if c.id == chosen_id), None)
            passing = list(select(state).passing)  # (the candidates questions are about)
            rows = []
            if chosen is None or not chosen.behaviour:
                where = "(no chosen code with outputs on the probes)"
            elif not passing:
                where = "(no candidate passes the trusted tests)"
            else:
                task = tasks[(record["suite"], record["task_id"])]
                rows = differences(task, chosen, passing, state, pool)
                where = (
                    "on an input where they agreed"
                    if any(r["agreed"] for r in rows)
                    else "only where they split"
                    if rows
                    else "on no probe input"
                )
            shared = [r for r in rows if r["agreed"]]
            counts[(f"{verdict}, {status}", where)] += 1
            for r in shared:
                print(f"shared: {record['task_id']}: {r['call'][:80]} ({r['origin']})")
            if where == "on no probe input":
                print(f"on no probe input: {record['task_id']} ({status})")
    print()
    print("| result | the chosen code differs from the reference | runs |")
    print("|---|---|---:|")
    for (result, where), n in sorted(counts.items()):
        print(f"| {result} | {where or '-'} | {n} |")


if __name__ == "__main__":
    main()
