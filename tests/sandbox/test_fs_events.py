"""File-system events and metadata (issue 43, item 3), as an attacker who reads our source:
``inotify`` on a host folder showed the names of the files the host created, and ``stat``
gave sizes outside the boundary (Landlock does not handle ``stat``). Under both boundaries
``inotify_init*``/``fanotify_init`` are refused (seccomp); a host file in a folder closed
to others (a root ``0700`` folder) cannot even be ``stat``-ed, since the run's uid is
unprivileged. What stays: ``stat`` of a path every user may reach (docs/sandbox.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from selfheal.kernel_sandbox import KernelPool

from .hostile_cases import RAW_SYSCALLS

CALLS = (
    RAW_SYSCALLS
    + r"""

def inotify_init1():
    return _code(libc.syscall(294 if X86 else 26, 0))

def inotify_init():
    return _code(libc.syscall(253, 0)) if X86 else "EPERM"  # (not on aarch64)

def fanotify_init():
    return _code(libc.syscall(300 if X86 else 262, 0, 0))

def size_of(path):
    try:
        return os.stat(path).st_size
    except OSError as e:
        return errno.errorcode[e.errno]
"""
)


@pytest.fixture
def closed_folder() -> Iterator[Path]:
    """A host folder only its owner may enter, holding a file of a telling size (in the
    temporary folder, which the fallback hides whole)."""
    d = Path(tempfile.mkdtemp(prefix="selfheal-closed-"))
    os.chmod(d, 0o700)
    (d / "secret.key").write_bytes(b"k" * 4321)
    yield d
    shutil.rmtree(d)


def test_no_file_system_events(bpool: KernelPool) -> None:
    tests = [
        "assert inotify_init1() == 'EPERM'",
        "assert inotify_init() == 'EPERM'",
        "assert fanotify_init() == 'EPERM'",
    ]
    report = bpool.run(CALLS, tests)
    assert report.passed, report.results


@pytest.mark.skipif(os.geteuid() != 0, reason="the host is not root: runs keep its uid")
def test_no_metadata_from_a_closed_folder(bpool: KernelPool, closed_folder: Path) -> None:
    path = closed_folder / "secret.key"
    code = CALLS + f"\nP = {str(path)!r}\n"
    expected = "ENOENT" if bpool.boundary.kind == "fallback" else "EACCES"
    report = bpool.run(code, ["assert size_of(P) != 4321", f"assert size_of(P) == {expected!r}"])
    assert report.passed, report.results
