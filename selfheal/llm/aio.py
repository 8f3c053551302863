"""Async first, sync derived: :func:`run_sync` runs a coroutine to completion from sync code.

Providers write their async implementation once and derive the blocking twin in one line::

    def complete(self, messages, **kw):
        return run_sync(self.acomplete(messages, **kw))

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
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["background_loop", "run_sync"]

T = TypeVar("T")

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
