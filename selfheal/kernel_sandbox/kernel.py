"""One sandbox kernel: an ipykernel in its own process (group, cgroup, network namespace),
spoken to over jupyter_client, carrying the harness, used for exactly one request.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import hmac
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient

from selfheal.errors import SandboxError
from selfheal.kernel_sandbox.containment import (
    CgroupSet,
    apply_rlimits,
    kernel_env,
    kill_tree,
    make_preexec,
    netns_prefix,
    nproc_budget,
    rlimit_pairs,
)
from selfheal.kernel_sandbox.types import Limits
from selfheal.kernel_sandbox.zygote import ForkedProcess, Zygote

__all__ = [
    "KernelEvent",
    "SandboxKernel",
    "killed_roots",
    "live_kernels",
    "shutdown_all_kernels",
]

_MIME = "application/x-selfheal"
_HARNESS_SRC = (Path(__file__).parent / "_kernel_harness.py").read_text()
_CANON_SRC = (Path(__file__).parent / "_canon.py").read_text()

_live: weakref.WeakSet[SandboxKernel] = weakref.WeakSet()
_live_lock = threading.Lock()
_killed_roots: list[str] = []


def killed_roots() -> list[str]:
    """Directories of the kernels this process has killed (tests use them to check that
    no process of a killed kernel is left)."""
    with _live_lock:
        return list(_killed_roots)


def live_kernels() -> list[SandboxKernel]:
    """Kernels started by this process and not yet killed."""
    with _live_lock:
        return [k for k in _live if k.alive_process]


def shutdown_all_kernels() -> None:
    """Kill every sandbox kernel this process started (also registered with ``atexit``)."""
    with _live_lock:
        ks = list(_live)
    for k in ks:
        k.kill()


atexit.register(shutdown_all_kernels)


@dataclass(frozen=True)
class KernelEvent:
    """What ``SandboxKernel.next_event`` saw."""

    kind: str
    """``message`` (a verified harness message), ``idle`` (nothing yet), ``dead`` (the
    process died), ``replied`` (the request finished)."""
    data: tuple[Any, ...] = ()
    """The harness message for ``message``; the reply status for ``replied``."""


def _cleanup(
    proc: subprocess.Popen[bytes] | ForkedProcess,
    cgroups: CgroupSet,
    kc: BlockingKernelClient,
    root: str,
    rfd: int,
) -> None:
    with contextlib.suppress(OSError):
        os.close(rfd)
    with contextlib.suppress(Exception):
        kc.stop_channels()
    with contextlib.suppress(Exception):
        kill_tree(proc.pid, proc.pid, cgroups)
    with contextlib.suppress(Exception):
        proc.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=2)
    with contextlib.suppress(Exception):
        cgroups.remove()
    shutil.rmtree(root, ignore_errors=True)


class SandboxKernel:
    """A started, warm kernel with the harness installed. Single use: after its one
    request, ``kill()`` it (the pool does)."""

    def __init__(
        self,
        limits: Limits,
        *,
        network_namespace: bool,
        python: str | None = None,
        startup_timeout: float = 30.0,
        zygote: Zygote | None = None,
    ) -> None:
        self.limits = limits
        self.network_namespace = network_namespace
        self.root = tempfile.mkdtemp(prefix="selfheal-k-")
        os.chmod(self.root, 0o700)
        root = Path(self.root)
        self.work = root / "work"
        home = root / "home"
        tmp = self.work / ".tmp"
        for d in (self.work, home, tmp):
            d.mkdir(parents=True, exist_ok=True)
        self._key = secrets.token_bytes(32)
        key_file = root / "key"
        self.fifo = root / "req"
        os.mkfifo(self.fifo, 0o600)
        self._used = False
        self._msg_id = ""
        # the result pipe (a named FIFO: ipykernel does not keep inherited descriptors):
        # the harness writes signed lines, the host reads them
        self.out_fifo = root / "out"
        os.mkfifo(self.out_fifo, 0o600)
        self._rfd = os.open(self.out_fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._buf = bytearray()
        key_file.write_bytes(self._key)
        session_key = secrets.token_hex(16)
        conn: dict[str, Any] = {
            "shell_port": 1,
            "iopub_port": 2,
            "stdin_port": 3,
            "control_port": 4,
            "hb_port": 5,
            "ip": str(root / "k"),
            "key": session_key,
            "transport": "ipc",
            "signature_scheme": "hmac-sha256",
            "kernel_name": "python3",
        }
        conn_file = root / "conn.json"
        conn_file.write_text(json.dumps(conn))
        argv = [
            "-f",
            str(conn_file),
            "--IPKernelApp.capture_fd_output=False",
            "--HistoryManager.enabled=False",
            "--quiet",
        ]
        self.cgroups = CgroupSet.create(limits)
        self._killed = False
        self._reply_status: str | None = None
        self._lock = threading.Lock()
        env = kernel_env(home, tmp)
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        try:
            if zygote is not None:
                spec = {
                    "cgroup_procs": [str(d / "cgroup.procs") for d in self.cgroups.dirs.values()],
                    "netns": network_namespace,
                    "rlimits": rlimit_pairs(limits, nproc_budget(limits)),
                    "cwd": str(self.work),
                    "env": env,
                    "argv": argv,
                }
                self.proc = ForkedProcess(zygote.spawn(spec), zygote)
            else:
                cmd = [python or sys.executable, "-m", "ipykernel_launcher", *argv]
                if network_namespace:
                    cmd = netns_prefix() + cmd
                self.proc = subprocess.Popen(
                    cmd,
                    cwd=self.work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=make_preexec(limits),
                    close_fds=True,
                )
        except (OSError, SandboxError) as e:
            os.close(self._rfd)
            self.cgroups.remove()
            shutil.rmtree(self.root, ignore_errors=True)
            raise SandboxError(
                f"could not start a sandbox kernel ({e}); check that ipykernel is installed "
                f"for {python or sys.executable!r}"
            ) from e
        self.pid = self.proc.pid
        self.cgroups.add(self.pid)
        self.kc = BlockingKernelClient()
        self.kc.load_connection_info(conn)  # type: ignore[arg-type]
        self.kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self._finalizer = weakref.finalize(
            self, _cleanup, self.proc, self.cgroups, self.kc, self.root, self._rfd
        )
        with _live_lock:
            _live.add(self)
        try:
            self._warm_up(str(key_file), startup_timeout)
        except BaseException:
            self.kill()
            raise

    # ---------------------------------------------------------------- lifecycle
    @property
    def alive_process(self) -> bool:
        return not self._killed and self.proc.poll() is None

    def _warm_up(self, key_file: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        code = (
            _HARNESS_SRC
            + f"\n_selfheal_install({key_file!r}, {str(self.work)!r}, {str(self.fifo)!r}, "
            + f"{str(self.out_fifo)!r}, {str(Path.home())!r}, {_CANON_SRC!r})"
            + "\ndel _selfheal_install\n"
        )
        # the first request is queued until the kernel is up; poll for its reply
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
                reply = self.kc.shell_channel.get_msg(timeout=0.05)
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
        # arm the one request this kernel will serve: the harness waits on the FIFO, so a
        # run only writes its payload (no execute-request round trip on the hot path)
        self._msg_id = str(
            self.kc.execute(
                "__selfheal__('armed')", silent=False, store_history=False, allow_stdin=False
            )
        )
        while True:
            ev = self.next_event(self._msg_id, max(0.0, deadline - time.monotonic()))
            if ev.kind == "message" and ev.data[0] == "armed":
                return
            if ev.kind != "idle" or time.monotonic() >= deadline:
                raise SandboxError(
                    f"the sandbox kernel did not arm its harness ({ev.kind}); the machine may "
                    "be overloaded: use a smaller pool or a longer startup_timeout"
                )

    def adopt_limits(self, limits: Limits) -> None:
        """Apply another run's rlimits and cgroup limits to this (still unused) kernel."""
        if limits == self.limits:
            return
        apply_rlimits(limits, self.pid)
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

    def kill(self) -> None:
        """Kill the kernel's whole process tree and remove its files. Idempotent."""
        with self._lock:
            if self._killed:
                return
            self._killed = True
        self._finalizer()
        with _live_lock:
            _killed_roots.append(self.root)

    # ---------------------------------------------------------------- requests
    def send_request(self, req: dict[str, Any]) -> str:
        """Hand ``req`` to the armed harness; returns the message id its events carry."""
        if self._used:
            raise SandboxError("a sandbox kernel serves one request; take a fresh one")
        self._used = True
        body = repr(req).encode("utf-8", "surrogatepass")
        data = len(body).to_bytes(8, "big") + body
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            # nobody reads: the kernel is gone; next_event reports it as dead
            return self._msg_id
        try:
            os.set_blocking(fd, True)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError:
            pass  # the kernel died while reading; next_event reports it
        finally:
            os.close(fd)
        return self._msg_id

    def process_count(self) -> int:
        """Processes in the kernel's tree (the kernel included)."""
        if self.cgroups.dirs:
            return len(self.cgroups.pids())
        import psutil

        try:
            return 1 + len(psutil.Process(self.pid).children(recursive=True))
        except psutil.Error:
            return 0

    def next_event(self, msg_id: str, timeout: float) -> KernelEvent:
        """Wait up to ``timeout`` s for the next verified harness message of ``msg_id``."""
        end = time.monotonic() + timeout
        while True:
            ev = self._read_results(0.0)
            if ev is not None:
                return ev
            if self._reply_status is not None:
                ev = self._read_results(0.05)
                return ev if ev is not None else KernelEvent("replied", (self._reply_status,))
            if self.proc.poll() is not None:
                ev = self._read_results(0.0)
                return ev if ev is not None else KernelEvent("dead")
            with contextlib.suppress(Empty):
                reply = self.kc.shell_channel.get_msg(timeout=0)
                if reply["parent_header"].get("msg_id") == msg_id:
                    self._reply_status = str(reply["content"].get("status"))
                    continue
            left = end - time.monotonic()
            if left <= 0:
                return KernelEvent("idle")
            ev = self._read_results(min(left, 0.05))
            if ev is not None:
                return ev

    def _read_results(self, timeout: float) -> KernelEvent | None:
        """The next verified line from the result pipe, waiting up to ``timeout`` s."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                ev = self._verify(line)
                if ev is not None:
                    return ev
                continue
            ready, _, _ = select.select([self._rfd], [], [], timeout)
            if not ready:
                return None
            try:
                chunk = os.read(self._rfd, 1 << 20)
            except BlockingIOError:
                return None
            except OSError:
                return None
            if not chunk:
                return None
            self._buf += chunk
            timeout = 0.0

    def _verify(self, line: bytes) -> KernelEvent | None:
        mac, _, payload = line.partition(b" ")
        good = hmac.new(self._key, payload, "sha256").hexdigest().encode()
        if not hmac.compare_digest(good, mac):
            return None  # forged or torn: ignored
        try:
            value = ast.literal_eval(payload.decode("utf-8", "surrogatepass"))
        except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
            return None
        if isinstance(value, tuple) and value:
            return KernelEvent("message", value)
        return None
