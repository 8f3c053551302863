"""Kernel side: the comparison helpers rewritten test code calls, and a safe repr. A
comparison is native only when both sides are *plain* (exact builtin value types, whose
dunder methods a candidate cannot override); see docs/sandbox.md, "Comparisons that cannot
be fooled". Shipped to the kernel as source (see ``_harness/__init__.py``).
"""

from __future__ import annotations

from typing import Any

_NoneType = type(None)
_PURE_SCALARS = frozenset({int, float, complex, str, bytes, bool, _NoneType, range})
_PURE_CONTAINERS = frozenset({list, tuple, dict, set, frozenset, bytearray})
APPROX_EQ: dict[Any, Any] = {}
"""pytest's approx classes -> their ``__eq__``, taken at warm-up before any candidate
(``pytest_item.pt_install``): ``f() == pytest.approx(0.3)`` compares a plain value with the
test's own approx object through pytest's code, never through the candidate's."""


def pure(v: Any, depth: int = 0) -> bool:
    """True if ``v`` is built only from exact builtin value types (no candidate code can run
    when comparing or hashing it). Nesting deeper than 200 counts as not plain."""
    t = type(v)
    if t in _PURE_SCALARS:
        return True
    if depth > 200 or t not in _PURE_CONTAINERS:
        return False
    if t is bytearray:
        return True
    if t is dict:
        for k, x in v.items():  # noqa: SIM110 - explicit loops, no helper lookups
            if not pure(k, depth + 1) or not pure(x, depth + 1):
                return False
        return True
    for x in v:  # noqa: SIM110
        if not pure(x, depth + 1):
            return False
    return True


def srepr(v: Any, limit: int = 300) -> str:
    """A repr that never trusts the candidate's ``__repr__`` for the type name."""
    tn = getattr(type(v), "__qualname__", "?")
    if pure(v):
        r = repr(v)
    else:
        try:
            r = f"{repr(v)!s} (a {tn}, not a plain builtin value)"
        except BaseException:
            r = f"<{tn} object (repr failed)>"
    if len(r) > limit:
        r = r[:limit] + "..."
    return r


def truth(v: Any) -> bool:
    """The truth of ``v``, trusted only for plain values."""
    if type(v) is bool:
        return v
    if pure(v):
        return bool(v)
    raise AssertionError(
        f"the test asked for the truth of {srepr(v)}; the sandbox only trusts the "
        f"truth of plain builtin values"
    )


def cmp(op: str, a: Any, b: Any) -> bool:
    """``a <op> b`` for the operators of ``rewrite._OPS``, refusing to be fooled."""
    if op == "Is":
        return a is b
    if op == "IsNot":
        return a is not b
    pa, pb = pure(a), pure(b)
    if op in ("In", "NotIn"):
        if pa and pb:
            r = a in b
        elif pb and not pa:
            r = False  # a candidate object cannot be equal to a plain builtin element
        else:
            r = a in b
            if type(r) is not bool:
                raise AssertionError(f"`in` on {srepr(b)} did not give a bool")
        return r if op == "In" else not r
    if op in ("Eq", "NotEq"):
        if pa and pb:
            r = a == b
        elif (pa and type(b) in APPROX_EQ) or (pb and type(a) in APPROX_EQ):
            r = bool(APPROX_EQ[type(b)](b, a)) if pa else bool(APPROX_EQ[type(a)](a, b))
        elif pa != pb:
            r = False  # a candidate object is never equal to a plain builtin value
        else:
            r = a == b
            if type(r) is not bool:
                r = truth(r)
        return r if op == "Eq" else not r
    if pa != pb:
        raise AssertionError(
            f"cannot order {srepr(a)} against {srepr(b)}: one side is not a plain builtin value"
        )
    if op == "Lt":
        r = a < b
    elif op == "LtE":
        r = a <= b
    elif op == "Gt":
        r = a > b
    else:
        r = a >= b
    if type(r) is not bool:
        r = truth(r)
    return r


def assert_(v: Any, src: str, msg: Any = None, detail: Any = None) -> None:
    """A rewritten ``assert``: fails unless ``v`` is (trustworthy and) true."""
    if not truth(v):
        text = f"assert {src}"
        if detail is not None:
            text += f"\n  left:  {srepr(detail[0])}\n  right: {srepr(detail[1])}"
        if msg is not None:
            try:
                text = f"{msg!s}\n{text}"
            except BaseException:
                pass
        raise AssertionError(text)


def assert_cmp(op: str, a: Any, b: Any, src: str, msg: Any = None) -> None:
    """A rewritten ``assert a <op> b``: the message shows both sides."""
    assert_(cmp(op, a, b), src, msg, (a, b))
