"""The first answer as a completion of the spec's own header (``first_answer="complete"``):
the header is prefilled as the start of the reply, the code is the header and what the model
continued it with, and a reply that does not complete it is asked again the usual way."""

from __future__ import annotations

from selfheal import HealConfig, heal
from selfheal.llm.ask import with_prefill
from selfheal.llm.base import Completion
from selfheal.llm.mock import MockProvider
from selfheal.result import HealResult
from selfheal.spec import header_of, parse_spec

HUMANEVAL_LIKE = '''from typing import List


def below_zero(operations: List[int]) -> bool:
    """ Given deposits and withdrawals, return True if the balance ever falls below zero.
    >>> below_zero([1, 2, -4, 5])
    True
    >>> below_zero([1, 2, 3])
    False
    """
'''
CONTINUATION = """    balance = 0
    for op in operations:
        balance += op
        if balance < 0:
            return True
    return False
"""
ONE = HealConfig.single_shot().model_copy(update={"first_answer": "complete"})


def test_the_header_is_the_code_spec_itself_or_def_name() -> None:
    assert header_of(parse_spec(HUMANEVAL_LIKE)) == HUMANEVAL_LIKE
    assert header_of(parse_spec("Write a function add(a, b) returning a + b.")) == "def add("
    assert header_of(parse_spec("Return the sum of a list.")) is None


def test_a_reply_is_the_prefill_and_its_continuation_with_the_block_closed() -> None:
    joined = with_prefill(Completion(text="    return 1\n"), "```python\ndef f():\n")
    assert joined.text == "```python\ndef f():\n    return 1\n```"
    own = with_prefill(Completion(text="```python\ndef f():\n    return 2\n```"), "```python\n")
    assert own.text == "```python\ndef f():\n    return 2\n```"


def test_the_complete_form_prefills_the_header_and_keeps_the_completion() -> None:
    mock = MockProvider({"generator": [CONTINUATION]})
    result = heal(HUMANEVAL_LIKE, provider=mock, config=ONE)
    assert isinstance(result, HealResult) and result.code is not None
    assert result.code.strip().endswith("return False")
    assert "def below_zero(operations: List[int]) -> bool:" in result.code
    (call,) = mock.calls_for("generator")
    last = call.messages[-1]
    assert last.role == "assistant" and last.content == "```python\n" + HUMANEVAL_LIKE
    assert "Complete the following Python function" in call.messages[-2].content


def test_a_reply_that_does_not_complete_the_header_is_asked_again_as_usual() -> None:
    whole = "```python\nfrom typing import List\n\ndef below_zero(operations: List[int]) -> bool:\n"
    whole += CONTINUATION + "```"
    mock = MockProvider({"generator": ["this is not code (", whole]})
    result = heal(HUMANEVAL_LIKE, provider=mock, config=ONE)
    assert isinstance(result, HealResult) and result.code is not None
    assert "balance += op" in result.code
    first, second = mock.calls_for("generator")
    assert first.messages[-1].role == "assistant"
    assert (
        second.messages[-1].role == "user" and "write this function" in second.messages[-1].content
    )


def test_the_instruct_form_is_the_default() -> None:
    assert HealConfig().first_answer == "instruct"
    mock = MockProvider({"generator": ["```python\ndef add(a, b):\n    return a + b\n```"]})
    heal(
        "Write a function add(a, b) returning a + b.",
        provider=mock,
        config=HealConfig.single_shot(),
    )
    assert mock.calls_for("generator")[0].messages[-1].role == "user"
