"""The scripted median session :meth:`selfheal.llm.mock.MockProvider.demo` replays (the
tutorials, the CLI's ``--provider mock`` and the tests use it): a first population that fails
the spec's even example, a diagnosis, a repair round whose three candidates agree, and a
verified result; when a reviewer rejects that round (``Reject(reason)``), a second one follows
whose candidates use ``statistics.median``, so every human decision of the tutorials replays."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from selfheal._parse import literal
from selfheal.llm.base import Message

Reply = str | Callable[[Sequence[Message]], str] | BaseException
"""A scripted reply: the text, a function of the messages returning it, or an exception."""

DEMO_SPEC = (
    "Write a function median(values) that returns the median of a list of numbers. "
    "For an even number of values it is the mean of the two middle values. "
    "Raise ValueError if the list is empty. Examples: median([3, 1, 2]) -> 2, "
    "median([4, 1, 3, 2]) -> 2.5"
)

_DEMO_TESTS = """```python
def median(values: list[float]) -> float: ...

# why: odd length, unsorted input
assert median([5, 1, 3]) == 3
# why: even length takes the mean of the two middle values
assert median([4, 1, 3, 2]) == 2.5
# why: a single value is its own median
assert median([7]) == 7
# why: the spec says an empty list raises ValueError
try:
    median([])
except ValueError:
    pass
else:
    raise AssertionError("median([]) must raise ValueError")
```"""

_DEMO_FIRST = """```python
def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
```"""

_DEMO_LOWER = """```python
def median(values):
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]
```"""

_DEMO_FLOOR = """```python
def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) // 2
```"""

_DEMO_ADVERSARIAL = """```python
# why: negative numbers, odd length
assert median([-1, -3, -2]) == -2
# why: two values average to a float
assert median([1, 2]) == 1.5
```"""

_DEMO_DIAGNOSIS = (
    '{"root_cause": "For an even number of values the code returns the upper middle element '
    "instead of the mean of the two middle values, and an empty list raises IndexError instead "
    'of ValueError.", "category": "edge_case", "repair_strategy": "Raise ValueError when the list '
    'is empty; for even lengths return the mean of ordered[n//2 - 1] and ordered[n//2].", '
    '"confidence": 0.9, "blame": "code", "wrong_tests": []}'
)

_DEMO_LESSONS = (
    '{"lessons": ["For an even number of values, average the two middle values.", '
    '"Check for an empty list first and raise ValueError."]}'
)

_DEMO_REPAIR = """```python
def median(values):
    if not values:
        raise ValueError("median() of an empty list")
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
```"""

_DEMO_REPAIR_B = """```python
def median(values):
    if len(values) == 0:
        raise ValueError("no values")
    s = sorted(values)
    half = len(s) // 2
    return s[half] if len(s) % 2 == 1 else (s[half - 1] + s[half]) / 2
```"""

_DEMO_REPAIR_C = """```python
def median(values):
    \"\"\"The median; the mean of the two middle values for an even count.\"\"\"
    if not values:
        raise ValueError("median() of an empty list")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 0:
        return (ordered[mid - 1] + ordered[mid]) / 2
    return ordered[mid]
```"""


_DEMO_AFTER_REJECT = """```python
import statistics


def median(values):
    if not values:
        raise ValueError("median() of an empty list")
    return statistics.median(values)
```"""

_DEMO_AFTER_REJECT_B = """```python
from statistics import median as _median


def median(values):
    if len(values) == 0:
        raise ValueError("no values")
    return _median(values)
```"""

_DEMO_AFTER_REJECT_C = """```python
import statistics


def median(values):
    \"\"\"The median of the values, by statistics.median.\"\"\"
    values = list(values)
    if not values:
        raise ValueError("median() of an empty list")
    return statistics.median(values)
```"""


def _demo_oracle(messages: Sequence[Message]) -> str:
    """The demo's spec oracle: the true median of the list in the question."""
    import json
    import re
    import statistics

    m = re.search(r"`median\((\[.*?\])\)`", messages[-1].content)
    try:
        values = literal(m.group(1)) if m else None
        answer = repr(statistics.median(values)) if values else "ValueError"
    except (ValueError, SyntaxError, TypeError):
        answer = "None"
    return json.dumps({"reasoning": "sort the values and take the middle", "value": answer})


_DEMO_CRITIC = '{"verdict": "accept", "concerns": [], "tests": []}'

DEMO_SCRIPT: dict[str, list[Reply]] = {
    "test_writer": [_DEMO_TESTS],
    # round 1: the greedy answer and a sample, both wrong on the even example; two more samples,
    # still wrong; round 2: a patch of the greedy one, a patch of the next, a rewrite: all right;
    # only when a reviewer rejects round 2: three more, with statistics.median
    "generator": [
        _DEMO_FIRST,
        _DEMO_LOWER,
        _DEMO_FLOOR,
        _DEMO_FIRST,
        _DEMO_REPAIR,
        _DEMO_REPAIR_B,
        _DEMO_REPAIR_C,
        _DEMO_AFTER_REJECT,
        _DEMO_AFTER_REJECT_B,
        _DEMO_AFTER_REJECT_C,
    ],
    "adversary": [_DEMO_ADVERSARIAL],
    "oracle": [_demo_oracle] * 8,
    "debugger": [_DEMO_DIAGNOSIS],
    "lessons": [_DEMO_LESSONS],
    "critic": [_DEMO_CRITIC],
}
