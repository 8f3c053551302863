"""The salvage corpus: what small models send, and exactly what comes out of it."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from selfheal._record import Record
from selfheal.errors import MalformedReply
from selfheal.llm.ask import aask_code, aask_structured, ask_code, ask_structured
from selfheal.llm.base import Message
from selfheal.llm.parsing import StructuredParseError, extract_code, parse_structured


class Plan(Record):
    """A test plan, as the test writer role returns it."""

    name: str
    """Name."""
    count: int
    """How many."""
    asserts: list[str]
    """Assert statements."""


class Step(Record):
    """Nested record."""

    title: str
    """Title."""
    weight: float = 1.0
    """Weight."""


class Outline(Record):
    """A record with nested records."""

    steps: tuple[Step, ...]
    """Steps."""
    note: str | None = None
    """Optional note."""


CLEAN = '{"name": "add", "count": 2, "asserts": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]}'
EXPECTED = Plan(name="add", count=2, asserts=["assert add(1, 2) == 3", "assert add(0, 0) == 0"])


def test_clean_json_needs_no_repair() -> None:
    parsed = parse_structured(CLEAN, Plan)
    assert parsed.value == EXPECTED
    assert parsed.degraded is False
    assert parsed.repairs == ()


def test_prose_around_json() -> None:
    text = f"Sure! Here's the plan you asked for: {CLEAN} Let me know if {{you}} need more."
    parsed = parse_structured(text, Plan)
    assert parsed.value == EXPECTED
    assert parsed.degraded is True
    assert parsed.repairs == ("extracted from surrounding prose",)


def test_fenced_json() -> None:
    text = f"Here you go:\n```json\n{CLEAN}\n```\n"
    parsed = parse_structured(text, Plan)
    assert parsed.value == EXPECTED
    assert parsed.repairs[0] == "extracted from code fence"


def test_json_fence_preferred_over_python_fence() -> None:
    text = (
        f"```python\nx = {{'name': 'wrong', 'count': 9, 'asserts': []}}\n```\n```json\n{CLEAN}\n```"
    )
    assert parse_structured(text, Plan).value == EXPECTED


def test_think_block_is_removed() -> None:
    text = "<think>The user wants {a plan}. count should be 2.</think>\n" + CLEAN
    parsed = parse_structured(text, Plan)
    assert parsed.value == EXPECTED
    assert parsed.repairs == ("removed <think> block",)


def test_truncated_after_complete_items_is_closed() -> None:
    text = '{"name": "add", "count": 2, "asserts": ["assert add(1, 2) == 3", '
    parsed = parse_structured(text, Plan)
    assert parsed.value == Plan(name="add", count=2, asserts=["assert add(1, 2) == 3"])
    assert "closed truncated object" in parsed.repairs


def test_truncated_list_item_is_dropped_not_completed() -> None:
    text = '{"name": "add", "count": 2, "asserts": ["assert add(1, 2) == 3", "assert add(0, '
    parsed = parse_structured(text, Plan)
    assert parsed.value.asserts == ["assert add(1, 2) == 3"]
    assert parsed.degraded is True


def test_truncated_list_of_objects_drops_the_partial_object() -> None:
    text = '{"steps": [{"title": "one", "weight": 0.5}, {"title": "tw'
    parsed = parse_structured(text, Outline)
    assert parsed.value == Outline(steps=(Step(title="one", weight=0.5),))
    assert parsed.repairs == ("dropped the cut-off last list item", "closed truncated object")


def test_truncated_number_in_list_is_dropped() -> None:
    class Numbers(Record):
        """Numbers."""

        xs: list[int]
        """Values."""

    parsed = parse_structured('{"xs": [1, 22, 3', Numbers)  # 3 may have been 35
    assert parsed.value.xs == [1, 22]


def test_truncated_inside_first_list_item_fails_rather_than_empty() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('{"name": "a", "count": 0, "asserts": ["assert f(', Plan)
    assert "cut off" in info.value.errors


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "add", "count": 2',  # number may have been 25
        '{"name": "ad',  # string value cut mid-way
        '{"name": "add", "cou',  # key cut mid-way
        '{"name": "add", "count":',  # value missing
    ],
)
def test_truncation_that_would_need_invented_values_fails(text: str) -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured(text, Plan)
    assert "cut off" in info.value.errors
    assert info.value.raw == text


def test_single_quotes_python_literal() -> None:
    text = "{'name': 'add', 'count': 2, 'asserts': ['assert add(1, 2) == 3', \"assert add(0, 0) == 0\"]}"
    parsed = parse_structured(text, Plan)
    assert parsed.value == EXPECTED
    assert parsed.repairs == ("read as a Python literal",)


def test_python_literal_with_json_words() -> None:
    class Flag(Record):
        """A flag."""

        ok: bool
        """Ok."""
        why: str | None
        """Why."""

    parsed = parse_structured("{'ok': true, 'why': null}", Flag)
    assert parsed.value == Flag(ok=True, why=None)


def test_trailing_commas() -> None:
    text = '{"name": "add", "count": 2, "asserts": ["assert add(1, 2) == 3", "assert add(0, 0) == 0",],}'
    parsed = parse_structured(text, Plan)
    assert parsed.value == EXPECTED
    assert parsed.repairs == ("removed trailing commas",)


def test_comma_inside_string_is_kept() -> None:
    text = '{"name": "a,]", "count": 1, "asserts": ["x",]}'
    assert parse_structured(text, Plan).value.name == "a,]"


def test_non_ascii_is_kept_intact() -> None:
    text = (
        '{"name": "café → naïve 日本 🙂", "count": 1, '
        "\"asserts\": [\"assert greet('José') == '¡Hola, José!'\"]}"
    )
    parsed = parse_structured(text, Plan)
    assert parsed.value.name == "café → naïve 日本 🙂"
    assert parsed.value.asserts == ["assert greet('José') == '¡Hola, José!'"]
    assert parsed.degraded is False


def test_escaped_unicode_is_decoded_once() -> None:
    parsed = parse_structured('{"name": "caf\\u00e9", "count": 1, "asserts": []}', Plan)
    assert parsed.value.name == "café"


def test_invalid_escape_in_regex() -> None:
    text = '{"name": "\\d+\\s*", "count": 1, "asserts": []}'
    parsed = parse_structured(text, Plan)
    assert parsed.value.name == "\\d+\\s*"
    assert parsed.repairs == ("fixed invalid escapes",)


def test_raw_newline_in_string() -> None:
    text = '{"name": "line one\nline two", "count": 1, "asserts": []}'
    parsed = parse_structured(text, Plan)
    assert parsed.value.name == "line one\nline two"
    assert parsed.repairs == ("allowed raw control characters",)


def test_string_where_list_expected_becomes_one_element_list() -> None:
    text = '{"name": "add", "count": 1, "asserts": "assert add(1, 2) == 3"}'
    parsed = parse_structured(text, Plan)
    assert parsed.value.asserts == ["assert add(1, 2) == 3"]
    assert parsed.repairs == ("wrapped the string asserts in a one-element list",)


def test_list_where_string_expected_is_joined_by_lines() -> None:
    text = '{"name": ["first part", "second part"], "count": 1, "asserts": []}'
    parsed = parse_structured(text, Plan)
    assert parsed.value.name == "first part\nsecond part"
    assert parsed.repairs == ("joined a list of strings into the string name",)


def test_list_of_asserts_stays_a_list() -> None:
    asserts = [f"assert f({i}) == {i * i}" for i in range(5)]
    text = '{"name": "sq", "count": 5, "asserts": ' + str(asserts).replace("'", '"') + "}"
    parsed = parse_structured(text, Plan)
    assert parsed.value.asserts == asserts
    assert len(parsed.value.asserts) == 5


def test_number_as_string() -> None:
    text = '{"name": "add", "count": " 2 ", "asserts": []}'
    parsed = parse_structured(text, Plan)
    assert parsed.value.count == 2
    assert parsed.repairs == ("read the string count as a number",)


def test_number_where_string_expected() -> None:
    parsed = parse_structured('{"name": 42, "count": 1, "asserts": []}', Plan)
    assert parsed.value.name == "42"


def test_unknown_keys_of_closed_record_are_dropped() -> None:
    text = '{"name": "add", "count": 1, "asserts": [], "confidence": "high"}'
    parsed = parse_structured(text, Plan)
    assert parsed.value == Plan(name="add", count=1, asserts=[])
    assert parsed.repairs == ("dropped unknown key confidence",)


def test_nested_records_are_coerced() -> None:
    text = '{"steps": [{"title": "one", "weight": "0.5"}, {"title": 2}]}'
    parsed = parse_structured(text, Outline)
    assert parsed.value == Outline(steps=(Step(title="one", weight=0.5), Step(title="2")))


def test_wrapped_answer_is_unwrapped() -> None:
    parsed = parse_structured('{"plan": ' + CLEAN + "}", Plan)
    assert parsed.value == EXPECTED
    assert parsed.repairs[0] == "unwrapped the object under 'plan'"


class Review(BaseModel):
    """Like the critic's reply: every field has a default, extra keys are ignored."""

    verdict: str = "accept"
    concerns: list[str] = Field(default_factory=list)
    tests: list[str] = Field(default_factory=list)


