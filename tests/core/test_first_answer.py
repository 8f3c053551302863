"""The first answer as a completion of the spec's own header (``first_answer="complete"``):
the header is prefilled as the start of the reply, the code is the header and what the model
continued it with, and a reply that does not complete it is asked again as a repair of it."""

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


def test_a_reply_that_does_not_complete_the_header_is_asked_again_as_a_repair() -> None:
    """The whole reply (the header and its continuation) is shown with what was wrong, and the
    corrected code asked for, sampled (tests/core/test_unparsed_replies.py)."""
    whole = "```python\nfrom typing import List\n\ndef below_zero(operations: List[int]) -> bool:\n"
    whole += CONTINUATION + "```"
    mock = MockProvider({"generator": ["this is not code (", whole]})
    result = heal(HUMANEVAL_LIKE, provider=mock, config=ONE)
    assert isinstance(result, HealResult) and result.code is not None
    assert "balance += op" in result.code
    first, second = mock.calls_for("generator")
    assert first.messages[-1].role == "assistant"
    assert second.messages[-2].content.startswith("```python\n" + HUMANEVAL_LIKE)
    assert second.messages[-1].role == "user" and "corrected code" in second.messages[-1].content
    assert second.temperature > 0


def test_both_forms_the_lead_completes_the_header() -> None:
    """``both`` asks the greedy answer completing the header (the lead, and the single shot),
    then instructed; the samples take turns across the two forms."""
    both = {"first_answer": "both"}
    mock = MockProvider({"generator": [CONTINUATION] * 4})
    heal(HUMANEVAL_LIKE, provider=mock, config=HealConfig.single_shot().model_copy(update=both))
    (lead,) = mock.calls_for("generator")
    assert lead.messages[-1].role == "assistant" and lead.temperature == 0.0

    whole = f"```python\n{HUMANEVAL_LIKE}{CONTINUATION}```"
    mock = MockProvider({"generator": [whole] * 4})
    four = HealConfig(candidates=4, first_sample=4, repair=False, probes=False, **both)
    heal(HUMANEVAL_LIKE, provider=mock, config=four, tests=["assert below_zero([-1])"])
    calls = mock.calls_for("generator")
    forms = sorted(
        (c.temperature, "complete" if c.messages[-1].role == "assistant" else "instruct")
        for c in calls
    )
    assert forms == [(0.0, "complete"), (0.0, "instruct"), (0.8, "complete"), (0.8, "instruct")]


def test_both_forms_are_the_default_and_instruct_asks_every_answer_as_before() -> None:
    assert HealConfig().generation.first_answer == "both"
    mock = MockProvider({"generator": ["```python\ndef add(a, b):\n    return a + b\n```"] * 2})
    heal(
        "Write a function add(a, b) returning a + b.",
        provider=mock,
        config=HealConfig(candidates=2, first_sample=2, repair=False, first_answer="instruct"),
    )
    calls = mock.calls_for("generator")
    assert len(calls) == 2 and all(c.messages[-1].role == "user" for c in calls)


def test_the_complete_form_shows_lessons_failures_and_feedback_as_the_generator_does() -> None:
    from selfheal.llm.prompts import render

    shown = {"lessons": ["Average the middles."], "failures": ["f(1) == 2 failed"]}
    base = {"spec": "s", "signature": "", "entry_point": "f", "examples": [], "remembered": []}
    for code_spec in (True, False):
        (_, user) = render(
            "complete", **base, **shown, feedback="too slow", header="def f(", code_spec=code_spec
        )
        assert all(s in user.content for s in ("Average the middles.", "f(1) == 2", "too slow"))
    (_, bare) = render(
        "complete",
        **base,
        lessons=[],
        failures=[],
        feedback="",
        header="def f(x):\n",
        code_spec=True,
    )
    assert bare.content == "Complete the following Python function:\n```python\ndef f(x):\n```"


