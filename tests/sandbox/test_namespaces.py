"""Namespaces and pids (issue 43, item 3), as an attacker who reads our source: new
namespaces through raw ``clone``/``clone3``/``unshare`` calls (a user namespace gives its
creator every capability inside it), and the host's pids, found through /proc or by
number, reached with ``kill`` through ``ctypes`` (no audit event). Under both boundaries
a kernel's runs are in a PID namespace of the kernel's, whose other processes (its init,
the next run's standby) are root's and hidden; the run is an unprivileged uid where the
host is root.
"""

from __future__ import annotations

import os
import subprocess

import psutil
import pytest
from processes import descendants_named

from selfheal.kernel_sandbox import KernelPool

from .hostile_cases import RAW_SYSCALLS

CALLS = (
    RAW_SYSCALLS
    + r"""
NR_CLONE, NR_CLONE3 = (56, 435) if X86 else (220, 435)
CLONE_NEWUSER, CLONE_NEWPID, SIGCHLD = 0x10000000, 0x20000000, 17

def raw_clone(flags):
    r = libc.syscall(NR_CLONE, flags | SIGCHLD, None, None, None, None)
    if r == 0:  # the child, if it was made: leave at once
        libc._exit(0)
    if r > 0:
        libc.waitpid(r, None, 0)
    return _code(r)

class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
        "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]

def raw_clone3(flags):
    args = CloneArgs(flags=flags, exit_signal=SIGCHLD)
    r = libc.syscall(NR_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
    if r == 0:
        libc._exit(0)
    if r > 0:
        libc.waitpid(r, None, 0)
    return _code(r)

def unshare(flags):
    return _code(libc.unshare(flags))

def kill(pid, sig=0):
    return _code(libc.kill(pid, sig))

def thread_runs():
    out = []
    t = threading.Thread(target=out.append, args=(1,))
    t.start()
    t.join()
    return out == [1]

def visible(pids):
    return [p for p in pids if os.path.exists(f"/proc/{p}")]
"""
)


BECOME_ROOT = """
import os

def become_root():
    try:
        os.setuid(0)
    except PermissionError:
        return "refused"
    return "root"
"""


def test_no_new_namespace(bpool: KernelPool) -> None:
    tests = [
        "assert raw_clone(CLONE_NEWUSER) == 'EPERM'",
        "assert raw_clone(CLONE_NEWPID) == 'EPERM'",
        "assert raw_clone3(CLONE_NEWUSER) == 'ENOSYS'",  # its flags are out of a filter's reach
        "assert unshare(CLONE_NEWUSER) == 'EPERM'",
        "assert thread_runs()",  # glibc falls back from clone3 to clone for threads
        "assert raw_clone(0) == 'ok'",  # a plain fork still works (the cgroup bounds it)
    ]
    report = bpool.run(CALLS, tests)
    assert report.passed, report.results


def test_no_other_pid_is_visible_or_reachable(
    bpool: KernelPool, host_sleep: subprocess.Popen[bytes]
) -> None:
    (kernel,) = bpool._ready
    others = sorted({1, os.getpid(), kernel.pid, host_sleep.pid, *range(2, 300)})
    code = CALLS + f"\nOTHERS = {others!r}\nHOST = {host_sleep.pid}\nKERNEL = {kernel.pid}\n"
    tests = [
        "assert set(visible(OTHERS)) <= {os.getpid()}",
        "assert kill(HOST) == 'ESRCH' and kill(KERNEL) == 'ESRCH'",
        "assert kill(1) != 'ok'",  # its namespace's init (the kernel's), not the run's
        "assert kill(os.getpid()) == 'ok'",
    ]
    report = bpool.run(code, tests)
    assert report.passed, report.results
    assert host_sleep.poll() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the host is not root: runs keep its uid")
def test_an_unprivileged_uid_where_the_host_is_root(bpool: KernelPool) -> None:
    tests = [
        "assert os.getuid() != 0 and os.geteuid() != 0 and os.getgid() != 0",
        "assert os.getgroups() == []",
        "assert become_root() == 'refused'",
    ]
    report = bpool.run(BECOME_ROOT, tests)
    assert report.passed, report.results


LEAVE = r"""
import ctypes
libc = ctypes.CDLL(None)

def leave():
    # a grandchild in a session of its own, orphaned at once: it comes to the namespace's
    # init, not to the kernel
    pid = libc.fork()
    if pid == 0:
        if libc.fork() == 0:
            libc.setsid()
            libc.prctl(15, b"selfheal-left", 0, 0, 0)  # PR_SET_NAME
            while True:
                libc.pause()
        libc._exit(0)
    libc.waitpid(pid, None, 0)
    return pid > 0
"""


def test_what_a_run_leaves_dies_before_the_next_run(bpool: KernelPool) -> None:
    (kernel,) = bpool._ready

    def left() -> list[psutil.Process]:
        return descendants_named(kernel.pid, "selfheal-left")

    assert bpool.run(LEAVE, ["assert leave()"]).passed
    # the next run starts once everything of the previous one is gone
    assert bpool.run("x = 1", ["assert x == 1"]).passed
    assert left() == []
    assert bpool.kernels_started == 1
