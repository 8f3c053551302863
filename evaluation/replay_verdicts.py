"""Replay the verdicts of a recorded run with the sandbox of this checkout: every candidate a
record kept is run again, without a model, on the run's own tests and on the reference
tests, and each outcome is compared with the one recorded (the candidates' ``outcomes``;
``population.json`` for the reference). Differences are listed one per line.

    python -m evaluation.replay_verdicts evaluation/results/humaneval164-r5 --first 40

Use it when the verdict path changes (docs/sandbox.md, "Verdicts on the host"): the same
code should get the same verdicts, apart from the differences the change intends.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from evaluation.population import _key
from evaluation.records import TaskRecord
from evaluation.results_file import reporting_errors, results_in
from evaluation.scoring import build_candidate, score
from evaluation.suites import get_suite
from selfheal.kernel_sandbox import AssertTest, get_default_pool

__all__ = ["main"]


def _index(task_id: str) -> int:
    tail = task_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def replay(records: Sequence[TaskRecord], reference: dict[str, bool], first: int) -> list[str]:
    """The differences, one line each (``task mode candidate test: recorded -> now``)."""
    pool = get_default_pool()
    suites = {r.suite for r in records}
    tasks = {t.id: t for s in suites for t in get_suite(s).tasks()}
    seen: set[tuple[str, str]] = set()
    diffs: list[str] = []
    counts: Counter[str] = Counter()
    for record in records:
        task = tasks.get(record.task_id)
        if task is None or not 0 <= _index(record.task_id) < first:
            continue
        tests = [AssertTest(id=t.id, code=t.code) for t in record.tests if t.code]
        for cand in record.candidates:
            code = cand.get("code") or ""
            if not code.strip() or (record.task_id, code) in seen:
                continue
            seen.add((record.task_id, code))
            where = f"{record.task_id} {record.mode} {cand.get('id')}"
            recorded = cand.get("outcomes") or {}
            if tests:
                report = pool.run(build_candidate(task, code), tests)
                for r in report.results:
                    before = recorded.get(r.test_id)
                    counts["own tests"] += 1
                    if before is not None and before != r.outcome:
                        diffs.append(
                            f"{where} {r.test_id}: {before} -> {r.outcome} {r.message[:120]!r}"
                        )
            key = _key(record.task_id, code)
            if key in reference:
                counts["reference"] += 1
                now = score(task, code, pool).passed
                if now != reference[key]:
                    diffs.append(f"{where} reference: {reference[key]} -> {now}")
    print(f"compared: {dict(counts)}; candidates: {len(seen)}; differences: {len(diffs)}")
    return diffs


@reporting_errors
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.replay_verdicts", description=__doc__)
    ap.add_argument("results", type=Path, help="a results folder (results.jsonl, population.json)")
    ap.add_argument("--first", type=int, default=40, help="tasks whose number is below this")
    ap.add_argument("--out", type=Path, help="write the differences here (one per line)")
    args = ap.parse_args(argv)
    records = results_in(args.results).read()
    pop = args.results / "population.json"
    reference = json.loads(pop.read_text()) if pop.exists() else {}
    started = time.monotonic()
    diffs = replay(records, reference, args.first)
    for line in diffs:
        print(line)
    print(f"{time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text("".join(f"{d}\n" for d in diffs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
