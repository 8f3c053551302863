"""Test files' mistakes found before any model call (issue 44, item 4): a name imported from
the code under test that the code does not define, tests that contradict each other, and a
test that checks no value (a smoke test, which cannot make a result verified or a remembered
solution on its own)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_harness import run_cli

from selfheal import HealConfig, HealRequest, heal
from selfheal.errors import ConfigError
from selfheal.llm.mock import MockProvider
from selfheal.memory import Memory, default_path
from selfheal.memory.learn import learnt_from
from selfheal.result import HealResult

BUGGY = '''def chunks(xs, n):
    """Split xs into lists of n items; the last one may be shorter."""
    return [xs[i:i + n] for i in range(0, len(xs) - n + 1, n)]
'''
RIGHT = BUGGY.replace(" - n + 1", "")
SPEC = "Fix the function chunks so that it passes its tests."

TYPO = """from buggy import chunkz


def test_chunks():
    assert chunkz([1, 2, 3], 2) == [[1, 2], [3]]
"""
CONTRADICTING = """from buggy import chunks


def test_keeps_tail():
    assert chunks([1, 2, 3], 2) == [[1, 2], [3]]


def test_drops_tail():
    assert chunks([1, 2, 3], 2) == [[1, 2]]
"""
SMOKE = """from buggy import chunks


def test_runs():
    chunks([1], 1)
"""
VALUE = """from buggy import chunks


def test_keeps_tail():
    assert chunks([1, 2, 3], 2) == [[1, 2], [3]]
