"""``selfheal.failcall``: what a failing call's test expects, read without a model."""

from __future__ import annotations

from typing import Any

import pytest

from selfheal.failcall import must_not_raise, plain, stated_return


@pytest.mark.parametrize(
    ("docstring", "message", "exc", "value", "source"),
    [
        (
            "Mean of the positives; 0.0 if there are none.",
            "",
            "ZeroDivisionError",
            "0.0",
            "docstring",
        ),
        ("Mean.\n\nReturns None when empty.", "", "ZeroDivisionError", "None", "docstring"),
        ("If the list is empty, return 0.", "", "IndexError", "0", "docstring"),
        (
            "Mean; 0.0 if there are none.",
            "it should return None",
            "ZeroDivisionError",
            "None",
            "message",
        ),
        ("", "return 0.0 when there are none", "ZeroDivisionError", "0.0", "message"),
    ],
)
def test_a_stated_value_is_read(
    docstring: str, message: str, exc: str, value: str, source: str
) -> None:
    found = stated_return(docstring, message, exc)
    assert found is not None and (found.value, found.source) == (value, source)


@pytest.mark.parametrize(
    ("docstring", "message", "exc"),
    [
        # not sure: two values for empty/none cases
        ("0 if empty; None if there are no positives", "", "ZeroDivisionError"),
        # the case is not an empty/none one
        ("Splits into 2 parts when there is a separator", "", "ValueError"),
        # an exception an empty input does not raise: the docstring's case may be another one
        ("Mean; 0.0 if there are none.", "", "TypeError"),
        # an explicit example in the message is the spec's to read
        ("Mean; 0.0 if there are none.", "mean([]) -> 0.0", "ZeroDivisionError"),
        # the message says something, but no value
        ("", "make it work", "ZeroDivisionError"),
    ],
)
def test_no_value_when_unsure(docstring: str, message: str, exc: str) -> None:
    assert stated_return(docstring, message, exc) is None


def _outcome(test: str, body: str) -> str:
    ns: dict[str, Any] = {}
    exec(f"def f(x):\n    {body}\n", ns)
    try:
        exec(test, ns)
    except AssertionError:
        return "failed"
    except Exception as exc:
        return f"error {type(exc).__name__}"
    return "passed"


@pytest.mark.parametrize("builtin", [True, False])
def test_must_not_raise_fails_only_on_that_exception(builtin: bool) -> None:
    test = must_not_raise("f([])", "ZeroDivisionError", builtin=builtin)
    assert _outcome(test, "return 1 / len(x)") == "failed"
    assert _outcome(test, "return 0.0") == "passed"
    assert _outcome(test, "raise ValueError('empty')") == "passed"  # another answer, not this bug


def test_plain_data_reads_back() -> None:
    assert plain([-1, -2]) and plain({"a": (1, 2.5)}) and plain("x") and plain(None)

    class Box(list[int]):
        pass

    assert not plain(Box([1])) and not plain(float("nan")) and not plain(object())
