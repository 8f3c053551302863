"""The probe canonicaliser on the host (no kernel): equal values give equal text."""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, defaultdict, namedtuple
from decimal import Decimal
from enum import IntEnum
from fractions import Fraction
from typing import Any

import pytest

from selfheal.kernel_sandbox._canon import LIMIT, MAX_ITEMS, canonical, raised


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (0.1 + 0.2, 0.3),
        (2.0, 2),
        (-0.0, 0.0),
        (complex(2, 0), 2),
        (1 / 3, Fraction(1, 3)),
        (Decimal("0.1"), 0.1),
        ({3, 1, 2}, {2, 3, 1}),
        ({"b", "a", "c"}, {"c", "a", "b"}),
        (frozenset({1, 2}), {2, 1}),
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}),
        ({1: "x", "k": None, (1, 2): 3}, {(1, 2): 3, "k": None, 1: "x"}),
        ({1.0: "a", 10.0: "b", 2.0: "c"}, {10: "b", 2: "c", 1: "a"}),
        (bytearray(b"ab"), b"ab"),
        (range(0, 3, 2), range(0, 4, 2)),
        (range(5, 5), range(0)),
        (defaultdict(list, {1: [2]}), {1: [2]}),
        (Counter("aab"), {"a": 2, "b": 1}),
        (OrderedDict(b=1, a=2), {"a": 2, "b": 1}),
        (namedtuple("P", "x y")(1, 2), (1, 2)),
        ([{1, 2}, ({"a": 0.1 + 0.2},)], [{2, 1}, ({"a": 0.3},)]),
    ],
)
def test_equal_values_give_equal_text(a: Any, b: Any) -> None:
    assert canonical(a) == canonical(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1, 2], (1, 2)),
        (True, 1),
        (0.3, 0.31),
        ("1", 1),
        (None, "None"),
        ([1, 2], iter([1, 2])),
        ({1: 2}, {1: 3}),
    ],
)
def test_different_values_give_different_text(a: Any, b: Any) -> None:
    assert canonical(a) != canonical(b)


def test_spelled_out_forms() -> None:
    assert canonical(math.nan) == "nan"
    assert canonical(-math.inf) == "-inf"
    assert canonical(0.1 + 0.2) == "0.3"
    assert canonical(-0.0) == "0"
    assert canonical((1,)) == "(1,)"
    assert canonical(set()) == "set()"
    assert canonical({3, 1, 2}) == "{1, 2, 3}"
    assert canonical([1.5, "a", None, True]) == "[1.5, 'a', None, True]"
    assert canonical(ValueError("x")) == "ValueError('x')"
    assert raised("KeyError") == "raise KeyError"


def test_subclasses_cannot_lie() -> None:
    class Four(int):
        def __repr__(self) -> str:
            return "4"

    class Color(IntEnum):
        RED = 1

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:  # isinstance() would believe it
            return list

    assert canonical(Four(5)) == "5"
    assert canonical(Color.RED) == "1"
    assert canonical(Liar()).startswith("<")


def test_addresses_are_stripped() -> None:
    class Thing:
        pass

    text = canonical(Thing())
    assert "0x" not in text and text.endswith("Thing object>")
    assert canonical(lambda: 1) == "<function test_addresses_are_stripped.<locals>.<lambda>>"


def test_iterators_are_consumed_and_marked() -> None:
    assert canonical(x * 2 for x in range(3)) == "<iterator [0, 2, 4]>"
    assert canonical(map(str, [1])) == "<iterator ['1']>"
    endless = canonical(iter(int, 1), limit=10**6)  # never ends: 0, 0, 0, ...
    assert endless.endswith(", ...more]>") and endless.count("0") == MAX_ITEMS


def test_recursion_and_depth_are_safe() -> None:
    xs: list[Any] = [1]
    xs.append(xs)
    assert canonical(xs) == "[1, <cycle>]"
    d: dict[str, Any] = {}
    d["self"] = d
    assert canonical(d) == "{'self': <cycle>}"
    deep: list[Any] = []
    for _ in range(500):
        deep = [deep]
    assert "<deep>" in canonical(deep)


def test_huge_values_are_bounded() -> None:
    text = canonical(list(range(1_000_000)))
    assert len(text) <= LIMIT and "sha256" in text
    assert canonical(list(range(1_000_000))) == text
    assert canonical("x" * 10**6) != canonical("x" * (10**6 + 1))
    assert len(canonical("x" * 10**6)) < 400
    assert len(canonical(10**10000)) < 200
    assert len(canonical({i: str(i) for i in range(50_000)})) <= LIMIT


def test_numpy_values_become_python_values() -> None:
    np = pytest.importorskip("numpy")
    assert canonical(np.float64(0.1) + np.float64(0.2)) == "0.3"
    assert canonical(np.int64(3)) == "3"
    assert canonical(np.bool_(True)) == "True"
    assert canonical(np.array([[1, 2], [3, 4]])) == "[[1, 2], [3, 4]]"
