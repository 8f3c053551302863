"""Probe inputs from the spec alone (selfheal/probes.py): examples whose arguments are dates or
Decimals are mutated like literals, and a model test's call with such values is an input."""

from __future__ import annotations

from selfheal.probes import calls_in_test, example_mutations, probe_call
from selfheal.state import Spec
from selfheal.state.cases import Example


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
        "    assert span(start) == 1\n"  # a local variable of the test: not an input
        "    assert span(date(2024, 1, 2), pd.Series([1, 2])) == 2\n"
        "    assert span(*days) == 3\n"
    )
    assert calls_in_test(source, "span") == ["span(date(2024, 1, 2), pd.Series([1, 2]))"]


def test_a_call_whose_arguments_cannot_be_built_is_not_an_input() -> None:
    # Feb 29 of 2021 does not exist: every candidate "raises ValueError" on it before it runs,
    # which is nothing to compare (or to ask you about)
    source = (
        "assert age_on(date(2020, 2, 29), date(2021, 2, 29)) == 1\n"
        "assert age_on(date(2020, 2, 29), date(2021, 3, 1)) == 1\n"
    )
    assert calls_in_test(source, "age_on") == ["age_on(date(2020, 2, 29), date(2021, 3, 1))"]
