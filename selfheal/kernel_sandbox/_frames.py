"""The host's side of the wire to a kernel's harness (``_harness/channel.py`` is the other):
signed, framed requests out, signed result lines in."""

from __future__ import annotations

import _hashlib
import ast
import hmac
import marshal
from typing import Any

__all__ = ["frame_request", "read_line"]

_hmac = _hashlib.hmac_digest


def frame_request(key: bytes, req: dict[str, Any]) -> bytes:
    """``req`` (plain data) as the harness reads it: an 8-byte length, then
    ``<hmac> <marshal of req>``."""
    body = marshal.dumps(req)
    framed = _hmac(key, body, "sha256").hex().encode() + b" " + body
    return len(framed).to_bytes(8, "big") + framed


def read_line(key: bytes, line: bytes) -> tuple[Any, ...] | None:
    """The message of one result line, or None if it is not signed with ``key`` (forged,
    or torn by a process dying mid-write) or not a well-formed literal tuple."""
    mac, _, payload = line.partition(b" ")
    good = _hmac(key, payload, "sha256").hex().encode()
    if not hmac.compare_digest(good, mac):
        return None
    try:
        value = ast.literal_eval(payload.decode("utf-8", "surrogatepass"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(value, tuple) or not value:
        return None
    return value
