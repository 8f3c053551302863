"""Kernel side: the candidate's half of a pytest-form test run in a separate process: it answers
the host's calls on plain data and on *handles* (ids into a table of its own objects) until
``end``; nothing here decides a verdict (docs/sandbox.md, "Your tests in pytest's form").
Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import builtins as _rm_builtins
import datetime as _dt
import marshal as _rm_marshal
import operator as _rm_operator
import os as _rm_os
import select as _rm_select
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.capture import NAME_CAP, Cap, clip, describe
    from selfheal.kernel_sandbox._harness.guard import Guard, Timeout, guarded
    from selfheal.kernel_sandbox._wire import (
        _Counter,
        _date,
        _datetime,
        _Decimal,
        _deque,
        _Fraction,
        _OrderedDict,
        _time,
        _timedelta,
        decode_value,
        encode_result,
        encode_value,
        holds_opaque,
    )

_rm_loads = _rm_marshal.loads
_rm_read = _rm_os.read
_rm_mro = type.__dict__["__mro__"].__get__  # a type's own MRO, never a metaclass's answer
_rm_name = type.__dict__["__qualname__"].__get__
_RM_EXC = {
    id(v): k
    for k, v in vars(_rm_builtins).items()
    if isinstance(v, type) and issubclass(v, BaseException)
}
"""The builtin exception types by identity: the nearest one is what the test process raises."""


_RM_OPERATORS: tuple[str, ...] = (
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "add",
    "sub",
    "mul",
    "truediv",
)
_RM_OPERATORS += ("floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift")
_RM_OPERATORS += ("rshift", "neg", "pos", "abs", "invert")


def _rm_call(f: Any, *args: Any, **kwargs: Any) -> Any:
    return f(*args, **kwargs)


_RM_OPS: dict[str, Any] = {
    "call": _rm_call,
    "getattr": getattr,
    "setattr": setattr,
    "delattr": delattr,
    "len": len,
    "iter": iter,
    "next": next,
    "repr": repr,
    "str": str,
    "bool": bool,
    "hash": hash,
    "isinstance": isinstance,
    "issubclass": issubclass,
    "contains": _rm_operator.contains,
    "getitem": _rm_operator.getitem,
    "setitem": _rm_operator.setitem,
    "delitem": _rm_operator.delitem,
    **{name: getattr(_rm_operator, name) for name in _RM_OPERATORS},
}
"""What the host may ask for: the operator's function, applied to the decoded arguments."""


class RmTable:
    """The candidate's objects the test process holds a handle to (id -> object)."""

    def __init__(self, module: Any) -> None:
        self.objs: dict[int, Any] = {0: module}  # handle 0: the candidate's module
        self.ids: dict[int, int] = {id(module): 0}

    def handle(self, v: Any) -> int:
        h = self.ids.get(id(v))
        if h is None:
            h = len(self.objs)
            self.objs[h] = v
            self.ids[id(v)] = h
        return h

    def decode(self, e: Any) -> Any:
        """An argument from the host: data (``_wire.encode_result``'s tags: builtins, dates,
        ``Decimal``, NumPy, pandas) or a handle (``("H", id)``), in lists, tuples, sets and
        dicts. The test process encoded it: trusted, so read without the host's checks."""
        tag = e[0]
        if tag == "H":
            return self.objs[e[1]]
        if tag in ("L", "T", "S", "Z"):  # exact ints, strings, bools, None, untagged
            kind: Any = {"L": list, "T": tuple, "S": set, "Z": frozenset}[tag]
            return kind(e[1])
        if tag in _RM_RICH:
            return rm_rich(self, e)
        if tag == "l":
            return [self.decode(x) for x in e[1]]
        if tag == "t":
            return tuple(self.decode(x) for x in e[1])
        if tag == "s":
            return {self.decode(x) for x in e[1]}
        if tag == "z":
            return frozenset(self.decode(x) for x in e[1])
        if tag == "d":
            return {self.decode(k): self.decode(x) for k, x in e[1]}
        return decode_value(e)  # the scalars (p, f, c, ba, r): the codec's own


_RM_RICH: tuple[str, ...] = (
    "dt",
    "d8",
    "tm",
    "td",
    "dec",
    "fr",
    "cnt",
    "od",
    "dd",
    "dq",
    "nd",
    "ns",
    "pds",
)
_RM_RICH += ("pdf", "pix")


def _rm_tz(micro: Any) -> Any:
    return None if micro is None else _dt.timezone(_timedelta(microseconds=micro))


