"""Your pytest-form tests in a separate, trusted process, forked per run by the test server, with
the host as the broker of every call to the candidate's process (``Limits.pytest_tests`` =
``"separate_process"``; docs/sandbox.md, "Your tests in pytest's form")."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import marshal
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from selfheal.kernel_sandbox._frames import readable, write_all
from selfheal.kernel_sandbox._harness.capture import NAME_CAP, clip
from selfheal.kernel_sandbox._run import KILL_GRACE, KernelSource
from selfheal.kernel_sandbox.candidate_calls import CandidateCalls
from selfheal.kernel_sandbox.containment import kernel_env
from selfheal.kernel_sandbox.types import LoadResult, Outcome, PytestItem, TestResult

_HERE = Path(__file__).parent
_BOOT = (
    "import sys; here = sys.argv[1]; sys.argv = sys.argv[1:]; "
    "exec(compile(open(here + '/_testrun.py').read(), here + '/_testrun.py', 'exec'))"
)
START_TIMEOUT = 60.0
"""Seconds a test process may take to start (Python and pytest imported)."""
_TEXT = 16000
_MAX_FRAME = 64 << 20
_OUTCOMES = ("passed", "failed", "error", "timeout", "crashed")


class Pipes:
    """Framed ``marshal`` messages over two non-blocking descriptors (``_testproc.Channel``
    is the other end)."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.buf = bytearray()

    async def recv(self, timeout: float) -> tuple[Any, ...] | None:
        """The next message, or None after ``timeout`` s; ``EOFError`` once it is gone."""
        end = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 8:
                n = int.from_bytes(self.buf[:8], "big")
                if n > _MAX_FRAME:
                    raise EOFError("the test process sent a frame too large")
                if len(self.buf) >= 8 + n:
                    data = bytes(self.buf[8 : 8 + n])
                    del self.buf[: 8 + n]
                    try:
                        m = marshal.loads(data)
                    except (ValueError, EOFError, TypeError) as e:
                        raise EOFError("the test process sent a malformed message") from e
                    if type(m) is not tuple or not m:
                        raise EOFError("the test process sent a malformed message")
                    return m
            left = end - time.monotonic()
            if left <= 0:
                return None
            await readable(self.rfd, left)
            try:
                chunk = os.read(self.rfd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                raise EOFError("the test process ended")
            self.buf += chunk

    async def send(self, obj: Any) -> None:
        data = marshal.dumps(obj)
        await write_all(self.wfd, len(data).to_bytes(8, "big") + data)

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.rfd = self.wfd = -1


class TestServer:
    """The test server (``_testrun.main``): pytest imported and configured once; it forks a
    test process for each run."""

    __test__ = False

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="selfheal-t-")
        os.makedirs(os.path.join(self.folder, "tmp"))
        to_child_r, wfd = os.pipe()
        rfd, from_child_w = os.pipe()
        env = kernel_env(Path(self.folder), Path(self.folder) / "tmp")
        argv = [str(_HERE), str(to_child_r), str(from_child_w)]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, *argv],
            cwd=self.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_child_r, from_child_w),
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        self.ctl = Pipes(rfd, wfd)
        self.ready = False
        self.runs = 0
        self.lock = threading.Lock()

    def _wait_ready(self) -> None:
        """Block until the server says ``ready`` (``EOFError`` if it does not)."""
        with self.lock:
            end = time.monotonic() + START_TIMEOUT
            while not self.ready:
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise EOFError("the test server did not start")
                select.select([self.ctl.rfd], [], [], min(left, 0.5))
                with contextlib.suppress(BlockingIOError):
                    chunk = os.read(self.ctl.rfd, 1 << 16)
                    if not chunk:
                        raise EOFError("the test server ended")
                    self.ctl.buf += chunk
                if len(self.ctl.buf) >= 8 + int.from_bytes(self.ctl.buf[:8], "big"):
                    self.ready = True  # (its one message: "ready")

    async def fork(self, memory_mb: int) -> TestRun:
        """A fresh test process for one run (its address space bounded to ``memory_mb``),
        forked by the server, on two FIFOs of its own."""
        if not self.ready:  # (callers on several threads and loops: one waits, in a thread)
            await asyncio.to_thread(self._wait_ready)
        with self.lock:
            self.runs += 1
            run = os.path.join(self.folder, f"run-{self.runs}")
        os.mkdir(run)
        os.mkfifo(os.path.join(run, "in"), 0o600)
        os.mkfifo(os.path.join(run, "out"), 0o600)
        rfd = os.open(os.path.join(run, "out"), os.O_RDONLY | os.O_NONBLOCK)
        wfd = os.open(os.path.join(run, "in"), os.O_RDWR | os.O_NONBLOCK)
        await self.ctl.send(("fork", run, int(memory_mb)))
        return TestRun(rfd, wfd, run)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.ctl.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class TestRun(Pipes):
    """One run's test process (forked by the server; not the host's child)."""

    __test__ = False

    def __init__(self, rfd: int, wfd: int, folder: str) -> None:
        super().__init__(rfd, wfd)
        self.folder = folder
        self.pidfd = -1

    def adopt(self, pid: Any) -> None:
        if type(pid) is int and pid > 0:
            with contextlib.suppress(OSError):
                self.pidfd = os.pidfd_open(pid)

    def kill(self) -> None:
        """Kill it (the server reaps it), close the pipes, remove its folder."""
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            os.close(self.pidfd)
            self.pidfd = -1
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_servers: list[TestServer] = []  # the one server, when started
_servers_lock = threading.Lock()


