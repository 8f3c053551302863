"""Kernel side: the process rules both boundaries share: each run in the kernel's own PID
namespace, cleaned after it, a /proc with other uids hidden, an unprivileged uid where the
kernel is root (docs/sandbox.md, "Containment"). Shipped to the kernel as source (see
``_harness/__init__.py``)."""

from __future__ import annotations

import ctypes as _pctypes
import os as _os
import select as _pselect
import signal as _psignal
import sys as _sysmod
from typing import Any

_P_NEWNS, _P_NEWPID = 0x00020000, 0x20000000
_P_NOSUID, _P_NODEV, _P_NOEXEC = 2, 4, 8
_P_BIND, _P_REC, _P_PRIVATE = 4096, 16384, 1 << 18
_P_PDEATHSIG = 1
RUN_UID = 65534
"""The uid (and gid) a run's process takes where the kernel is root: ``nobody``."""


class Isolation:
    """What a kernel's runs get (see the module docstring); found once, at warm-up."""

    def __init__(self) -> None:
        self.pidns = False  # runs go into a PID namespace of the kernel's (``namespace``)
        self.init = -1  # that namespace's init, once serving
        self.ask = -1  # the init's command pipe (we write), and its answers (we read)
        self.answer = -1
        self.me = -1  # a pidfd of the kernel: its forked processes see it die
        self.uid = -1  # the uid runs take, or -1 (they keep the kernel's)

    def describe(self) -> str:
        """The parts in force, in words (appended to the boundary's description)."""
        parts = ["own PID namespace"] if self.pidns else []
        if self.uid >= 0:
            parts.append(f"uid {self.uid}")
        return ", ".join(parts)

    def keep(self) -> set[int]:
        """The kernel's children that are not runs (``_kill_leftovers`` spares them)."""
        return {self.init} if self.init > 0 else set()


def _pfail(what: str) -> OSError:
    e = _pctypes.get_errno()
    return OSError(e, f"{what}: {_os.strerror(e)}")


