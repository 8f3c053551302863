"""The result channel is read in bounded chunks with caps per run (issue 43, item 4).

Written as an attacker who read the source would: the candidate finds the result FIFO's
descriptor (the one write-only FIFO among its descriptors) and writes megabytes without a
newline from several threads. Before the fix the host kept all of it in one buffer (the
test in flight then passed, its run's process flooding for as long as it liked); now the
run's process is killed once it goes over the caps, its test says why, the run goes on in a
fresh process, a run on the pool's other kernel keeps to its own limits, and the kernel
serves the next run.
"""

from __future__ import annotations

import os
import threading

from selfheal.kernel_sandbox import KernelPool, Limits
from selfheal.kernel_sandbox._frames import CHUNK, JUNK_CAP, ResultReader, line_cap

FLOOD = r"""
import fcntl, os, stat, threading, time

def _result_pipes():
    found = []
    for fd in range(3, 257):
        try:
            st = os.fstat(fd)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
    return found

def _flood(fd):
    junk = b"x" * (1 << 20)  # no newline, ever
    while True:
        try:
            os.write(fd, junk)
        except OSError:
            time.sleep(0.001)

def flood():
    pipes = _result_pipes()
    for fd in pipes:
        try:
            fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: a bigger pipe, more per read
        except OSError:
            pass
        for _ in range(4):
            threading.Thread(target=_flood, args=(fd,), daemon=True).start()
    time.sleep(6)
    return len(pipes)

def g():
    return 1
"""

NORMAL = """
import time

def f(x):
    time.sleep(1.5)  # still running while the other kernel's run floods
    return 2 * x
"""

LIMITS = Limits(test_timeout=10.0, load_timeout=5.0, run_timeout=30.0)


def test_a_flooding_run_is_stopped_and_the_other_kernel_keeps_its_time() -> None:
    with KernelPool(size=2, limits=LIMITS) as pool:
        assert pool.wait_ready(60), "sandbox kernels did not start"
        started = pool.kernels_started
        flooded, other = pool.run_many(
            [
                (FLOOD, ["assert flood() == 1", "assert g() == 1"]),
                (NORMAL, ["assert f(2) == 4"]),
            ]
        )
        first, second = flooded.results
        assert first.outcome == "error" and first.exc_type == "ChannelFlood", first
        assert "flooded the result channel" in first.message
        assert second.outcome == "passed"  # the run went on in a fresh process
        assert flooded.kernel_restarts == 1
        # the run beside it was not held up by the flood: it ended within its own limits
        assert other.passed, other
        assert other.duration < LIMITS.test_timeout
        # the kernel serves the next run (no kernel was replaced)
        assert pool.run("def h(x):\n    return x\n", ["assert h(3) == 3"]).passed
        assert pool.kernels_started == started


def test_the_reader_keeps_a_bounded_buffer_and_reports_the_flood_once() -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)
    reader = ResultReader(r)
    cap = reader.new_run(1, 64 * 1024)
    assert cap == line_cap(64 * 1024)
    junk = b"j" * (1 << 20)  # no newline

    def writer() -> None:
        written = 0
        while written < JUNK_CAP + 8 * (1 << 20):
            written += os.write(w, junk)
        os.write(w, b"\nGOOD\n")

    t = threading.Thread(target=writer)
    t.start()
    reports = []
    peak = 0
    good = None
    while good is None:
        good = reader.take(lambda line: line if line == b"GOOD" else None)
        peak = max(peak, len(reader.buf))
        why = reader.flood()
        if why:
            reports.append(why)
    t.join()
    os.close(w)
    os.close(r)
    assert good == b"GOOD"  # a line after the junk is read
    assert peak <= cap + CHUNK  # never more than one line's cap of junk kept
    assert len(reports) == 1 and "flooded the result channel" in reports[0]


def test_many_short_junk_lines_count_as_junk() -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    reader = ResultReader(r)
    reader.new_run(1, 64 * 1024)
    lines = b"a b\n" * (16 * 1024)  # many short lines: each one is checked, none kept
    while (why := reader.flood()) is None:
        try:
            os.write(w, lines)
        except BlockingIOError:
            pass
        assert reader.take(lambda _: None) is None
    os.close(w)
    os.close(r)
    assert reader.junk > JUNK_CAP and "flooded" in why
    assert len(reader.buf) < len(lines)
