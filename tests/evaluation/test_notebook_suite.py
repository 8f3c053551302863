"""The notebook suite (``--suite notebook``, ``evaluation/suites/notebook.jsonl``; issue 44):
specs as data scientists type them in a notebook, each with hidden tests and a reference
solution checked in the real sandbox here; and the two fields it added to the suite-file
format, ``code`` (a failing cell to heal) and ``examples`` (how many the spec states)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from eval_fakes import wrong_solution

from evaluation.errors import SuiteError
from evaluation.honesty import normalise
from evaluation.pair import run_pair
from evaluation.scoring import score
from evaluation.suite_checks import check_examples, check_solutions
from evaluation.suite_file import load_suite_file, main
from evaluation.suites import SUITE_FILES_DIR, Task, get_suite
from selfheal import HealRequest
from selfheal.config import HealConfig
from selfheal.examples import example_assert, read_examples
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider
from selfheal.state.cases import Example

SUITE = SUITE_FILES_DIR / "notebook.jsonl"

FRAME_VALUES = ("pd.DataFrame(", "pd.Series(", "np.array(", "array(")
"""How an example's value starts when it is a DataFrame, a Series or an array: the sandbox
compares those with ``==``, whose truth it does not trust (below)."""


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return get_suite("notebook").tasks()


def _examples(task: Task) -> tuple[Example, ...]:
    return read_examples(task.prompt, task.entry_point)[0]


def _non_literal(value: str) -> bool:
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return True
    return False


def test_registered_by_name_with_the_kinds_and_counts_it_promises(tasks: list[Task]) -> None:
    assert len(tasks) >= 30
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(t.suite == "notebook" and t.canonical_solution for t in tasks)
    per_category = {c: sum(t.category == c for t in tasks) for c in {t.category for t in tasks}}
    assert per_category["dates"] >= 6 and per_category["money"] >= 5
    assert per_category["text"] >= 6 and per_category["dataframe"] >= 7
    assert per_category["numpy"] >= 3
    doctests = [t for t in tasks if '"""' in t.prompt and ">>> " + t.entry_point in t.prompt]
    non_literal = [t for t in tasks if any(_non_literal(e.expected) for e in _examples(t))]
    no_example = [t for t in tasks if not _examples(t) and t.examples == 0]
    cells = [t for t in tasks if t.code is not None]
    assert len(doctests) >= 8, [t.id for t in doctests]
    assert len(non_literal) >= 8, [t.id for t in non_literal]
    assert len(no_example) >= 6, [t.id for t in no_example]
    assert len(cells) >= 4, [t.id for t in cells]


def test_every_example_a_spec_states_is_read_as_a_trusted_test(tasks: list[Task]) -> None:
    """Each task says how many examples its spec states; selfheal reads exactly that many,
    and nothing that looks like an example is left unread."""
    assert all(t.examples is not None for t in tasks)
    assert check_examples(tasks) == {}
    assert {t.id: read_examples(t.prompt, t.entry_point)[1] for t in tasks} == {
        t.id: () for t in tasks
    }


def test_no_hidden_test_is_in_the_spec_or_the_starting_code(tasks: list[Task]) -> None:
    """No assertion of a hidden test, and no call with a value in it that a hidden test
    makes, appears in what the agent sees (the spec, and the failing cell's code)."""
    for task in tasks:
        public = normalise(task.prompt + "\n" + (task.code or ""))
        for source in task.reference_tests:
            for node in ast.walk(ast.parse(source)):
                shown = isinstance(node, ast.Assert) or (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == task.entry_point
                    and any(isinstance(n, ast.Constant) for n in ast.walk(node))
                )
                segment = ast.get_source_segment(source, node) if shown else None
                assert segment is None or normalise(segment) not in public, (task.id, segment)


def test_reference_solutions_pass_every_hidden_test_in_the_sandbox(
    tasks: list[Task], pool: KernelPool
) -> None:
    assert check_solutions(tasks, pool) == {}
    accepted = [t.id for t in tasks if score(t, wrong_solution(t), pool).passed]
    assert accepted == []


def test_each_failing_cell_fails_its_hidden_tests_and_is_a_valid_request(
    tasks: list[Task], pool: KernelPool
) -> None:
    """The starting code is a real bug (it fails a hidden test in the sandbox) and a heal
    accepts it as ``code=`` (``HealRequest``'s checks, before any model call)."""
    cells = [t for t in tasks if t.code is not None]
    for task in cells:
        assert task.code is not None
        verdict = score(task, task.code, pool)
        assert not verdict.passed, task.id
        HealRequest(task.prompt, entry_point=task.entry_point, code=task.code)


