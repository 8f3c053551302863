"""Scripted replies for the core tests (a small 'clamp' task and the median demo)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from selfheal import HealConfig
from selfheal.llm.base import Message

SPEC = (
    "Write a function clamp(x, lo, hi) that returns x limited to the range [lo, hi]. "
    "Example: clamp(5, 0, 3) -> 3"
)


def block(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


TESTS = block(
    """
def clamp(x: float, lo: float, hi: float) -> float: ...

# why: inside the range
assert clamp(2, 0, 3) == 2
# why: below the range
assert clamp(-1, 0, 3) == 0
"""
)
WRONG_TEST = block(
    """
# why: model-written and wrong: 7 clamped to [0, 3] is 3
assert clamp(7, 0, 3) == 7
"""
)
NO_TESTS = block("# nothing to add")
GOOD = block(
    """
def clamp(x, lo, hi):
    return max(lo, min(x, hi))
"""
)
BUGGY = block(
    """
def clamp(x, lo, hi):
    return min(x, hi)
"""
)
BROKEN = block(
    """
def clamp(x, lo, hi):
    return x
"""
)
DIAG_CODE = (
    '{"root_cause": "values below lo are not raised to lo", "category": "edge_case", '
    '"repair_strategy": "use max(lo, ...)", "confidence": 0.9, "blame": "code", "wrong_tests": []}'
)
DIAG_TEST = (
    '{"root_cause": "test adv1 expects 7 but the spec limits to hi=3", "category": "wrong_test", '
    '"repair_strategy": "none", "confidence": 0.9, "blame": "test", "wrong_tests": ["adv1"]}'
)
LESSONS = '{"lessons": ["Clamp from below with max(lo, x)."]}'
ACCEPT = '{"verdict": "accept", "concerns": [], "tests": []}'
REJECT_WITH_TEST = (
    '{"verdict": "reject", "concerns": ["floats are not checked"], '
    '"tests": ["assert clamp(0.5, 1.0, 2.0) == 1.0"]}'
)
REJECT_CONCERNS = '{"verdict": "reject", "concerns": ["no docstring"], "tests": []}'


def oracle(value: str) -> str:
    return json.dumps({"reasoning": "from the spec", "value": value})


ORACLE_0 = oracle("0")  # clamp(-1, 0, 3): agrees with the test sb2


PASSING_ADV = block("# why: top edge\nassert clamp(3, 0, 3) == 3")


def repair_script(debugger: list[str] | None = None) -> dict[str, list[str]]:
    """The clamp run that fails once, is diagnosed (``debugger`` replies), repaired, verified."""
    return {
        "test_writer": [TESTS],
        "generator": [BUGGY, GOOD],
        "adversary": [PASSING_ADV],
        "oracle": [ORACLE_0],
        "debugger": debugger if debugger is not None else [DIAG_CODE],
        "lessons": [LESSONS],
        "critic": [ACCEPT],
    }


INSTRUCTED: dict[str, object] = {"first_answer": "instruct"}
"""The instructed form for the first answer: the scripts' replies (greedy answer and samples)
are whole code blocks, not completions of the spec's header (the other forms have their own
tests in test_first_answer.py)."""

CHAIN: dict[str, object] = {
    "candidates": 1,
    "first_sample": 1,
    "agreement": 1,
    "adversarial_tests": True,
    "critic": True,
    "lessons": True,
    "spec_blind_tests": True,
    "max_iterations": 4,
    "repair_width": 1,
    **INSTRUCTED,
}
"""One candidate per round with every role on: the scripted chain these tests tell, step by
step (the population has its own tests in test_population.py), in the instructed form. A lone
candidate that passes the trusted tests counts as verified here (``agreement=1``)."""


def chain(**changes: object) -> HealConfig:
    """A ``HealConfig`` of the scripted chain, with ``changes``."""
    return HealConfig.model_validate({**CHAIN, **changes})


def oracle_from_truth(messages: Sequence[Message]) -> str:
    """A spec oracle that knows the right answer for any clamp call it is asked about."""
    call = re.search(r"`(clamp\(.*?\))`", messages[-1].content)
    assert call, messages[-1].content
    x, lo, hi = eval(call.group(1).replace("clamp", ""))
    return json.dumps({"reasoning": "by the spec", "value": repr(max(lo, min(x, hi)))})


def every_role() -> dict[str, list[str]]:
    """A chain run (``chain()``) in which every role speaks: a buggy first version, a repair
    the critic rejects with a test about floats, and the fix."""
    reject = json.dumps(
        {
            "verdict": "reject",
            "concerns": ["floats"],
            "tests": ["assert clamp(1.5, 1.0, 2.0) == 1.5"],
        }
    )
    inty = block("def clamp(x, lo, hi):\n    return max(int(lo), min(int(x), int(hi)))")
    return {
        "test_writer": [TESTS],
        "generator": [BUGGY, inty, GOOD],
        "adversary": [block("assert clamp(3, 0, 3) == 3")],
        "oracle": [ORACLE_0, oracle("1.5")],
        "debugger": [DIAG_CODE, DIAG_CODE],
        "lessons": [LESSONS, LESSONS],
        "critic": [reject],
    }
