"""Your own tests and your own code, end to end with the scripted demo model and the real
sandbox: a pytest function you give runs (and fails when it must), files with nothing to run
are refused, the tests behind a result export as a pytest file that plain pytest passes, and
``--code`` never overwrites your file with code that is not verified."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import run_cli

from selfheal import heal
from selfheal.errors import ConfigError
from selfheal.llm.mock import DEMO_SPEC, MockProvider
from selfheal.result import HealResult

MUST_FAIL = "def test_x():\n    assert median([1, 2, 3]) == 999"

RIGHT = """def median(values):
    if len(values) == 0:
        raise ValueError("no values")
    s = sorted(values)
    half, odd = divmod(len(s), 2)
    return s[half] if odd else (s[half - 1] + s[half]) / 2
"""
UPPER = "def median(values):\n    return sorted(values)[len(values) // 2]\n"

PYTEST_FILE = """import pytest
from stats import median


@pytest.mark.parametrize("xs,want", [([5, 1, 3], 3), ([1, 2, 3, 4], 2.5)])
def test_median(xs, want):
    assert median(xs) == want


def test_empty():
    with pytest.raises(ValueError):
        median([])
"""


def test_a_pytest_function_that_must_fail_is_not_verified_cli() -> None:
    # the command: on 97f55f5 it printed VERIFIED, "trusted tests 3/3 passed", exit 0
    ran = run_cli("heal", "--provider", "mock", "--test", MUST_FAIL)
    assert ran.code == 1, ran.out + ran.err
    assert "VERIFIED" not in ran.out
    assert "✗ u1::test_x" in ran.out
    assert "assert median([1, 2, 3]) == 999" in ran.out and "right: 999" in ran.out


def test_a_pytest_function_that_must_fail_is_not_verified_api() -> None:
    result = heal(DEMO_SPEC, provider="mock", tests=[MUST_FAIL])
    assert isinstance(result, HealResult)
    assert not result.verified
    assert result.test_outcomes()["u1::test_x"] == "failed"
    assert "u1::test_x" in result.evidence.failing


def test_a_pytest_file_runs_every_item_and_its_ids_reach_the_evidence(tmp_path: Path) -> None:
    path = tmp_path / "test_stats.py"
    path.write_text(PYTEST_FILE)
    result = heal(DEMO_SPEC, provider="mock", tests=path)
    assert isinstance(result, HealResult)
    ids = [t.id for t in result.tests if t.origin == "user"]
    assert ids == ["u1::test_median[xs0-3]", "u1::test_median[xs1-2.5]", "u1::test_empty"]
    assert result.verified
    assert all(result.test_outcomes()[i] == "passed" for i in ids)
    broken = path.with_name("test_broken.py")
    broken.write_text(PYTEST_FILE.replace("2.5)", "2.75)"))
    failing = heal(DEMO_SPEC, provider="mock", tests=[str(broken)])
    assert isinstance(failing, HealResult) and not failing.verified
    assert failing.evidence.failing == ("u1::test_median[xs1-2.75]",)


@pytest.mark.parametrize(
    ("test", "why"),
    [
        ("x = 1", "checks nothing"),
        ("print(median)", "checks nothing"),  # a call of a builtin only: not even a smoke test
        ("def check(f):\n    assert f([1]) == 1", "defines check but never calls it"),
    ],
)
def test_a_test_that_checks_nothing_is_refused(test: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        heal(DEMO_SPEC, provider="mock", tests=[test])


def test_a_bare_comparison_is_an_assert() -> None:
    result = heal(DEMO_SPEC, provider="mock", tests=["median([1, 2]) == 99"])
    assert isinstance(result, HealResult) and not result.verified
    assert result.test_outcomes()["u1"] == "failed"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("import pytest\n\n@pytest.mark.skip\ndef test_later():\n    assert 0\n", "no test"),
        ("BROKEN = (\ndef test_x():\n    assert 1\n", "not valid Python"),
        ("N = missing_name\n\ndef test_x():\n    assert median([1]) == 1\n", "could not collect"),
    ],
)
def test_a_test_file_that_cannot_run_exits_2(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "test_mine.py"
    if content is not None:
        path.write_text(content)
    ran = run_cli("heal", "--provider", "mock", "--tests", str(path))
    assert ran.code == 2, ran.out + ran.err
    assert says in ran.err
    assert "Traceback" not in ran.err


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kept.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_exported_tests_pass_under_plain_pytest_and_catch_a_wrong_solution(
    tmp_path: Path,
) -> None:
    tests = tmp_path / "test_stats.py"
    tests.write_text(PYTEST_FILE)
    result = heal(DEMO_SPEC, provider="mock", tests=[tests, "assert median([7]) == 7"])
    assert isinstance(result, HealResult) and result.verified and result.code
    kept = result.tests_file(import_from="solution")
    assert "# your tests, trusted" in kept and "# ex1: example, trusted" in kept
    assert "# u2: yours, trusted" in kept
    (tmp_path / "solution.py").write_text(result.code)
    (tmp_path / "test_kept.py").write_text(kept)
    ok = _pytest(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "6 passed" in ok.stdout  # 3 items, u2, ex1, ex2
    (tmp_path / "solution.py").write_text(UPPER)
    bad = _pytest(tmp_path)
    assert bad.returncode == 1 and "failed" in bad.stdout
    # with the code at the head of the file instead of an import
    (tmp_path / "test_kept.py").write_text(result.tests_file())
    assert _pytest(tmp_path).returncode == 0


def test_your_code_that_passes_is_verified_without_asking_the_model() -> None:
    mock = MockProvider.demo()
    result = heal(DEMO_SPEC, provider=mock, code=RIGHT)
    assert isinstance(result, HealResult)
    assert result.verified and result.code == RIGHT
    assert [c.id for c in result.candidates] == ["c0"] and result.candidates[0].origin == "user"
    assert "your code (c0) passes them" in result.evidence.summary
    assert mock.calls_for("generator") == []
    assert result.diff == ""


def test_code_keeps_your_file_when_the_heal_is_not_verified(tmp_path: Path) -> None:
    mine = tmp_path / "stats.py"
    mine.write_text(UPPER)
    tests = tmp_path / "test_stats.py"
    tests.write_text(PYTEST_FILE.replace("2.5)", "2.75)"))  # no median passes this item
    ran = run_cli(
        "heal",
        "--provider",
        "mock",
        DEMO_SPEC,
        "--code",
        str(mine),
        "--tests",
        str(tests),
        "--out",
        str(mine),
        "--write-tests",
        str(tmp_path / "test_kept.py"),
    )
    assert ran.code == 1, ran.out + ran.err
    assert mine.read_text() == UPPER
    assert "is left as it was" in ran.err
    assert "c0" in ran.out or "u1::test_median" in ran.out
    assert (tmp_path / "test_kept.py").read_text().startswith('"""Tests kept by selfheal')


def test_code_that_fails_is_repaired_from_and_the_diff_shown(tmp_path: Path) -> None:
    mine = tmp_path / "stats.py"
    mine.write_text(UPPER)
    out = tmp_path / "healed.py"
    also = RIGHT.replace("if odd else", "if odd == 1 else")
    fixes = [f"```python\n{RIGHT}```", f"```python\n{also}```"]
    mock = MockProvider({"generator": fixes, "debugger": ["{}"]}, repeat_last=True)
    result = heal(DEMO_SPEC, provider=mock, code=UPPER)
    assert isinstance(result, HealResult)
    assert result.candidates[0].id == "c0" and result.candidates[0].origin == "user"
    assert result.candidates[0].round == 1 and result.attempts[0].candidate == "c0"
    assert result.verified and result.code.strip() in (RIGHT.strip(), also.strip())
    assert result.diff.startswith("--- your code") and "+    half, odd = divmod" in result.diff
    ran = run_cli("heal", "--provider", "mock", DEMO_SPEC, "--code", str(mine), "--out", str(out))
    assert mine.read_text() == UPPER  # the original is never lost
    assert "c0 user: your code" in ran.err  # it ran first, before any model answer
