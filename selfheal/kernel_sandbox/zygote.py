"""A fork server for sandbox kernels: one process that has already imported ipykernel and
IPython forks each new kernel (docs/sandbox.md, "How a run works", step 1); the host treats
a forked kernel like any other kernel process (``ForkedProcess``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from selfheal._procs import die_with_parent
from selfheal.errors import SandboxError
from selfheal.kernel_sandbox.containment import kernel_env, kill_tree
from selfheal.kernel_sandbox.leftovers import mark_owner

_ZYGOTE_SRC = r"""
import contextlib, ctypes, json, os, random, resource, select, signal, sys
from ipykernel.kernelapp import IPKernelApp
import ipykernel.ipkernel, ipykernel.zmqshell, IPython.core.interactiveshell
import jupyter_client.session, zmq, tornado.ioloop, asyncio, traceback, linecache, _hashlib
import importlib
for name in ("debugpy", "ipykernel.debugger", "ipykernel.comm", "IPython.core.debugger",
             "IPython.core.completer", "IPython.core.magics", "pdb", "pydoc", "code",
             "faulthandler", "gzip", "mimetypes", "unicodedata", "stringprep",
             "encodings.idna", "email.parser", "http.server", "xmlrpc.client", "xml.dom",
             "jupyter_client.jsonutil", "ipykernel.iostream", "ipykernel.heartbeat",
             "ipykernel.parentpoller", "ipykernel.eventloops", "ipykernel.displayhook"):
    with contextlib.suppress(Exception):
        importlib.import_module(name)
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
CLONE_NEWNS, MS_REC_PRIVATE = 0x00020000, (1 << 14) | (1 << 18)
inp, out = sys.stdin.buffer, sys.stdout
out.write("ready\n"); out.flush()
buf = b""
while True:
    r, _, _ = select.select([inp], [], [], 0.05)
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        out.write("exit %d %d\n" % (pid, os.waitstatus_to_exitcode(st))); out.flush()
    if not r:
        continue
    chunk = os.read(inp.fileno(), 65536)
    if not chunk:
        os._exit(0)
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        spec = json.loads(line)
        spec["zygote"] = os.getpid()
        pid = os.fork()
        if pid:
            out.write("pid %s %d\n" % (spec["token"], pid)); out.flush()
            continue
        code = 1
        try:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the zygote
            if os.getppid() != spec["zygote"]:
                os._exit(1)
            os.setsid()
            for f in spec["cgroup_procs"]:
                try:
                    with open(f, "w") as fh:
                        fh.write(str(os.getpid()))
                except OSError:
                    pass
            if spec["netns"] and libc.unshare(CLONE_NEWNET) != 0:
                os._exit(71)
            # its own mounts (the runs' folders are tmpfs mounts), none seen by the host
            if spec.get("mountns") and (libc.unshare(CLONE_NEWNS) != 0
                                        or libc.mount(None, b"/", None, MS_REC_PRIVATE, None)):
                os._exit(71)
            for res, value in spec["rlimits"]:
                try:
                    resource.setrlimit(res, (value, value))
                except (ValueError, OSError):
                    pass
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            fd = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(fd, target)
            os.close(fd)
            os.chdir(spec["cwd"])
            os.environ.clear()
            os.environ.update(spec["env"])
            random.seed()
            sys.argv = ["ipykernel_launcher"] + spec["argv"]
            IPKernelApp.launch_instance(spec["argv"])
            code = 0
        except BaseException:
            code = 70
        finally:
            os._exit(code)
"""


class Zygote:
    """One pre-imported process that forks kernels on request. Thread-safe. It is started
    at once; requests wait in its pipe until it has imported ipykernel (``spawn`` waits up
    to ``timeout`` s for each answer)."""

    def __init__(self, python: str | None = None, timeout: float = 60.0) -> None:
        self.root = tempfile.mkdtemp(prefix="selfheal-z-")
        mark_owner(self.root)
        home = Path(self.root) / "home"
        tmp = Path(self.root) / "tmp"
        home.mkdir()
        tmp.mkdir()
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [python or sys.executable, "-c", _ZYGOTE_SRC],
            cwd=self.root,
            env=kernel_env(home, tmp),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            # the zygote (and, through it, every kernel it forked) dies with the thread
            # that started it: the process loop's (``selfheal._sync``), alive until exit
            preexec_fn=die_with_parent,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._pids: dict[str, int] = {}
        self._exits: dict[int, int] = {}
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.root)
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name="zygote")
        self._reader.start()

    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            parts = raw.decode(errors="replace").split()
            with self._cond:
                if len(parts) == 3 and parts[0] == "pid":
                    self._pids[parts[1]] = int(parts[2])
                elif len(parts) == 3 and parts[0] == "exit":
                    self._exits[int(parts[1])] = int(parts[2])
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    async def spawn(self, spec: dict[str, Any]) -> int:
        """Fork a kernel described by ``spec``; returns its pid."""
        token = os.urandom(8).hex()
        line = json.dumps({**spec, "token": token}).encode() + b"\n"
        with self._lock:
            try:
                self._stdin.write(line)
                self._stdin.flush()
            except OSError as e:
                raise SandboxError(f"the kernel fork server is gone ({e})") from e
        # the answer comes from the reader thread: waiting for it has no async form
        pid = await asyncio.to_thread(self._answer, token)
        if pid is None:
            raise SandboxError("the kernel fork server did not answer")
        return pid

    def _answer(self, token: str) -> int | None:
        end = time.monotonic() + self.timeout
        with self._cond:
            while token not in self._pids:
                left = end - time.monotonic()
                if left <= 0 or not self.alive:
                    return None
                self._cond.wait(min(left, 0.1))
            return self._pids.pop(token)

    def exit_status(self, pid: int, wait: float = 0.0) -> int | None:
        """The exit status of a forked kernel once the zygote has reaped it."""
        end = time.monotonic() + wait
        with self._cond:
            while pid not in self._exits:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._exits.pop(pid)

    def close(self) -> None:
        self._finalizer()


def _stop(proc: subprocess.Popen[bytes], root: str) -> None:
    with contextlib.suppress(Exception):
        kill_tree(proc.pid, proc.pid)
    with contextlib.suppress(Exception):
        proc.wait(timeout=2)
    shutil.rmtree(root, ignore_errors=True)


class ForkedProcess:
    """The part of ``subprocess.Popen``'s interface the sandbox uses, for a kernel forked
    by the zygote (not our child: liveness comes from a pidfd, the status from the zygote)."""

    def __init__(self, pid: int, zygote: Zygote) -> None:
        self.pid = pid
        self._zygote = zygote
        self.returncode: int | None = None
        self._pidfd: int | None
        try:
            self._pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._pidfd = None

    def _gone(self) -> bool:
        if self._pidfd is not None:
            r, _, _ = select.select([self._pidfd], [], [], 0)
            return bool(r)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if not self._gone():
            return None
        status = self._zygote.exit_status(self.pid, wait=0.2)
        self.returncode = status if status is not None else -1
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode
