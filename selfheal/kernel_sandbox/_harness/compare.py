"""Kernel side: the comparison helpers rewritten test code calls, and a safe repr; only *plain*
values (exact builtin types, checked by identity, copied by ``plain``) are compared natively,
and the helpers read no global name (docs/sandbox.md, "Comparisons that cannot be fooled").
Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

from typing import Any

_NoneType = type(None)
_NOT_PLAIN = ("not a plain value",)
"""What ``plain`` returns for a value that is not plain (a tuple no caller can mistake for
a copy: ``plain`` never returns this very object otherwise)."""
_type_qualname = type.__dict__["__qualname__"].__get__
_dict_items = dict.items
APPROX_EQ: dict[Any, Any] = {}
"""pytest's approx classes -> their ``__eq__``, taken at warm-up before any candidate
(``pytest_item.pt_install``); ``sealing.seal`` binds them into ``cmp`` as a tuple of pairs,
looked up by identity: ``f() == pytest.approx(0.3)`` compares a plain value with the test's own approx
object through pytest's code, never through the candidate's."""


def plain(
    v: Any,
    depth: int = 0,
    _me: Any = None,
    _not: Any = _NOT_PLAIN,
    _type: Any = type,
    _int: Any = int,
    _float: Any = float,
    _complex: Any = complex,
    _str: Any = str,
    _bytes: Any = bytes,
    _bool: Any = bool,
    _none: Any = _NoneType,
    _range: Any = range,
    _list: Any = list,
    _tuple: Any = tuple,
    _dict: Any = dict,
    _set: Any = set,
    _frozenset: Any = frozenset,
    _bytearray: Any = bytearray,
    _items: Any = _dict_items,
    _RuntimeError: Any = RuntimeError,
) -> Any:
    """A fresh copy of ``v`` built only from exact builtin value types (so no candidate code
    can run when it is compared or hashed, and nothing can change it afterwards), or
    ``_NOT_PLAIN``. Immutable parts are shared, mutable ones copied. Nesting deeper than 200,
    and a container changed in size while it is copied, count as not plain."""
    t = _type(v)
    if (
        t is _int
        or t is _str
        or t is _float
        or t is _bool
        or t is _none
        or t is _bytes
        or t is _complex
        or t is _range
    ):
        return v
    if depth > 200:
        return _not
    me = _me if _me is not None else plain
    try:
        if t is _list or t is _tuple or t is _set or t is _frozenset:
            out = []
            same = True
            for x in v:
                c = me(x, depth + 1, me)
                if c is _not:
                    return _not
                same = same and c is x
                out.append(c)
            if t is _list:
                return out
            if t is _tuple:
                return v if same else _tuple(out)
            if t is _set:
                return _set(out)
            return v if same else _frozenset(out)
        if t is _dict:
            d = {}
            for k, x in _items(v):
                ck = me(k, depth + 1, me)
                cx = me(x, depth + 1, me)
                if ck is _not or cx is _not:
                    return _not
                d[ck] = cx
            return d
        if t is _bytearray:
            return _bytearray(v)
    except _RuntimeError:  # changed size while copied (a thread of the candidate's)
        return _not
    return _not


def pure(v: Any, _plain: Any = plain, _not: Any = _NOT_PLAIN) -> bool:
    """True if ``v`` is built only from exact builtin value types (see ``plain``)."""
    return _plain(v) is not _not


def srepr(
    v: Any,
    limit: int = 300,
    _plain: Any = plain,
    _not: Any = _NOT_PLAIN,
    _type: Any = type,
    _qualname: Any = _type_qualname,
    _repr: Any = repr,
    _len: Any = len,
    _BaseException: Any = BaseException,
) -> str:
    """A repr that never trusts the candidate's ``__repr__`` for the type name."""
    c = _plain(v)
    if c is not _not:
        r = _repr(c)
    else:
        tn = _qualname(_type(v))
        try:
            r = f"{_repr(v)!s} (a {tn}, not a plain builtin value)"
        except _BaseException:
            r = f"<{tn} object (repr failed)>"
    if _len(r) > limit:
        r = r[:limit] + "..."
    return r


