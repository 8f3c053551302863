"""Turning model replies into test cases."""

from __future__ import annotations

from selfheal.llm.parsing import lenient_block
from selfheal.testsuite import parse_test_block


def test_cut_off_block_keeps_its_complete_tests() -> None:
    reply = "```python\n# why: a\nassert f(1) == 2\n# why: b\nassert f(2) == 3\nassert f(3) =="
    code, salvaged = lenient_block(reply)
    assert salvaged
    assert code.splitlines()[-1] == "assert f(2) == 3"
    assert [src for src, _ in parse_test_block(code, "f")[1]] == [
        "assert f(1) == 2",
        "assert f(2) == 3",
    ]


def test_clean_block_is_not_salvaged() -> None:
    code, salvaged = lenient_block("Here:\n```python\nassert f(1) == 2\n```\nDone.")
    assert (code, salvaged) == ("assert f(1) == 2", False)


def test_nothing_usable() -> None:
    assert lenient_block("```python\nassert f(1 ==") == ("", True)


def test_parse_block_signature_imports_and_rationale() -> None:
    block = (
        "import math\n\ndef area(r: float) -> float: ...\n\n"
        "# why: unit circle\nassert math.isclose(area(1), math.pi)\n"
        "# why: not a test of area\nassert True\n"
        "x = area(2)\n"
        "try:\n    area(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('negative')\n"
    )
    signature, tests = parse_test_block(block, "area")
    assert signature == "def area(r: float) -> float:"
    assert tests[0] == ("import math\nassert math.isclose(area(1), math.pi)", "unit circle")
    assert len(tests) == 2 and tests[1][0].startswith("import math\ntry:")


def test_a_comparison_without_assert_becomes_an_assertion() -> None:
    _, tests = parse_test_block("f(1) == 2\nf(2)\nx == 3", "f")
    assert tests == [("assert f(1) == 2", "")]


def test_diff_lines_never_glue_together() -> None:
    from selfheal.diffs import unified_diff

    d = unified_diff("a = 1\nb = 2", "a = 1\nb = 3")
    assert "-b = 2\n+b = 3\n" in d


def test_missing_dependency_names_how_to_install() -> None:
    from selfheal.errors import ConfigError, MissingDependency

    plain = MissingDependency("ollama", "ollama")
    assert 'pip install "selfheal[ollama]"' in str(plain)
    assert isinstance(plain, ImportError) and isinstance(plain, ConfigError)
    custom = MissingDependency(
        "llama-cpp-python", "local", "the local model", install="`make install`"
    )
    assert "Install it with: `make install`" in str(custom) and "pip install" not in str(custom)