def rm_rich(table: RmTable, e: Any) -> Any:
    """A date, ``Decimal``, ``Fraction``, collection, NumPy or pandas value of the test (see
    ``RmTable.decode``)."""
    tag, dec = e[0], table.decode
    if tag == "dt":
        y, mo, d, h, mi, s, us, tz, fold = e[1:]
        return _datetime(y, mo, d, h, mi, s, us, tzinfo=_rm_tz(tz), fold=fold)
    if tag == "d8":
        return _date(*e[1:4])
    if tag == "tm":
        h, mi, s, us, tz, fold = e[1:]
        return _time(h, mi, s, us, tzinfo=_rm_tz(tz), fold=fold)
    if tag == "td":
        return _timedelta(days=e[1], seconds=e[2], microseconds=e[3])
    if tag == "dec":
        return _Decimal(e[1])
    if tag == "fr":
        return _Fraction(e[1], e[2])
    if tag == "dq":
        return _deque(dec(x) for x in e[1])
    if tag in ("cnt", "od", "dd"):
        pairs = [(dec(k), dec(v)) for k, v in e[1]]
        if tag == "cnt":
            return _Counter(dict(pairs))
        return _OrderedDict(pairs) if tag == "od" else dict(pairs)
    import numpy as np

    if tag == "nd":
        _, dtype, shape, flat = e
        vals = [dec(x) for x in flat]
        kind = np.dtype(dtype)
        if kind.kind in "Mm":
            return np.array(vals, dtype="i8").view(kind).reshape(shape)
        if kind.kind == "O":
            out = np.empty(len(vals), dtype=object)
            out[:] = vals
            return out.reshape(shape)
        return np.array(vals, dtype=kind).reshape(shape)
    if tag == "ns":
        return np.array([dec(e[2])], dtype=np.dtype(e[1]))[0]
    import pandas as pd

    if tag == "pix":
        return pd.Index(dec(e[2]), name=dec(e[1]))
    if tag == "pds":
        _, name, index, dtype, values = e
        return pd.Series(dec(values), index=dec(index), name=dec(name), dtype=dtype)
    _, cols, index, dtypes, data = e
    ix = dec(index)
    series = [pd.Series(dec(a), index=ix, dtype=k) for a, k in zip(data, dtypes, strict=True)]
    frame = pd.concat(series, axis=1) if series else pd.DataFrame(index=ix)
    frame.columns = pd.Index([dec(c) for c in cols], tupleize_cols=False)
    return frame


def rm_reply(table: RmTable, v: Any) -> tuple[Any, ...]:
    """A result for the host: ``("v", encoded)``, or ``("h", handle, type name, exception
    base)`` (the base: the nearest builtin exception type of a class that is one, else None)."""
    enc = encode_result(v)
    if not holds_opaque(enc):  # data: sent back; else it stays here, as a handle
        return ("v", enc)
    base = None
    if issubclass(type(v), type):  # (``type(v)`` is its real class; ``__class__`` may lie)
        try:
            for c in _rm_mro(v):
                base = _RM_EXC.get(id(c))
                if base is not None:
                    break
        except BaseException:
            base = None
        name = clip(_rm_name(v), NAME_CAP)
    else:
        name = clip(_rm_name(type(v)), NAME_CAP)
    return ("h", table.handle(v), name, base)


def rm_error(e: BaseException) -> tuple[Any, ...]:
    """An exception the candidate raised: ``("x", type name, message, args or None, nearest
    builtin base, traceback)``."""
    tn, msg, tb, _line = describe(e)
    base = "Exception"
    try:
        for c in _rm_mro(type(e)):
            found = _RM_EXC.get(id(c))
            if found is not None:
                base = found
                break
    except BaseException:
        pass
    try:
        args = encode_value(tuple(e.args)) if type(e.args) is tuple else None
    except BaseException:
        args = None
    return ("x", tn, msg, args, base, tb)


def rm_serve(g: Guard, module: Any, fd: int, seq: int, limit_out: int, send: Any) -> None:
    """Answer the host's calls on ``fd`` (framed like requests: an 8-byte length, then
    ``<hmac> <marshal>``; the run's number checked, the signature not needed: the candidate
    runs in this very process) until ``end`` or the pipe closes."""
    table = RmTable(module)
    buf = b""
    while True:
        while len(buf) < 8 or len(buf) < 8 + int.from_bytes(buf[:8], "big"):
            _rm_select.select([fd], [], [], None)
            chunk = _rm_read(fd, 1 << 20)
            if not chunk:
                return
            buf += chunk
        n = int.from_bytes(buf[:8], "big")
        body, buf = buf[8 : 8 + n], buf[8 + n :]
        try:
            msg = _rm_loads(body.partition(b" ")[2])
        except (ValueError, EOFError, TypeError):
            continue
        if type(msg) is not dict or msg.get("seq") != seq:
            continue  # not this run's (left over from another one): ignored
        if msg.get("op") == "end":
            return
        send(("reply", msg.get("n"), *rm_one(g, table, msg, limit_out)))


def rm_one(g: Guard, table: RmTable, msg: dict[str, Any], limit_out: int) -> tuple[Any, ...]:
    """One call, run as candidate code (the guard's alarm, audit hook, captured output):
    ``(reply, stdout, stderr)``."""
    fn: Any = _RM_OPS.get(str(msg.get("op")))
    out, err = Cap(limit_out), Cap(limit_out)
    box: list[Any] = [None]
    try:
        args = [table.decode(a) for a in msg.get("args", ())]
        kwargs = {k: table.decode(v) for k, v in msg.get("kwargs", {}).items()}
    except BaseException as e:
        why = f"bad arguments from the host: {type(e).__name__}"
        return (("x", "ValueError", why, None, "ValueError", ""), "", "")

    def run() -> None:  # the value encoded under the guard too (its time, its audit hook)
        box[0] = rm_reply(table, fn(*args, **kwargs))

    def names() -> None:  # the candidate's names, for the test module's globals
        box[0] = (
            "ns",
            [
                (k, rm_reply(table, v))
                for k, v in list(vars(table.objs[0]).items())
                if type(k) is str and not (k.startswith("__") and k.endswith("__"))
            ],
        )

    if msg.get("op") == "namespace":
        run = names
    elif fn is None:
        return (("x", "ValueError", "unknown operation", None, "ValueError", ""), "", "")

    exc = guarded(g, run, float(msg.get("timeout", 5.0)), out, err)
    if exc is None:
        reply = box[0]
    elif type(exc) is Timeout:
        reply = ("t",)
    else:
        reply = rm_error(exc)
    return (reply, out.text(), err.text())
