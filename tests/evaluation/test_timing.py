"""Where heal's time goes (``evaluation.timing``): each run's path read from its record, and
the table beside another mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.pair import error_record
from evaluation.records import TaskRecord, TestRecord
from evaluation.results_file import ResultsFile
from evaluation.suites import Task
from evaluation.timing import main, path_of, timing_table
from selfheal.config import HealConfig

EX = TestRecord(id="ex1", origin="example", trusted=True, code="assert f(1) == 1")


def run(
    task: Task, mode: str, wall: float, passed: bool, *outcomes: str, repaired: bool = False
) -> TaskRecord:
    """A record whose candidates (greedy first, then samples) had these outcomes on ``ex1``."""
    origins = ["greedy", *["sample"] * (len(outcomes) - 1)]
    candidates = tuple(
        {"id": f"c{i}", "origin": o, "round": 1, "outcomes": {"ex1": out}}
        for i, (o, out) in enumerate(zip(origins, outcomes, strict=True))
    )
    return error_record(task, mode, HealConfig(first_sample=2), "mock:x", "").model_copy(
        update={
            "wall_time": wall,
            "passed": passed,
            "tests": (EX,),
            "candidates": candidates,
            "diagnoses": ({"root_cause": "x"},) if repaired else (),
        }
    )


def test_paths_and_the_table(builtin_tasks: list[Task], tmp_path: Path) -> None:
    a, b, c, d = builtin_tasks[:4]
    heal = [
        run(a, "heal", 10, True, "passed", "passed"),
        run(b, "heal", 30, True, "passed", "failed", "passed", "passed"),
        run(c, "heal", 31, False, "failed", "failed", "passed", "failed"),
        run(d, "heal", 66, True, "failed", "failed", "failed", "failed", repaired=True),
    ]
    assert [path_of(r) for r in heal] == ["settled", "topped_up", "greedy_failed", "repaired"]
    other = [run(t, "sample-5", 7, t is a, "passed") for t in (a, b, c, d)]
    table = timing_table([*heal, *other], "heal", "sample-5")
    assert (
        "| greedy answer passes the examples; the first answers agree, stop | 1 | 10.0 | 7.0 | 1 | 1 |"
        in table
    )
    assert (
        "| no candidate passes: the diagnosis and a repair round | 1 | 66.0 | 7.0 | 1 | 0 |"
        in table
    )
    results = ResultsFile(tmp_path / "results.jsonl")
    for r in [*heal, *other]:
        results.append(r)
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path), "--against", "sample-9"]) == 2


def test_no_trusted_test_is_the_greedy_failed_path(builtin_tasks: list[Task]) -> None:
    r = run(builtin_tasks[0], "heal", 1, True, "passed").model_copy(update={"tests": ()})
    assert path_of(r) == "greedy_failed"
    assert path_of(r.model_copy(update={"candidates": ()})) is None


def test_a_missing_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
