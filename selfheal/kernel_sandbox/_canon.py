"""The canonical text of a value, for comparing the behaviour of candidates (``ProbeCall``; the
rules: docs/sandbox.md, "Probe values: canonical text"). Its source also runs in each kernel
before any candidate exists: plain Python, no selfheal imports, everything bound at load."""

from __future__ import annotations

import math as _math
import re as _re
import sys as _sys
from decimal import Decimal as _Decimal
from fractions import Fraction as _Fraction
from hashlib import sha256 as _sha256
from typing import Any

LIMIT = 2000
"""Most characters of a canonical text."""
MAX_ITEMS = 1000
"""Most items taken from an iterator or generator."""
MAX_NODES = 10_000
"""Most values visited in one canonical text; the rest is cut (marked ``<cut>``)."""
MAX_DEPTH = 60
"""Deepest nesting followed; deeper values are written ``<deep>``."""
LONG = 1000
"""A string, bytes or repr longer than this keeps its first 200 characters and a hash."""

_addr = _re.compile(r" at 0x[0-9a-fA-F]+").sub
_isfinite = _math.isfinite
_modules = _sys.modules
_int_str = int.__repr__
_to_int = int.__int__
_to_float = float.__float__
_to_str = str.__str__
_list_iter = list.__iter__
_tuple_iter = tuple.__iter__
_set_iter = set.__iter__
_frozenset_iter = frozenset.__iter__
_dict_items = dict.items
_real = complex.__dict__["real"].__get__
_imag = complex.__dict__["imag"].__get__
_keys_type: type = type({}.keys())
_items_type: type = type({}.items())
_values_type: type = type({}.values())


def canonical(value: Any, limit: int = LIMIT) -> str:
    """The canonical text of ``value``, at most ``limit`` characters (see the module)."""
    state = [0, set()]  # [nodes visited, ids of the containers on the current path]
    text = _canon(value, state, 0)
    if len(text) > limit:
        tail = f"...<{len(text)} chars, sha256 {_digest(text)}>"
        text = text[: max(0, limit - len(tail))] + tail
    return text


def raised(exc_type: str) -> str:
    """The canonical text of a call that raised: ``raise <ExcType>``."""
    return f"raise {exc_type}"


def _digest(text: str) -> str:
    return _sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _long(text: str, n: int) -> str:
    return f"{text[:200]}...<{n} chars, sha256 {_digest(text)}>"


def _float(x: float) -> str:
    if x != x:
        return "nan"
    if not _isfinite(x):
        return "inf" if x > 0 else "-inf"
    r = float(format(x, ".9g"))
    if r == 0:
        return "0"
    if r.is_integer() and -1e16 < r < 1e16:
        return _int_str(int(r))
    return repr(r)


def _int(x: int) -> str:
    try:
        return _int_str(x)
    except ValueError:  # over the interpreter's digit limit for int -> str
        return f"<int of {x.bit_length()} bits, sha256 {_digest(format(x, 'x'))}>"


def _str(s: str) -> str:
    if len(s) > LONG:
        return _long(repr(s), len(s))
    return repr(s)


def _bytes(b: bytes) -> str:
    if len(b) > LONG:
        return f"{b[:200]!r}...<{len(b)} bytes, sha256 {_sha256(b).hexdigest()[:16]}>"
    return repr(b)


def _sort_key(v: Any, text: str) -> tuple[Any, ...]:
    t = type(v)
    if (t is int or t is float or t is bool) and v == v:
        return (0, v, text)
    if t is str:
        return (1, v, text)
    return (2, text)


def _sorted_texts(items: Any, state: list[Any], depth: int) -> list[str]:
    keyed = []
    for x in items:
        if state[0] >= MAX_NODES:
            keyed.append(((3,), "<cut>"))
            break
        text = _canon(x, state, depth)
        keyed.append((_sort_key(x, text), text))
    keyed.sort(key=_first)
    return [text for _, text in keyed]


def _first(pair: tuple[Any, ...]) -> Any:
    return pair[0]


