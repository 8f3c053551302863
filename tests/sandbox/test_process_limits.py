"""Other processes' limits (issue 43, item 3): a candidate that knows a host pid (a `sleep`
the test started, the warm kernel itself) calls ``prlimit64`` through ``ctypes`` (no
audit event) to lower its limits. Under both boundaries the call is refused (seccomp:
``prlimit64`` only on the calling process) and the host process keeps its limits; a
candidate that lowers its own limits reaches no later run on the same kernel.
"""

from __future__ import annotations

import os
import resource
import subprocess

from selfheal.kernel_sandbox import KernelPool

PRLIMIT = r"""
import ctypes, errno, os, platform, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR_PRLIMIT64 = {"x86_64": 302, "aarch64": 261}[platform.machine()]

class Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

def prlimit(pid, res, value):
    new = Rlimit(value, value)
    if libc.syscall(NR_PRLIMIT64, pid, res, ctypes.byref(new), None) == 0:
        return "lowered"
    return errno.errorcode[ctypes.get_errno()]
"""


def test_a_host_process_keeps_its_limits(
    bpool: KernelPool, host_sleep: subprocess.Popen[bytes]
) -> None:
    before = resource.prlimit(host_sleep.pid, resource.RLIMIT_CPU)
    code = PRLIMIT + f"\nHOST = {host_sleep.pid}\n"
    tests = [
        "assert prlimit(HOST, resource.RLIMIT_CPU, 1) != 'lowered'",
        "assert prlimit(HOST, resource.RLIMIT_NOFILE, 3) != 'lowered'",
        # the process itself may still ask and lower (pid 0: glibc's setrlimit)
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))",
        "assert prlimit(0, resource.RLIMIT_NOFILE, 200) == 'lowered'",
    ]
    report = bpool.run(code, tests)
    assert report.passed, report
    assert resource.prlimit(host_sleep.pid, resource.RLIMIT_CPU) == before
    assert host_sleep.poll() is None  # alive


def test_lowered_limits_reach_no_later_run(bpool: KernelPool) -> None:
    (kernel,) = bpool._ready
    before = resource.prlimit(kernel.pid, resource.RLIMIT_DATA)
    mib = 1 << 20
    code = PRLIMIT + f"\nKERNEL = {kernel.pid}\n"
    tests = [
        f"assert prlimit(KERNEL, resource.RLIMIT_DATA, {16 * mib}) != 'lowered'",
        f"resource.setrlimit(resource.RLIMIT_DATA, ({16 * mib}, {16 * mib}))",
        f"assert resource.getrlimit(resource.RLIMIT_DATA) == ({16 * mib}, {16 * mib})",
    ]
    first = bpool.run(code, tests)
    assert first.passed, first
    assert resource.prlimit(kernel.pid, resource.RLIMIT_DATA) == before
    later = "def big():\n    return len(bytearray(64 * 2**20))\n"
    for _ in range(3):  # the standby forked during the first run, and those after it
        report = bpool.run(later, ["assert big() == 64 * 2**20"])
        assert report.passed, report.results
    assert bpool.kernels_started == 1  # the same kernel served every run
    assert os.path.exists(f"/proc/{kernel.pid}")
