"""The static check of what an example's value may use (``selfheal.expected``): the allow-list
the example reader and the host-side evaluator share."""

from __future__ import annotations

import pytest

from selfheal.expected import expected_problem, import_lines


@pytest.mark.parametrize(
    "src",
    [
        "datetime.date(2024, 3, 5)",
        "datetime.datetime(2024, 3, 5, tzinfo=zoneinfo.ZoneInfo('Europe/Paris'))",
        "datetime(2024, 3, 5)",
        "date(2024, 3, 5) + timedelta(days=1)",
        "Decimal('1.10')",
        "Fraction(1, 3)",
        "collections.Counter('abca')",
        "math.pi * 2",
        "pd.DataFrame({'a': [1, 2]}).set_index('a')",
        "pd.Series([1.0, None], name='x')",
        "np.array([[1, 2], [3, 4]], dtype=np.float64)",
        "{x: x * x for x in range(3)}",
        "sorted({3, 1, 2}, reverse=True)",
        "frozenset([1]) | {2}",
        "-1.5e-3",
        "b'\\x00'",
        "(1, [2, {'a': None}])",
        "float('nan')",
        "inf",
    ],
)
def test_values_that_can_be_built_without_the_candidate(src: str) -> None:
    assert expected_problem(src, {"f"}) is None


@pytest.mark.parametrize(
    ("src", "why"),
    [
        ("f(3)", "calls `f`, which the candidate would define; write the value itself"),
        ("[f]", "uses `f`, which the candidate would define"),
        ("helper(3)", "calls `helper`, which the candidate would define"),
        ("x + 1", "uses the name `x`, which an example cannot refer to"),
        ("sorted", "names the function `sorted` without calling it"),
        ("1 < 2", "uses a comparison"),
        ("1 if True else 2", "uses a conditional expression"),
        ("lambda: 1", "uses a lambda"),
        ("().__class__", "uses the attribute `__class__`"),
        ("open('x')", "calls `open`, which an example may not call (only abs, bool, bytes"),
        ("__import__('os')", "calls `__import__`, which an example may not call"),
        ("np.load('a.npy')", "uses `np.load`, which is not among"),
        ("pd.DataFrame().to_pickle('x')", "uses `to_pickle`, which reads or writes files"),
        ("3(4)", "calls `3`, which is not a function"),
        ("pd.DataFrame({'a': [1]}).eval('a + 1')", "uses `eval`, which evaluates text"),
        ("'{0.__class__}'.format(1)", "uses `format`, which evaluates text"),
        ("1.5. Then", "has a space around the dot before `Then`: prose, not a value"),
        ("f(", "is not a Python expression"),
        ("datetime(2024, 1, 1) - datetime.timedelta(1)", "uses `datetime` both as the module"),
    ],
)
def test_what_cannot_be_built_says_why(src: str, why: str) -> None:
    problem = expected_problem(src, {"f"})
    assert problem is not None and problem.startswith(why), problem


def test_the_import_lines_each_value_needs() -> None:
    assert import_lines("datetime.date(2024, 3, 5)", "Decimal('1') + Decimal('2')") == [
        "import datetime",
        "from decimal import Decimal",
    ]
    assert import_lines("datetime(2024, 1, 1)", "np.array([1])", extra=["import math"]) == [
        "import math",
        "import numpy as np",
        "from datetime import datetime",
    ]
    assert import_lines("[1, 2]", "{'a': sorted([2, 1])}") == []