class Lessons(BaseModel):
    """A record with a single list field."""

    lessons: list[str] = Field(default_factory=list)


def test_all_default_record_skips_unrelated_objects() -> None:
    text = 'Format: {"foo": 1}. Answer: {"verdict": "reject", "tests": ["assert f(1) == 2"]}'
    parsed = parse_structured(text, Review)
    assert parsed.value == Review(verdict="reject", tests=["assert f(1) == 2"])


def test_all_default_record_unwraps_instead_of_defaulting() -> None:
    parsed = parse_structured('{"review": {"verdict": "reject", "concerns": ["slow"]}}', Review)
    assert parsed.value == Review(verdict="reject", concerns=["slow"])
    assert parsed.repairs == ("unwrapped the object under 'review'",)


def test_all_default_record_rejects_an_unrelated_object() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('{"answer": 42}', Review)
    assert "none of the expected keys (concerns, tests, verdict)" in info.value.errors


def test_empty_object_takes_defaults() -> None:
    assert parse_structured("{}", Review).value == Review()


def test_bare_list_fills_the_only_list_field() -> None:
    text = '```json\n["Check empty input first.", "Sort before taking the middle."]\n```'
    parsed = parse_structured(text, Lessons)
    assert parsed.value.lessons == ["Check empty input first.", "Sort before taking the middle."]
    assert parsed.repairs == ("extracted from code fence", "wrapped a bare list as lessons")


