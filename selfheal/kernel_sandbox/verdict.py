"""Verdicts decided on the host from the values a candidate's process returned: a split
test's host side (``split.py``) evaluated over them, a ``CallTest``'s value compared with its
``expected``. The candidate never sees what its values are compared with."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from selfheal.kernel_sandbox.hosteval import HostEval, HostEvalError, compare, truth
from selfheal.kernel_sandbox.split import SLOT, SplitTest
from selfheal.kernel_sandbox.types import CallTest, TestResult
from selfheal.kernel_sandbox.values import data_equal, decode

_SHOWN = 300


@dataclass(frozen=True)
class Raised:
    """A value the candidate side could not give: its expression raised."""

    exc_type: str
    """The exception's type name."""
    message: str
    """Its message."""
    traceback: str
    """Its trimmed traceback."""


class _CandidateRaised(Exception):
    def __init__(self, raised: Raised) -> None:
        super().__init__(raised.message)
        self.raised = raised


class _Values(HostEval):
    """The host's evaluator with the candidate's values behind the slot names: a value
    whose expression raised raises when the host reads it (and only then)."""

    def name(self, name: str) -> Any:
        v = super().name(name)
        if isinstance(v, Raised):
            raise _CandidateRaised(v)
        return v


def short(v: Any, n: int = _SHOWN) -> str:
    """``repr(v)`` cut to ``n`` characters."""
    try:
        r = repr(v)
    except Exception as e:  # a pandas repr can fail on odd data
        r = f"<{type(v).__name__}: repr failed ({type(e).__name__})>"
    return r if len(r) <= n else r[:n] + "..."


def _assert(s: ast.Assert, ev: HostEval) -> None:
    test = s.test
    sides: tuple[Any, Any] | None = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        sides = ev.expr(test.left), ev.expr(test.comparators[0])
        ok = truth(compare(type(test.ops[0]).__name__, *sides, top=True))
    else:
        ok = truth(ev.expr(test))
    if not ok:
        detail = f"\n  left:  {short(sides[0])}\n  right: {short(sides[1])}" if sides else ""
        text = f"assert {getattr(s, 'sh_src', None) or ast.unparse(test)}{detail}"
        if s.msg is not None:
            text = f"{ev.expr(s.msg)!s}\n{text}"[:4000]
        raise AssertionError(text)


def judge(split: SplitTest, r: TestResult, value: Any) -> TestResult:
    """``r`` (the candidate side ran without raising) with the host's verdict."""
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == "vals"):
        return _error(r, "SandboxError", "no values came back for this test")
    kept = value[1]
    if not isinstance(kept, list) or len(kept) != split.values:
        return _error(r, "SandboxError", "the values that came back do not match the test")
    env: dict[str, Any] = {}
    for k, item in enumerate(kept):
        if isinstance(item, tuple) and len(item) == 2 and item[0] == "v":
            env[SLOT.format(k)] = decode(item[1])
        elif isinstance(item, tuple) and len(item) == 4 and item[0] == "x":
            env[SLOT.format(k)] = Raised(*(str(x)[:4000] for x in item[1:]))
        else:
            return _error(r, "SandboxError", "a value came back malformed")
    ev = _Values(env)
    try:
        ev.run(split.host.body, _assert)
    except _CandidateRaised as e:
        raised = e.raised
        update = {
            "exc_type": raised.exc_type,
            "message": raised.message,
            "traceback": raised.traceback,
        }
        return r.model_copy(update={"outcome": "error", **update})
    except AssertionError as e:
        update = {"exc_type": "AssertionError", "message": str(e), "traceback": _where(r, ev)}
        return r.model_copy(update={"outcome": "failed", **update})
    except HostEvalError as e:
        return _error(r, "SandboxError", f"the host could not evaluate the test: {e}")
    except Exception as e:
        return _error(r, type(e).__name__, str(e)[:4000])
    return r


def _where(r: TestResult, ev: HostEval) -> str:
    """A traceback naming the test's line that failed (the host ran it)."""
    s = ev.current
    if s is None:
        return ""
    text = getattr(s, "sh_src", None)
    shown = f"\n    assert {text}" if text else ""
    return f'Traceback (most recent call last):\n  File "<test {r.test_id}>", line {s.lineno}, in {getattr(s, "sh_func", "<module>")}{shown}\n'


def _error(r: TestResult, exc_type: str, message: str) -> TestResult:
    return r.model_copy(update={"outcome": "error", "exc_type": exc_type, "message": message})


def check_call(t: CallTest, r: TestResult, value: Any) -> TestResult:
    """Compare a CallTest's returned value with ``expected`` on the host."""
    args = [*map(repr, t.args), *(f"{k}={v!r}" for k, v in t.kwargs.items())]
    call = f"{t.function}({', '.join(args)})"
    if not isinstance(value, tuple) or len(value) != 2 or value[0] != "enc":
        return _error(r, "SandboxError", "no value came back")
    actual = decode(value[1])
    try:
        if data_equal(actual, t.expected):
            return r
    except AssertionError:
        pass
    msg = f"{call} returned {short(actual)}, expected {short(t.expected)}"
    return r.model_copy(update={"outcome": "failed", "exc_type": "AssertionError", "message": msg})
