"""The host's side of the wire to a kernel's harness (``_harness/channel.py`` is the other):
signed, framed requests out, signed result lines in, both awaited on the pool's event loop
(non-blocking descriptors watched by the loop; no thread waits on a pipe)."""

from __future__ import annotations

import _hashlib
import asyncio
import hmac
import marshal
import os
from typing import Any

from selfheal._parse import literal

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
        value = literal(payload.decode("utf-8", "surrogatepass"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(value, tuple) or not value:
        return None
    return value


async def readable(fd: int, timeout: float | None, *, write: bool = False) -> bool:
    """Wait up to ``timeout`` s until the non-blocking ``fd`` can be read (or hung up), or
    with ``write``, written."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    watch, unwatch = (
        (loop.add_writer, loop.remove_writer) if write else (loop.add_reader, loop.remove_reader)
    )

    def wake() -> None:
        if not ready.done():
            ready.set_result(True)

    watch(fd, wake)
    try:
        await asyncio.wait({ready}, timeout=timeout)
    finally:
        unwatch(fd)
    return ready.done()


async def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the non-blocking ``fd``, awaiting room in the pipe."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await readable(fd, None, write=True)
