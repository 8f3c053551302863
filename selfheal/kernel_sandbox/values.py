"""The host's reading of the values a candidate's process sends back (``_wire.encode_result``'s
grammar only, checked by exact type, within size and depth limits); anything else is a
``NotPlain``, equal to nothing; ``data_equal`` is an assert's ``==`` (docs/sandbox.md,
"Verdicts on the host")."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import fractions
import math
from dataclasses import dataclass
from typing import Any

from selfheal.kernel_sandbox._wire import MAX_DEPTH, MAX_PARTS, NAME_CHARS

_SCALAR = (int, str, bytes, bool, type(None))
_FLAT = (int, str, bool, type(None))
_MAX_TEXT = 1 << 22
"""Longest string or bytes one value may carry (4 MiB)."""
_NP_KINDS = "biufcUSMmO"


@dataclass(frozen=True)
class NotPlain:
    """A value that is not data the host can read: a candidate's own object, a value too
    large or too deep, or a library the host lacks. Equal to nothing, not even itself."""

    what: str
    """What it was, for messages (``a Thing``, ``a value over 200000 parts``)."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{self.what}, not a plain value>"


class _Bad(Exception):
    """The encoded value breaks the grammar."""


def _int(x: Any) -> int:
    if type(x) is not int:
        raise _Bad("not an int")
    return x


def _tz(micro: Any) -> dt.tzinfo | None:
    return None if micro is None else dt.timezone(dt.timedelta(microseconds=_int(micro)))


