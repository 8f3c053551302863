"""Kernel side: the boundary a run's process enters before the candidate loads (``prepare`` at
warm-up, ``for_run`` before each fork, ``enter`` in the run's process); a process that cannot
enter it raises and never runs the candidate with less (docs/sandbox.md, "The boundary the
operating system enforces"). Shipped to the kernel as source (see ``_harness/__init__.py``)."""

from __future__ import annotations

import ctypes as _bctypes
import os as _os
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.fallback import (
        drop_capabilities,
        private_mounts,
        seccomp,
        seccomp_filter,
        seccomp_program,
    )
    from selfheal.kernel_sandbox._harness.landlock import (
        kernel_rulesets,
        landlock_abi,
        proc_rules,
        restrict,
        run_ruleset,
        static_rules,
    )
    from selfheal.kernel_sandbox._harness.process import (
        Isolation,
        isolation,
        own_proc,
        unprivileged,
    )


class Boundary:
    """What a kernel's run processes enter (see the module docstring)."""

    def __init__(self, kind: str, host_home: str) -> None:
        self.kind = kind  # landlock | fallback | off
        self.host_home = host_home
        self.libc: Any = None
        self.abi = 0
        self.static: list[tuple[int, int]] = []  # landlock: the fixed rules, opened once
        self.rulesets: dict[tuple[bool, bool], int] = {}  # landlock: the kernel's layer
        self.mounts = False  # fallback: a private mount namespace works here
        # seccomp programs by (network allowed, subprocesses allowed), built once
        self.filters: dict[tuple[bool, bool], Any] = {}
        self.buffers: list[Any] = []  # what the filters point to
        self.iso = Isolation()  # the process rules (process.py)
        self.proc_fds: list[int] = []  # a run's process: its /proc entries the rules name

    def keep(self) -> set[int]:
        """The descriptors a run's process keeps until ``enter``."""
        return set(self.rulesets.values())


def prepare(kind: str, host_home: str) -> tuple[Boundary, str]:
    """Set the kernel's boundary up (once); returns it and its description."""
    b = Boundary(kind, host_home)
    b.libc = _bctypes.CDLL(None, use_errno=True)
    b.libc.syscall.restype = _bctypes.c_long
    if kind != "off":
        machine = _os.uname().machine
        for net in (False, True):
            for sub in (False, True):
                prog, buf = seccomp_filter(seccomp_program(machine, sub, net))
                b.filters[(net, sub)] = prog
                b.buffers.append(buf)
    for name in ("syscall", "prctl", "capset", "unshare", "mount", "setns"):  # looked up once
        getattr(b.libc, name)
    if kind == "off":
        return b, "off"
    b.iso = isolation(b.libc)
    more = (", " + b.iso.describe()) if b.iso.describe() else ""
    if kind == "landlock":
        b.abi = landlock_abi(b.libc)
        if b.abi < 1:
            raise OSError("Landlock is not available in this kernel")
        b.static = static_rules()
        b.rulesets = kernel_rulesets(b.libc, b.abi)
        return b, f"landlock (ABI {b.abi}{more})"
    pid = _os.fork()
    if pid == 0:  # a throwaway child: can it have mounts of its own?
        _os._exit(0 if b.libc.unshare(0x00020000) == 0 else 1)
    b.mounts = _os.waitstatus_to_exitcode(_os.waitpid(pid, 0)[1]) == 0
    return b, "fallback (" + ("mount namespace, " if b.mounts else "") + f"seccomp{more})"


def for_run(b: Boundary, work: str) -> int:
    """(In the kernel, before forking the process of a run in ``work``.) Its own Landlock
    ruleset, or -1."""
    if b.kind != "landlock":
        return -1
    return run_ruleset(b.libc, b.abi, b.static, work)


def standby(b: Boundary, ruleset: int) -> int:
    """(In a run's process, before it takes a request.) Its own /proc where it has a PID
    namespace, and the Landlock rules for the /proc entries it may read. Returns its pid as
    the host knows it."""
    host_pid = _os.getpid()
    if b.iso.pidns:
        host_pid = own_proc(b.libc)
    if b.kind == "landlock" and ruleset >= 0:
        b.proc_fds = proc_rules(b.libc, b.abi, ruleset)
    return host_pid


def enter(
    b: Boundary, work: str, ruleset: int, allow_network: bool, allow_subprocess: bool
) -> None:
    """(In a run's process, after its go, before the candidate.) Enter the boundary."""
    if b.kind == "landlock":
        if allow_subprocess:  # multiprocessing's semaphores live in /dev/shm
            _os.close(ruleset)
            static = static_rules()  # (the kernel's descriptors were not kept)
            ruleset = run_ruleset(b.libc, b.abi, static, work, ("/dev/shm",))
            for fd, _ in static:
                _os.close(fd)
            b.proc_fds += proc_rules(b.libc, b.abi, ruleset)
        unprivileged(b.iso, b.libc)
        drop_capabilities(b.libc)
        restrict(ruleset, b.libc)
        restrict(b.rulesets[(allow_network, allow_subprocess)], b.libc)
    elif b.kind == "fallback":
        if b.mounts and not private_mounts(b.libc, work, b.host_home, allow_subprocess):
            raise OSError("could not enter a private mount namespace")
        unprivileged(b.iso, b.libc)
        drop_capabilities(b.libc)
    if b.filters:
        seccomp(b.libc, b.filters[(allow_network, allow_subprocess)])
    for fd in (ruleset, *b.keep()):
        if fd >= 0:
            try:
                _os.close(fd)
            except OSError:
                pass
