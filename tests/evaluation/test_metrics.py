"""Metrics that are functions of the records alone (no agent, no kernel)."""

from __future__ import annotations

from evaluation.metrics import summarise
from evaluation.records import TaskRecord, TestRecord
from evaluation.scoring import ReferenceVerdict


def record(task: str, status: str, passed: bool, tests: list[tuple[bool, str]]) -> TaskRecord:
    return TaskRecord(
        suite="t",
        task_id=task,
        category="c",
        mode="heal",
        model="mock:x",
        passed=passed,
        first_attempt_passed=passed,
        verified=status == "verified",
        status=status,
        verdict=ReferenceVerdict(passed=passed, outcome="passed" if passed else "failed"),
        tests=tuple(
            TestRecord(id=f"t{i}", origin="example" if trusted else "spec_blind",
                       trusted=trusted, code="assert True", outcome=outcome)
            for i, (trusted, outcome) in enumerate(tests)
        ),
    )  # fmt: skip


def test_disputed_counts_give_ups_where_only_model_tests_fail() -> None:
    records = [
        # trusted passes, a model-written test fails: disputed (and the code was right)
        record("a", "exhausted", True, [(True, "passed"), (False, "failed")]),
        # same dispute, but the reference shows the model's test was right
        record("b", "exhausted", False, [(True, "passed"), (False, "error")]),
        # a trusted test fails: a real failure, not a dispute
        record("c", "exhausted", False, [(True, "failed"), (False, "failed")]),
        # no trusted test at all: nothing settles it either way, not counted
        record("d", "failed", True, [(False, "failed")]),
        # verified runs are never disputed
        record("e", "verified", True, [(True, "passed"), (False, "passed")]),
    ]
    assert [r.disputed for r in records] == [True, True, False, False, False]
    m = summarise(records, "heal")
    assert (m.gave_up, m.disputed, m.disputed_passed, m.false_failure) == (4, 2, 1, 2)
