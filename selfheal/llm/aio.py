"""Async first, sync derived: :func:`run_sync` runs a coroutine to completion from sync code.

Async code is written once and its blocking twin derived in one line, as nbclient does::

    complete = blocking(acomplete)

It works whether or not an event loop already runs in the calling thread (in Jupyter one
always does, and ``asyncio.run`` would refuse): the coroutine runs on one long-lived
background event loop (a daemon thread named ``selfheal-llm-loop``) and the caller blocks on
the result. One loop for every sync call of the process means HTTP clients made for it stay
warm between calls, and calls from several threads at once run concurrently on it. A
``KeyboardInterrupt`` (or any exception) in the waiting thread cancels the coroutine.

Callbacks a coroutine makes (``on_token``) run on that background thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

__all__ = ["PerLoop", "background_loop", "blocking", "run_sync"]

T = TypeVar("T")
P = ParamSpec("P")

_LOOP: asyncio.AbstractEventLoop | None = None
_THREAD: threading.Thread | None = None
_LOCK = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared background event loop (started on first use, a daemon thread)."""
    global _LOOP, _THREAD
    with _LOCK:
        if _LOOP is not None and _THREAD is not None and _THREAD.is_alive():
            return _LOOP
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=main, name="selfheal-llm-loop", daemon=True)
        thread.start()
        ready.wait()
        _LOOP, _THREAD = loop, thread
        return loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result (or raise its exception)."""
    loop = background_loop()
    if threading.current_thread() is _THREAD:
        # Called from a callback running on the background loop itself (waiting there would
        # deadlock): run on a fresh loop in a throwaway thread instead.
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="selfheal-sync") as ex:
            return ex.submit(asyncio.run, coro).result()
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        if not future.done():
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(timeout=5)
        raise


def blocking(afn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of an async function or method, via :func:`run_sync`: for a function
    ``ask_code = blocking(aask_code)``, for a method ``complete = blocking(acomplete)`` in the
    class body."""

    @functools.wraps(afn)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(afn(*args, **kwargs))

    name = afn.__name__.removeprefix("a")
    twin.__name__ = name
    twin.__qualname__ = afn.__qualname__.removesuffix(afn.__name__) + name
    twin.__doc__ = f"Blocking twin of ``{afn.__name__}`` (works inside a running event loop too)."
    return twin


class PerLoop(Generic[T]):
    """One value per running event loop, made on first use: an async HTTP client's connection
    pool belongs to the loop it was made in. A new ``key`` (another URL or key) replaces the
    loop's value."""

    def __init__(self) -> None:
        self._values: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Hashable, T]]
        self._values = weakref.WeakKeyDictionary()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The running loop's value for ``key`` (made with ``make`` when there is none)."""
        loop = asyncio.get_running_loop()
        cached = self._values.get(loop)
        if cached is not None and cached[0] == key:
            return cached[1]
        value = make()
        self._values[loop] = (key, value)
        return value