def test_a_completion_from_def_name_gets_the_standard_imports_it_uses() -> None:
    """Completed from ``def name(``, a reply has no line above the function for its imports
    (the built-in suite's records: ``string.punctuation``, ``datetime.date``, ``math.floor``
    raised NameError when called); the ones it uses are added, and nothing it binds itself."""
    spec = "Write a function letters(text) returning the letters of text, lowercased. letters('A,b') -> 'ab'"
    body = (
        "text):\n    kept = Counter(c for c in text if c not in string.punctuation)\n"
        "    return ''.join(kept).lower()\n"
    )
    config = HealConfig(candidates=1, first_sample=1, agreement=1, repair=False)
    config = config.model_copy(update={"first_answer": "complete", "spec_blind_tests": False})
    result = heal(spec, provider=MockProvider({"generator": [body]}), config=config)
    assert result.code is not None
    assert result.code.startswith("from collections import Counter\nimport string\ndef letters(")
    assert result.verified and set(result.test_outcomes().values()) == {"passed"}


def test_missing_imports_leaves_bound_names_and_picks_the_module_or_its_class() -> None:
    from selfheal.roles._source import missing_imports

    assert missing_imports("def f(string):\n    return string.upper()") == []
    assert missing_imports("import math\ndef f(x):\n    return math.floor(x)") == []
    assert missing_imports("def f(x):\n    return undefined(x) + e + X") == []
    assert missing_imports("def f(d):\n    return datetime.now() - d") == [
        "from datetime import datetime"
    ]
    assert missing_imports(
        "def f(n):\n    return datetime.date.today() + datetime.timedelta(n)"
    ) == ["import datetime"]
    assert missing_imports("def f(x):\n    return floor(x), defaultdict(list)") == [
        "from collections import defaultdict",
        "from math import floor",
    ]
    # the notebook's modules and conventional names (the single answers of the notebook suite
    # failed with NameErrors for these)
    assert missing_imports("def f(a):\n    return np.asarray(a), pd.Series(a)") == [
        "import numpy as np",
        "import pandas as pd",
    ]
    assert missing_imports("def f(s):\n    return unicodedata.normalize('NFKC', s)") == [
        "import unicodedata"
    ]
    assert missing_imports("def f(d):\n    return d + relativedelta(months=1)") == [
        "from dateutil.relativedelta import relativedelta"
    ]
    assert missing_imports("def f(np):\n    return np.sum()") == []


def test_a_completion_of_def_name_reads_as_a_person_writes_it() -> None:
    """The local model continues ``def name(`` with `` arg)`` (a word boundary of its
    tokenizer): every function read ``def name( arg)`` and showed as a changed line in a
    diff. The join drops those spaces, and only after an opening bracket."""
    joined = with_prefill(Completion(text=" items: list) -> list:\n    return items\n"), "def f(")
    assert joined.text.startswith("def f(items: list) -> list:\n")
    # llama-server returns the prefilled text with its continuation: the same join there
    served = "```python\ndef f( items: list) -> list:\n    return items\n"
    assert with_prefill(Completion(text=served), "```python\ndef f(").text.startswith(
        "```python\ndef f(items: list) -> list:\n"
    )
    # the model then closes it the same way (`` a ):``): that space goes too, only there
    closed = with_prefill(Completion(text=" a ) -> int:\n    return g( a )\n"), "def f(")
    assert closed.text == "def f(a) -> int:\n    return g( a )\n"
    served = "```python\ndef f( a ):\n    return a\n"
    assert with_prefill(Completion(text=served), "```python\ndef f(").text.startswith(
        "```python\ndef f(a):\n"
    )
    wrapped = with_prefill(Completion(text=" a,\n      b ):\n    return a\n"), "def f(")
    assert wrapped.text.startswith("def f(a,\n      b ):")  # a second line is the model's
    kept = with_prefill(Completion(text="   return 1\n"), "```python\ndef f():\n ")
    assert kept.text.startswith("```python\ndef f():\n    return 1")
    spec = "Write a function add(a, b) returning a + b. add(1, 2) -> 3"
    config = HealConfig(candidates=1, first_sample=1, agreement=1, repair=False)
    config = config.model_copy(update={"first_answer": "complete", "spec_blind_tests": False})
    mock = MockProvider({"generator": [" a, b):\n    return a + b\n"]})
    result = heal(spec, provider=mock, config=config)
    assert result.code is not None and result.code.startswith("def add(a, b):\n")