def _pmount(libc: Any, src: Any, target: str, fstype: Any, flags: int, data: Any = None) -> None:
    enc = [x.encode() if isinstance(x, str) else x for x in (src, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        raise _pfail(f"mount {target}")


def isolation(libc: Any) -> Isolation:
    """(In the kernel, at warm-up.) What this kernel can give its runs: a PID namespace
    where it may make one (root: tried here and left again), and, where it is root, an
    unprivileged uid (after ``kernel_mounts``)."""
    iso = Isolation()
    if _os.geteuid() != 0:
        return iso  # the runs keep the host's uid, already unprivileged
    fd = _os.open("/proc/self/ns/pid", _os.O_RDONLY | _os.O_CLOEXEC)
    try:
        iso.pidns = libc.unshare(_P_NEWPID) == 0 and libc.setns(fd, _P_NEWPID) == 0
    finally:
        _os.close(fd)
    if iso.pidns:
        iso.me = _os.pidfd_open(_os.getpid())
    if kernel_mounts(libc):
        iso.uid = RUN_UID
    return iso


def _run_python_dirs() -> list[str]:
    dirs = (_sysmod.prefix, _sysmod.base_prefix, _sysmod.exec_prefix, _sysmod.base_exec_prefix)
    return sorted({_os.path.realpath(p) for p in dirs} - {"/"})


def _closed_above(path: str) -> str | None:
    """The topmost folder above (or at) ``path`` that others may not enter, if any."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        d = "/" + "/".join(parts[:i])
        if not _os.stat(d).st_mode & 0o001:
            return d
    return None


def kernel_mounts(libc: Any) -> bool:
    """(In the kernel's serving thread, once.) A mount namespace of its own for that thread
    and the processes it forks, in which every folder that others may not enter and that
    holds the Python installation (``/root`` for pyenv) is an empty tmpfs with the
    installation bound back: an unprivileged uid can then import, and sees nothing else
    of that folder. False where it cannot (the installation itself closed to others, or
    no mounts allowed): the thread is then back in its mount namespace."""
    dirs = _run_python_dirs()
    if any(_os.stat(d).st_mode & 0o005 != 0o005 for d in dirs):
        return False
    tops = {d: t for d in dirs if (t := _closed_above(d)) is not None}
    if not tops:
        return True  # nothing to open up
    before = _os.open("/proc/self/ns/mnt", _os.O_RDONLY | _os.O_CLOEXEC)
    keep: dict[str, int] = {}
    try:
        if libc.unshare(_P_NEWNS) != 0:
            return False
        try:  # (a bind mount's source must be in the new namespace: opened here)
            keep = {d: _os.open(d, _os.O_PATH | _os.O_CLOEXEC) for d in tops}
            _pmount(libc, None, "/", None, _P_REC | _P_PRIVATE)  # nothing reaches the host
            for top in sorted(set(tops.values())):
                _pmount(libc, "tmpfs", top, "tmpfs", _P_NOSUID | _P_NODEV, "size=64k,mode=755")
            for d, fd in keep.items():
                _os.makedirs(d, 0o755, exist_ok=True)
                _pmount(libc, f"/proc/self/fd/{fd}", d, None, _P_BIND | _P_REC)
        except OSError:
            libc.setns(before, _P_NEWNS)
            return False
        return True
    finally:
        for fd in (before, *keep.values()):
            _os.close(fd)


def namespace(iso: Isolation, libc: Any) -> None:
    """(In the kernel's serving thread, before its first run.) From now on what this thread
    forks is in a PID namespace of its own, whose init (pid 1, forked here) reaps orphans
    and kills, on ``clean``, every process a finished run left (orphans come to it)."""
    if not iso.pidns:
        return
    if libc.unshare(_P_NEWPID) != 0:
        raise _pfail("unshare(CLONE_NEWPID)")
    ask_r, ask_w = _os.pipe()
    answer_r, answer_w = _os.pipe()
    pid = _os.fork()
    if pid == 0:
        _ns_init(iso, libc, ask_r, answer_w)  # never returns
    _os.close(ask_r)
    _os.close(answer_w)
    iso.init, iso.ask, iso.answer = pid, ask_w, answer_r


def clean(iso: Isolation) -> None:
    """(In the kernel, once a run's process is gone.) Have the namespace's init kill what
    the run left, and wait until it has."""
    if iso.init <= 0:
        return
    try:
        _os.write(iso.ask, b"k")
        if _os.read(iso.answer, 1) == b"k":
            return
    except OSError:
        pass
    raise OSError("the PID namespace's init is gone: no run can start")


def kernel_gone(iso: Isolation) -> bool:
    """(In a forked process, after ``PR_SET_PDEATHSIG``.) True if the kernel died before."""
    if iso.me < 0:
        return False
    return bool(_pselect.select([iso.me], [], [], 0)[0])


def _ns_init(iso: Isolation, libc: Any, ask: int, answer: int) -> None:
    """Pid 1 of the kernel's namespace: on each ``k`` from the kernel, kill its children
    (what runs left: orphans come to it, not to the kernel) until none is left, reap them,
    answer ``k``. Leaves when the kernel does (its namespace dies with it)."""
    try:
        libc.prctl(_P_PDEATHSIG, _psignal.SIGKILL, 0, 0, 0)
        if kernel_gone(iso):
            _os._exit(1)
        low = 3
        for fd in sorted((ask, answer)):
            _os.closerange(low, fd)
            low = fd + 1
        _os.closerange(low, 1 << 16)
        # a /proc of this namespace, to find its children by the pids it can kill
        if libc.unshare(_P_NEWNS) != 0:
            raise _pfail("unshare(CLONE_NEWNS)")
        _pmount(libc, None, "/", None, _P_REC | _P_PRIVATE)
        _pmount(libc, "proc", "/proc", "proc", _P_NOSUID | _P_NODEV | _P_NOEXEC)
        while _os.read(ask, 1) == b"k":
            _kill_children()
            _os.write(answer, b"k")
    finally:
        _os._exit(0)


def _reap() -> None:
    while True:
        try:
            if _os.waitpid(-1, _os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _kill_children() -> None:
    for _ in range(500):
        _reap()  # orphans that ended on their own
        try:
            with open("/proc/1/task/1/children", "rb") as fh:
                kids = [int(x) for x in fh.read().split()]
        except OSError:
            kids = []
        if not kids:
            return
        for kid in kids:
            try:
                _os.kill(kid, _psignal.SIGKILL)
            except OSError:
                pass
        for kid in kids:
            try:
                _os.waitpid(kid, 0)
            except ChildProcessError:
                pass


def own_proc(libc: Any) -> int:
    """(In a run's process, as a standby, in the kernel's PID namespace.) A mount namespace of
    its own with a /proc of its PID namespace, other uids' processes invisible: the
    process's pid as the host knows it (read before)."""
    host_pid = int(_os.readlink("/proc/self"))
    if libc.unshare(_P_NEWNS) != 0:
        raise _pfail("unshare(CLONE_NEWNS)")
    _pmount(libc, None, "/", None, _P_REC | _P_PRIVATE)
    _pmount(libc, "proc", "/proc", "proc", _P_NOSUID | _P_NODEV | _P_NOEXEC, "hidepid=2")
    return host_pid


def unprivileged(iso: Isolation, libc: Any) -> None:
    """(In a run's process, before its boundary.) Take the unprivileged uid, if any: no
    capability is left, and the change clears ``PR_SET_PDEATHSIG``, set again here."""
    if iso.uid < 0:
        return
    _os.setgroups([])
    _os.setresgid(iso.uid, iso.uid, iso.uid)
    _os.setresuid(iso.uid, iso.uid, iso.uid)
    libc.prctl(_P_PDEATHSIG, _psignal.SIGKILL, 0, 0, 0)