def test_bare_list_is_refused_when_ambiguous() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('["a", "b"]', Review)  # two list fields: which one?
    assert "array where an object was expected" in info.value.errors


class Verdict(Record):
    """A record with a choice."""

    verdict: Literal["accept", "reject"]
    """The choice."""


def test_choice_in_the_wrong_case_is_matched() -> None:
    parsed = parse_structured('{"verdict": " Reject"}', Verdict)
    assert parsed.value.verdict == "reject"
    assert parsed.repairs == ("read ' Reject' as the choice 'reject' for verdict",)


def test_unknown_choice_is_not_guessed() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('{"verdict": "maybe"}', Verdict)
    assert "verdict" in info.value.errors


def test_missing_field_fails_with_validation_text() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('{"name": "add", "asserts": []}', Plan)
    assert "count: Field required" in info.value.errors
    assert isinstance(info.value, MalformedReply)


def test_not_a_number_is_not_coerced() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured('{"name": "add", "count": "two", "asserts": []}', Plan)
    assert "count" in info.value.errors


def test_no_json_at_all() -> None:
    with pytest.raises(StructuredParseError) as info:
        parse_structured("I cannot help with that.", Plan)
    assert info.value.errors == "no JSON object found in the reply"


def test_first_object_that_validates_wins() -> None:
    text = 'Use a dict like {"a": 1}. Answer: ' + CLEAN
    assert parse_structured(text, Plan).value == EXPECTED


