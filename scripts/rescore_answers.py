"""Re-scores a benchmark run's `verified` under the rule that your answers to questions steer
the choice but verify only beside an example or a test of yours (``TestCase.answer``), without
a model: the rule changes only the final status, never the route of a run, so a record's
status under it follows from its tests and its questions.

    PYTHONPATH=. python scripts/rescore_answers.py evaluation/results/notebook-local-r8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _still_verified(record: dict) -> bool:  # type: ignore[type-arg]
    """Whether a verified record stays verified: a trusted test other than an answer passed
    (a verified record's trusted tests all passed)."""
    answers = {q.get("test_id") for q in record.get("questions") or []}
    return any(t["trusted"] and t["id"] not in answers for t in record["tests"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a benchmark output folder (results.jsonl)")
    args = parser.parse_args()
    rows: dict[str, list[int]] = {}
    for line in (args.run / "results.jsonl").open():
        r = json.loads(line)
        row = rows.setdefault(r["mode"], [0, 0, 0, 0])
        if r["verified"]:
            row[0] += 1
            row[1] += not r["passed"]
            if _still_verified(r):
                row[2] += 1
                row[3] += not r["passed"]
    print("| mode | verified as run (of them wrong) | under the rule (of them wrong) |")
    print("|---|---:|---:|")
    for mode, (before, wrong, now, wrong_now) in rows.items():
        print(f"| `{mode}` | {before} ({wrong}) | {now} ({wrong_now}) |")


if __name__ == "__main__":
    main()
