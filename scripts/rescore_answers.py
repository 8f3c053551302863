"""Re-scores a benchmark run's `verified` under the rule that an answer confirming what every
candidate returned does not verify on its own (``TestCase.confirms``), without a model: the
rule changes only the final status, never the route of a run, so a record's status under it
follows from its tests and its questions.

    PYTHONPATH=. python scripts/rescore_answers.py evaluation/results/notebook-local-r8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selfheal.questions import answer_test
from selfheal.state import Answer, HealState, Question, Spec


def _still_verified(record: dict) -> bool:  # type: ignore[type-arg]
    """Whether a verified record stays verified: a trusted test other than a confirming
    answer passed (a record's trusted tests all passed, or it would not be verified)."""
    confirming = set()
    for asked in record.get("questions") or []:
        question = Question.model_validate(asked["question"])
        answer = Answer.model_validate(asked["answer"])
        state = HealState(spec=Spec(text="", entry_point=question.function))
        test, _ = answer_test(state, question, answer)
        if test is not None and test.confirms and asked.get("test_id"):
            confirming.add(asked["test_id"])
    return any(t["trusted"] and t["id"] not in confirming for t in record["tests"])


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
    print("| mode | verified before (of them wrong) | verified now (of them wrong) |")
    print("|---|---:|---:|")
    for mode, (before, wrong, now, wrong_now) in rows.items():
        print(f"| `{mode}` | {before} ({wrong}) | {now} ({wrong_now}) |")


if __name__ == "__main__":
    main()
