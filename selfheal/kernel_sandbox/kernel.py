"""One sandbox kernel: an ipykernel in its own process (group, cgroup, network namespace),
spoken to over jupyter_client only at warm-up. After that it serves runs: each run is one
request written into a FIFO, served by a process the harness forks for it (see
``_harness/server.py``), and its results come back as signed lines on a second FIFO."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient

from selfheal.errors import SandboxError
from selfheal.kernel_sandbox._frames import (
    ResultReader,
    frame_request,
    read_line,
    readable,
    write_all,
)
from selfheal.kernel_sandbox._harness import Setup, install_code
from selfheal.kernel_sandbox._launch import cleanup, connection, launch
from selfheal.kernel_sandbox.boundary import BoundaryKind, mount_namespace_available
from selfheal.kernel_sandbox.containment import (
    CgroupSet,
    apply_rlimits,
    kernel_env,
    nproc_budget,
    process_limits,
    rlimit_pairs,
)
from selfheal.kernel_sandbox.leftovers import mark_owner
from selfheal.kernel_sandbox.types import Limits
from selfheal.kernel_sandbox.zygote import Zygote

MAX_USES = 1000
"""Runs one kernel serves before it is replaced (each run has a fresh forked process)."""

_live: weakref.WeakSet[SandboxKernel] = weakref.WeakSet()
_live_lock = threading.Lock()
_killed_roots: collections.deque[str] = collections.deque(maxlen=10_000)


def killed_roots() -> list[str]:
    """Directories of the kernels this process has killed and of the runs that ended (tests
    use them to check that no process of a killed kernel or a finished run is left)."""
    with _live_lock:
        return list(_killed_roots)


def live_kernels() -> list[SandboxKernel]:
    """Kernels started by this process and not yet killed."""
    with _live_lock:
        return [k for k in _live if k.alive_process]


@atexit.register
def shutdown_all_kernels() -> None:
    """Kill every sandbox kernel this process started (also registered with ``atexit``)."""
    with _live_lock:
        ks = list(_live)
    for k in ks:
        k.kill()


@dataclass(frozen=True)
class KernelEvent:
    """What ``SandboxKernel.next_event`` saw."""

    kind: str
    """``message`` (a verified harness message of the run), ``idle`` (nothing yet), ``dead``
    (the kernel process died), ``replied`` (the harness's loop ended), ``flooded`` (the
    run's process went over the result pipe's caps: kill it)."""
    data: tuple[Any, ...] = ()
    """The harness message, without its run number, for ``message``; why, for ``flooded``."""


class SandboxKernel:
    """A started, warm kernel with the harness installed and serving (``await
    SandboxKernel.start(...)``). Serves one run at a time; each run gets a fresh process
    forked from the warm kernel, so nothing one run defines, imports or patches is visible
    to the next. Its I/O is awaited on the event loop that started it (the pool's)."""

    def __init__(self, limits: Limits, *, network_namespace: bool, boundary: BoundaryKind) -> None:
        # (the kernel's files only; ``start`` launches it)
        self.limits = limits
        self.boundary = boundary
        self.boundary_text = ""  # what the kernel reports it enforces, once serving
        self.network_namespace = network_namespace
        self.root = tempfile.mkdtemp(prefix="selfheal-k-")
        os.chmod(self.root, 0o700)
        mark_owner(self.root)  # a host killed from now on leaves it for the next to sweep
        root = Path(self.root)
        self.work = root / "work"
        tmp = self.work / ".tmp"
        for d in (self.work, root / "home", tmp):
            d.mkdir(parents=True, exist_ok=True)
        self._key = secrets.token_bytes(32)
        self.key_file = root / "key"
        self.fifo = root / "req"
        os.mkfifo(self.fifo, 0o600)
        # the result pipe (a named FIFO: ipykernel does not keep inherited descriptors)
        self.out_fifo = root / "out"
        os.mkfifo(self.out_fifo, 0o600)
        self._rfd = os.open(self.out_fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._reader = ResultReader(self._rfd)
        self.mount_namespace = mount_namespace_available()  # then each run's folder is a tmpfs
        self.key_file.write_bytes(self._key)
        self._seq = 0
        self.uses = 0
        self._retired = False
        self._serving = False
        self._msg_id = ""
        self._nproc: int | None = None  # RLIMIT_NPROC of a run with other limits (non-root)
        self._killed = False
        self._lock = threading.Lock()
        self.cgroups = CgroupSet.create(limits)
        mark_owner(self.root, self.cgroups.dirs.values())

    @classmethod
    async def start(
        cls,
        limits: Limits,
        *,
        network_namespace: bool,
        python: str | None = None,
        startup_timeout: float = 30.0,
        zygote: Zygote | None = None,
        boundary: BoundaryKind = "off",
    ) -> SandboxKernel:
        """Launch a kernel (forked by ``zygote`` if given), install the harness and wait
        until it serves; a cancelled start kills what it started."""
        kernel = cls(limits, network_namespace=network_namespace, boundary=boundary)
        await kernel._launch(python, zygote, startup_timeout)
        return kernel

    async def _launch(self, python: str | None, zygote: Zygote | None, timeout: float) -> None:
        root = Path(self.root)
        conn = connection(root)
        env = kernel_env(root / "home", self.work / ".tmp")
        try:
            self.proc = await launch(
                root,
                self.work,
                env,
                conn,
                self.cgroups,
                self.limits,
                network_namespace=self.network_namespace,
                python=python,
                zygote=zygote,
                mount_namespace=self.mount_namespace,
            )
        except BaseException:
            os.close(self._rfd)
            self.cgroups.remove()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.pid = self.proc.pid
        self.cgroups.add(self.pid)
        self.kc = AsyncKernelClient()
        self.kc.load_connection_info(conn)  # type: ignore[arg-type]
        self.kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self._finalizer = weakref.finalize(
            self, cleanup, self.proc, self.cgroups, self.kc, self.root, self._rfd
        )
        with _live_lock:
            _live.add(self)
        try:
            await self._warm_up(str(self.key_file), timeout)
        except BaseException:
            self.kill()
            raise

    @property
    def alive_process(self) -> bool:
        return not self._killed and self.proc.poll() is None

    @property
    def reusable(self) -> bool:
        """True if the kernel can serve another run (serving, alive, not retired)."""
        return self._serving and not self._retired and self.uses < MAX_USES and self.alive_process

    def retire(self) -> None:
        """Serve no more runs after the current one (the pool then kills it)."""
        self._retired = True

    async def _warm_up(self, key_file: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        setup = Setup(
            key_file=key_file,
            work=str(self.work),
            fifo=str(self.fifo),
            out_fifo=str(self.out_fifo),
            host_home=str(Path.home()),
            boundary=self.boundary,
            disk_mb=self.limits.disk_mb if self.mount_namespace else 0,
        )
        # the first request is queued until the kernel is up; await its reply
        code = install_code(setup)
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        while True:
            if self.proc.poll() is not None:
                raise SandboxError(
                    f"the sandbox kernel exited during start-up (code {self.proc.returncode}); "
                    "check that ipykernel runs with this Python and the memory limit "
                    f"({self.limits.memory_mb} MiB) is not too small"
                )
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"the sandbox kernel did not start within {timeout}s; the machine may be "
                    "overloaded: use a smaller pool or a longer startup_timeout"
                )
            try:
                reply = await self.kc.shell_channel.get_msg(timeout=0.05)
            except Empty:
                continue
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            if reply["content"].get("status") != "ok":
                c = reply["content"]
                raise SandboxError(
                    f"installing the sandbox harness failed: {c.get('ename')}: {c.get('evalue')}"
                )
            break
        # start serving: this request never ends; runs only write into the FIFO (no
        # execute-request round trip on the hot path)
        self._msg_id = str(
            self.kc.execute(
                "__selfheal__('serve')", silent=False, store_history=False, allow_stdin=False
            )
        )
        while True:
            ev = await self.next_event(0, max(0.0, deadline - time.monotonic()))
            if ev.kind == "message" and ev.data[0] == "armed":
                self.boundary_text = str(ev.data[1]) if len(ev.data) > 1 else ""
                self._serving = True
                return
            if ev.kind != "idle" or time.monotonic() >= deadline:
                raise SandboxError(
                    f"the sandbox kernel did not arm its harness ({ev.kind}); the machine may "
                    "be overloaded: use a smaller pool or a longer startup_timeout"
                )

    def adopt_limits(self, limits: Limits) -> None:
        """Apply another run's rlimits and cgroup limits to this kernel (forked processes
        inherit them). The kernel then serves only that run."""
        if process_limits(limits) == process_limits(self.limits):
            return
        self.retire()
        self._nproc = nproc_budget(limits)
        apply_rlimits(limits, self.pid, self._nproc)
        mem = (limits.memory_mb + 256) * 1024 * 1024
        for ctrl, d in self.cgroups.dirs.items():
            with contextlib.suppress(OSError):
                if ctrl in ("pids", "unified"):
                    (d / "pids.max").write_text(str(limits.max_processes))
                if ctrl == "memory":
                    (d / "memory.limit_in_bytes").write_text(str(mem))
                if ctrl == "unified":
                    (d / "memory.max").write_text(str(mem))
        self.limits = limits

    async def akill(self) -> None:
        """``kill`` from the kernel's event loop: its client closed there, the rest (a
        process tree to reap, files to remove) in a worker thread."""
        with contextlib.suppress(Exception):
            self.kc.stop_channels()
        await asyncio.to_thread(self.kill)

    def kill(self) -> None:
        """Kill the kernel's whole process tree and remove its files. Idempotent."""
        with self._lock:
            if self._killed:
                return
            self._killed = True
        self._finalizer()
        with _live_lock:
            # (its runs' directories are <root>-r<n>: a process of one names the root too)
            _killed_roots.append(self.root)

    async def send_request(self, req: dict[str, Any]) -> int:
        """Hand ``req`` to the serving harness (signed, numbered); returns the run number
        its messages carry. The run's process works in a fresh ``<root>-r<n>/work``."""
        if not self._serving:
            raise SandboxError("this sandbox kernel is not serving")
        self._seq += 1
        self.uses += 1
        # the process serving the run was forked before the run: it sets its own rlimits
        rlimits = rlimit_pairs(self.limits, self._nproc)
        # the kernel fits each line within ``cap``; the host reads no more
        n = len(req.get("tests", ())) + int(req.get("calls_budget", 0))  # (candidate_calls.py)
        cap = self._reader.new_run(n, int(req.get("output_limit", 0)))
        req = {**req, "seq": self._seq, "rlimits": rlimits, "line_cap": cap}
        data = frame_request(self._key, req)
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            # nobody reads: the kernel is gone or not serving; next_event says so
            self.retire()
            return self._seq
        try:
            await write_all(fd, data)
        except OSError:
            pass  # the kernel died while reading; next_event reports it
        except BaseException:
            self.retire()  # a torn request (cancelled mid-write): serve no more
            raise
        finally:
            os.close(fd)
        return self._seq

    def frame(self, call: dict[str, Any]) -> bytes:
        """``call`` framed and signed as the harness reads it (``candidate_calls.py``)."""
        return frame_request(self._key, call)

    def kill_child(self, pid: int) -> None:
        """SIGKILL the process serving the current run (the harness then reaps it and
        whatever it left, and says ``exit``)."""
        if pid <= 0:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return  # already gone
        try:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        finally:
            os.close(fd)

    def process_count(self) -> int:
        """Processes in the kernel's tree (the kernel included)."""
        if self.cgroups.dirs:
            return len(self.cgroups.pids())
        import psutil

        try:
            return 1 + len(psutil.Process(self.pid).children(recursive=True))
        except psutil.Error:
            return 0

    async def next_event(self, seq: int, timeout: float) -> KernelEvent:
        """Wait up to ``timeout`` s for the next verified message of run ``seq``."""
        end = time.monotonic() + timeout
        while True:
            ev = self._take(seq)
            if ev is not None:
                return ev
            if self.proc.poll() is not None:
                ev = self._take(seq)
                return ev if ev is not None else KernelEvent("dead")
            left = end - time.monotonic()
            if left <= 0:
                shell = self.kc.shell_channel
                if await shell.msg_ready():
                    reply = await shell.get_msg(timeout=0)
                    if reply["parent_header"].get("msg_id") == self._msg_id:
                        self._serving = False
                        return KernelEvent("replied")
                return KernelEvent("idle")
            await readable(self._rfd, min(left, 0.05))

    def _take(self, seq: int) -> KernelEvent | None:
        """The next verified line of run ``seq`` in the result pipe (read in bounded chunks,
        ``ResultReader``), if any; ``flooded`` once the run's process went over its caps."""
        ev = self._reader.take(lambda line: self._verify(line, seq))
        why = self._reader.flood() if ev is None else None
        return KernelEvent("flooded", (why,)) if why else ev

    def _verify(self, line: bytes, seq: int) -> KernelEvent | None:
        value = read_line(self._key, line)
        if value is None:
            return None  # forged or torn: ignored
        if value[0] == "armed":
            return KernelEvent("message", value)
        if len(value) < 2:
            return None
        if value[1] != seq and not (value[0] == "internal" and value[1] == 0):
            return None  # another run's message (or a stale one): not ours
        return KernelEvent("message", (value[0], *value[2:]))
