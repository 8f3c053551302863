"""Your pytest-form tests in a separate, trusted process (``Limits.pytest_tests`` =
``"separate_process"``, the default; docs/sandbox.md, "Your tests in pytest's form").

The host starts a *test process* (``_testrun.py``: pytest and your module, no candidate
code) and loads the candidate in a fresh process of a warm kernel that answers calls
(``candidate_calls.py``). The host is the broker: each call the test makes on the code under
test comes up the test process's pipe and goes to the candidate's process; its reply (plain
data, a handle, an exception) goes back down. pytest decides each item in the test process
and the host reads the outcome from that pipe: nothing the candidate's process writes can
set it. One test process per run and module, started ahead (a warm spare) so its start is off
the run's critical path.
"""

from __future__ import annotations

import atexit
import marshal
import os
import shutil
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


class TestProcess:
    """One test process and its two pipes (see ``_testproc.Channel``)."""

    __test__ = False

    def __init__(self, memory_mb: int) -> None:
        self.folder = tempfile.mkdtemp(prefix="selfheal-t-")
        os.makedirs(os.path.join(self.folder, "tmp"))
        to_child_r, self.wfd = os.pipe()
        self.rfd, from_child_w = os.pipe()
        env = kernel_env(Path(self.folder), Path(self.folder) / "tmp")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-c",
                _BOOT,
                str(_HERE),
                str(to_child_r),
                str(from_child_w),
                str(memory_mb),
            ],
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
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
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

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.rfd = self.wfd = -1
        shutil.rmtree(self.folder, ignore_errors=True)


SPARES = 2
"""Test processes kept started ahead (the default pool runs two candidates at once)."""
_spares: dict[int, list[TestProcess]] = {}
_spares_lock = threading.Lock()


def take(memory_mb: int) -> TestProcess:
    """A started test process (a warm spare when there is one); the spares made up."""
    with _spares_lock:
        ready = _spares.setdefault(memory_mb, [])
        proc = ready.pop(0) if ready else None
        while len(ready) < SPARES:
            ready.append(TestProcess(memory_mb))
    if proc is None or proc.proc.poll() is not None:
        if proc is not None:
            proc.kill()
        proc = TestProcess(memory_mb)
    return proc


@atexit.register
def _kill_spares() -> None:
    with _spares_lock:
        procs = [p for ready in _spares.values() for p in ready]
        _spares.clear()
    for proc in procs:
        proc.kill()


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
        code: str,
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
        proc = take(lim.memory_mb)
        current: PytestItem | None = None
        started = time.monotonic()
        try:
            ready = await proc.recv(START_TIMEOUT)
            if ready is None or ready[0] != "ready":
                raise EOFError("the test process did not start")
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
        finally:  # killed now, reaped and its folder removed off the run's critical path
            if proc.proc.poll() is None:
                proc.proc.kill()
            threading.Thread(target=proc.kill, daemon=True).start()


def not_loaded(items: Sequence[PytestItem], load: LoadResult) -> list[TestResult]:
    where = f" at line {load.line}" if load.line else ""
    why = f"not run: the candidate did not load ({load.exc_type}{where}: {load.message})"
    return [
        TestResult(test_id=t.id, outcome="error", exc_type="CandidateNotLoaded", message=why)
        for t in items
    ]
