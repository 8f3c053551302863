"""Kernel side: the process rules both boundaries share (docs/sandbox.md, "Containment",
"other processes"). Each run's process lives in a PID namespace of its own, second after a
tiny init (``spawn``), and sees a /proc of that namespace only (``own_proc``); where the
kernel runs as root, the run's process then takes an unprivileged uid (``unprivileged``),
and the kernel has once arranged its mounts so that this uid can still read the Python
installation (``kernel_mounts``). Shipped to the kernel as source (see
``_harness/__init__.py``).
"""

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
        self.pidns = -1  # the kernel's own PID namespace (a descriptor), or -1: none per run
        self.me = -1  # a pidfd of the kernel: its run processes see it die
        self.uid = -1  # the uid runs take, or -1 (they keep the kernel's)

    def describe(self) -> str:
        """The parts in force, in words (appended to the boundary's description)."""
        parts = ["own PID namespace"] if self.pidns >= 0 else []
        if self.uid >= 0:
            parts.append(f"uid {self.uid}")
        return ", ".join(parts)


def _pfail(what: str) -> OSError:
    e = _pctypes.get_errno()
    return OSError(e, f"{what}: {_os.strerror(e)}")


def _pmount(libc: Any, src: Any, target: str, fstype: Any, flags: int, data: Any = None) -> None:
    enc = [x.encode() if isinstance(x, str) else x for x in (src, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        raise _pfail(f"mount {target}")


def isolation(libc: Any) -> Isolation:
    """(In the kernel, at warm-up.) What this kernel can give its runs: a PID namespace per
    run where it may make one (root), and, where it is root, an unprivileged uid (after
    ``kernel_mounts``)."""
    iso = Isolation()
    if _os.geteuid() != 0:
        return iso  # the runs keep the host's uid, already unprivileged
    fd = _os.open("/proc/self/ns/pid", _os.O_RDONLY | _os.O_CLOEXEC)
    if libc.unshare(_P_NEWPID) == 0 and libc.setns(fd, _P_NEWPID) == 0:
        iso.pidns = fd
        iso.me = _os.pidfd_open(_os.getpid())
    else:
        _os.close(fd)
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


def spawn(iso: Isolation, libc: Any) -> tuple[int, int]:
    """(In the kernel.) Fork a run's process: (its pid, the pid of its namespace's init, or
    -1); in the child, (0, -1). With a PID namespace, a fresh one per run: its init (pid 1,
    reaps orphans, killed by ``end``) and the run's process (pid 2)."""
    if iso.pidns < 0:
        return _os.fork(), -1
    if libc.unshare(_P_NEWPID) != 0:
        raise _pfail("unshare(CLONE_P_NEWPID)")
    init = pid = -1
    try:
        init = _os.fork()
        if init == 0:
            _ns_init(iso, libc)  # never returns
        pid = _os.fork()
    finally:
        # (the parent only) the kernel's next forks: its own namespace again
        if pid != 0 and libc.setns(iso.pidns, _P_NEWPID) != 0:
            raise _pfail("setns")
    return pid, init


def kernel_gone(iso: Isolation) -> bool:
    """(In a forked process, after ``PR_SET_P_PDEATHSIG``.) True if the kernel died before."""
    if iso.me < 0:
        return False
    return bool(_pselect.select([iso.me], [], [], 0)[0])


def _ns_init(iso: Isolation, libc: Any) -> None:
    """Pid 1 of a run's namespace: reap what is handed to it until the kernel kills it
    (its namespace dies with it) or dies."""
    try:
        libc.prctl(_P_PDEATHSIG, _psignal.SIGKILL, 0, 0, 0)
        if kernel_gone(iso):
            _os._exit(1)
        _os.closerange(3, 1 << 16)
        _psignal.pthread_sigmask(_psignal.SIG_BLOCK, {_psignal.SIGCHLD})
        while True:
            try:
                while _os.waitpid(-1, _os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            _psignal.sigwait({_psignal.SIGCHLD})
    finally:
        _os._exit(0)


def end(init: int) -> None:
    """(In the kernel.) Kill a run's namespace (its init, then everything in it) and reap
    the init once all of it is gone."""
    if init <= 0:
        return
    try:
        _os.kill(init, _psignal.SIGKILL)
        _os.waitpid(init, 0)
    except OSError:
        pass


def own_proc(libc: Any) -> int:
    """(In a run's process, as a standby, in its own PID namespace.) A mount namespace of
    its own with a /proc of its PID namespace, other uids' processes invisible: the
    process's pid as the host knows it (read before)."""
    host_pid = int(_os.readlink("/proc/self"))
    if libc.unshare(_P_NEWNS) != 0:
        raise _pfail("unshare(CLONE_P_NEWNS)")
    _pmount(libc, None, "/", None, _P_REC | _P_PRIVATE)
    _pmount(libc, "proc", "/proc", "proc", _P_NOSUID | _P_NODEV | _P_NOEXEC, "hidepid=2")
    return host_pid


def unprivileged(iso: Isolation, libc: Any) -> None:
    """(In a run's process, before its boundary.) Take the unprivileged uid, if any: no
    capability is left, and the change clears ``PR_SET_P_PDEATHSIG``, set again here."""
    if iso.uid < 0:
        return
    _os.setgroups([])
    _os.setresgid(iso.uid, iso.uid, iso.uid)
    _os.setresuid(iso.uid, iso.uid, iso.uid)
    libc.prctl(_P_PDEATHSIG, _psignal.SIGKILL, 0, 0, 0)