def server() -> TestServer:
    """The test server (started on first use, again if it died). It dies with the thread
    that starts it: ``warm`` starts it from the caller's thread before a heal's runs."""
    with _servers_lock:
        s = _servers[0] if _servers else None
        if s is None or s.proc.poll() is not None:
            if s is not None:
                s.kill()
            s = TestServer()
            _servers[:] = [s]
        return s


def warm() -> None:
    """Start the test server now, if it is not running (its start is not waited for)."""
    server()


@atexit.register
def _kill_servers() -> None:
    with _servers_lock:
        servers = list(_servers)
        _servers.clear()
    for s in servers:
        s.kill()


def _result(item: PytestItem, m: tuple[Any, ...], output_limit: int) -> TestResult:
    _, _id, outcome, exc, msg, tb, out, err, dur = m
    return TestResult(
        test_id=item.id,
        outcome=outcome if outcome in _OUTCOMES else "error",
        exc_type=clip(exc, NAME_CAP) if exc is not None else None,
        message=clip(msg, _TEXT),
        traceback=clip(tb, _TEXT, _TEXT // 2),
        stdout=clip(out, output_limit),
        stderr=clip(err, output_limit),
        duration=float(dur) if type(dur) is float else 0.0,
    )


class PytestRun:
    """The pytest items of one candidate's run (see the module docstring)."""

    def __init__(
        self,
        source: KernelSource,
        items: Sequence[PytestItem],
        calls: CandidateCalls,
        deadline: float,
    ) -> None:
        self.source = source
        self.items = list(items)
        self.calls = calls
        self.limits = calls.limits
        self.deadline = deadline
        self.results: dict[str, TestResult] = {}
        self.budget_exhausted = False

    def _set(self, item: PytestItem, outcome: Outcome, exc: str | None, why: str) -> None:
        if item.id not in self.results:
            self.results[item.id] = TestResult(
                test_id=item.id, outcome=outcome, exc_type=exc, message=why
            )

    async def go(self) -> None:
        modules: dict[str, list[PytestItem]] = {}
        for t in self.items:
            modules.setdefault(t.module, []).append(t)
        for module, items in modules.items():
            pending = list(items)
            while pending:
                if time.monotonic() >= self.deadline:
                    self.budget_exhausted = True
                    for t in pending:
                        why = f"the run's time budget ({self.limits.run_timeout}s) was spent"
                        self._set(t, "timeout", "TimeoutError", why)
                    break
                before = len(pending)
                await self._module(module, pending)
                pending = [t for t in pending if t.id not in self.results]
                if len(pending) == before:  # no progress: pytest would not run them
                    for t in pending:
                        self._set(t, "error", "SandboxError", "pytest did not run this item")
                    break

    async def _module(self, module: str, pending: list[PytestItem]) -> None:
        """Run ``pending`` (items of ``module``) in one test process, until it finishes or
        one of its items runs over its time (the process is then killed)."""
        lim = self.limits
        by_node = {t.nodeid: t for t in pending}
        current: PytestItem | None = None
        started = time.monotonic()
        proc = await _started(lim.memory_mb)
        if isinstance(proc, str):
            for t in pending:
                self._set(t, "error", "SandboxError", f"the test process did not start: {proc}")
            return
        try:
            left = max(0.01, self.deadline - time.monotonic())
            names = await self.calls.call("namespace", [], {}, min(left, lim.test_timeout), left)
            await proc.send(("run", module, [t.nodeid for t in pending], names))
            mark = time.monotonic()
            while True:
                now = time.monotonic()
                if current is not None:
                    limit_at = started + lim.test_timeout + KILL_GRACE
                else:  # collecting the module, or between items
                    limit_at = mark + lim.load_timeout + lim.test_timeout
                m = await proc.recv(max(0.0, min(limit_at, self.deadline) - now))
                if m is None:
                    if current is not None:
                        why = f"the test took over {lim.test_timeout}s and was stopped"
                        self._set(current, "timeout", "TimeoutError", why)
                    return
                kind = m[0]
                if kind == "start" and len(m) == 2:
                    current = by_node.get(m[1])
                    started = time.monotonic()
                elif kind == "call" and len(m) == 4:  # (also while the module is imported)
                    left = (
                        started + lim.test_timeout if current is not None else limit_at
                    ) - time.monotonic()
                    reply = await self.calls.call(m[1], m[2], m[3], left, self.deadline)
                    await proc.send(("r", *reply))
                elif kind == "item" and len(m) == 9:
                    item = by_node.get(m[1])
                    if item is not None:
                        self.results[item.id] = _result(item, m, lim.output_limit)
                    current = None
                    mark = time.monotonic()
                elif kind == "finished":
                    return
                else:
                    raise EOFError("the test process sent a message out of turn")
        except EOFError as e:
            if current is not None:
                self._set(current, "error", "SandboxError", f"the test process failed: {e}")
        finally:
            proc.kill()


async def _started(memory_mb: int) -> TestRun | str:
    """A test process that said ``ready``, or why there is none; a server that died (it dies
    with the thread that started it) is replaced once."""
    why = ""
    for _ in range(2):
        srv = server()
        proc: TestRun | None = None
        try:
            proc = await srv.fork(memory_mb)
            end = time.monotonic() + START_TIMEOUT
            while time.monotonic() < end:
                m = await proc.recv(0.5)
                if m is not None:
                    if m[0] != "ready" or len(m) != 3:
                        raise EOFError("the test process did not start")
                    proc.adopt(m[2])
                    return proc
                if srv.proc.poll() is not None:
                    raise EOFError("the test server died")
            raise EOFError(f"the test process did not start within {START_TIMEOUT}s")
        except (EOFError, OSError) as e:
            why = str(e)
            if proc is not None:
                proc.kill()
            with _servers_lock:
                if srv in _servers:
                    _servers.remove(srv)
            srv.kill()
    return why


def not_loaded(items: Sequence[PytestItem], load: LoadResult) -> list[TestResult]:
    where = f" at line {load.line}" if load.line else ""
    why = f"not run: the candidate did not load ({load.exc_type}{where}: {load.message})"
    return [
        TestResult(test_id=t.id, outcome="error", exc_type="CandidateNotLoaded", message=why)
        for t in items
    ]
