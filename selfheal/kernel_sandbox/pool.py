"""``KernelPool``: warm sandbox kernels, each serving runs in fresh forked processes."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from selfheal._sync import enter, loop_serves, on_process_loop, process_loop, submit, sync_twin
from selfheal.errors import ConfigError, SandboxError
from selfheal.kernel_sandbox.boundary import BoundaryInfo, BoundaryMode, boundary_for, mode_from_env
from selfheal.kernel_sandbox.containment import netns_available
from selfheal.kernel_sandbox.execution import (
    InputFiles,
    input_files,
    run_candidate,
    run_snippet,
    run_trace,
)
from selfheal.kernel_sandbox.kernel import SandboxKernel
from selfheal.kernel_sandbox.leftovers import sweep_once
from selfheal.kernel_sandbox.types import (
    AssertTest,
    ExecutionReport,
    Limits,
    ProbeCall,
    SandboxTest,
    SnippetResult,
    TraceLimits,
    TraceResult,
)
from selfheal.kernel_sandbox.zygote import Zygote

T = TypeVar("T")


class KernelPool:
    """A pool of warm sandbox kernels. Implements the ``Executor`` protocol: every run in a fresh
    process forked from a warm kernel, at most ``size`` at once; async at its core, on selfheal's
    process loop, with sync twins. The options: docs/sandbox.md, "API"."""

    def __init__(
        self,
        size: int = 2,
        *,
        limits: Limits | None = None,
        network_namespace: bool | None = None,
        python: str | None = None,
        startup_timeout: float = 30.0,
        fast_start: bool = True,
        boundary: BoundaryMode | None = None,
    ) -> None:
        if size < 1:
            raise ConfigError(f"KernelPool size must be at least 1, got {size}")
        self.size = size
        self.limits = limits or Limits()
        available = netns_available()
        if network_namespace and not available:
            raise ConfigError(
                "network_namespace=True but `unshare --net` does not work here (needs root "
                "or unprivileged user namespaces); pass network_namespace=None to fall back"
            )
        self.network_namespace = available if network_namespace is None else network_namespace
        self.boundary: BoundaryInfo = boundary_for(boundary)
        """The boundary every candidate runs inside (``boundary``: a mode, default
        ``$SELFHEAL_SANDBOX`` or ``auto``; ``strict`` without Landlock raises here)."""
        self.python = python
        self.startup_timeout = startup_timeout
        self._ready: collections.deque[SandboxKernel] = collections.deque()
        self._leased: set[SandboxKernel] = set()
        self._dying: set[SandboxKernel] = set()
        self._starting = 0
        self._closed = False
        self._error: BaseException | None = None
        self._failures = 0
        self.kernels_started = 0
        self.fast_start = fast_start
        self._zygote: Zygote | None = None
        self._zygote_failures = 0
        self._loop = process_loop()
        self._cond = asyncio.Condition()  # (bound to the process loop on first use)
        self._chores: set[asyncio.Task[None]] = set()  # kernel starts and kills in flight

    def start(self) -> KernelPool:
        """Start warming ``size`` kernels in the background (``run`` does it too). The first
        pool of a process first removes what killed hosts left behind (``leftovers``)."""
        sweep_once()
        if self._closed:
            raise SandboxError("this KernelPool is closed; create a new one")
        self._loop.call_soon_threadsafe(self._refill)
        return self

    async def await_ready(self, timeout: float = 60.0) -> bool:
        """Wait until ``size`` warm kernels are ready and idle (for benchmarks and tests)."""
        if self._closed:
            return False
        return await self._submit(self._all_idle(timeout))

    wait_ready = sync_twin(await_ready)

    async def _all_idle(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        async with self._cond:
            self._refill()
            while len(self._ready) < self.size:
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), left)
            return True

    def close(self) -> None:
        """Kill every kernel of the pool. Idempotent; also runs at interpreter exit."""
        if self._closed and not (self._ready or self._leased or self._dying or self._zygote):
            return
        self._closed = True
        if on_process_loop() or not loop_serves(self._loop) or sys.is_finalizing():
            self._kill_now()  # (on the loop itself nothing may be awaited; at exit, no loop)
            return
        with contextlib.suppress(Exception):
            submit(self._shutdown(), self._loop).done.result(timeout=60)

    async def _shutdown(self) -> None:
        """(On the process loop.) Cancel the kernel starts, wake the runs waiting for a
        kernel (they fail: the pool is closed), kill every kernel."""
        chores = list(self._chores)
        for t in chores:
            t.cancel()
        await asyncio.gather(*chores, return_exceptions=True)
        async with self._cond:
            self._cond.notify_all()
        kernels = [*self._ready, *self._leased, *self._dying]
        self._ready.clear()
        await asyncio.gather(*(k.akill() for k in kernels), return_exceptions=True)
        self._kill_now()

    def _kill_now(self) -> None:
        """Kill every kernel and the fork server at once, blocking."""
        for t in list(self._chores):
            t.cancel()
        kernels = [*self._ready, *self._leased, *self._dying]
        self._ready.clear()
        for k in kernels:
            with contextlib.suppress(Exception):
                k.kc.stop_channels()
            k.kill()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def __enter__(self) -> KernelPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # (everything below runs on the process loop)
    def _get_zygote(self) -> Zygote | None:
        if not self.fast_start:
            return None
        if self._zygote is not None and self._zygote.alive:
            return self._zygote
        if self._zygote_failures >= 2 or self._closed:
            return None
        try:
            # (it and every kernel it forks die with this thread: the process loop's)
            self._zygote = Zygote(self.python, timeout=self.startup_timeout)
        except Exception:
            self._zygote_failures += 1
            self._zygote = None
        return self._zygote

    async def _new_kernel(
        self, limits: Limits, network_namespace: bool, *, forked: bool = True
    ) -> SandboxKernel:
        zygote = self._get_zygote() if forked else None
        kw: dict[str, Any] = {
            "network_namespace": network_namespace,
            "python": self.python,
            "startup_timeout": self.startup_timeout,
            "boundary": self.boundary.kind,
        }
        try:
            k = await SandboxKernel.start(limits, zygote=zygote, **kw)
        except SandboxError:
            if zygote is None:
                raise
            self._zygote_failures += 1
            if self._zygote_failures >= 2:
                self.fast_start = False  # forked kernels do not work here: stop trying
            k = await SandboxKernel.start(limits, **kw)
        self.kernels_started += 1
        return k

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(work)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    def _refill(self) -> None:
        """Start kernels until ``size`` are ready, busy or starting."""
        while (
            not self._closed
            and len(self._ready) + len(self._leased) + self._starting < self.size
            and self._failures < 3
        ):
            self._starting += 1
            self._chore(self._spawn())

    async def _spawn(self) -> None:
        try:
            k = await self._new_kernel(self.limits, self.network_namespace)
        except Exception as e:
            self._error, k = e, None
        finally:
            self._starting -= 1  # (a cancelled start too: the pool is closing)
        async with self._cond:
            self._failures = self._failures + 1 if k is None else 0
            if k is not None and not self._closed:
                self._ready.append(k)
            self._cond.notify_all()
        if k is not None and self._closed:
            await k.akill()

    async def acquire(self, limits: Limits, deadline: float) -> SandboxKernel:
        """Take an idle warm kernel (waiting for one if needed) set up for ``limits``."""
        if limits.allow_network and self.network_namespace:
            # pool kernels have no network: this run needs its own kernel (used once)
            k = await self._new_kernel(limits, network_namespace=False, forked=False)
            k.retire()
            return k
        async with self._cond:
            if self._closed:
                raise SandboxError("this KernelPool is closed; create a new one")
            self._refill()
            while not self._ready:
                if self._closed:
                    raise SandboxError("the KernelPool was closed while waiting for a kernel")
                if self._failures >= 3 and self._starting == 0:
                    err = self._error
                    self._failures = 0  # let a later call try again
                    raise SandboxError(
                        f"sandbox kernels fail to start: {err}; see the message above for "
                        "what to fix"
                    ) from err
                self._refill()
                # (``deadline`` is the run's: waiting for a kernel does not eat it)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), 0.5)
            k = self._ready.popleft()
            self._leased.add(k)
        try:
            if limits.allow_subprocess:
                k.retire()  # processes it may have started are not worth chasing: replace it
            k.adopt_limits(limits)
        except Exception:
            await self.release(k)
            raise
        return k

    async def release(self, kernel: SandboxKernel) -> None:
        """Give back a kernel: idle again if it can serve more runs, else killed in the
        background and replaced."""
        async with self._cond:
            self._leased.discard(kernel)
            if kernel.reusable and not self._closed:
                self._ready.append(kernel)
                self._cond.notify_all()
                return
            self._dying.add(kernel)
            self._refill()
        self._chore(self._bury(kernel))

    async def _bury(self, kernel: SandboxKernel) -> None:
        await kernel.akill()
        self._dying.discard(kernel)

    def _limits(self, timeout: float | None, limits: Limits | None) -> Limits:
        lim = limits or self.limits
        if timeout is not None:
            if timeout <= 0:
                raise ConfigError(f"timeout must be positive, got {timeout}")
            lim = lim.model_copy(update={"test_timeout": float(timeout)})
        return lim

    async def _submit(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` on the process loop (a heal's call is already there; another
        loop's enters it, and cancelling the caller cancels the run)."""
        if self._closed or self._loop.is_closed():
            work.close()
            raise SandboxError("this KernelPool is closed; create a new one")
        return await enter(work, self._loop)

    async def arun(
        self,
        code: str,
        tests: Sequence[str | SandboxTest],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
        files: InputFiles | None = None,
    ) -> ExecutionReport:
        """Load ``code`` in a fresh process and run each test; ``timeout`` is per test.
        ``files`` (name -> host path or bytes) are copied into the run's folder first: the
        only way a candidate reads a file of the host (the boundary refuses the rest)."""
        lim = self._limits(timeout, limits)
        return await self._submit(run_candidate(self, code, tests, lim, input_files(files, lim)))

    async def arun_snippet(
        self,
        code: str,
        *,
        setup: str = "",
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> SnippetResult:
        """Run ``setup`` (usually the candidate), then ``code``; report the last value."""
        lim = self._limits(timeout, limits)
        return await self._submit(run_snippet(self, code, setup, lim))

    async def arun_many(
        self,
        items: Sequence[tuple[str, Sequence[str | SandboxTest]]],
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> list[ExecutionReport]:
        """Run many ``(code, tests)`` pairs, at most ``size`` at once (one per kernel);
        reports in the order given. A population's round: K candidates, same tests."""
        lim = self._limits(timeout, limits)

        async def batch() -> list[ExecutionReport]:
            runs = [run_candidate(self, code, tests, lim) for code, tests in items]
            return list(await asyncio.gather(*runs))

        return await self._submit(batch())

    async def arun_trace(
        self,
        code: str,
        test: str | AssertTest | ProbeCall,
        *,
        timeout: float | None = None,
        limits: Limits | None = None,
        trace: TraceLimits | None = None,
    ) -> TraceResult:
        """Load ``code``, run ``test`` with the candidate's lines traced (the debugger's
        ``trace_failure``): the lines that ran, in which call, with the locals at each step,
        bounded by ``trace``. No verdict is taken from it."""
        lim = self._limits(timeout, limits)
        return await self._submit(run_trace(self, code, test, lim, trace or TraceLimits()))

    run = sync_twin(arun)
    run_snippet = sync_twin(arun_snippet)
    run_many = sync_twin(arun_many)
    run_trace = sync_twin(arun_trace)


_defaults: dict[str, KernelPool] = {}
_default_lock = threading.Lock()


def get_default_pool(boundary: BoundaryMode | None = None) -> KernelPool:
    """The process-wide shared pool (size 2, default limits) for the sandbox mode
    ``boundary`` (default: ``$SELFHEAL_SANDBOX``, else ``auto``), created on first use and
    closed at interpreter exit."""
    mode = mode_from_env(boundary)
    with _default_lock:
        pool = _defaults.get(mode)
        if pool is None or pool._closed:
            pool = _defaults[mode] = KernelPool(size=2, boundary=mode).start()
            atexit.register(pool.close)
        return pool