def _example_tests(tasks: list[Task], frames: bool) -> list[tuple[Task, str]]:
    return [
        (task, example_assert(ex))
        for task in tasks
        for ex in _examples(task)
        if ex.expected.startswith(FRAME_VALUES) == frames
    ]


def _failing_examples(cases: list[tuple[Task, str]], pool: KernelPool) -> list[str]:
    failing = []
    for task, test in cases:
        check = task.model_copy(update={"reference_tests": (test,)})
        assert task.canonical_solution is not None
        if not score(check, task.canonical_solution, pool).passed:
            failing.append(f"{task.id}: {test.splitlines()[-1][:90]}")
    return failing


def test_the_reference_solution_passes_every_example_test_in_the_sandbox(
    tasks: list[Task], pool: KernelPool
) -> None:
    """The test a heal makes of each example (``example_assert``) passes on the reference
    solution in the sandbox: no example is misread into a test that fails right code."""
    cases = _example_tests(tasks, frames=False)
    assert len(cases) >= 20
    assert _failing_examples(cases, pool) == []


def test_dataframe_and_array_examples_pass_on_the_reference_solution(
    tasks: list[Task], pool: KernelPool
) -> None:
    """DataFrame, Series and array examples compare as data on the host (docs/sandbox.md,
    "Verdicts on the host"): right code passes them."""
    cases = _example_tests(tasks, frames=True)
    assert len(cases) >= 5
    assert _failing_examples(cases, pool) == []


# --------------------------------------------------------------------------- the format


def _write(tmp_path: Path, **fields: Any) -> Path:
    task = {
        "id": "t/add",
        "spec": "Write `add(a, b)` that adds two numbers. add(2, 3) -> 5",
        "tests": "assert add(1, 1) == 2",
        **fields,
    }
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(task) + "\n", encoding="utf-8")
    return path


def test_code_and_examples_fields_reach_the_task(tmp_path: Path) -> None:
    code = "def add(a, b):\n    return a - b\n"
    (task,) = load_suite_file(_write(tmp_path, code=code, examples=1))
    assert task.code == code and task.examples == 1
    (plain,) = load_suite_file(_write(tmp_path))
    assert plain.code is None and plain.examples is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"code": "def plus(a, b):\n    return a + b\n"},
            "field 'code': defines no function add()",
        ),
        ({"code": "def add(a, b) return"}, "field 'code': not valid Python"),
        ({"examples": -1}, "field 'examples': got -1; it must be how many examples"),
        ({"examples": "2"}, "field 'examples': got '2'"),
        ({"examples": True}, "field 'examples': got True"),
    ],
)
def test_bad_code_or_examples_is_a_malformed_task(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(
        SuiteError, match="line 1: " + message.replace("(", r"\(").replace(")", r"\)")
    ):
        load_suite_file(_write(tmp_path, **fields))


def test_suite_file_check_reports_a_spec_whose_examples_are_not_all_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m evaluation.suite_file`` fails (exit 1) when fewer examples are read than the
    task says its spec states, and says which example was not read and why."""
    spec = "Write `add(a, b)`. add(2, 3) -> 5, and add(1, 2) -> three"
    path = _write(tmp_path, spec=spec, examples=2)
    (task,) = load_suite_file(path)
    assert check_examples([task]) == {
        "t/add": "1 example(s) read, 2 stated; not read: add(1, 2) -> three (the expected value "
        "uses the name `three`, which an example cannot refer to; write the value itself (a "
        "string needs quotes: 'three'))"
    }
    assert main([str(path)]) == 1
    assert "FAIL t/add: 1 example(s) read, 2 stated" in capsys.readouterr().out


class _Recorder:
    """A heal function that records its keywords, then fails like a broken agent would."""

    def __init__(self) -> None:
        self.keywords: list[dict[str, Any]] = []

    def __call__(self, spec: str, **keywords: Any) -> Any:
        self.keywords.append(keywords)
        raise RuntimeError("recorded")


def test_the_runner_gives_the_starting_code_to_the_agent(tasks: list[Task]) -> None:
    """A task with starting code is healed with ``code=`` (as ``--code`` gives it); a task
    without gets no ``code`` keyword (a heal function may not take one)."""
    cell = next(t for t in tasks if t.code is not None)
    spec_only = next(t for t in tasks if t.code is None)
    heal = _Recorder()
    for task in (cell, spec_only):
        record = run_pair(
            task,
            "heal",
            config=HealConfig(),
            provider=MockProvider(),
            heal=heal,
            executor=lambda: pytest.fail("nothing is scored when the agent raised"),
        )
        assert record.status == "harness_error"
    assert heal.keywords[0]["code"] == cell.code
    assert "code" not in heal.keywords[1]
