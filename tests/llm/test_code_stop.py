"""Answers that stop when the function ends (issue 45, item 4): the rule on real-looking
replies, and the streaming backends that stop reading where it says (no model needed)."""

from __future__ import annotations

import json
from collections.abc import Callable

from llm_fakes import FakeServer, Request, Response

from selfheal.llm.base import Message
from selfheal.llm.mock import MockProvider
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.llm.parsing.code_stop import FunctionEnds, function_end
from selfheal.llm.retry import RetryPolicy
from selfheal.llm.stream import ReplyStream
from selfheal.llm.tokens import estimate_tokens

FUNCTION = '''```python
def count_vowels(text: str) -> int:
    """How many vowels text has."""
    return sum(1 for c in text.lower() if c in "aeiou")
'''
"""How the local model begins an instructed answer (an open block, the function)."""


def test_prose_after_the_closing_fence_ends_the_reply_at_the_fence() -> None:
    reply = FUNCTION + "```\n\nThis function works by iterating over each character"
    assert reply[: function_end(reply, "count_vowels")] == FUNCTION


def test_prose_right_after_the_function_ends_it_without_waiting_for_the_line() -> None:
    reply = FUNCTION + "\nThis function works"
    assert reply[: function_end(reply, "count_vowels")] == FUNCTION + "\n"
    unfenced = FUNCTION.removeprefix("```python\n") + "\nExplanation:\n"
    assert function_end(unfenced, "count_vowels") == len(unfenced) - len("Explanation:\n")


def test_a_second_helper_function_does_not_end_it() -> None:
    helper = "\n\ndef is_vowel(c: str) -> bool:\n    return c in 'aeiou'\n"
    assert function_end(FUNCTION + helper, "count_vowels") is None
    assert function_end(FUNCTION + helper + "\nimport re\nVOWELS = 'aeiou'\n", None) is None
    # the function asked for comes after its helper: only its end counts
    first = "```python\ndef is_vowel(c):\n    return c in 'aeiou'\n\nNow the main function:\n"
    assert function_end(first, "count_vowels") is None


def test_a_main_block_or_example_calls_end_it() -> None:
    main = FUNCTION + '\n\nif __name__ == "__main__":\n    print(count_vowels("hello"))\n'
    assert main[: function_end(main, "count_vowels")].rstrip() == FUNCTION.rstrip()
    usage = FUNCTION + "\n# Example usage\nprint(count_vowels('hello'))  # 2\n"
    assert usage[: function_end(usage, "count_vowels")].endswith("# Example usage\n")
    tests = FUNCTION + "\nassert count_vowels('abc') == 1\n"
    assert tests[: function_end(tests, "count_vowels")] == FUNCTION + "\n"


def test_nothing_ends_before_the_function_is_complete() -> None:
    assert function_end("Here is the function:\n```python\n", "f") is None
    assert function_end("```python\ndef f(x):\n    return x\n``", "f") is None  # not yet a fence
    signature = "```python\ndef f(\n    x: int,\n) -> int:\n    return x\n\nThat is all.\n"
    assert signature[: function_end(signature, "f")].endswith("    return x\n\n")


def test_a_prefilled_header_is_the_models_to_complete_not_to_end() -> None:
    """A HumanEval header (the def line and docstring) is complete Python already: the rule
    reads it but ends nothing until the model wrote a line of the body."""
    header = 'def below_zero(ops: list) -> bool:\n    """Does the balance fall below zero?\n"""\n'
    ends = FunctionEnds("below_zero", "```python\n" + header)
    assert ends("Sure, here it is:\n") is None
    body = "    return min(0, *ops) < 0\n"
    assert ends(body + "```") == len(body)
    assert ends(body + "\nThis works because") == len(body) + 1
    assert FunctionEnds("f", "x") == FunctionEnds("f", "x")  # a value: batched requests match


def test_a_reply_stream_says_when_to_stop_and_ends_its_text_there() -> None:
    stream = ReplyStream(None, FunctionEnds("f"))
    pieces = ["```python\ndef f", "(x):\n", "    return x\n", "```", "\nIt returns x."]
    said = [stream.add(p) for p in pieces]
    assert said == [False, False, False, True, True]
    assert stream.text == "```python\ndef f(x):\n    return x\n"


def test_the_openai_compatible_provider_stops_reading_where_the_function_ends(
    http_server: Callable[..., FakeServer],
) -> None:
    """The server would stream 200 more fragments of prose and then say 999 tokens: the
    provider stops at the fence (closing the stream ends decoding on llama-server), so the
    reply and its token count are the function's."""
    pieces = ["```python\n", "def f(x):\n", "    return x\n", "```", "\n"] + ["blah "] * 200

    def handler(r: Request) -> Response:
        chunks: list[dict[str, object]] = [
            {"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces
        ]
        chunks.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 999}})
        body = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
        return Response(status=200, body=body, headers={"content-type": "text/event-stream"})

    server = http_server(handler)
    p = OpenAICompatible(
        model="m", base_url=server.url + "/v1", api_key="k", policy=RetryPolicy(timeout=10.0)
    )
    done = p.complete([Message(role="user", content="f")], stop_when=FunctionEnds("f"))
    assert done.text == "```python\ndef f(x):\n    return x\n"
    assert (done.completion_tokens, done.finish_reason) == (4, "stop")


def test_ask_code_asks_every_reply_to_end_with_its_function() -> None:
    from selfheal.llm.ask import ask_code

    mock = MockProvider({"any": [FUNCTION + "```\nThis function counts vowels."]})
    reply = ask_code(mock, [Message(role="user", content="count")], entry_point="count_vowels")
    assert reply.text == FUNCTION and "This function" not in reply.text
    assert mock.calls[0].messages[-1].role == "user"
    assert reply.completions[0].completion_tokens == estimate_tokens(FUNCTION)