def truth(
    v: Any,
    _plain: Any = plain,
    _not: Any = _NOT_PLAIN,
    _srepr: Any = srepr,
    _type: Any = type,
    _bool: Any = bool,
    _AssertionError: Any = AssertionError,
) -> bool:
    """The truth of ``v``, trusted only for plain values."""
    if _type(v) is _bool:
        return v  # type: ignore[no-any-return]
    c = _plain(v)
    if c is not _not:
        return _bool(c)  # type: ignore[no-any-return]
    raise _AssertionError(
        f"the test asked for the truth of {_srepr(v)}; the sandbox only trusts the "
        f"truth of plain builtin values"
    )


def cmp(
    op: str,
    a: Any,
    b: Any,
    _approx: Any = (),
    _plain: Any = plain,
    _not: Any = _NOT_PLAIN,
    _truth: Any = truth,
    _srepr: Any = srepr,
    _type: Any = type,
    _bool: Any = bool,
    _AssertionError: Any = AssertionError,
) -> bool:
    """``a <op> b`` for the operators of ``rewrite._OPS``, refusing to be fooled: plain
    values are compared as the copies ``plain`` made (``_approx``: pytest's approx classes
    and their ``__eq__``, bound by ``sealing.seal``)."""
    if op == "Is":
        return a is b
    if op == "IsNot":
        return a is not b
    ca, cb = _plain(a), _plain(b)
    pa, pb = ca is not _not, cb is not _not
    if op == "In" or op == "NotIn":
        if pa and pb:
            r = ca in cb
        elif pb and not pa:
            r = False  # a candidate object cannot be equal to a plain builtin element
        else:
            r = a in b
            if _type(r) is not _bool:
                raise _AssertionError(f"`in` on {_srepr(b)} did not give a bool")
        return r if op == "In" else not r
    if op == "Eq" or op == "NotEq":
        if pa and pb:
            r = ca == cb
        elif pa != pb:
            r = False  # a candidate object is never equal to a plain builtin value
            other = b if pa else a
            ta = _type(other)
            for cls, eq in _approx:  # the test's own pytest.approx(...)
                if cls is ta:
                    r = _bool(eq(other, ca if pa else cb))
                    break
        else:
            r = a == b
            if _type(r) is not _bool:
                r = _truth(r)
        return r if op == "Eq" else not r
    if pa != pb:
        raise _AssertionError(
            f"cannot order {_srepr(a)} against {_srepr(b)}: one side is not a plain builtin value"
        )
    if pa:
        a, b = ca, cb
    if op == "Lt":
        r = a < b
    elif op == "LtE":
        r = a <= b
    elif op == "Gt":
        r = a > b
    else:
        r = a >= b
    if _type(r) is not _bool:
        r = _truth(r)
    return r  # type: ignore[no-any-return]


def assert_(
    v: Any,
    src: str,
    msg: Any = None,
    detail: Any = None,
    _truth: Any = truth,
    _srepr: Any = srepr,
    _AssertionError: Any = AssertionError,
    _BaseException: Any = BaseException,
) -> None:
    """A rewritten ``assert``: fails unless ``v`` is (trustworthy and) true."""
    if not _truth(v):
        text = f"assert {src}"
        if detail is not None:
            text += f"\n  left:  {_srepr(detail[0])}\n  right: {_srepr(detail[1])}"
        if msg is not None:
            try:
                text = f"{msg!s}\n{text}"
            except _BaseException:
                pass
        raise _AssertionError(text)


def assert_cmp(
    op: str,
    a: Any,
    b: Any,
    src: str,
    msg: Any = None,
    _cmp: Any = cmp,
    _assert: Any = assert_,
) -> None:
    """A rewritten ``assert a <op> b``: the message shows both sides."""
    _assert(_cmp(op, a, b), src, msg, (a, b))