def _canon(v: Any, state: list[Any], depth: int) -> str:
    state[0] += 1
    if state[0] > MAX_NODES:
        return "<cut>"
    t = type(v)
    if v is None or t is bool:
        return "True" if v is True else "False" if v is False else "None"
    if t is int:
        return _int(v)
    if t is float:
        return _float(v)
    if t is str:
        return _str(v)
    if t is bytes or t is bytearray:
        return _bytes(bytes(v))
    if t is complex:
        return _complex(v)
    if depth > MAX_DEPTH:
        return "<deep>"
    # ``issubclass`` on the real type: an object cannot lie about it (``isinstance`` would
    # believe a ``__class__`` property)
    if issubclass(t, (list, tuple, dict, set, frozenset)):
        return _container(v, t, state, depth)
    # subclasses of builtin scalars are read through their base type (IntEnum, str enums...)
    if issubclass(t, int):
        return _int(_to_int(v))
    if issubclass(t, float):
        return _float(_to_float(v))
    if issubclass(t, str):
        return _str(_to_str(v))
    if issubclass(t, (bytes, bytearray)):
        return _bytes(bytes(memoryview(v)))
    if issubclass(t, complex):
        return _complex(complex(_real(v), _imag(v)))
    if t is range:
        return _range(v)
    if t is _Fraction or t is _Decimal:
        try:
            return _float(float(v))
        except (OverflowError, ValueError):
            return _str_of_object(v)
    if t is _keys_type or t is _items_type:
        return _set(v, state, depth)
    if t is _values_type:
        return "dict_values(" + _seq(v, state, depth, "[", "]") + ")"
    np = _modules.get("numpy")
    if np is not None and str(getattr(t, "__module__", "")).startswith("numpy"):
        try:
            if isinstance(v, np.ndarray):
                return _canon(v.tolist(), state, depth + 1)
            if isinstance(v, np.generic):
                return _canon(v.item(), state, depth + 1)
        except Exception:
            pass
    if hasattr(t, "__next__"):
        return _iterator(v, state, depth)
    return _str_of_object(v)


def _complex(c: complex) -> str:
    if c.imag == 0:
        return _float(c.real)
    return f"complex({_float(c.real)}, {_float(c.imag)})"


def _range(r: range) -> str:
    n = len(r)
    if n == 0:
        return "range(0, 0)"
    if n == 1:
        return f"range({r[0]}, {r[0] + 1})"
    return f"range({r.start}, {r[-1] + r.step}, {r.step})"


def _container(v: Any, t: type, state: list[Any], depth: int) -> str:
    path: set[int] = state[1]
    key = id(v)
    if key in path:
        return "<cycle>"
    path.add(key)
    try:
        if issubclass(t, list):
            return _seq(_list_iter(v), state, depth, "[", "]")
        if issubclass(t, tuple):
            items = list(_tuple_iter(v))
            if len(items) == 1:
                return "(" + _canon(items[0], state, depth + 1) + ",)"
            return _seq(items, state, depth, "(", ")")
        if issubclass(t, dict):
            return _dict(v, state, depth)
        return _set(_set_iter(v) if issubclass(t, set) else _frozenset_iter(v), state, depth)
    finally:
        path.discard(key)


def _seq(items: Any, state: list[Any], depth: int, open_: str, close: str) -> str:
    texts = []
    for x in items:
        if state[0] >= MAX_NODES:
            texts.append("<cut>")
            break
        texts.append(_canon(x, state, depth + 1))
    return open_ + ", ".join(texts) + close


def _set(items: Any, state: list[Any], depth: int) -> str:
    texts = _sorted_texts(items, state, depth + 1)
    return "{" + ", ".join(texts) + "}" if texts else "set()"


def _dict(d: dict[Any, Any], state: list[Any], depth: int) -> str:
    keyed: list[tuple[Any, ...]] = []
    for k, x in _dict_items(d):
        if state[0] >= MAX_NODES:
            keyed.append(((3,), "<cut>", "<cut>"))
            break
        kt = _canon(k, state, depth + 1)
        keyed.append((_sort_key(k, kt), kt, _canon(x, state, depth + 1)))
    keyed.sort(key=_first)
    return "{" + ", ".join([f"{kt}: {xt}" for _, kt, xt in keyed]) + "}"


def _iterator(it: Any, state: list[Any], depth: int) -> str:
    texts = []
    more = False
    for i, x in enumerate(it):
        if i >= MAX_ITEMS or state[0] >= MAX_NODES:
            more = True
            break
        texts.append(_canon(x, state, depth + 1))
    return "<iterator [" + ", ".join(texts) + (", ...more" if more else "") + "]>"


def _str_of_object(v: Any) -> str:
    name = getattr(type(v), "__qualname__", "?")
    try:
        r = repr(v)
        if not isinstance(r, str):
            raise TypeError("repr is not a str")
        r = _to_str(r)
    except Exception:
        return f"<{name} object (repr failed)>"
    r = _addr("", r)
    if len(r) > LONG:
        return _long(r, len(r))
    return r
