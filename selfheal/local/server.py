"""The local model as a served engine: a supervised ``llama-server`` on 127.0.0.1, started on
first use with a free port and a random key, one per model and settings in the process
(:func:`shared_server`), restarted once if it dies, stopped at exit and never orphaned.
:mod:`selfheal.local.settings` says how to run it; docs/local_model.md says how it runs."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

from selfheal._record import Record
from selfheal.errors import ProviderUnavailable
from selfheal.local.keeper import clean_old_logs, free_port, on_keeper, spawn, tail
from selfheal.local.settings import INSTALL, ServerSettings, log_dir

STARTUP_TIMEOUT = 180.0
"""Seconds to wait for ``/health`` after starting (loading 1.1 GB takes ~5 s idle)."""


class Endpoint(Record):
    """Where a started server listens, and which start of it this is."""

    base_url: str
    """``http://127.0.0.1:PORT/v1``."""
    api_key: str
    """The key requests must send."""
    generation: int
    """Counts starts: a request that failed on generation 1 while generation 2 runs was
    cut by a restart another caller already made, and may retry at once."""


_STARTED: list[LocalServer] = []
"""Every server started by this process (stopped at exit)."""


class LocalServer:
    """One supervised llama-server process (see the module docs).

    Nothing starts until :meth:`ensure` (the provider calls it on its first request) or
    :meth:`start`. ``api_key`` defaults to a random one; ``port=0`` picks a free port."""

    _counter = 0

    def __init__(
        self,
        settings: ServerSettings,
        *,
        api_key: str | None = None,
        port: int = 0,
        startup_timeout: float = STARTUP_TIMEOUT,
        max_restarts: int = 1,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.settings = settings
        self.api_key = api_key or "sk-selfheal-" + secrets.token_urlsafe(24)
        self.requested_port = port
        self.startup_timeout = startup_timeout
        self.max_restarts = max_restarts
        self.restarts = 0
        self.owner_pid = os.getpid()
        LocalServer._counter += 1
        self.log_path = (
            Path(log_path)
            if log_path
            else log_dir() / f"llama-server-{os.getpid()}-{LocalServer._counter}.log"
        )
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._last: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._ready = False
        self._generation = 0
        self.start_seconds: float | None = None
        """How long the last start took, to healthy."""

    def __repr__(self) -> str:
        state = "running" if self.alive else ("stopped" if self._proc else "not started")
        return f"LocalServer({self.settings.alias!r}, {state}, url={self.base_url!r})"

    @property
    def pid(self) -> int | None:
        """The server's process id (of the last one started, once it has stopped)."""
        proc = self._proc or self._last
        return proc.pid if proc is not None else None

    @property
    def port(self) -> int | None:
        """The port it listens on (None before the first start)."""
        return self._port

    @property
    def base_url(self) -> str | None:
        """``http://127.0.0.1:PORT/v1`` once started, else None."""
        return f"http://127.0.0.1:{self._port}/v1" if self._port else None

    @property
    def alive(self) -> bool:
        """The process runs (it may still be loading the model)."""
        return self._proc is not None and self._proc.poll() is None

    def current(self) -> Endpoint | None:
        """The endpoint when started, healthy once and still running; else None. Cheap (no
        lock, no I/O): the provider's fast path."""
        if self._ready and self.alive and self.base_url:
            return Endpoint(
                base_url=self.base_url, api_key=self.api_key, generation=self._generation
            )
        return None

    def health(self, timeout: float = 2.0) -> bool:
        """``GET /health`` answers 200 (the model is loaded and the server accepts work)."""
        if not self._port:
            return False
        try:
            r = httpx.get(f"http://127.0.0.1:{self._port}/health", timeout=timeout)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's log."""
        return tail(self.log_path, lines)

    def describe_exit(self) -> str:
        """What happened to a dead server, with its log tail."""
        proc = self._proc or self._last
        code = proc.poll() if proc is not None else None
        if code is None:
            how = "is not running"
        elif code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            how = f"was killed by {name}"
        else:
            how = f"exited with code {code}"
        tail = self.log_tail()
        return f"llama-server (pid {self.pid}) {how}. The end of its log ({self.log_path}):\n" + (
            tail or "(empty)"
        )

    def ensure(self) -> Endpoint:
        """Start the server if it has not started (or was stopped), restart it once if it
        died; return where it listens. Blocks while it starts (seconds)."""
        with self._lock:
            endpoint = self.current()
            if endpoint is not None:
                return endpoint
            if self._proc is not None and not self.alive:  # it died under us
                if self.restarts >= self.max_restarts:
                    raise ProviderUnavailable(
                        f"The local model server died again after {self.restarts} restart(s); "
                        "it is not restarted another time. "
                        + self.describe_exit()
                        + "\nCheck the log, run `selfheal doctor`, or lower "
                        "SELFHEAL_LOCAL_SLOTS / SELFHEAL_LOCAL_CTX if memory ran out.",
                        provider="local",
                        model=self.settings.alias,
                    )
                self.restarts += 1
                with contextlib.suppress(OSError), self.log_path.open("a") as fh:
                    fh.write(f"\n=== selfheal: restart {self.restarts} after the server died ===\n")
            self._start_locked()
            endpoint = self.current()
            assert endpoint is not None
            return endpoint

    def recover(self, failed: Endpoint) -> bool:
        """After a request to ``failed`` lost its connection: True when the server had died
        and runs again (restarted now, or already by another caller), so the request may be
        retried once; False when the same server still runs (the failure is something
        else). Raises :class:`ProviderUnavailable` when it died and may not be restarted
        again."""
        self.settle()
        with self._lock:
            if self.alive and self._ready:
                return self._generation != failed.generation
            if self._proc is None and self._last is None:
                return False
            self.ensure()
            return True

    def settle(self, timeout: float = 2.0) -> bool:
        """After a broken connection: wait up to ``timeout`` seconds for a dying server to be
        gone (its sockets close a moment before it can be reaped). True when it is dead."""
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def start(self) -> LocalServer:
        """Start now (blocking until healthy). A running server is left alone."""
        with self._lock:
            if not self.alive:
                self._start_locked()
        return self

    def _start_locked(self) -> None:
        self._close_proc()
        if self not in _STARTED:
            _STARTED.append(self)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        clean_old_logs(self.log_path.parent)
        started = time.monotonic()
        last_error = ""
        for _attempt in range(3):
            port = self.requested_port or free_port()
            env = dict(os.environ)
            env["LLAMA_API_KEY"] = self.api_key
            # llama.cpp's OpenMP threads spin while waiting by default; on a shared 2-core
            # machine that made decoding 6x slower (docs/local_model.md).
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            argv = self.settings.argv(port)
            with self.log_path.open("ab") as log:
                log.write(f"=== selfheal: {shlex.join(argv)}\n".encode())
                log.flush()
                self._proc = on_keeper(functools.partial(spawn, argv, env, log))
            self._port = port
            _register_atexit()
            if self._wait_healthy(started):
                self._ready = True
                self._generation += 1
                self.start_seconds = time.monotonic() - started
                return
            last_error = self.describe_exit()
            bind_failed = "bind" in self.log_tail(5).lower()
            self._close_proc()
            if not (bind_failed and not self.requested_port):
                break
        raise ProviderUnavailable(
            "The local model server (llama-server) did not start. "
            + last_error
            + f"\nCheck the model file and the build: `selfheal doctor`; rebuild with {INSTALL}.",
            provider="local",
            model=self.settings.alias,
        )

    def _wait_healthy(self, started: float) -> bool:
        delay = 0.05
        while time.monotonic() - started < self.startup_timeout:
            if not self.alive:
                return False
            if self.health(timeout=1.0):
                return True
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        with self.log_path.open("a") as fh:
            fh.write(f"\n=== selfheal: not healthy after {self.startup_timeout:g} s; stopped ===\n")
        return False

    def _close_proc(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        self._end_proc(proc, timeout)

    def _end_proc(self, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
        if proc is None:
            return
        self._last = proc  # keeps the exit status for describe_exit
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        else:
            # the process is gone; its group may not be (llama-server starts none, but be sure)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def restart(self) -> Endpoint:
        """Stop a running server and start a fresh one (blocking until healthy): nothing it had
        cached survives, neither its slots nor the prompt cache it keeps in host memory
        (``--cache-ram``), which no endpoint clears. Not counted as a restart after a death."""
        with self._lock:
            self._start_locked()  # (it ends the running process first)
            endpoint = self.current()
            assert endpoint is not None
            return endpoint

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after ``timeout``). A later
        :meth:`ensure` starts a fresh one."""
        with self._lock:
            self._close_proc(timeout)
            self.restarts = 0

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        proc = self._proc
        return proc.wait() if proc is not None else 0

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SERVERS: dict[ServerSettings, LocalServer] = {}
_SERVERS_LOCK = threading.Lock()


def shared_server(settings: ServerSettings) -> LocalServer:
    """The process-wide server for these settings (created, not started, on first call)."""
    with _SERVERS_LOCK:
        if settings not in _SERVERS:
            _SERVERS[settings] = LocalServer(settings)
        return _SERVERS[settings]


def shutdown_all() -> None:
    """Stop every server this process started (registered with ``atexit``)."""
    for server in list(_STARTED):
        if server.owner_pid == os.getpid():
            with contextlib.suppress(Exception):
                server.stop(timeout=5.0)


@functools.cache
def _register_atexit() -> None:
    atexit.register(shutdown_all)
