"""Every test form a suite file's hidden tests may take runs (issue 44, item 5): pytest
functions, ``Test*`` classes and ``unittest.TestCase`` classes each give one reference test
per test, a hidden test that runs nothing is a malformed task, and the leak check tracks
``self.assertEqual(...)`` as it tracks ``assert`` lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.honesty import check_messages, secret_assertions
from evaluation.scoring import score
from evaluation.suite_file import task_from_mapping
from evaluation.suites import Task
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.base import Message

ROOT = Path(__file__).resolve().parents[2]
SPEC = "Write `add(a, b)` that returns a + b."
RIGHT = "def add(a, b):\n    return a + b\n"

UNITTEST = """import unittest


class TestAdd(unittest.TestCase):
    def setUp(self):
        self.base = 2

    def test_small(self):
        self.assertEqual(add(self.base, 3), 5)

    def test_wrong(self):
        self.assertEqual(add(2, 3), 999)
"""
PYTEST_CLASS = """class TestAdd:
    def setup_method(self, method):
        self.base = 2

    def test_small(self):
        assert add(self.base, 3) == 5

    def test_wrong(self):
        assert add(2, 3) == 999
"""


def task(tests: object) -> Task:
    return task_from_mapping({"id": "t/add", "spec": SPEC, "tests": tests}, suite="s")


@pytest.mark.parametrize("tests", [UNITTEST, PYTEST_CLASS, [UNITTEST]])
def test_a_test_class_runs_each_method_and_a_wrong_hidden_test_fails(
    pool: KernelPool, tests: object
) -> None:
    t = task(tests)
    assert len(t.reference_tests) == 2
    verdict = score(t, RIGHT, pool)
    assert not verdict.passed and verdict.failing_test == "ref-1"
    outcomes = [r.outcome for r in verdict.tests]
    assert outcomes[0] == "passed" and outcomes[1] != "passed"  # set-up ran, each test ran
    fixed = UNITTEST.replace("999", "5")
    right = task(tests.replace("999", "5") if isinstance(tests, str) else [fixed])
    assert score(right, RIGHT, pool).passed


def test_suite_file_reports_the_unittest_solution_that_fails(tmp_path: Path) -> None:
    # the command: it reported that `return a + b` passes `assertEqual(add(2, 3), 999)`
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "add", "spec": SPEC, "tests": UNITTEST, "solution": RIGHT}))
    p = subprocess.run(
        [sys.executable, "-m", "evaluation.suite_file", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL add:" in p.stdout and "0 of 1 solutions pass" in p.stdout


@pytest.mark.parametrize(
    ("tests", "says"),
    [
        ("import unittest\n\nclass TestAdd(unittest.TestCase):\n    pass\n", "has no test_ method"),
        ("def helper():\n    assert add(1, 2) == 3\n", "runs nothing that checks a value"),
        ("x = add(1, 2)\n", "runs nothing that checks a value"),
        (["assert add(1, 2) == 3", "import unittest\n"], "(item 1) runs nothing"),
        ("class TestA:\n    def test_a(self, tmp_path):\n        assert add(1, 2) == 3\n", "takes arguments besides self"),
    ],
)  # fmt: skip
def test_a_hidden_test_that_runs_nothing_is_a_malformed_task(tests: object, says: str) -> None:
    with pytest.raises(ValueError, match=r"field 'tests': .*" + re.escape(says)):
        task(tests)


def test_the_leak_check_tracks_unittest_assertions_in_both_forms() -> None:
    t = task(UNITTEST)
    assert list(dict.fromkeys(secret_assertions(t))) == [
        "add(self.base, 3) == 5",
        "add(2, 3) == 999",
    ]
    for leaked in ("assert add(2, 3) == 999", "self.assertEqual(add(2,3), 999)"):
        report = check_messages(t, [Message(role="user", content=SPEC + "\n" + leaked)])
        assert report.leaks == ("add(2, 3) == 999",), leaked
    assert check_messages(t, [Message(role="user", content=SPEC)]).clean