class _Decoder:
    def __init__(self) -> None:
        self.parts = 0

    def seq(self, e: Any, n: int) -> tuple[Any, ...]:
        if type(e) is not tuple or len(e) != n:
            raise _Bad("malformed")
        return e

    def items(self, x: Any) -> list[Any]:
        if type(x) is not list:
            raise _Bad("not a list")
        self.parts += len(x)
        if self.parts > MAX_PARTS:
            raise _Bad("too large")
        return x

    def dec(self, e: Any, depth: int) -> Any:
        self.parts += 1
        if self.parts > MAX_PARTS or depth > MAX_DEPTH:
            raise _Bad("too large")
        if type(e) is not tuple or not e or type(e[0]) is not str:
            raise _Bad("malformed")
        tag = e[0]
        if tag == "p":
            (_, v) = self.seq(e, 2)
            if type(v) not in _SCALAR or (type(v) in (str, bytes) and len(v) > _MAX_TEXT):
                raise _Bad("not a scalar")
            return v
        if tag == "f":
            (_, h) = self.seq(e, 2)
            return float.fromhex(_text(h))
        if tag == "c":
            (_, re_, im) = self.seq(e, 3)
            return complex(float.fromhex(_text(re_)), float.fromhex(_text(im)))
        if tag in ("L", "T", "S", "Z"):  # exact ints, strings, bools, None, untagged
            (_, xs) = self.seq(e, 2)
            vals = self.items(xs)
            for x in vals:
                if type(x) not in _FLAT or (type(x) is str and len(x) > _MAX_TEXT):
                    raise _Bad("not a flat item")
            kind = {"L": list, "T": tuple, "S": set, "Z": frozenset}[tag]
            return list(vals) if kind is list else kind(vals)
        if tag in ("l", "t", "s", "z"):
            (_, xs) = self.seq(e, 2)
            vals = [self.dec(x, depth + 1) for x in self.items(xs)]
            if tag == "l":
                return vals
            if tag == "t":
                return tuple(vals)
            return _hashed(set if tag == "s" else frozenset, vals)
        if tag in ("cnt", "od", "dd", "dq"):  # collections' Counter, OrderedDict, ...
            (_, body) = self.seq(e, 2)
            inner = self.dec(("l" if tag == "dq" else "d", body), depth)
            kinds = {"cnt": collections.Counter, "od": collections.OrderedDict}
            if tag == "dq":
                return collections.deque(inner)
            return kinds[tag](inner) if tag in kinds else inner
        if tag == "d":
            (_, kvs) = self.seq(e, 2)
            out = {}
            for kv in self.items(kvs):
                k, v = self.seq(kv, 2)
                key = self.dec(k, depth + 1)
                if isinstance(key, NotPlain | list | dict | set):
                    raise _Bad("unhashable key")
                out[key] = self.dec(v, depth + 1)
            return out
        if tag == "ba":
            (_, b) = self.seq(e, 2)
            if type(b) is not bytes or len(b) > _MAX_TEXT:
                raise _Bad("not bytes")
            return bytearray(b)
        if tag == "r":
            (_, a, b, c) = self.seq(e, 4)
            return range(_int(a), _int(b), _int(c))
        if tag == "dt":
            (_, y, mo, d, h, mi, s, us, tz, fold) = self.seq(e, 10)
            y, mo, d, h, mi, s, us = map(_int, (y, mo, d, h, mi, s, us))
            return dt.datetime(y, mo, d, h, mi, s, us, tzinfo=_tz(tz), fold=_int(fold))
        if tag == "d8":
            (_, y, m, d) = self.seq(e, 4)
            return dt.date(_int(y), _int(m), _int(d))
        if tag == "tm":
            (_, h, mi, s, us, tz, fold) = self.seq(e, 7)
            return dt.time(_int(h), _int(mi), _int(s), _int(us), tzinfo=_tz(tz), fold=_int(fold))
        if tag == "td":
            (_, d, s, us) = self.seq(e, 4)
            return dt.timedelta(days=_int(d), seconds=_int(s), microseconds=_int(us))
        if tag == "dec":
            (_, s) = self.seq(e, 2)
            return decimal.Decimal(_text(s))
        if tag == "fr":
            (_, n, d) = self.seq(e, 3)
            return fractions.Fraction(_int(n), _int(d))
        if tag in ("nd", "ns", "pds", "pdf", "pix"):
            return self.library(e, depth)
        if tag == "o":
            (_, name) = self.seq(e, 2)
            return NotPlain(f"a {_text(name)[:NAME_CHARS]}")
        if tag == "cut":
            return NotPlain(f"a value over {MAX_PARTS} parts or {MAX_DEPTH} levels deep")
        raise _Bad(f"unknown tag {tag[:20]!r}")

    def library(self, e: Any, depth: int) -> Any:
        try:
            import numpy as np
        except ImportError:
            return NotPlain("a NumPy value (NumPy is not installed on the host)")
        tag = e[0]
        if tag == "nd":
            (_, dtype, shape, flat) = self.seq(e, 4)
            return self.array(np, dtype, shape, flat, depth)
        if tag == "ns":
            (_, dtype, v) = self.seq(e, 3)
            arr = self.array(np, dtype, [], [v], depth)
            return arr[()]
        try:
            import pandas as pd
        except ImportError:
            return NotPlain("a pandas value (pandas is not installed on the host)")
        if tag == "pix":
            (_, name, values) = self.seq(e, 3)
            return pd.Index(self.dec(values, depth + 1), name=self.label(name, depth))
        if tag == "pds":
            (_, name, index, dtype, values) = self.seq(e, 5)
            ix = self.dec(index, depth + 1)
            data = self.dec(values, depth + 1)
            return pd.Series(data, index=ix, name=self.label(name, depth), dtype=_pd_dtype(dtype))
        (_, cols, index, dtypes, data) = self.seq(e, 5)
        columns = [self.label(c, depth) for c in self.items(cols)]
        arrays = [self.dec(a, depth + 1) for a in self.items(data)]
        kinds = [_pd_dtype(d) for d in self.items(dtypes)]
        if not len(columns) == len(arrays) == len(kinds):
            raise _Bad("a DataFrame's parts disagree")
        ix = self.dec(index, depth + 1)
        series = [pd.Series(a, index=ix, dtype=k) for a, k in zip(arrays, kinds, strict=True)]
        frame = pd.concat(series, axis=1) if series else pd.DataFrame(index=ix)
        frame.columns = pd.Index(columns, tupleize_cols=False) if columns else frame.columns
        return frame

    def label(self, e: Any, depth: int) -> Any:
        v = self.dec(e, depth + 1)
        if isinstance(v, NotPlain | list | dict | set):
            raise _Bad("not a label")
        return v

    def array(self, np: Any, dtype: Any, shape: Any, flat: Any, depth: int) -> Any:
        dts = _text(dtype)
        if len(dts) > 8 or not dts or dts.lstrip("<>|=")[:1] not in _NP_KINDS:
            raise _Bad("not a NumPy dtype")
        kind = np.dtype(dts)
        dims = [_int(n) for n in self.items(shape)]
        if any(n < 0 for n in dims) or len(dims) > 32:
            raise _Bad("bad shape")
        vals = [self.dec(x, depth + 1) for x in self.items(flat)]
        if math.prod(dims) != len(vals):
            raise _Bad("shape and values disagree")
        if kind.kind in "Mm":
            return np.array(vals, dtype="i8").view(kind).reshape(dims)
        if kind.kind == "O":
            out = np.empty(len(vals), dtype=object)
            out[:] = vals
            return out.reshape(dims)
        return np.array(vals, dtype=kind).reshape(dims)


