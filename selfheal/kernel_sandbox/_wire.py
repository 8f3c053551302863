"""The value codec shared by the host and the kernel harness: values as tagged tuples, written
with ``repr`` and read back as a literal; ``encode_result`` runs in the candidate's process and
is not trusted (the host decodes with ``values.decode``; docs/sandbox.md, "Verdicts on the
host"). Its source also runs in every kernel: plain Python, no selfheal imports."""

from __future__ import annotations

import collections as _collections
import datetime as _dt
import decimal as _decimal
import fractions as _fractions
import sys as _sys
from typing import Any

_NoneType = type(None)
_int, _str, _bytes, _bool, _float, _complex = int, str, bytes, bool, float, complex
_list, _tuple, _dict, _set, _frozenset, _bytearray, _range = (
    list,
    tuple,
    dict,
    set,
    frozenset,
    bytearray,
    range,
)
_date, _datetime, _time, _timedelta = _dt.date, _dt.datetime, _dt.time, _dt.timedelta
_Decimal, _Fraction = _decimal.Decimal, _fractions.Fraction
_Counter, _OrderedDict, _defaultdict, _deque = (
    _collections.Counter,
    _collections.OrderedDict,
    _collections.defaultdict,
    _collections.deque,
)
_loaded_modules = _sys.modules
MAX_PARTS = 1_000_000
"""Most parts (values, items) one encoded value may hold; beyond it the value is cut."""
MAX_DEPTH = 100
"""Deepest nesting one encoded value may have."""
NAME_CHARS = 200
"""Longest type name an opaque value carries."""


class _Cut(Exception):
    pass


def encode_value(v: Any) -> Any:
    """Encode a plain Python value as tagged tuples (what ``decode_value`` reads).

    Raises ``TypeError`` for values that are not plain builtin data. Types are checked by
    identity: ``t in (int, ...)`` would ask the metaclass of a candidate's type."""
    t = type(v)
    if t is _float:
        return ("f", v.hex())
    if t is _complex:
        return ("c", v.real.hex(), v.imag.hex())
    if t is _int or t is _str or t is _bytes or t is _bool or t is _NoneType:
        return ("p", v)
    if t is _bytearray:
        return ("ba", _bytes(v))
    if t is _range:
        return ("r", v.start, v.stop, v.step)
    if t is _list:
        return ("l", [encode_value(x) for x in v])
    if t is _tuple:
        return ("t", [encode_value(x) for x in v])
    if t is _set:
        return ("s", [encode_value(x) for x in v])
    if t is _frozenset:
        return ("z", [encode_value(x) for x in v])
    if t is _dict:
        return ("d", [(encode_value(k), encode_value(x)) for k, x in v.items()])
    raise TypeError(
        f"CallTest values must be plain builtin data (numbers, strings, lists, dicts, ...), "
        f"not {t.__qualname__}; use an AssertTest for other values"
    )


def decode_value(e: Any) -> Any:
    """Inverse of ``encode_value`` (input comes from a literal, never from ``eval`` of code)."""
    tag = e[0]
    if tag == "p":
        return e[1]
    if tag == "f":
        return float.fromhex(e[1])
    if tag == "c":
        return complex(float.fromhex(e[1]), float.fromhex(e[2]))
    if tag == "ba":
        return bytearray(e[1])
    if tag == "r":
        return range(e[1], e[2], e[3])
    if tag == "l":
        return [decode_value(x) for x in e[1]]
    if tag == "t":
        return tuple(decode_value(x) for x in e[1])
    if tag == "s":
        return {decode_value(x) for x in e[1]}
    if tag == "z":
        return frozenset(decode_value(x) for x in e[1])
    if tag == "d":
        return {decode_value(k): decode_value(x) for k, x in e[1]}
    raise ValueError(f"unknown value tag {tag!r}")


def _opaque_name(t: Any) -> str:
    """A type's name for the host, cut to ``NAME_CHARS`` with the mark ``capture.clip`` uses
    (the codec imports no harness part: it is the one the others import)."""
    try:
        name = t.__qualname__
        if type(name) is not _str:
            return "?"
    except BaseException:
        return "?"
    if len(name) <= NAME_CHARS:
        return name
    mark = f"...<cut: {len(name)} characters>..."
    return name[: NAME_CHARS - len(mark)] + mark


def _tz(v: Any) -> Any:
    """A datetime's or time's UTC offset in microseconds, or None when naive."""
    tz = v.tzinfo
    if tz is None:
        return None
    off = v.utcoffset()
    if type(off) is not _timedelta:
        raise _Cut
    return (off.days * 86400 + off.seconds) * 1_000_000 + off.microseconds


def _flat(items: list[Any]) -> bool:
    """Every item an exact ``int``, ``str``, ``bool`` or ``None`` (sent without tags)."""
    for x in items:
        t = type(x)
        if not (t is _int or t is _str or t is _bool or t is _NoneType):
            return False
    return True


