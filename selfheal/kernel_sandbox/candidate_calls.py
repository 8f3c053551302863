"""The host's end of a candidate answering calls (``_harness/remote.py`` is the other): one
candidate loaded in a fresh process of a warm kernel, then each call written into the
kernel's calls FIFO and its reply read from the signed result lines. A call that runs over
its time, or a process that dies, ends that process; the next call loads the candidate again
in a fresh one (as a run goes on after a crash). Used by ``pytest_process.py``."""

from __future__ import annotations

import os
import time
from typing import Any

from selfheal.kernel_sandbox._frames import write_all
from selfheal.kernel_sandbox._run import EXIT_GRACE, KILL_GRACE, KernelSource, _gone, _load_from
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.types import Limits, LoadResult

CALLS_BUDGET = 4096
"""Replies one process may send, for the result pipe's byte cap (``_frames.run_cap``)."""
_PER_REQUEST = ("load_timeout", "test_timeout", "output_limit", "disk_mb")


class CandidateCalls:
    """A candidate loaded once, answering calls (see the module docstring)."""

    def __init__(
        self,
        source: KernelSource,
        code: str,
        limits: Limits,
        files: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        self.source = source
        self.code = code
        self.limits = limits
        self.files = files
        self.kernel: SandboxKernel | None = None
        self.seq = 0  # the run in the kernel that answers, 0 when none is up
        self.child = 0  # its process id
        self.n = 0  # calls sent
        self.load: LoadResult | None = None  # the first load's result
        self.restarts = 0
        self.boundary = ""
        self.fd = -1  # the kernel's calls FIFO, open for writing while the kernel is held
        self.named = False  # the candidate's names were asked for: ask again after a reload

    async def start(self, deadline: float) -> LoadResult:
        """Load the candidate (again, after a crash or a timeout): the first load's result,
        or a failed reload's."""
        if self.kernel is None or not self.kernel.reusable:
            if self.kernel is not None:
                self._close_fd()
                await self.source.release(self.kernel)
                self.kernel = None
            self.kernel = await self.source.acquire(self.limits, deadline)
            self.boundary = self.kernel.boundary_text
        kernel = self.kernel
        req: dict[str, Any] = {
            "code": self.code,
            "tests": [("remote", "pytest")],
            "start": 0,
            "files": self.files,
            "calls_budget": CALLS_BUDGET,
            "allow_network": self.limits.allow_network,
            "allow_subprocess": self.limits.allow_subprocess,
        }
        req |= self.limits.model_dump(include=set(_PER_REQUEST))
        self.seq = seq = await kernel.send_request(req)
        self.child = 0
        end = time.monotonic() + self.limits.load_timeout + KILL_GRACE
        load: LoadResult | None = None
        while load is None:
            left = end - time.monotonic()
            if left <= 0:
                load = LoadResult(
                    ok=False,
                    outcome="timeout",
                    exc_type="TimeoutError",
                    message=f"loading the candidate took over {self.limits.load_timeout}s",
                )
                break
            ev = await kernel.next_event(seq, min(left, 0.25))
            if ev.kind == "message" and ev.data[0] == "start":
                self.child = int(ev.data[1])
            elif ev.kind == "message" and ev.data[0] == "load":
                load = _load_from(ev.data, self.limits.output_limit)
            elif ev.kind in ("dead", "replied", "flooded") or (
                ev.kind == "message" and ev.data[0] in ("exit", "internal", "done")
            ):
                load = LoadResult(
                    ok=False,
                    outcome="crashed",
                    exc_type="KernelDied",
                    message="the candidate's process ended while it loaded",
                )
        if not load.ok:
            await self._stop()
        if self.load is None:
            self.load = load
        else:
            self.restarts += 1
        return load

    async def call(
        self, op: str, args: list[Any], kwargs: dict[str, Any], timeout: float, deadline: float
    ) -> tuple[Any, ...]:
        """One call: ``(reply, stdout, stderr)``, the reply as ``_harness/remote.py`` sends it
        (``("v", ...)``, ``("h", ...)``, ``("x", ...)``, ``("t",)``), or ``("crashed", why)``
        when the candidate's process died under it or could not be loaded again."""
        if not self.seq:
            load = await self.start(deadline)
            if not load.ok:
                return (("crashed", f"the candidate did not load again: {load.message}"), "", "")
            if self.named:  # the same handles for its names as in the first process
                await self.call("namespace", [], {}, timeout, deadline)
        self.named = self.named or op == "namespace"
        kernel = self.kernel
        assert kernel is not None
        self.n += 1
        n = self.n
        msg = {"seq": self.seq, "n": n, "op": op, "args": args, "kwargs": kwargs}
        msg["timeout"] = max(0.01, timeout)
        await self._send(kernel, msg)
        end = time.monotonic() + timeout + KILL_GRACE
        while True:
            left = end - time.monotonic()
            if left <= 0:
                await self._stop()
                return (("t",), "", "")
            ev = await kernel.next_event(self.seq, min(left, 0.25))
            if ev.kind == "message":
                m = ev.data
                if m[0] == "reply" and m[1] == n and len(m) == 5:
                    return (m[2], m[3], m[4])
                if m[0] == "exit":
                    self.seq = 0
                    return (("crashed", "the candidate's process died during the call"), "", "")
                if m[0] in ("done", "internal", "load", "result"):  # not a call's answer
                    await self._stop()  # (a candidate writing its own lines): killed
                    why = f"the candidate's process sent {m[0]!r} during a call and was stopped"
                    return (("crashed", why), "", "")
            elif ev.kind in ("dead", "replied"):
                self.seq = 0
                return (("crashed", "the kernel died during the call"), "", "")
            elif ev.kind == "flooded":
                await self._stop()
                return (("crashed", str(ev.data[0])), "", "")

    async def _send(self, kernel: SandboxKernel, call: dict[str, Any]) -> None:
        """Write ``call`` into the kernel's calls FIFO (made by its harness, ``remote.py``)."""
        if self.fd < 0:
            self.fd = os.open(os.path.join(kernel.root, "calls"), os.O_WRONLY | os.O_NONBLOCK)
        await write_all(self.fd, kernel.frame(call))

    async def _stop(self) -> None:
        """End the process answering calls (killed), and wait until the kernel says so."""
        kernel, seq, self.seq = self.kernel, self.seq, 0
        if kernel is None or not seq:
            return
        if self.child:
            kernel.kill_child(self.child)
        if not self.child or not await _gone(kernel, seq):
            kernel.retire()

    async def close(self) -> None:
        """Tell the process to end, wait for it (``EXIT_GRACE`` s, then kill it), give the
        kernel back."""
        kernel = self.kernel
        if kernel is None:
            return
        try:
            if self.seq:
                seq = self.seq
                await self._send(kernel, {"seq": seq, "n": 0, "op": "end"})
                end = time.monotonic() + EXIT_GRACE
                while (left := end - time.monotonic()) > 0:
                    ev = await kernel.next_event(seq, min(left, 0.25))
                    if ev.kind in ("dead", "replied"):
                        break
                    if ev.kind == "message" and ev.data[0] in ("exit", "done"):
                        self.seq = 0
                        break
                await self._stop()
        finally:
            self._close_fd()
            self.kernel = None
            await self.source.release(kernel)

    def _close_fd(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