def _text(x: Any) -> str:
    if type(x) is not str or len(x) > 4096:
        raise _Bad("not a short string")
    return x


def _pd_dtype(x: Any) -> Any:
    s = _text(x)
    if len(s) > 40 or not all(ch.isalnum() or ch in "[]_, :<>" for ch in s):
        raise _Bad("not a dtype")
    return s


def _hashed(kind: Any, vals: list[Any]) -> Any:
    if any(isinstance(v, NotPlain | list | dict | set | bytearray) for v in vals):
        raise _Bad("unhashable member")
    return kind(vals)


def decode(e: Any) -> Any:
    """The host's value for ``e`` (what ``_wire.encode_result`` wrote), or a ``NotPlain``
    saying why it cannot be read. Never raises."""
    try:
        return _Decoder().dec(e, 0)
    except (_Bad, ValueError, TypeError, OverflowError, ArithmeticError, RecursionError) as err:
        return NotPlain(f"a value the host cannot read ({str(err)[:80]})")


def _library_kind(v: Any) -> str | None:
    mod = type(v).__module__ or ""
    if mod.startswith("pandas"):
        return "pandas"
    if mod.startswith("numpy"):
        return "numpy"
    return None


def data_equal(a: Any, b: Any) -> bool:
    """``a == b`` as an assert means it: Python's ``==`` for builtin values; for NumPy arrays
    equal shapes and values (NaN equal to NaN); for pandas objects
    ``pandas.testing.assert_*_equal`` (dtypes not checked: ``int32`` data equals ``int64``);
    never equal to a ``NotPlain``."""
    if isinstance(a, NotPlain) or isinstance(b, NotPlain):
        return False
    ka, kb = _library_kind(a), _library_kind(b)
    if ka == "pandas" or kb == "pandas":
        return _pandas_equal(a, b)
    if ka == "numpy" or kb == "numpy":
        import numpy as np

        if np.ndim(a) == 0 and np.ndim(b) == 0:
            r = a == b
            return bool(r) or bool(_both_nan(a, b))
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
        except TypeError:  # equal_nan on a kind without NaN (strings, objects)
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    r = a == b
    if type(r) is not bool:
        raise AssertionError(f"comparing {type(a).__name__} with {type(b).__name__} gave no bool")
    return r


def _both_nan(a: Any, b: Any) -> bool:
    try:
        return bool(math.isnan(a) and math.isnan(b))
    except TypeError:
        return False


def _pandas_equal(a: Any, b: Any) -> bool:
    import pandas as pd

    checks = (
        (pd.DataFrame, pd.testing.assert_frame_equal),
        (pd.Series, pd.testing.assert_series_equal),
        (pd.Index, pd.testing.assert_index_equal),
    )
    for kind, check in checks:
        if isinstance(a, kind) or isinstance(b, kind):
            if not (isinstance(a, kind) and isinstance(b, kind)):
                return False
            try:
                check(a, b, check_dtype=False) if kind is not pd.Index else check(a, b, exact=False)
            except AssertionError:
                return False
            return True
    r = a == b  # a pandas scalar (Timestamp, Timedelta, NA)
    return r is True or (type(r) is not bool and bool(pd.notna(r)) and bool(r))
