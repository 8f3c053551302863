"""Suites load, and every builtin reference solution passes its own reference tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_fakes import wrong_solution

from evaluation.errors import SuiteError
from evaluation.scoring import score
from evaluation.suite_file import check_solutions
from evaluation.suites import BuiltinSuite, HumanEvalSuite, Suite, Task, get_suite, select_tasks
from selfheal.kernel_sandbox import KernelPool


def test_builtin_suite_has_twenty_plus_distinct_tasks(builtin_tasks: list[Task]) -> None:
    assert len(builtin_tasks) >= 20
    assert len({t.id for t in builtin_tasks}) == len(builtin_tasks)
    assert {t.category for t in builtin_tasks} >= {
        "intervals",
        "parsing",
        "text",
        "numeric",
        "dates",
    }
    for task in builtin_tasks:
        assert task.entry_point in task.prompt, task.id
        assert task.reference_tests and task.canonical_solution


@pytest.mark.parametrize("suite", ["builtin", "example"])
def test_reference_solutions_pass_their_reference_tests_and_nothing_else_does(
    suite: str, pool: KernelPool
) -> None:
    """Every task of the builtin and the example suite has a solution that passes its hidden
    tests in the sandbox, and a do-nothing solution fails every task."""
    tasks = get_suite(suite).tasks()
    assert all(task.canonical_solution for task in tasks)
    assert check_solutions(tasks, pool) == {}
    accepted = [t.id for t in tasks if score(t, wrong_solution(t), pool).passed]
    assert accepted == []


def test_humaneval_suite_loads_164_problems_with_helpers_in_context() -> None:
    tasks = HumanEvalSuite().tasks()
    assert len(tasks) == 164
    by_id = {t.id: t for t in tasks}
    poly_task = by_id["HumanEval/32"]
    assert "def poly(" in poly_task.context_code
    assert "def find_zero" not in poly_task.context_code
    # The reference defines the helper again, so a candidate cannot swap it.
    assert poly_task.reference_tests[0].index("def poly(") < poly_task.reference_tests[0].index(
        "def check("
    )
    assert poly_task.reference_tests[0].rstrip().endswith("check(find_zero)")
    assert by_id["HumanEval/0"].context_code.strip() == "from typing import List"


def test_humaneval_canonical_solutions_pass(pool: KernelPool) -> None:
    tasks = {t.id: t for t in HumanEvalSuite().tasks()}
    for task_id in ["HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/50"]:
        task = tasks[task_id]
        assert score(task, task.canonical_solution, pool).passed, task_id


def test_suites_implement_the_protocol_and_register_by_name() -> None:
    assert isinstance(get_suite("builtin"), Suite)
    assert isinstance(get_suite("humaneval"), Suite)
    with pytest.raises(SuiteError, match="Unknown suite"):
        get_suite("nope")


def test_select_tasks_by_ids_and_limit(builtin_tasks: list[Task]) -> None:
    ids = [builtin_tasks[3].id, builtin_tasks[1].id]
    chosen = select_tasks(builtin_tasks, task_ids=ids)
    assert [t.id for t in chosen] == [builtin_tasks[1].id, builtin_tasks[3].id]
    assert len(select_tasks(builtin_tasks, limit=5)) == 5
    with pytest.raises(SuiteError, match="Unknown task id"):
        select_tasks(builtin_tasks, task_ids=["missing/task"])


def test_invalid_task_file_is_reported_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("id: x\ncategory: y\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=r"bad\.yaml"):
        BuiltinSuite(tmp_path).tasks()


def test_demo_suite_scores_the_demo_script_right_and_wrong(pool: KernelPool) -> None:
    """The ``demo`` suite is the one task the mock answers; its hidden tests accept a correct
    median and reject the script's first (upper-middle) answer."""
    (task,) = get_suite("demo").tasks()
    assert task.id == "demo/median" and task.entry_point == "median"
    assert task.canonical_solution is not None
    assert score(task, task.canonical_solution, pool).passed
    upper_middle = "def median(values):\n    return sorted(values)[len(values) // 2]\n"
    verdict = score(task, upper_middle, pool)
    assert not verdict.passed and "median([10, 20]) == 15" in verdict.message
    assert not any(t in task.prompt for t in ("[10, 20]", "[5]", "[9, -4")), "tests stay hidden"