# ------------------------------------------------------------------------------ code


def test_extract_code_prefers_block_defining_entry_point() -> None:
    text = (
        "First a usage example:\n```python\nprint(slugify('Héllo Wörld'))\n```\n"
        "Then the function:\n```python\ndef slugify(s: str) -> str:\n"
        "    return s.lower().replace(' ', '-')  # naïve → ok\n```\n"
    )
    code = extract_code(text, entry_point="slugify")
    assert code == (
        "def slugify(s: str) -> str:\n    return s.lower().replace(' ', '-')  # naïve → ok"
    )


def test_extract_code_prefers_later_block_when_both_define() -> None:
    text = (
        "```python\ndef f(x):\n    return x\n```\nOops, fixed:\n"
        "```python\ndef f(x):\n    return x + 1\n```"
    )
    assert extract_code(text, entry_point="f") == "def f(x):\n    return x + 1"


def test_extract_code_skips_other_languages_and_broken_blocks() -> None:
    text = (
        "```bash\npip install thing\n```\n"
        "```python\ndef f(x:\n    return\n```\n"
        "```\ndef f(x):\n    return 2 * x\n```"
    )
    assert extract_code(text, entry_point="f") == "def f(x):\n    return 2 * x"


def test_extract_code_keeps_non_ascii_source() -> None:
    text = '```python\ndef greet(name):\n    return f"¡Hola, {name}! 👋"\n```'
    assert extract_code(text) == 'def greet(name):\n    return f"¡Hola, {name}! 👋"'


def test_extract_code_unfenced_reply() -> None:
    text = "Here is the code:\ndef f(x):\n    return x * 2\nThis doubles x."
    assert extract_code(text, entry_point="f") == "def f(x):\n    return x * 2"


def test_extract_code_unfenced_after_prose_starting_with_from() -> None:
    text = "from what you asked, here it is:\nimport math\n\ndef f(x):\n    return math.sqrt(x)"
    assert extract_code(text, entry_point="f") == (
        "import math\n\ndef f(x):\n    return math.sqrt(x)"
    )


def test_extract_code_rejects_prose_and_broken_code() -> None:
    assert extract_code("Sure") is None
    assert extract_code("I cannot do that.") is None
    assert extract_code("```python\ndef f(x):\n    return (x\n```") is None


def test_extract_code_truncated_fence() -> None:
    complete = "```python\ndef f(x):\n    return x\n"  # no closing fence, but parses
    assert extract_code(complete) == "def f(x):\n    return x"
    assert extract_code("```python\ndef f(x):\n    return [x,") is None


# --------------------------------------------------------------------- ask_* with a fake


def test_ask_structured_first_try(scripted: Any) -> None:
    fake = scripted([CLEAN])
    reply = ask_structured(fake, [Message(role="user", content="plan")], Plan)
    assert reply.value == EXPECTED
    assert reply.degraded is False
    assert len(reply.completions) == 1
    assert fake.calls[0]["schema"] == Plan.model_json_schema()
    assert fake.calls[0]["temperature"] == 0.0


def test_ask_structured_retries_with_validation_error(scripted: Any) -> None:
    fake = scripted(['{"name": "add", "asserts": []}', CLEAN])
    messages = [Message(role="system", content="sys"), Message(role="user", content="plan")]
    reply = ask_structured(fake, messages, Plan, retries=2)
    assert reply.value == EXPECTED
    assert reply.degraded is True
    assert [c.text for c in reply.completions] == ['{"name": "add", "asserts": []}', CLEAN]
    second = fake.calls[1]["messages"]
    assert second[:2] == messages
    assert second[2] == Message(role="assistant", content='{"name": "add", "asserts": []}')
    assert second[3].role == "user"
    assert "count: Field required" in second[3].content
    assert '"count"' in second[3].content  # the schema is shown again


