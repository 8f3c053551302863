"""Where a benchmark run's wrong results show on its own probe inputs, without a model: for
each heal run, the probe inputs on which the chosen code's output differs from the task's
reference solution (run in the sandbox, as the simulated user runs it), split by whether the
candidates passing the trusted tests all agreed there. A question picked by disagreement can
reach a difference only where they split; one where they agreed is a mistake they share.

    PYTHONPATH=. python scripts/shared_mistakes.py evaluation/results/notebook-local-r8 \\
        --suite evaluation/suites/notebook.jsonl
"""

from __future__ import annotations

import argparse
import json
import lzma
from collections import Counter
from pathlib import Path
from typing import Any

from evaluation.scoring import DEFAULT_LIMITS
from evaluation.simulated_user import reference_output
from evaluation.suite_file import load_suite_file
from evaluation.task import Task
from selfheal.kernel_sandbox import KernelPool

Json = dict[str, Any]


def _last_state(run: Path, record: Json) -> Json | None:
    path = run / "runs" / f"{record['run_id']}.jsonl.xz"
    if not path.exists():
        return None
    with lzma.open(path, "rt") as f:
        lines = f.read().splitlines()
    return json.loads(lines[-1]) if lines else None


def _passing(state: Json) -> list[Json]:
    """The candidates that load and pass every trusted test."""
    trusted = [t["id"] for t in state["tests"] if t["trusted"]]
    out = []
    for c in state["candidates"]:
        report = c.get("report")
        if not report or not report["load"]["ok"]:
            continue
        outcomes = {r["test_id"]: r["outcome"] for r in report["results"]}
        if all(outcomes.get(t) == "passed" for t in trusted):
            out.append(c)
    return out


def differences(
    task: Task, chosen: Json, passing: list[Json], state: Json, pool: KernelPool
) -> list[Json]:
    """The probe inputs where the chosen code's output is not the reference's."""
    rows = []
    for p in state["probes"]:
        mine = chosen.get("behaviour", {}).get(p["id"])
        if mine is None or mine.startswith("<"):
            continue  # no value (a timeout)
        want = reference_output(task, p["call"], pool, DEFAULT_LIMITS)
        if want is None or want == mine:
            continue
        outputs = {c.get("behaviour", {}).get(p["id"]) for c in passing}
        agreed = len(passing) >= 2 and len(outputs) == 1
        rows.append({"call": p["call"], "origin": p["origin"], "agreed": agreed, "chosen": mine})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a benchmark output folder (results.jsonl, runs/)")
    parser.add_argument("--suite", type=Path, required=True, help="the suite's JSONL file")
    parser.add_argument("--mode", default="heal", help="the mode whose runs to read (heal)")
    args = parser.parse_args()
    tasks = {t.id: t for t in load_suite_file(args.suite)}
    counts: Counter[tuple[str, str]] = Counter()
    with KernelPool(size=2) as pool:
        for line in (args.run / "results.jsonl").open():
            record = json.loads(line)
            if record["mode"] != args.mode:
                continue
            state = _last_state(args.run, record)
            verdict = "right" if record["passed"] else "wrong"
            status = "verified" if record["verified"] else "not verified"
            if state is None or record["passed"]:
                counts[(f"{verdict}, {status}", "")] += 1
                continue
            chosen_id = next((c["id"] for c in record["candidates"] if c.get("chosen")), None)
            chosen = next((c for c in state["candidates"] if c["id"] == chosen_id), None)
            passing = _passing(state)
            rows = []
            if chosen is None or not chosen.get("behaviour"):
                where = "(no chosen code with outputs on the probes)"
            elif not passing:
                where = "(no candidate passes the trusted tests)"
            else:
                rows = differences(tasks[record["task_id"]], chosen, passing, state, pool)
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
