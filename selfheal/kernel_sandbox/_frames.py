"""The host's side of the wire to a kernel's harness (``_harness/channel.py`` is the other):
signed, framed requests out, signed result lines in, both awaited on the process loop (the pool's)
(non-blocking descriptors watched by the loop; no thread waits on a pipe). The result pipe is
read in bounded chunks with a line cap and byte caps per run (``ResultReader``): a candidate
that writes junk into it costs the host a bounded buffer and bounded time per turn of the
loop, and is reported as a flood."""

from __future__ import annotations

import _hashlib
import asyncio
import hmac
import marshal
import os
from collections.abc import Callable
from typing import Any, TypeVar

from selfheal._parse import literal

_hmac = _hashlib.hmac_digest
T = TypeVar("T")
_MiB = 1 << 20
CHUNK = 256 * 1024
"""Bytes of the result pipe read at once."""
READS = 4
"""Chunks of the result pipe read per turn of the pool's loop, at most (then it yields)."""
JUNK_CAP = 16 * _MiB
"""Bytes a run's process may put into the result pipe that are not verified lines of its
run (junk, forged or torn lines, lines over the line cap) before it is killed as a flood."""


def line_cap(output_limit: int) -> int:
    """The longest result line the host reads, in bytes: a test's fields are capped in the
    kernel (``_harness/capture.py``), its two output streams at ``output_limit`` characters
    each, which ``repr`` writes in at most 10 bytes each (``\\U0001xxxx``)."""
    return 4 * _MiB + 24 * max(0, output_limit)


def run_cap(tests: int, output_limit: int) -> int:
    """Bytes a run's process may send in all (verified or not) before it is killed as a
    flood: what ``tests`` results of the longest kind take, plus the junk cap."""
    return JUNK_CAP + (tests + 2) * line_cap(output_limit)


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
    if len(mac) != 64:  # (junk costs no digest)
        return None
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


class ResultReader:
    """The host's end of a kernel's result pipe: bounded chunks into a bounded buffer.

    ``take`` gives the next line its caller verifies; the others are junk. A line longer
    than the line cap is skipped up to its newline without being kept. ``flood`` says, once
    per run, why the run's process went over a cap (then the host kills it)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.skipping = False  # inside a line over the cap: drop up to its newline
        self.new_run(0, 64 * 1024)

    def new_run(self, tests: int, output_limit: int) -> int:
        """Start counting for a run of ``tests`` tests (``run_cap``); returns its line cap
        (``line_cap``)."""
        self.line_max = line_cap(output_limit)
        self.total_max = run_cap(tests, output_limit)
        self.total = self.junk = 0
        self.reported = False
        return self.line_max

    def take(self, verify: Callable[[bytes], T | None]) -> T | None:
        """The first line ``verify`` accepts (what it returns), from what is buffered and at
        most ``READS`` chunks more (then the loop's other work goes first); the lines it
        rejects are junk. None when there is none yet, or the run flooded (``flood``)."""
        for _ in range(READS):
            while (line := self._line()) is not None:
                got = verify(line) if line else None
                if got is not None:
                    return got
                self.junk += len(line) + 1 if line else 0
            if (self._over() and not self.reported) or not self._fill():
                return None
        return None

    def flood(self) -> str | None:
        """Why the run's process flooded the pipe (said once per run), or None."""
        if self.reported or not self._over():
            return None
        self.reported = True
        if self.junk > JUNK_CAP:
            why = f"over {JUNK_CAP // _MiB} MiB that are not its results"
        else:
            why = f"over {self.total_max // _MiB} MiB in all"
        return f"the candidate flooded the result channel ({why}); its process was killed"

    def _over(self) -> bool:
        return self.junk > JUNK_CAP or self.total > self.total_max

    def _line(self) -> bytes | None:
        """The next complete line already read (without its newline), or None."""
        while (nl := self.buf.find(b"\n")) >= 0:
            out = bytes(self.buf[:nl])
            del self.buf[: nl + 1]
            if nl <= self.line_max:
                return out
            self.junk += nl + 1  # (its start came before the chunk that ended it)
        return None

    def _fill(self) -> bool:
        """Read one chunk (``CHUNK`` bytes at most); False when nothing was there."""
        try:
            chunk = os.read(self.fd, CHUNK)
        except OSError:  # nothing yet (or the pipe is gone)
            return False
        if not chunk:
            return False
        self.total += len(chunk)
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                self.junk += len(chunk)
                return True
            self.junk += nl
            chunk = chunk[nl:]
            self.skipping = False
        self.buf += chunk
        start = self.buf.rfind(b"\n") + 1  # of the line still being written
        if len(self.buf) - start > self.line_max:
            self.junk += len(self.buf) - start  # a line over the cap: never kept whole
            del self.buf[start:]
            self.skipping = True
        return True
