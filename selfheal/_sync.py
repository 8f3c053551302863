"""One process-wide event loop, entered at the API edge, and the blocking twins of its async
entry points (``run = sync_twin(arun)``; ``sync_iter_twin`` for an async generator):
docs/architecture.md, "One concurrency model"."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

THREAD_NAME = "selfheal-loop"
"""The name of the thread the process loop runs in."""

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def process_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop (started on first use, in the daemon thread ``selfheal-loop``)."""
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

        thread = threading.Thread(target=main, name=THREAD_NAME, daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread = loop, thread
        return loop


def loop_serves(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is the process loop and its thread still runs it (not at exit)."""
    return loop is _loop and _thread is not None and _thread.is_alive() and loop.is_running()


def on_process_loop() -> bool:
    """Whether the caller runs on the process loop (in its thread)."""
    return _thread is not None and threading.current_thread() is _thread


class Entry(Generic[T]):
    """A coroutine started on a loop from another thread (:func:`submit`): ``done`` settles
    once its task has ended (cancelled included), ``stop()`` cancels the task."""

    def __init__(self, coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> None:
        self.done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._loop = loop
        self._task: asyncio.Task[T] | None = None
        self._stopped = False
        loop.call_soon_threadsafe(self._start, coro)

    def _start(self, coro: Coroutine[Any, Any, T]) -> None:
        if self._stopped:
            coro.close()
            self.done.cancel()
            return
        self._task = self._loop.create_task(coro)
        self._task.add_done_callback(self._settle)

    def _settle(self, t: asyncio.Task[T]) -> None:
        if t.cancelled():
            self.done.cancel()
        elif (error := t.exception()) is not None:
            self.done.set_exception(error)
        else:
            self.done.set_result(t.result())

    def stop(self) -> None:
        """Cancel the task (or, not started yet, never start it)."""

        def cancel() -> None:
            self._stopped = True
            if self._task is not None:
                self._task.cancel()

        self._loop.call_soon_threadsafe(cancel)


def submit(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> Entry[T]:
    """Start ``coro`` as a task on ``loop`` (default: the process loop) from another thread:
    the one way into a loop from outside it (the Dask gate uses it for its worker's loop)."""
    return Entry(coro, loop or process_loop())


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the process loop and return its result (blocking)."""
    if on_process_loop():
        coro.close()
        raise RuntimeError(
            "a blocking selfheal call was made on selfheal's own event loop, which would wait "
            "for itself: await its async twin (``aheal``, ``arun``, ...) there instead"
        )
    entry = submit(coro)
    try:
        return entry.done.result()
    except BaseException:
        entry.stop()
        raise


async def enter(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Await ``coro`` on ``loop`` (default: the process loop): directly when the caller runs
    there, else as a task there; cancelling the caller cancels that task and waits for it to
    end (its cleanup done) before the cancellation goes on."""
    target = loop or process_loop()
    if asyncio.get_running_loop() is target:
        return await coro
    entry = submit(coro, target)
    waiting = asyncio.wrap_future(entry.done)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        entry.stop()
        with contextlib.suppress(BaseException):
            await waiting
        raise


def entered(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """The coroutine function ``fn``, always awaited on the process loop (see :func:`enter`):
    for async entry points callers may await on their own loop."""

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        async def body() -> T:
            return await fn(*args, **kwargs)

        return await enter(body())

    return call


def _named(twin: Callable[..., Any], fn: Callable[..., Any], kind: str) -> None:
    """Name ``twin`` after ``fn`` (``arun`` -> ``run``), its docstring after ``fn``'s."""
    name = fn.__name__[1:] if fn.__name__.startswith("a") else f"{fn.__name__}_sync"
    twin.__name__ = name
    twin.__qualname__ = fn.__qualname__[: -len(fn.__name__)] + name
    twin.__doc__ = f"{kind} twin of ``{fn.__name__}``. {fn.__doc__ or ''}".strip()


def sync_twin(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of the coroutine function ``fn`` (see the module docstring); of a
    class method too: ``start = classmethod(sync_twin(astart))``."""
    call = fn.__func__ if isinstance(fn, classmethod) else fn  # (in its class's body)

    @functools.wraps(fn)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(call(*args, **kwargs))

    _named(twin, fn, "Blocking")
    return twin


def sync_iter_twin(fn: Callable[P, AsyncIterator[T]]) -> Callable[P, Iterator[T]]:
    """The blocking iterator twin of the async generator function ``fn``: each item is
    awaited on the process loop; closing the iterator (or an exception while it waits)
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

    _named(twin, fn, "Iterator")
    return twin
