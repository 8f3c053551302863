"""The harness that runs inside every sandbox kernel: small modules whose *source* is sent
to the kernel at warm-up and executed there, in the order of ``PARTS``, in one private
namespace with a copy of the builtins taken before any candidate exists (docs/sandbox.md,
"How a run works", says what each part does). ``_canon.py`` runs in a namespace of its own."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TypedDict

__all__ = ["PARTS", "Setup", "install_code"]

_HERE = Path(__file__).parent
PARTS = (
    _HERE.parent / "_wire.py",
    _HERE / "compare.py",
    _HERE / "pytest_item.py",
    _HERE / "pytest_collect.py",
    _HERE / "capture.py",
    _HERE / "sealing.py",
    _HERE / "guard.py",
    _HERE / "trace.py",
    _HERE / "session.py",
    _HERE / "remote.py",
    _HERE / "channel.py",
    _HERE / "landlock.py",
    _HERE / "fallback.py",
    _HERE / "process.py",
    _HERE / "boundary.py",
    _HERE / "loop.py",
    _HERE / "server.py",
)
"""The harness's modules, in the order the kernel executes them."""

_BOOT = """
def __sh_boot__(parts, args):
    import builtins
    ns = {"__name__": "__sh_harness__", "__builtins__": dict(builtins.__dict__)}
    for name, src in parts:
        exec(compile(src, name, "exec", dont_inherit=True), ns)
    ns["install"](ns, *args)
"""


class Setup(TypedDict):
    """What the kernel's harness is installed with (``server.install`` reads it)."""

    key_file: str
    """The file of the HMAC key that signs the harness's messages (read, then deleted)."""
    work: str
    """The kernel's working folder."""
    fifo: str
    """The FIFO the host's run requests come through."""
    out_fifo: str
    """The FIFO the harness's results go out through."""
    host_home: str
    """The host's home folder (the guard keeps candidates out of it)."""
    boundary: str
    """The kind of boundary each run enters (``landlock``, ``fallback``, ``off``)."""
    disk_mb: int
    """The size of the tmpfs each run's folder is (0: a plain folder, where the kernel has no
    mount namespace of its own)."""


@functools.lru_cache(maxsize=1)
def _sources() -> tuple[tuple[str, str], ...]:
    return tuple((f"<selfheal {p.stem}>", p.read_text()) for p in PARTS)


@functools.lru_cache(maxsize=1)
def _canon_source() -> str:
    return (_HERE.parent / "_canon.py").read_text()


def install_code(setup: Setup) -> str:
    """The warm-up execute request: install the harness in the kernel's IPython namespace
    (only the entry point ``__selfheal__`` is left there)."""
    args = (_canon_source(), dict(setup))
    return f"{_BOOT}\n__sh_boot__({_sources()!r}, {args!r})\ndel __sh_boot__\n"