def test_ask_structured_retry_prompt_does_not_grow(scripted: Any) -> None:
    fake = scripted(["nope", "still nope", CLEAN])
    ask_structured(fake, [Message(role="user", content="plan")], Plan, retries=2)
    assert [len(call["messages"]) for call in fake.calls] == [1, 3, 3]


def test_ask_structured_mentions_truncation(scripted: Any) -> None:
    fake = scripted([('{"name": "add", "count": 2', "length"), CLEAN])
    ask_structured(fake, [Message(role="user", content="plan")], Plan)
    assert "cut off because it was too long" in fake.calls[1]["messages"][-1].content


def test_ask_structured_gives_up_with_raw(scripted: Any) -> None:
    fake = scripted(["no", "no again", "still no"])
    with pytest.raises(MalformedReply) as info:
        ask_structured(fake, [Message(role="user", content="plan")], Plan, retries=2)
    assert info.value.raw == "still no"
    assert info.value.provider == "fake"
    assert "3 attempts" in str(info.value)
    assert len(fake.calls) == 3


def test_ask_structured_zero_retries(scripted: Any) -> None:
    fake = scripted(["no", CLEAN])
    with pytest.raises(MalformedReply):
        ask_structured(fake, [Message(role="user", content="plan")], Plan, retries=0)
    assert len(fake.calls) == 1


async def test_aask_structured(scripted: Any) -> None:
    fake = scripted(["{'name': 'add', 'count': 2, 'asserts': []}"])
    reply = await aask_structured(fake, [Message(role="user", content="plan")], Plan)
    assert reply.value == Plan(name="add", count=2, asserts=[])
    assert reply.degraded is True
    assert reply.repairs == ("read as a Python literal",)


GOOD_CODE = "Here it is:\n```python\ndef f(x):\n    return x + 1\n```\nIt adds one."


def test_ask_code_first_try(scripted: Any) -> None:
    fake = scripted([GOOD_CODE])
    reply = ask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert reply.code == "def f(x):\n    return x + 1"
    assert reply.text == GOOD_CODE.removesuffix("```\nIt adds one.")  # it ends with the function
    assert reply.degraded is False
    assert fake.calls[0]["schema"] is None


def test_ask_code_truncated_reply_asks_again(scripted: Any) -> None:
    cut = ("```python\ndef f(x):\n    return [x,", "length")
    fake = scripted([cut, GOOD_CODE])
    reply = ask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert reply.code == "def f(x):\n    return x + 1"
    assert reply.degraded is True
    assert len(reply.completions) == 2
    assert "cut off" in fake.calls[1]["messages"][-1].content


def test_ask_code_missing_entry_point_asks_again(scripted: Any) -> None:
    fake = scripted(["```python\ndef g(x):\n    return x\n```", GOOD_CODE])
    reply = ask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert reply.code.startswith("def f(")
    assert "does not define `f`" in fake.calls[1]["messages"][-1].content


def test_ask_code_syntax_error_is_shown(scripted: Any) -> None:
    fake = scripted(["```python\ndef f(x):\n    return (x\n```", GOOD_CODE])
    ask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert "SyntaxError" in fake.calls[1]["messages"][-1].content


def test_ask_code_never_returns_unparseable_code(scripted: Any) -> None:
    bad = "```python\ndef f(x):\n    return (x\n```"
    fake = scripted([bad, bad, bad])
    with pytest.raises(MalformedReply) as info:
        ask_code(fake, [Message(role="user", content="write f")], entry_point="f", retries=2)
    assert info.value.raw == bad
    assert "SyntaxError" in str(info.value)


def test_ask_code_unfenced_is_degraded(scripted: Any) -> None:
    fake = scripted(["def f(x):\n    return x"])
    reply = ask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert reply.code == "def f(x):\n    return x"
    assert reply.degraded is True


async def test_aask_code(scripted: Any) -> None:
    fake = scripted(["no code here", GOOD_CODE])
    reply = await aask_code(fake, [Message(role="user", content="write f")], entry_point="f")
    assert reply.code == "def f(x):\n    return x + 1"
    assert len(fake.calls) == 2
