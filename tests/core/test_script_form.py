"""The third prompt form, ``script`` (issue 45 item 2): EvalPlus's instruct prompt (a
self-contained script for the problem, the problem in a code block), the reply prefilled with
EvalPlus's response prefix and an opened python block; the same stop rules and answer parsing
as the other forms, so the tests and prose such a reply writes after the function are cut.
Scripted mock model; no kernel."""

from __future__ import annotations

import pytest
import scripted as s

from selfheal import HealConfig, heal
from selfheal.errors import ConfigError
from selfheal.llm.mock import MockCall, MockProvider
from selfheal.llm.tokens import estimate_tokens

INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a "
    "markdown code block:"
)
RESPONSE = (
    "Below is a Python script with a self-contained function that solves the problem and "
    "passes corresponding tests:\n```python\n"
)
"""EvalPlus's response prefix and the opened block: the prefilled start of the reply."""
FUNCTION = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
SCRIPT = (
    FUNCTION
    + "\n\n# Test the function\nassert clamp(5, 0, 3) == 3\nprint(clamp(-1, 0, 3))\n```\n\n"
    + "This script defines `clamp`, which limits x to the range, and tests it on two inputs."
)
"""A continuation as EvalPlus's form writes them: the function, then tests, then prose."""
QUIET = {"memory": False, "spec_blind_tests": False, "repair": False}
QUIET_RUN = {**QUIET, "run_tests": False, "probes": False}


def single_shot(**update: object) -> HealConfig:
    return HealConfig.single_shot().model_copy(update={"first_answer": "script", **update})


def form_of(call: MockCall) -> str:
    last = call.messages[-1]
    if last.role != "assistant":
        return "instruct"
    return "script" if last.content == RESPONSE else "complete"


def test_the_script_form_asks_as_evalplus_and_cuts_the_tests_and_prose_after_the_function() -> None:
    mock = MockProvider({"generator": [SCRIPT]})
    result = heal(s.SPEC, provider=mock, config=single_shot())
    (call,) = mock.calls_for("generator")
    system, user, prefill = call.messages
    assert (system.role, user.role, prefill.role) == ("system", "user", "assistant")
    # a prose spec goes in a plain block, and its function is named
    assert user.content == f"{INSTRUCTION}\n```\n{s.SPEC}\n```\n\nFunction name: `clamp`"
    assert prefill.content == RESPONSE
    # the stop rules: the reply ends where the function is complete and a test starts (a
    # comment is more of the program, as in every form)
    assert result.code == FUNCTION + "\n\n# Test the function"
    (event,) = [e for e in result.timeline if e.kind == "llm" and e.node == "generate"]
    assert event.detail == "generator via script.yaml v1"
    assert event.reply == FUNCTION + "\n\n# Test the function\n"  # the continuation, cut
    assert event.completion_tokens < estimate_tokens(SCRIPT) / 2
    assert [(c.origin, c.form, c.temperature) for c in result.candidates] == [
        ("greedy", "script", 0.0)
    ]
    assert result.to_dict()["candidates"][0]["form"] == "script"


def test_a_code_spec_goes_in_a_python_block_as_it_is() -> None:
    spec = (
        'def add(a: int, b: int) -> int:\n    """Return a + b.\n    >>> add(1, 2)\n    3\n    """\n'
    )
    mock = MockProvider({"generator": ["def add(a: int, b: int) -> int:\n    return a + b\n```"]})
    result = heal(spec, provider=mock, config=single_shot())
    (call,) = mock.calls_for("generator")
    assert call.messages[1].content == f"{INSTRUCTION}\n```python\n{spec.strip()}\n```"
    assert call.messages[2].content == RESPONSE
    assert result.code == "def add(a: int, b: int) -> int:\n    return a + b"


def test_a_spec_with_no_function_name_is_still_asked_as_a_script() -> None:
    """The ``complete`` form needs a header and falls back to ``instruct`` without one; the
    ``script`` form does not."""
    mock = MockProvider({"generator": ["def double(x):\n    return 2 * x\n```"]})
    result = heal("Double a number.", provider=mock, config=single_shot())
    (call,) = mock.calls_for("generator")
    assert form_of(call) == "script" and "Function name" not in call.messages[1].content
    assert [c.form for c in result.candidates] == ["script"]


def test_a_population_takes_turns_across_the_three_forms() -> None:
    """``heal-three-forms``'s draws: the two greedy answers completing and instructed, then
    the samples in the script form, completing, instructed, ..."""
    mock = MockProvider({"generator": [s.GOOD, s.GOOD, SCRIPT, s.GOOD, s.GOOD]})
    config = HealConfig(
        candidates=5,
        first_sample=5,
        population_forms=("complete", "instruct", "script"),
        **QUIET_RUN,  # type: ignore[arg-type]
    )
    result = heal(s.SPEC, provider=mock, config=config)
    assert [(form_of(c), c.temperature) for c in mock.calls_for("generator")] == [
        ("complete", 0.0), ("instruct", 0.0), ("script", 0.8), ("complete", 0.8), ("instruct", 0.8)
    ]  # fmt: skip
    assert [(c.origin, c.form) for c in result.candidates] == [
        ("greedy", "complete"), ("greedy", "instruct"),
        ("sample", "script"), ("sample", "complete"), ("sample", "instruct"),
    ]  # fmt: skip
    assert result.candidates[2].code == FUNCTION + "\n\n# Test the function"


def test_the_script_form_is_a_choice_wherever_a_form_is() -> None:
    from selfheal.cli import build_parser
    from selfheal.cli.heal import heal_config
    from selfheal.config.options import setting

    args = build_parser().parse_args(
        ["heal", "SPEC", "--first-answer", "script", "--population-forms", "script,complete"]
    )
    g = heal_config(args).generation
    assert (g.first_answer, g.population_forms) == ("script", ("script", "complete"))
    # %selfheal_config's words
    words = dict(setting(w) for w in ("first_answer=script", "population_forms=complete,script"))
    g = HealConfig.model_validate(words).generation
    assert (g.first_answer, g.population_forms) == ("script", ("complete", "script"))
    with pytest.raises(ConfigError, match=r"population_forms.*'complete' or 'script'"):
        HealConfig(population_forms=("script", "chat"))
