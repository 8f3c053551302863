"""The value codec shared by the host and the kernel harness: plain builtin values as tagged
tuples, written with ``repr`` and read back as a literal. Its *source* also runs inside
every sandbox kernel (see ``_harness``), so it stays plain Python with no selfheal imports.
"""

from __future__ import annotations

from typing import Any

_NoneType = type(None)


def encode_value(v: Any) -> Any:
    """Encode a plain Python value as tagged tuples (what ``decode_value`` reads).

    Raises ``TypeError`` for values that are not plain builtin data. Types are checked by
    identity: ``t in (int, ...)`` would ask the metaclass of a candidate's type.
    """
    t = type(v)
    if t is float:
        return ("f", v.hex())
    if t is complex:
        return ("c", v.real.hex(), v.imag.hex())
    if t is int or t is str or t is bytes or t is bool or t is _NoneType:
        return ("p", v)
    if t is bytearray:
        return ("ba", bytes(v))
    if t is range:
        return ("r", v.start, v.stop, v.step)
    if t is list:
        return ("l", [encode_value(x) for x in v])
    if t is tuple:
        return ("t", [encode_value(x) for x in v])
    if t is set:
        return ("s", [encode_value(x) for x in v])
    if t is frozenset:
        return ("z", [encode_value(x) for x in v])
    if t is dict:
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