"""


def silent() -> MockProvider:
    """A model with no script: any call fails (and is recorded in ``calls``)."""
    return MockProvider({})


def files(tmp_path: Path, tests: str, code: str = BUGGY) -> tuple[Path, Path]:
    (tmp_path / "buggy.py").write_text(code)
    (tmp_path / "test_buggy.py").write_text(tests)
    return tmp_path / "buggy.py", tmp_path / "test_buggy.py"


def cli(code: Path, tests: Path, script: Path, *more: str) -> tuple[int, str, str]:
    script.write_text("{}")  # a model with no reply: a call would end the run with its error
    ran = run_cli(
        "heal", "--provider", f"mock:{script}", "--code", str(code), "--tests", str(tests), *more
    )
    return ran.code, ran.out, ran.err


# -- a name the code does not define ------------------------------------------------------------


def test_a_misspelt_import_exits_2_naming_it_before_any_model_call(
    tmp_path: Path, runs_dir: Path
) -> None:
    code, tests = files(tmp_path, TYPO + "\n\ndef helper_for_chunks():\n    pass\n")
    (tmp_path / "buggy.py").write_text(BUGGY + "\n\ndef unrelated():\n    return 0\n")
    rc, out, err = cli(code, tests, tmp_path / "script.yaml")
    assert rc == 2, out + err
    assert "'chunkz' from buggy" in err and f"{tests}, line 1" in err
    assert "it defines: chunks, unrelated" in err  # the closest match first
    assert "did you mean 'chunks'?" in err
    assert "Traceback" not in err and "MockScriptExhausted" not in err
    assert not list(runs_dir.glob("*.jsonl"))  # no run started: no model was asked


def test_a_misspelt_import_is_a_config_error_from_heal_and_the_model_is_not_called(
    tmp_path: Path,
) -> None:
    _, tests = files(tmp_path, TYPO)
    mock = silent()
    with pytest.raises(ConfigError, match=r"'chunkz' from buggy .*line 1.*defines: chunks"):
        heal(SPEC, provider=mock, code=BUGGY, tests=tests)
    module_form = "import buggy\n\n\ndef test_x():\n    assert buggy.chunkz([1], 1) == [[1]]\n"
    with pytest.raises(ConfigError, match="'chunkz' from buggy"):
        heal(SPEC, provider=mock, code=BUGGY, tests=[module_form])
    statements = "from buggy import chunkz\nassert chunkz([1], 1) == [[1]]"
    with pytest.raises(ConfigError, match=r"'chunkz' from buggy .*line 1 of test 1"):
        heal(SPEC, provider=mock, code=BUGGY, tests=[statements])
    assert mock.calls == []


def test_the_name_the_spec_asks_for_may_be_missing_from_the_code(tmp_path: Path) -> None:
    _, tests = files(tmp_path, TYPO)
    spec = "Write chunkz(xs, n): split xs into lists of n items; the last may be shorter."
    request = HealRequest(spec, provider="mock", code=BUGGY, tests=tests, entry_point="chunkz")
    assert request.tests  # accepted: chunkz is the function to write


# -- tests that contradict each other ---------------------------------------------------------


def test_contradicting_tests_exit_2_quoting_both_before_any_model_call(
    tmp_path: Path, runs_dir: Path
) -> None:
    code, tests = files(tmp_path, CONTRADICTING)
    rc, out, err = cli(code, tests, tmp_path / "script.yaml")
    assert rc == 2, out + err
    assert "contradict each other" in err and "no code can pass both" in err
    assert "line 5 (test_keeps_tail): assert chunks([1, 2, 3], 2) == [[1, 2], [3]]" in err
    assert "line 9 (test_drops_tail): assert chunks([1, 2, 3], 2) == [[1, 2]]" in err
    assert "MockScriptExhausted" not in err
    assert not list(runs_dir.glob("*.jsonl"))  # no run, so no lesson remembered from one


@pytest.mark.parametrize(
    ("spec", "tests"),
    [
        (SPEC, ["assert chunks([1, 2, 3], 2) == [[1, 2], [3]]", "chunks([1,2,3], 2) == [[1, 2]]"]),
        (
            SPEC + " Example: chunks([1, 2, 3], 2) -> [[1, 2], [3]]",
            ["import unittest\n\nclass TestC(unittest.TestCase):\n    def test_c(self):\n"
             "        self.assertEqual(chunks([1, 2, 3], 2), [[1, 2]])\n"],
        ),
    ],
)  # fmt: skip
def test_contradictions_are_found_in_every_form_and_against_the_spec(
    spec: str, tests: list[str]
) -> None:
    mock = silent()
    with pytest.raises(ConfigError, match="contradict each other"):
        heal(spec, provider=mock, code=BUGGY, tests=tests, entry_point="chunks")
    assert mock.calls == []


def test_different_calls_or_a_skipped_test_are_no_contradiction() -> None:
    skipped = CONTRADICTING.replace(
        "def test_drops_tail", "@pytest.mark.skip(reason='old behaviour')\ndef test_drops_tail"
    )
    ok = ["assert chunks([1, 2, 3], 2) == [[1, 2], [3]]", "assert chunks([1, 2], 2) == [[1, 2]]"]
    for tests in (ok, ["import pytest\n" + skipped]):
        assert HealRequest(SPEC, provider="mock", code=BUGGY, tests=tests).tests


# -- a test that checks no value --------------------------------------------------------------


def test_a_smoke_test_alone_is_not_verified_nor_remembered(tmp_path: Path) -> None:
    _, tests = files(tmp_path, SMOKE, RIGHT)
    result = heal(SPEC, provider=silent(), code=RIGHT, tests=tests)
    assert isinstance(result, HealResult)
    assert result.status == "unverified"  # it was VERIFIED in 3 s (issue 44)
    (test,) = result.tests
    assert test.id == "u1::test_runs" and test.smoke and test.trusted
    assert result.test_outcomes()["u1::test_runs"] == "passed"
    assert result.evidence.smoke == ("u1::test_runs",)
    assert "smoke test(s) only: u1::test_runs" in result.evidence.summary
    assert "(smoke test: checks no value)" in result.tests_text()
    progress = [e.detail for e in result.state.events if e.node == "plan_tests"]
    assert any("1 of them smoke test(s) that check no value (u1::test_runs)" in d for d in progress)
    assert Memory(default_path()).solutions() == []
    # the memory's own rule too: a state called verified on smoke tests alone leaves no solution
    forced = result.state.model_copy(update={"status": "verified", "final_code": RIGHT})
    assert learnt_from(forced).solution is None
    valued = forced.model_copy(
        update={"tests": tuple(t.model_copy(update={"smoke": False}) for t in forced.tests)}
    )
    assert learnt_from(valued).solution is not None


def test_a_statement_that_only_calls_is_a_smoke_test_beside_a_value_check(tmp_path: Path) -> None:
    _, tests = files(tmp_path, VALUE, RIGHT)
    smoke = "from buggy import chunks\nchunks([1], 1)"  # its import reads the candidate
    result = heal(SPEC, provider=silent(), code=RIGHT, tests=[tests, smoke])
    assert isinstance(result, HealResult)
    assert {t.id: t.smoke for t in result.tests} == {"u1::test_keeps_tail": False, "u2": True}
    assert result.verified  # a value-checking trusted test passed too
    assert "1 of them smoke test(s) that check no value: u2" in result.evidence.summary


def test_the_cli_says_smoke_and_exits_1(tmp_path: Path) -> None:
    code, tests = files(tmp_path, SMOKE, RIGHT)
    rc, out, err = cli(code, tests, tmp_path / "script.yaml")
    assert rc == 1, out + err
    assert "UNVERIFIED" in out and "VERIFIED after" not in out.replace("UNVERIFIED", "")
    assert "smoke test(s) that check no value (u1::test_runs)" in err


# -- a unittest.TestCase class of any name runs ------------------------------------------------

ADD_TESTS = """import unittest


class AddTests(unittest.TestCase):
    def setUp(self):
        self.x = 2

    def test_add(self):
        self.assertEqual(add(self.x, 3), WANT)
"""


def test_a_unittest_class_not_named_test_runs_and_can_fail() -> None:
    add = "def add(a, b):\n    return a + b\n"
    spec = "Fix add(a, b) so that it returns a + b."
    once = HealConfig(max_iterations=1)  # no repair round: the model is never asked
    wrong = heal(
        spec, provider=silent(), code=add, tests=[ADD_TESTS.replace("WANT", "999")], config=once
    )
    right = heal(spec, provider=silent(), code=add, tests=[ADD_TESTS.replace("WANT", "5")])
    assert isinstance(wrong, HealResult) and isinstance(right, HealResult)
    # it was a statements test that only defined the class: `u1` passed, VERIFIED
    assert wrong.test_outcomes() == {"u1::AddTests::test_add": "failed"}
    assert not wrong.verified
    assert right.test_outcomes() == {"u1::AddTests::test_add": "passed"}  # setUp ran
    assert not right.tests[0].smoke
