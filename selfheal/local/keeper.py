"""The llama-server process itself: spawned from a keeper thread that lives as long as the
host process (the server dies with the *thread* that started it), on a free port, with its
output in a log file whose tail every error quotes."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from selfheal._procs import die_with_parent

T = TypeVar("T")

_KEEPER_QUEUE: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
    queue.SimpleQueue()
)
_KEEPER: threading.Thread | None = None
_KEEPER_LOCK = threading.Lock()


def _keeper_main() -> None:
    while True:
        fn, future = _KEEPER_QUEUE.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)


def on_keeper(fn: Callable[[], T]) -> T:
    """Run ``fn`` on the keeper thread: a daemon thread that lives as long as the process.
    The server dies with the *thread* that started it (PR_SET_PDEATHSIG), so it must not be
    started from a short-lived worker thread (``asyncio.to_thread``, an executor)."""
    global _KEEPER
    with _KEEPER_LOCK:
        if _KEEPER is None or not _KEEPER.is_alive():
            _KEEPER = threading.Thread(
                target=_keeper_main, name="selfheal-llama-server-keeper", daemon=True
            )
            _KEEPER.start()
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    _KEEPER_QUEUE.put((fn, future))
    return future.result()


def spawn(argv: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start the server (call it through :func:`on_keeper`)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group: stopped as a whole
        preexec_fn=die_with_parent,  # PR_SET_PDEATHSIG: dies with the keeper thread
        close_fds=True,
    )


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 15, limit: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log file (``""`` when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def clean_old_logs(directory: Path, max_age_days: float = 3.0) -> None:
    """Remove server logs older than ``max_age_days``."""
    cutoff = time.time() - max_age_days * 86400
    with contextlib.suppress(OSError):
        for p in directory.glob("llama-server-*.log"):
            with contextlib.suppress(OSError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()
