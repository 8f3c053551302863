"""What a killed host leaves behind, and cleaning it up: every sandbox directory carries an
*owner* marker (the host's pid and start time, the cgroups it made), and the first pool a
later process starts removes what belonged to a host that is gone. Directories without a
marker, or whose host still runs, are never touched (docs/sandbox.md, "orphans")."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import psutil

from selfheal.kernel_sandbox.containment import CgroupSet

MARKER = "owner.json"
"""The marker file in a kernel's or fork server's directory."""

PATTERNS = ("selfheal-k-*", "selfheal-z-*")
"""Directory names (under the temp directory) that a sandbox creates."""

_CGROUP_RE = re.compile(r"^/sys/fs/cgroup/.+/selfheal-[0-9a-f]{12}$")
"""The only cgroups a marker may name (those ``CgroupSet.create`` makes): a marker lives in a
directory sandboxed code could reach, so nothing else it names is ever removed."""

_swept = False
_sweep_lock = threading.Lock()


def _started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def mark_owner(root: str | os.PathLike[str], cgroups: Iterable[Path] = ()) -> None:
    """Record in ``root`` that this process owns it (and the cgroups it made for it)."""
    data = {
        "pid": os.getpid(),
        "started": _started(os.getpid()),
        "cgroups": [str(d) for d in cgroups],
    }
    tmp = Path(root) / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, Path(root) / MARKER)


def _owner_gone(root: Path) -> tuple[bool, list[str]]:
    """Whether ``root``'s owner is known and no longer runs, and the cgroups it recorded."""
    try:
        data = json.loads((root / MARKER).read_text())
        pid, started = int(data["pid"]), data["started"]
        cgroups = [str(c) for c in data.get("cgroups", []) if _CGROUP_RE.match(str(c))]
    except (OSError, ValueError, KeyError, TypeError):
        return False, []  # no (readable) marker: not ours to judge
    now = _started(pid)
    alive = now is not None and (started is None or abs(now - float(started)) < 1.0)
    return not alive, cgroups


def sweep_leftovers(tmp: str | None = None) -> list[str]:
    """Remove the sandbox directories (and cgroups) of hosts that are gone; returns the
    directories removed. Only directories of this user with an owner marker are considered."""
    base = tmp or tempfile.gettempdir()
    removed: list[str] = []
    uid = os.getuid()
    for pattern in PATTERNS:
        for d in glob.glob(os.path.join(glob.escape(base), pattern)):
            root = Path(d)
            try:
                if root.is_symlink() or not root.is_dir() or root.stat().st_uid != uid:
                    continue
            except OSError:
                continue
            gone, cgroups = _owner_gone(root)
            if not gone:
                continue
            with contextlib.suppress(Exception):
                CgroupSet({str(i): Path(c) for i, c in enumerate(cgroups)}, 0).remove()
            remove_kernel_dirs(str(root))
            removed.append(str(root))
    return removed


def remove_kernel_dirs(root: str) -> None:
    """Remove a kernel's folder and its runs' folders (``<root>-r<N>``, the harness's names)."""
    for path in (root, *glob.glob(glob.escape(root) + "-r*")):
        shutil.rmtree(path, ignore_errors=True)


def sweep_once() -> list[str]:
    """``sweep_leftovers`` the first time it is called in this process (pools call it)."""
    global _swept
    with _sweep_lock:
        if _swept:
            return []
        _swept = True
    try:
        return sweep_leftovers()
    except OSError:
        return []
