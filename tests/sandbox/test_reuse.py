"""A kernel serves run after run, each in a fresh process forked from it: nothing one
candidate does reaches the next, and the kernel itself is out of a candidate's reach."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from selfheal.kernel_sandbox import KernelPool, ProbeCall

from .conftest import FAST

LEAVE_TRACES = """
import builtins, os, sys, threading, time
builtins.LEAK = 1
builtins.len = lambda x: 3
os.environ["SELFHEAL_LEAK"] = "1"
sys.modules["json"] = None
with open("planted.py", "w") as fh:
    fh.write("VALUE = 'planted'\\n")
with open(os.environ["TMPDIR"] + "/planted.txt", "w") as fh:
    fh.write("x")
def junk():
    # keep writing junk (no newline) to every pipe it can find, after its run too
    import stat
    while True:
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b"junk without newline")
            except OSError:
                pass
        time.sleep(0.001)
threading.Thread(target=junk, daemon=True).start()
def f():
    return os.getcwd()
"""
LOOK = """
import builtins, os, sys
def look():
    return {
        "leak": hasattr(builtins, "LEAK"),
        "len": len([1]),
        "env": "SELFHEAL_LEAK" in os.environ,
        "json": sys.modules.get("json", 0) is None,
        "planted": os.path.exists("planted.py"),
        "tmp": os.listdir(os.environ["TMPDIR"]),
        "cwd": os.getcwd(),
    }
"""


@pytest.fixture
def one() -> Iterator[KernelPool]:
    with KernelPool(size=1, limits=FAST) as p:
        assert p.wait_ready(60)
        yield p


def test_nothing_reaches_the_next_run(one: KernelPool) -> None:
    first = one.run(LEAVE_TRACES, [ProbeCall(id="cwd", expr="f()")])
    assert first.load.ok, first.load
    second = one.run(LOOK, [ProbeCall(id="look", expr="look()"), "assert len([1, 2]) == 2"])
    assert second.passed, second
    seen = second.results[0].value or ""
    assert "'leak': False" in seen and "'len': 1" in seen and "'env': False" in seen
    assert "'json': False" in seen and "'planted': False" in seen and "'tmp': []" in seen
    assert first.results[0].value is not None and first.results[0].value not in seen
    assert one.kernels_started == 1  # the same kernel served both


def test_kernel_is_out_of_reach(one: KernelPool) -> None:
    # the kernel's pid as the host knows it: in its own PID namespace a run's getppid() is
    # 0 (its parent is outside), and kill(0) would only reach its own process group
    (kernel,) = one._ready
    code = (
        "import os, signal\n"
        "def kill_parent():\n"
        f"    os.kill({kernel.pid}, signal.SIGKILL)\n"
        "def open_requests():\n"
        "    here = os.path.dirname(os.getcwd())\n"
        "    return open(here + '/req', 'wb')\n"
        "def crash():\n"
        "    os._exit(9)\n"
    )
    report = one.run(code, ["kill_parent()", "open_requests()", "crash()", "assert 1 == 1"])
    assert [r.outcome for r in report.results] == ["error", "error", "crashed", "passed"]
    assert [r.exc_type for r in report.results[:2]] == ["PermissionError", "PermissionError"]
    assert report.kernel_restarts == 1
    assert one.run("x = 1", ["assert x == 1"]).passed
    assert one.kernels_started == 1  # a crash costs a process, not the kernel


HARNESS_PATCH = """
import sys
def f(x):
    # walk up into the harness's frames and make every comparison true
    frame = sys._getframe(1)
    while frame is not None:
        g = frame.f_globals
        if "cmp" in g and "truth" in g:
            g["truth"] = lambda v: True
            g["pure"] = lambda v, depth=0: True
            g["cmp"] = lambda op, a, b: True
        frame = frame.f_back
    return 0
"""


def test_patching_the_harness_fails_the_test(one: KernelPool) -> None:
    report = one.run(HARNESS_PATCH, ["assert f(2) == 4", "assert 1 == 2", "assert 2 == 2"])
    assert [r.outcome for r in report.results] == ["failed", "failed", "passed"]
    assert "edited the sandbox harness" in report.results[0].message


def test_runs_with_other_limits_or_subprocesses_get_their_own_kernel(one: KernelPool) -> None:
    lim = FAST.model_copy(update={"memory_mb": 768})
    assert one.run("x = 1", ["assert x == 1"], limits=lim).passed
    sub = FAST.model_copy(update={"allow_subprocess": True})
    assert one.run("x = 1", ["assert x == 1"], limits=sub).passed
    assert one.run("x = 1", ["assert x == 1"]).passed
    assert one.kernels_started == 3
