"""Async first, sync twins derived in one line (as nbclient does with ``run_sync``):
``run = sync_twin(arun)``; an async generator's iterator twin: ``sync_iter_twin(agen)``.

The coroutine runs on one long-lived background event loop (a daemon thread named
``selfheal-sync``) and the caller blocks on its result, so a sync twin works from plain code,
from other threads, and from inside a running event loop (a notebook cell), where
``asyncio.run`` would refuse. An exception in the waiting thread (``KeyboardInterrupt``)
cancels the coroutine."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is not None and _thread is not None and _thread.is_alive():
            return _loop
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=main, name="selfheal-sync", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread = loop, thread
        return loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the background loop and return its result."""
    loop = _background_loop()
    if threading.current_thread() is _thread:
        # called from a coroutine on the background loop itself: waiting here would block
        # the loop that must run it, so this one call gets a loop of its own
        box: list[Any] = []

        def alone() -> None:
            try:
                box.append((True, asyncio.run(coro)))
            except BaseException as e:
                box.append((False, e))

        t = threading.Thread(target=alone, name="selfheal-sync-nested")
        t.start()
        t.join()
        ok, value = box[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value
    fut = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        raise


def sync_twin(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of the coroutine function ``fn`` (see the module docstring)."""

    @functools.wraps(fn)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(fn(*args, **kwargs))

    name = fn.__name__[1:] if fn.__name__.startswith("a") else f"{fn.__name__}_sync"
    twin.__name__ = name
    twin.__qualname__ = fn.__qualname__[: -len(fn.__name__)] + name
    twin.__doc__ = f"Blocking twin of ``{fn.__name__}``. {fn.__doc__ or ''}".strip()
    return twin


def sync_iter_twin(fn: Callable[P, AsyncIterator[T]]) -> Callable[P, Iterator[T]]:
    """The blocking iterator twin of the async generator function ``fn``: each item is
    awaited on the background loop; closing the iterator (or an exception while it waits)
    closes the async generator there, so its cleanup runs."""

    @functools.wraps(fn)
    def twin(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        agen = fn(*args, **kwargs)

        async def step() -> tuple[bool, T | None]:
            try:
                return True, await agen.__anext__()
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                await aclose()

        try:
            while True:
                more, item = run_sync(step())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            run_sync(close())

    name = fn.__name__[1:] if fn.__name__.startswith("a") else f"{fn.__name__}_sync"
    twin.__name__ = name
    twin.__qualname__ = fn.__qualname__[: -len(fn.__name__)] + name
    twin.__doc__ = f"Iterator twin of ``{fn.__name__}``. {fn.__doc__ or ''}".strip()
    return twin
