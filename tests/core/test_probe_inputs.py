"""Probe inputs from the spec alone (selfheal/probes.py): examples whose arguments are dates or
Decimals are mutated like literals, and a model test's call with such values is an input."""

from __future__ import annotations

from selfheal.probes import calls_in_test, example_mutations, probe_call
from selfheal.state import Spec
from selfheal.state.cases import Example
from selfheal.testsuite import parse_test_block


def test_examples_with_date_and_decimal_arguments_are_mutated() -> None:
    spec = Spec(
        text="business_days(start, end) counts Mon-Fri days in [start, end)",
        entry_point="business_days",
        examples=(
            Example(call="business_days(date(2024, 3, 1), date(2024, 3, 8))", expected="5"),
            Example(call="business_days(datetime.date(2024, 3, 4), Decimal('1.10'))", expected="1"),
        ),
    )
    calls = example_mutations(spec, 40)
    assert "business_days(datetime.date(2024, 3, 2), datetime.date(2024, 3, 8))" in calls
    assert "business_days(datetime.date(2024, 2, 29), datetime.date(2024, 3, 8))" in calls
    assert "business_days(datetime.date(2024, 3, 4), Decimal('2.20'))" in calls
    # each runs with the imports its values need, whatever the candidate imported
    assert probe_call("p1", calls[0]).setup.splitlines()[0] == "import datetime"
    assert "from decimal import Decimal" in probe_call("p2", "f(Decimal('1'))").setup


def test_a_value_the_host_cannot_build_is_not_mutated() -> None:
    spec = Spec(
        text="f",
        entry_point="f",
        examples=(Example(call="f(open('data.csv'))", expected="1"),),
    )
    assert example_mutations(spec, 10) == []


def test_calls_in_a_model_test_with_constructed_values_are_inputs() -> None:
    source = (
        "from datetime import date\n"
        "def test_span():\n"
        "    start = date(2024, 1, 1)\n"
        "    assert span(start) == 1\n"  # a value the test built: in place of its name
        "    assert span(date(2024, 1, 2), pd.Series([1, 2])) == 2\n"
        "    assert span(*days) == 3\n"
        "    start.replace(day=3)\n"  # (a date cannot change, but a name used so may have)
        "    assert span(start) == 4\n"
        "    got = span(start - 1)\n"  # a value the host cannot build: not an input
        "    assert span(got) == 5\n"
    )
    assert calls_in_test(source, "span") == [
        "span(date(2024, 1, 1))",
        "span(date(2024, 1, 2), pd.Series([1, 2]))",
    ]


def test_a_model_tests_data_made_before_its_assert_is_an_input_and_travels_with_it() -> None:
    """A model's test block that builds its data first (``df = pd.DataFrame(...)``, then the
    asserts): each test carries the statements its names need (before: a NameError, and the
    test was 'disputed'), and the call is a probe input with the data in place."""
    block = (
        "import pandas as pd\nfrom datetime import date\n\n"
        "today = date(2023, 10, 15)\n"
        "df = pd.DataFrame({'date': [date(2023, 10, 10), date(2023, 10, 14)]})\n"
        "expected = pd.DataFrame({'date': [date(2023, 10, 14)]})\n"
        "other = 5\n"
        "assert last_n(df, 2, today) == expected\n"
        "df['x'] = 1\n"
        "result = last_n(df, 7, today)\n"
        "assert len(result) == 2\n"
    )
    _, tests = parse_test_block(block, "last_n")
    first, second = (src for src, _ in tests)
    assert first.splitlines()[2:] == [
        "today = date(2023, 10, 15)",
        "df = pd.DataFrame({'date': [date(2023, 10, 10), date(2023, 10, 14)]})",
        "expected = pd.DataFrame({'date': [date(2023, 10, 14)]})",
        "assert last_n(df, 2, today) == expected",
    ]
    assert "other = 5" not in second and "expected =" not in second
    assert second.splitlines()[-3:] == [
        "df['x'] = 1",
        "result = last_n(df, 7, today)",
        "assert len(result) == 2",
    ]
    frame = "pd.DataFrame({'date': [date(2023, 10, 10), date(2023, 10, 14)]})"
    assert calls_in_test(first, "last_n") == [f"last_n({frame}, 2, date(2023, 10, 15))"]
    assert calls_in_test(second, "last_n") == []  # df was changed: not the value written


def test_a_call_whose_arguments_cannot_be_built_is_not_an_input() -> None:
    # Feb 29 of 2021 does not exist: every candidate "raises ValueError" on it before it runs,
    # which is nothing to compare (or to ask you about)
    source = (
        "assert age_on(date(2020, 2, 29), date(2021, 2, 29)) == 1\n"
        "assert age_on(date(2020, 2, 29), date(2021, 3, 1)) == 1\n"
    )
    assert calls_in_test(source, "age_on") == ["age_on(date(2020, 2, 29), date(2021, 3, 1))"]
