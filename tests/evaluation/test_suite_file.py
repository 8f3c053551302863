"""Your own suite (``--suite PATH``): the file format, an error per malformed task with its
line and field, the example suite (every reference solution passes its hidden tests in the
sandbox), the honesty check on it, and a benchmark run of it with its report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eval_fakes import oracle_provider

from evaluation.errors import SuiteError
from evaluation.honesty import check_messages, secret_assertions
from evaluation.results_file import ResultsFile
from evaluation.run_benchmark import main
from evaluation.scoring import score
from evaluation.suite_file import load_suite_file, task_from_mapping
from evaluation.suites import SUITE_FILES_DIR, Task, get_suite
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.base import Message

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = SUITE_FILES_DIR / "example.jsonl"

GOOD = {
    "id": "t/add",
    "spec": "Write `add(a, b)` returning a + b.",
    "tests": "assert add(1, 2) == 3",
}

MALFORMED = [
    ('{"id": "a", "spec": "Write `f(x)`."', "line 1: not valid JSON"),
    ('["id", "spec"]', "line 2: a task must be a mapping of fields, got list"),
    ('{"spec": "Write `f(x)`.", "tests": "assert f(1)"}', "line 3: field 'id': missing"),
    ('{"id": "b", "tests": "assert f(1)"}', "line 4: field 'spec': missing"),
    ('{"id": "c", "spec": "Write `f(x)`."}', "line 5: field 'tests': missing"),
    ('{"id": "d", "spec": "Write `f(x)`.", "tests": "assert f(1"}', "line 6: field 'tests': not valid Python"),
    ('{"id": "e", "spec": "Write `f(x)`.", "tests": 3}', "line 7: field 'tests': got int"),
    ('{"id": "f", "spec": "Write `f(x)`.", "tests": []}', "line 8: field 'tests': a list must hold"),
    ('{"id": "g", "spec": "Write `f(x)`.", "test": "assert f(1)"}', "line 9: field 'test': unknown"),
    ('{"id": "h", "spec": "Any function.", "tests": "assert True"}', "line 10: field 'entry_point': missing, and the spec shows no signature"),
    ('{"id": "i", "spec": "def f(x): ... def g(y): ...", "tests": "assert 1"}', "line 11: field 'entry_point': missing, and the spec defines f, g"),
    ('{"id": "j", "spec": "Write `f(x)`.", "tests": "assert 1", "entry_point": "not a name"}', "line 12: field 'entry_point': 'not a name' is not a Python name"),
    ('{"id": "k", "spec": "Write `f(x)`.", "tests": "def test_a(tmp_path):\\n    assert f(1)"}', "line 13: field 'tests': test function test_a() takes arguments"),
    ('{"id": "l", "spec": "Write `f(x)`.", "tests": "assert f(1)", "setup": "import ("}', "line 14: field 'setup': not valid Python"),
    ('{"id": "m", "spec": "Write `f(x)`.", "tests": "assert f(1)", "category": ""}', "line 15: field 'category': got str ''"),
    ('{"id": 7, "spec": "Write `f(x)`.", "tests": "assert f(1)"}', "line 16: field 'id': got int 7"),
    ('{"id": "n", "spec": "Write `f(x)`.", "tests": "assert f(1)", "solution": "def f(:"}', "line 17: field 'solution': not valid Python"),
    (json.dumps(GOOD), ""),
    (json.dumps(GOOD), "line 19: field 'id': 't/add' is already the id of line 18"),
]  # fmt: skip
"""Each malformed line of a suite file, and the error that must name it."""


def test_every_malformed_line_is_reported_with_its_number_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(line for line, _ in MALFORMED) + "\n", encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_suite_file(path)
    message = str(caught.value)
    wanted = [why for _, why in MALFORMED if why]
    assert f"has {len(wanted)} malformed task(s)" in message
    reported = [line.strip() for line in message.splitlines() if line.startswith("  line ")]
    assert len(reported) == len(wanted)
    for line, why in zip(reported, wanted, strict=True):
        assert line.startswith(why), (line, why)


def test_a_malformed_suite_exits_2_with_the_line_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + '{"id": "x", "spec": "s"}\n', encoding="utf-8")
    command = [sys.executable, "-m", "evaluation.run_benchmark", "--suite", str(path)]
    done = subprocess.run(
        [*command, "--model", "mock", "--list-tasks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done
    assert "line 3: field 'spec': got str 's'" not in done.stderr  # 's' is a fine spec
    assert "line 3: field 'tests': missing" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_suite_names_and_missing_files_say_what_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"or give the path of your own suite file"):
        get_suite("nope")
    with pytest.raises(SuiteError, match=r"No suite file"):
        get_suite(str(tmp_path / "missing.jsonl"))
    with pytest.raises(SuiteError, match=r"holds no task"):
        (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
        get_suite(str(tmp_path / "empty.jsonl")).tasks()


def test_tests_forms_become_reference_tests_with_the_setup_first() -> None:
    pytest_style = (
        "X = 2\n\ndef test_one():\n    assert f(1) == X\n\ndef test_two():\n    assert f(2) == 4\n"
    )
    task = task_from_mapping(
        {"id": "t", "spec": "def f(x):\n    ...", "tests": pytest_style, "setup": "import math"},
        suite="mine",
    )
    assert task.entry_point == "f" and task.category == "default" and task.suite == "mine"
    assert len(task.reference_tests) == 2
    assert task.reference_tests[0].startswith("import math\n\nX = 2")
    assert task.reference_tests[0].rstrip().endswith("test_one()")
    assert task.reference_tests[1].rstrip().endswith("test_two()")
    asserts = task_from_mapping(
        {**GOOD, "tests": "assert add(1, 2) == 3\nassert add(0, 0) == 0"}, suite="s"
    )
    assert asserts.reference_tests == ("assert add(1, 2) == 3\nassert add(0, 0) == 0\n",)
    listed = task_from_mapping(
        {**GOOD, "tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}, suite="s"
    )
    assert len(listed.reference_tests) == 2
    assert task_from_mapping({**GOOD, "entry_point": "plus"}, suite="s").entry_point == "plus"


def test_pytest_style_tests_fail_one_by_one_in_the_sandbox(pool: KernelPool) -> None:
    task = task_from_mapping(
        {
            "id": "t",
            "spec": "Write `half(n)`.",
            "tests": "def test_even():\n    assert half(4) == 2\n\ndef test_odd():\n    assert half(3) == 1.5\n",
        },
        suite="s",
    )
    assert score(task, "def half(n):\n    return n / 2\n", pool).passed
    verdict = score(task, "def half(n):\n    return n // 2\n", pool)
    assert not verdict.passed and verdict.failing_test == "ref-1"
    assert verdict.failing_assertion == "assert half(3) == 1.5"


def test_a_yaml_suite_reads_like_jsonl_and_reports_lines(tmp_path: Path) -> None:
    good = tmp_path / "mine.yaml"
    good.write_text(
        "- id: t/add\n  spec: Write `add(a, b)`.\n  tests: |\n    assert add(1, 2) == 3\n"
        "- id: t/neg\n  category: math\n  spec: Write `neg(a)`.\n  tests: [assert neg(1) == -1]\n",
        encoding="utf-8",
    )
    tasks = get_suite(str(good)).tasks()
    assert [(t.id, t.entry_point, t.category) for t in tasks] == [
        ("t/add", "add", "default"),
        ("t/neg", "neg", "math"),
    ]
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "- id: a\n  spec: Write `f(x)`.\n  tests: assert f(1)\n- id: b\n  spec: Write `g(x)`.\n",
        encoding="utf-8",
    )
    with pytest.raises(SuiteError, match=r"line 4: field 'tests': missing"):
        load_suite_file(bad)
    with pytest.raises(SuiteError, match=r"a YAML suite is a list of tasks"):
        (tmp_path / "map.yaml").write_text("id: a\n", encoding="utf-8")
        load_suite_file(tmp_path / "map.yaml")


@pytest.fixture(scope="module")
def example_tasks() -> list[Task]:
    return get_suite("example").tasks()


def test_the_example_suite_has_twenty_plus_tasks_unlike_humaneval(
    example_tasks: list[Task],
) -> None:
    assert len(example_tasks) >= 20
    assert len({t.id for t in example_tasks}) == len(example_tasks)
    assert {t.category for t in example_tasks} == {"parsing", "dates", "intervals", "data"}
    assert all(t.canonical_solution for t in example_tasks)
    assert get_suite(str(EXAMPLE)).tasks() == [
        t.model_copy(update={"suite": str(EXAMPLE)}) for t in example_tasks
    ]


# Every example solution passing its hidden tests in the sandbox, and a do-nothing solution
# failing every task: tests/evaluation/test_suites.py (with the builtin suite's).


def test_the_example_hidden_tests_are_secret_and_a_leak_would_be_caught(
    example_tasks: list[Task],
) -> None:
    """The same honesty check as HumanEval's: every task has hidden assertions that are not
    in its spec, and a message carrying one is reported as a leak."""
    for task in example_tasks:
        secrets = secret_assertions(task)
        assert secrets, task.id
        assert check_messages(task, [Message(role="user", content=task.prompt)]).clean, task.id
        leaked = check_messages(
            task, [Message(role="user", content=task.prompt + "\n" + secrets[-1])]
        )
        assert leaked.leaks == (secrets[-1],), task.id


def test_a_benchmark_of_the_example_suite_and_its_report(
    example_tasks: list[Task], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole example suite, single shot and heal, with a scripted model that answers each
    task with its reference solution except two: the report counts them, and no hidden test
    reached the model."""
    wrong = {example_tasks[0].id, example_tasks[5].id}
    out = tmp_path / "out"
    args = ["--suite", str(EXAMPLE), "--provider", "mock:oracle", "--modes", "single_shot,heal",
            "--out", str(out), "--no-progress", "--no-hash"]  # fmt: skip
    assert main(args, provider=oracle_provider(example_tasks, wrong=wrong)) == 0
    records = ResultsFile(out / "results.jsonl").read()
    assert len(records) == 2 * len(example_tasks)
    assert not any(r.error for r in records)
    assert {r.task_id for r in records if not r.passed} == wrong
    assert all(r.honesty.clean and r.honesty.secret_assertions > 0 for r in records)
    n = len(example_tasks)
    ok = f"{n - 2} ({100 * (n - 2) / n:.1f}%)"
    table = (out / "results.md").read_text()
    assert f"| single_shot | {n} | {ok}" in table and f"| heal | {n} | {ok}" in table
    assert f"# Benchmark: {EXAMPLE} with `mock:oracle`" in table
    summary = json.loads((out / "results.json").read_text())
    assert summary["settings"]["suite"] == str(EXAMPLE) and summary["complete"]
    assert set(summary["metrics"]["heal"]["by_category"]) == {
        "parsing",
        "dates",
        "intervals",
        "data",
    }
    assert f"| heal | {n} | {ok}" in capsys.readouterr().out
    # what a right answer cost, per mode, and what each candidate cost
    for mode in ("single_shot", "heal"):
        m = summary["metrics"][mode]
        per_pass = (m["prompt_tokens"] + m["completion_tokens"]) / m["passed"]
        assert m["tokens_per_pass"] == per_pass
    assert "| tok per right answer |" in table
    for r in records:
        assert r.candidates or r.mode == "single_shot"
        assert all(c["cost"]["prompt_tokens"] > 0 for c in r.candidates)
        assert all(c["cost"]["sandbox_seconds"] > 0 for c in r.candidates if c["loaded"])


def test_the_scripted_demo_refuses_another_suite_before_running(tmp_path: Path) -> None:
    args = ["--suite", "example", "--model", "mock", "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(args) == 2
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_suite_file_needs_no_name_and_its_results_go_by_its_stem(tmp_path: Path) -> None:
    from evaluation.run_benchmark import _default_out

    assert _default_out(str(tmp_path / "team.jsonl"), "local") == Path(
        "evaluation/results/team-local"
    )
    assert _default_out("example", "mock:x.yaml") == Path("evaluation/results/example-mock-x.yaml")
