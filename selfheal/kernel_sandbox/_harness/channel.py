"""Kernel side: the two channels to the host (HMAC-signed lines on the result FIFO, signed and
numbered requests from the request FIFO: docs/sandbox.md, "How a run works"), and the state a
kernel's harness keeps. Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import _hashlib
import marshal as _marshal
import os as _os
from hmac import compare_digest as _compare_digest
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.capture import clip
    from selfheal.kernel_sandbox._harness.guard import Guard
    from selfheal.kernel_sandbox._harness.session import Checks

_hmac = _hashlib.hmac_digest
_loads = _marshal.loads
_os_write = _os.write
_os_read = _os.read


def sign(key: bytes, obj: Any) -> bytes:
    """One message as a line (see the module docstring)."""
    payload = repr(obj).encode("utf-8", "surrogatepass")
    return b"\n" + _hmac(key, payload, "sha256").hex().encode() + b" " + payload + b"\n"


class Harness:
    """Everything the serving loop and the forked runs share."""

    def __init__(
        self,
        key: bytes,
        out_fd: int,
        guard: Guard,
        checks: Checks,
        ip: Any = None,
        libc: Any = None,
        display_publisher: Any = None,
    ) -> None:
        self.key = key
        self.out_fd = out_fd
        self.guard = guard
        self.checks = checks
        self.ip = ip
        self.libc = libc
        self.display_publisher = display_publisher
        self.last_seq = 0
        self.boundary: Any = None  # what every run's process enters (boundary.py)
        self.boundary_text = "off"
        self.disk_mb = 0  # each run's folder is a tmpfs of this size (0: a plain folder)
        self.call_fd = -1  # the FIFO of a pytest-form test's calls (remote.py), or -1
        self.cache: dict[Any, Any] = {}  # compiled tests, inherited by every forked process

    def send(self, obj: Any, cap: int = 0) -> None:
        """Write ``obj`` as one signed line; with ``cap``, a line over ``cap`` bytes (the
        most the host reads) is replaced by ``fit``'s short form."""
        line = sign(self.key, obj)
        if cap and len(line) > cap:
            line = sign(self.key, fit(obj, len(line)))
        view = memoryview(line)
        while view:
            view = view[_os_write(self.out_fd, view) :]


def fit(obj: tuple[Any, ...], size: int) -> tuple[Any, ...]:
    """A message too long for the host (``size`` bytes) in short form: a test's result
    becomes an ``error`` saying so (its output cut, its value dropped); any other message
    keeps its first 2,000 characters of each string."""
    if obj[0] == "result":  # ("result", seq, i, outcome, type, message, tb, out, err, ...)
        why = f"the test's result was {size} bytes, too large to send to the host"
        out, err = (clip(x, 2000) for x in obj[7:9])
        return (*obj[:3], "error", "SandboxError", why, "", out, err, True, obj[10], None)
    return tuple(clip(x, 2000) if isinstance(x, str) else x for x in obj)


def read_request(h: Harness, fd: int) -> dict[str, Any] | None:
    """The next request (see the module docstring); None if it is not signed with the key
    or not newer than the last one."""
    n = int.from_bytes(read_exact(fd, 8), "big")
    if n > 1 << 30:
        return None
    body = read_exact(fd, n)
    mac, _, payload = body.partition(b" ")
    if not _compare_digest(_hmac(h.key, payload, "sha256").hex().encode(), mac):
        return None
    value = _loads(payload)  # signed by the host: plain data it marshalled itself
    if type(value) is not dict or type(value.get("seq")) is not int or value["seq"] <= h.last_seq:
        return None
    h.last_seq = value["seq"]
    return value


def read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        b = _os_read(fd, n if n < 1 << 20 else 1 << 20)
        if not b:
            raise ValueError("the pipe closed early")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)
