"""A deterministic, scriptable provider for tests and demos.

Replies are scripted per role: ``MockProvider({"generator": [reply1, reply2], ...})``. A reply
is a string, a function of the messages returning a string, or an exception to raise. The role
travels with each call (``CompletionRequest.role``, which the pipeline sets), so one mock
serves every role; a call without a role answers from the script of role ``"any"``. Every call
is recorded in ``calls`` (``calls_for(role)`` picks one role's).

``MockProvider.demo()`` replays a scripted session for :data:`DEMO_SPEC` (a median function):
a first population that fails the spec's even example, a diagnosis, a repair round whose three
candidates agree, and a verified result, without any model. When a reviewer rejects that
repair round (``Reject(reason)``), a second one follows whose candidates use
``statistics.median``, so every human decision of the tutorials can be replayed. It runs to
the end with any options (a role whose replies are used up answers its last one again) and
refuses any other spec before the run starts (``check_spec``), so a run with it is never cut
off halfway.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from selfheal.errors import ConfigError, ProviderError
from selfheal.llm.base import Completion, CompletionRequest, Message, ProviderBase
from selfheal.llm.tokens import estimate_tokens

__all__ = ["DEMO_SPEC", "MockCall", "MockProvider", "MockScriptExhausted"]

Reply = str | Callable[[Sequence[Message]], str] | BaseException

UNBOUND = "any"
"""The script a call without a role answers from."""


class MockScriptExhausted(ProviderError):
    """The script has no more replies for a role."""


@dataclass(frozen=True)
class MockCall:
    """One recorded call."""

    role: str
    messages: tuple[Message, ...]
    reply: str
    schema: dict[str, Any] | None = None
    max_tokens: int = 1024
    """The completion-token cap the caller asked for."""
    node: str = ""
    """The pipeline node the call came from."""
    temperature: float = 0.0
    """The sampling temperature asked for."""
    seed: int | None = None
    """The sampling seed asked for (None: the backend's choice)."""


@dataclass
class _Script:
    replies: dict[str, list[Reply]]
    default: Reply | None
    repeat_last: bool = False
    positions: dict[str, int] = field(default_factory=dict)

    def next(self, role: str, messages: Sequence[Message]) -> str:
        queue = self.replies.get(role)
        if queue is None:
            if self.default is None:
                raise MockScriptExhausted(
                    f"The mock provider has no script for role {role!r}. Add replies for it: "
                    f"MockProvider({{{role!r}: [...]}}) or a default=.",
                    provider="mock",
                )
            reply: Reply = self.default
        else:
            i = self.positions.get(role, 0)
            if i >= len(queue) and self.repeat_last and queue:
                i = len(queue) - 1
            if i >= len(queue):
                raise MockScriptExhausted(
                    f"The mock script for role {role!r} has {len(queue)} replies and reply "
                    f"#{i + 1} was asked for. Add more replies.",
                    provider="mock",
                )
            self.positions[role] = i + 1
            reply = queue[i]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(messages)
        return reply


class MockProvider(ProviderBase):
    """Scripted replies per role. Implements the ``Provider`` protocol."""

    max_concurrency = 1
    """Requests the pipeline may have in flight at once: one, so scripted replies are consumed
    in a fixed order and a scripted run is reproducible."""

    def __init__(
        self,
        script: Mapping[str, Sequence[Reply]] | None = None,
        *,
        default: Reply | None = None,
        name: str = "scripted",
        latency: float = 0.0,
        only_spec: str | None = None,
        repeat_last: bool = False,
    ) -> None:
        """``only_spec``: the one spec the script answers for (others are refused before a
        run starts); ``repeat_last``: a role whose replies are used up answers its last one
        again instead of raising ``MockScriptExhausted``."""
        self._script = _Script(
            {k: list(v) for k, v in (script or {}).items()}, default, repeat_last
        )
        self._name = name
        self._latency = latency
        self._only_spec = only_spec
        self._lock = threading.Lock()
        self.calls: list[MockCall] = []

    @property
    def model_id(self) -> str:
        return f"mock:{self._name}"

    def check_spec(self, spec: str) -> None:
        """Refuse a spec the script was not written for, before the run starts."""
        if self._only_spec is not None and spec.split() != self._only_spec.split():
            raise ConfigError(
                f"The {self.model_id} provider only replays its scripted median demo (run "
                "`selfheal heal --provider mock` with no spec); it cannot heal this spec. Use "
                "a real model: --provider local (the default, installed by `make install`), "
                "ollama:MODEL, anthropic:MODEL, openai:MODEL or hf:MODEL; or script the "
                "replies yourself with mock:<script.yaml>."
            )

    def calls_for(self, role: str) -> list[MockCall]:
        return [c for c in self.calls if c.role == role]

    def _take(self, request: CompletionRequest, n: int) -> list[str]:
        """The next ``n`` replies of the request's role, in order, under one lock (so
        concurrent callers never interleave)."""
        role = request.role or UNBOUND
        texts: list[str] = []
        with self._lock:
            for _ in range(n):
                text = self._script.next(role, request.messages)
                self.calls.append(
                    MockCall(
                        role,
                        request.messages,
                        text,
                        request.schema,
                        request.max_tokens,
                        request.node,
                        request.temperature,
                        request.seed,
                    )
                )
                texts.append(text)
        return texts

    async def _answer(self, request: CompletionRequest, text: str) -> Completion:
        cut = min((text.find(s) for s in request.stop if s and s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        if self._latency:
            await asyncio.sleep(self._latency)
        if request.on_token is not None:
            for piece in text.split(" "):
                request.on_token(piece + " ")
        prompt = "\n".join(m.content for m in request.messages)
        return Completion(
            text=text,
            prompt_tokens=estimate_tokens(prompt),
            completion_tokens=estimate_tokens(text),
            latency=self._latency,
            model=self.model_id,
            finish_reason="stop",
        )

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        (text,) = await asyncio.to_thread(self._take, request, 1)
        return await self._answer(request, text)

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        """``n`` scripted replies in order, one after the other (deterministic)."""
        texts = await asyncio.to_thread(self._take, request, n)
        return [await self._answer(request.replace(on_token=None), t) for t in texts]

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def demo(cls) -> MockProvider:
        """The scripted median session: fail, diagnose, learn, repair, verify."""
        return cls(DEMO_SCRIPT, name="demo", latency=0.05, only_spec=DEMO_SPEC, repeat_last=True)

    @classmethod
    def from_file(cls, path: str | Path) -> MockProvider:
        """Load a script from YAML: ``{role: [reply, ...]}``, optionally with ``latency:
        SECONDS`` (each call then takes that long, like a slow model)."""
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"Cannot read mock script {p}: {exc}") from exc
        latency = data.pop("latency", 0.0) if isinstance(data, dict) else 0.0
        if not isinstance(latency, int | float) or latency < 0:
            raise ConfigError(f"Mock script {p}: latency must be a number of seconds >= 0.")
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise ConfigError(f"Mock script {p} must map role names to lists of replies.")
        return cls(
            {str(k): [str(x) for x in v] for k, v in data.items()},
            name=p.stem,
            latency=float(latency),
        )

    @classmethod
    def from_string(cls, rest: str) -> MockProvider:
        """Build from the part after ``mock:`` in a model string: ``demo`` (default) or a YAML path."""
        if rest in {"", "demo"}:
            return cls.demo()
        return cls.from_file(rest)


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
    import ast
    import json
    import re
    import statistics

    m = re.search(r"`median\((\[.*?\])\)`", messages[-1].content)
    try:
        values = ast.literal_eval(m.group(1)) if m else None
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
