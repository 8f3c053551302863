"""``KernelPool``: warm sandbox kernels, each serving runs in fresh forked processes."""

from __future__ import annotations

import asyncio
import atexit
import collections
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from selfheal._sync import sync_twin
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

__all__ = ["KernelPool", "get_default_pool"]

T = TypeVar("T")


class KernelPool:
    """A pool of warm sandbox kernels. Implements the ``Executor`` protocol.

    Every run gets a fresh process forked from a warm kernel (nothing one candidate
    defines, imports or patches is visible to the next), so a kernel serves run after run
    and a run costs no kernel start. Runs are thread-safe and async-friendly: at most
    ``size`` run at once (one per kernel); more callers wait for a kernel to be free. A
    kernel that served a run with other containment limits, with subprocesses or network
    allowed, or whose harness stopped answering, is killed and replaced in the background.

    ``network_namespace``: ``None`` (default) uses a fresh network namespace with no route
    out where the host allows it (root or user namespaces), ``True`` requires it, ``False``
    disables it. ``fast_start`` forks kernels from a fork server that has already imported
    ipykernel (falls back to a plain ``python -m ipykernel_launcher`` if that fails).
    """

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
        self._cond = threading.Condition()
        self._ready: collections.deque[SandboxKernel] = collections.deque()
        self._leased: set[SandboxKernel] = set()
        self._dying: set[SandboxKernel] = set()
        self._starting = 0
        self._closed = False
        self._error: BaseException | None = None
        self._failures = 0
        self._workers = ThreadPoolExecutor(max_workers=size + 1, thread_name_prefix="sandbox")
        self._runs = ThreadPoolExecutor(max_workers=max(8, 4 * size), thread_name_prefix="run")
        self.kernels_started = 0
        self.fast_start = fast_start
        self._zygote: Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._zygote_failures = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> KernelPool:
        """Start warming ``size`` kernels in the background (``run`` does it too). The first
        pool of a process first removes what killed hosts left behind (``leftovers``)."""
        sweep_once()
        with self._cond:
            if self._closed:
                raise SandboxError("this KernelPool is closed; create a new one")
            self._refill()
        return self

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Block until ``size`` warm kernels are ready and idle (for benchmarks and tests)."""
        end = time.monotonic() + timeout
        with self._cond:
            self._refill()
            while len(self._ready) < self.size:
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._cond.wait(left)
            return True

    def close(self) -> None:
        """Kill every kernel of the pool. Idempotent; also runs at interpreter exit."""
        with self._cond:
            self._closed = True
            ready = list(self._ready) + list(self._leased)
            self._ready.clear()
            self._cond.notify_all()
        for k in ready:
            k.kill()
        self._runs.shutdown(wait=False, cancel_futures=True)
        self._workers.shutdown(wait=True, cancel_futures=True)
        with self._cond:
            dying = list(self._dying)
        for k in dying:
            self._kill(k)
        with self._zygote_lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None

    def __enter__(self) -> KernelPool:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ kernels
    def _get_zygote(self) -> Zygote | None:
        if not self.fast_start:
            return None
        with self._zygote_lock:
            if self._zygote is not None and self._zygote.alive:
                return self._zygote
            if self._zygote_failures >= 2 or self._closed:
                return None
            try:
                self._zygote = Zygote(self.python, timeout=self.startup_timeout)
            except Exception:
                self._zygote_failures += 1
                self._zygote = None
            return self._zygote

    def _new_kernel(
        self, limits: Limits, network_namespace: bool, *, forked: bool = True
    ) -> SandboxKernel:
        # kernels die with the thread that started them (PR_SET_PDEATHSIG): the fork server
        # is only ever started from the pool's long-lived worker threads
        zygote = self._get_zygote() if forked else None
        kw: dict[str, Any] = {
            "network_namespace": network_namespace,
            "python": self.python,
            "startup_timeout": self.startup_timeout,
            "boundary": self.boundary.kind,
        }
        try:
            k = SandboxKernel(limits, zygote=zygote, **kw)
        except SandboxError:
            if zygote is None:
                raise
            with self._zygote_lock:
                self._zygote_failures += 1
                if self._zygote_failures >= 2:
                    self.fast_start = False  # forked kernels do not work here: stop trying
            k = SandboxKernel(limits, **kw)
        self.kernels_started += 1
        return k

    def _refill(self) -> None:
        """(Caller holds the lock.) Start kernels until ``size`` are ready, busy or starting."""
        while (
            not self._closed
            and len(self._ready) + len(self._leased) + self._starting < self.size
            and self._failures < 3
        ):
            self._starting += 1
            self._workers.submit(self._spawn)

    def _spawn(self) -> None:
        try:
            k = self._new_kernel(self.limits, self.network_namespace)
        except BaseException as e:
            with self._cond:
                self._starting -= 1
                self._error = e
                self._failures += 1
                self._cond.notify_all()
            return
        with self._cond:
            self._starting -= 1
            self._failures = 0
            closed = self._closed
            if not closed:
                self._ready.append(k)
                self._cond.notify_all()
        if closed:
            k.kill()

    def acquire(self, limits: Limits, deadline: float) -> SandboxKernel:
        """Take an idle warm kernel (waiting for one if needed) set up for ``limits``."""
        if limits.allow_network and self.network_namespace:
            # pool kernels have no network: this run needs its own kernel (used once)
            k = self._new_kernel(limits, network_namespace=False, forked=False)
            k.retire()
            return k
        with self._cond:
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
                left = deadline - time.monotonic()
                # waiting for a kernel does not eat the run budget below a start-up time
                self._cond.wait(max(0.05, min(left, 0.5)) if left > 0 else 0.5)
            k = self._ready.popleft()
            self._leased.add(k)
        try:
            if limits.allow_subprocess:
                k.retire()  # processes it may have started are not worth chasing: replace it
            k.adopt_limits(limits)
        except Exception:
            self.release(k)
            raise
        return k

    def release(self, kernel: SandboxKernel) -> None:
        """Give back a kernel: idle again if it can serve more runs, else killed in the
        background and replaced."""
        with self._cond:
            self._leased.discard(kernel)
            if kernel.reusable and not self._closed:
                self._ready.append(kernel)
                self._cond.notify_all()
                return
            self._dying.add(kernel)
            self._refill()
        try:
            self._workers.submit(self._kill, kernel)
        except RuntimeError:  # executor shut down
            self._kill(kernel)

    def _kill(self, kernel: SandboxKernel) -> None:
        kernel.kill()
        with self._cond:
            self._dying.discard(kernel)

    # ------------------------------------------------------------------ Executor
    def _limits(self, timeout: float | None, limits: Limits | None) -> Limits:
        lim = limits or self.limits
        if timeout is not None:
            if timeout <= 0:
                raise ConfigError(f"timeout must be positive, got {timeout}")
            lim = lim.model_copy(update={"test_timeout": float(timeout)})
        return lim

    async def _offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the blocking ``fn`` in one of the pool's run threads; a cancelled caller stops it
        (the candidate's process killed within 0.25 s, the kernel back in the pool)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        try:
            fut = loop.run_in_executor(self._runs, functools.partial(fn, *args, stop=stop))
        except RuntimeError as e:  # the run threads were shut down
            raise SandboxError("this KernelPool is closed; create a new one") from e
        try:
            return await fut
        except asyncio.CancelledError:
            stop.set()
            raise

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
        return await self._offload(run_candidate, self, code, tests, lim, input_files(files, lim))

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
        return await self._offload(run_snippet, self, code, setup, lim)

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
        gate = asyncio.Semaphore(self.size)

        async def one(code: str, tests: Sequence[str | SandboxTest]) -> ExecutionReport:
            async with gate:
                return await self._offload(run_candidate, self, code, tests, lim)

        return list(await asyncio.gather(*(one(c, t) for c, t in items)))

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
        return await self._offload(run_trace, self, code, test, lim, trace or TraceLimits())

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