class _Encoder:
    """One value's encoding, with a budget of parts (cut beyond ``MAX_PARTS``)."""

    def __init__(self) -> None:
        self.parts = 0

    def enc(self, v: Any, depth: int) -> Any:
        self.parts += 1
        if self.parts > MAX_PARTS or depth > MAX_DEPTH:
            raise _Cut
        t = type(v)
        if t is _float:
            return ("f", v.hex())
        if t is _int or t is _str or t is _bytes or t is _bool or t is _NoneType:
            return ("p", v)
        if t is _list or t is _tuple or t is _set or t is _frozenset:
            items = _list(v)
            tag = "l" if t is _list else "t" if t is _tuple else "s" if t is _set else "z"
            if _flat(items):  # ints and strings as they are: ("L", [1, 2, 3])
                self.parts += len(items)
                if self.parts > MAX_PARTS:
                    raise _Cut
                return (tag.upper(), items)
            return (tag, [self.enc(x, depth + 1) for x in items])
        if t is _dict:
            return (
                "d",
                [(self.enc(k, depth + 1), self.enc(x, depth + 1)) for k, x in _list(v.items())],
            )
        if t is _complex:
            return ("c", v.real.hex(), v.imag.hex())
        if t is _bytearray:
            return ("ba", _bytes(v))
        if t is _range:
            return ("r", v.start, v.stop, v.step)
        if t is _datetime:
            return (
                "dt",
                v.year,
                v.month,
                v.day,
                v.hour,
                v.minute,
                v.second,
                v.microsecond,
                _tz(v),
                v.fold,
            )
        if t is _date:
            return ("d8", v.year, v.month, v.day)
        if t is _time:
            return ("tm", v.hour, v.minute, v.second, v.microsecond, _tz(v), v.fold)
        if t is _timedelta:
            return ("td", v.days, v.seconds, v.microseconds)
        if t is _Counter or t is _OrderedDict or t is _defaultdict:
            kind = "cnt" if t is _Counter else "od" if t is _OrderedDict else "dd"
            items = _list(_dict.items(v))
            return (kind, [(self.enc(k, depth + 1), self.enc(x, depth + 1)) for k, x in items])
        if t is _deque:
            return ("dq", [self.enc(x, depth + 1) for x in _list(v)])
        if t is _Decimal:
            return ("dec", _str(v))
        if t is _Fraction:
            return ("fr", v.numerator, v.denominator)
        return self.library(v, t, depth)

    def library(self, v: Any, t: Any, depth: int) -> Any:
        """NumPy and pandas values, by exact type (only when the candidate imported them)."""
        np = _loaded_modules.get("numpy")
        if np is not None:
            if t is np.ndarray:
                return self.array(v, np, depth)
            if isinstance(v, np.generic) and type(t) is type and t.__module__ == "numpy":
                return ("ns", _str(v.dtype.str), self.enc(v.item(), depth + 1))
        pd = _loaded_modules.get("pandas")
        if pd is not None and np is not None:
            if t is pd.DataFrame:
                cols = [self.enc(c, depth + 1) for c in _list(v.columns)]
                data = [
                    self.array(v.iloc[:, i].to_numpy(), np, depth + 1) for i in range(v.shape[1])
                ]
                dtypes = [_str(d) for d in _list(v.dtypes)]
                return ("pdf", cols, self.index(v.index, np, depth), dtypes, data)
            if t is pd.Series:
                arr = self.array(v.to_numpy(), np, depth + 1)
                return (
                    "pds",
                    self.enc(v.name, depth + 1),
                    self.index(v.index, np, depth),
                    _str(v.dtype),
                    arr,
                )
        return ("o", _opaque_name(t))

    def index(self, ix: Any, np: Any, depth: int) -> Any:
        return ("pix", self.enc(ix.name, depth + 1), self.array(ix.to_numpy(), np, depth + 1))

    def array(self, a: Any, np: Any, depth: int) -> Any:
        if type(a) is not np.ndarray:
            raise _Cut
        self.parts += a.size
        if self.parts > MAX_PARTS:
            raise _Cut
        kind = a.dtype.kind
        shape = [_int(n) for n in a.shape]
        flat = a.reshape(-1)
        if kind in "Mm":  # datetime64 / timedelta64: their integer ticks and unit
            return (
                "nd",
                _str(a.dtype.str),
                shape,
                [("p", _int(x)) for x in flat.view("i8").tolist()],
            )
        if kind == "O":
            return ("nd", "|O", shape, [self.enc(x, depth + 1) for x in flat.tolist()])
        if kind in "biufcUS":
            return ("nd", _str(a.dtype.str), shape, [self.enc(x, depth + 1) for x in flat.tolist()])
        raise _Cut


def encode_result(v: Any) -> Any:
    """What a candidate returned, as data for the host (see the module docstring): never
    raises for a value too large or deep (``("cut",)``) or of another kind (``("o", ...)``)."""
    try:
        return _Encoder().enc(v, 0)
    except _Cut:
        return ("cut",)
    except RecursionError:
        return ("cut",)


def holds_opaque(e: Any) -> bool:
    """True if an encoded value holds a part that is not data (``("o", ...)``, ``("cut",)``):
    the candidate's process keeps such a value as a handle; the test process cannot send it."""
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is tuple:
            if x and (x[0] == "o" or x[0] == "cut"):
                return True
            stack.extend(x)
        elif type(x) is list:
            stack.extend(x)
    return False
