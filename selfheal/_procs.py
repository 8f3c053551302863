"""Child processes that never outlive their host: the one helper both the kernel sandbox and
the local model server start their children with (a foundation, so neither reaches into the
other)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

try:
    _libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - not glibc/musl
    _libc = None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """(In a freshly forked child.) Ask Linux to SIGKILL this process when the thread that
    forked it exits (Linux only; elsewhere nothing), so a child never outlives a host that was killed without running its
    ``atexit`` handlers (SIGKILL, SIGTERM, a crash). If the parent is already gone, exit."""
    if _libc is None:
        return
    parent = os.getppid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
