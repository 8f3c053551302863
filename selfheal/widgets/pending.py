"""``Pending``: one question at a time to a person, answered from the view's buttons or from
code. The run goes on as a task on its loop and awaits a future that one click (in the
kernel's thread, or any other) resolves; listeners (the view's panels) hear about each
question. ``FutureApprover`` and ``FutureAsker`` are its two kinds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

from selfheal.errors import ConfigError
from selfheal.state import HealState

Q = TypeVar("Q")
A = TypeVar("A")


class Pending(Generic[Q, A]):
    """Each question (``_offer``: the item, the run's state) returns a future that
    :meth:`_resolve` sets."""

    nothing_waiting = "Nothing is waiting for an answer."
    """The error when an answer comes and nothing waits for it (each kind says what to check)."""

    def __init__(self) -> None:
        self._future: asyncio.Future[A] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pending: Q | None = None
        """What waits for an answer, if anything."""
        self._listeners: list[Callable[[Q, HealState], None]] = []

    def _listen(self, listener: Callable[[Q, HealState], None]) -> None:
        self._listeners.append(listener)

    @property
    def waiting(self) -> bool:
        """True while something waits for an answer, from the moment its listeners have shown
        it: the run asks on selfheal's loop thread, and whoever reads this from another thread
        (a click, your code, a test) then finds the panel already shown. (The listeners
        themselves, which draw the question, read ``offered``.)"""
        return self._future is not None and not self._future.done()

    @property
    def offered(self) -> bool:
        """True from the moment something is offered (before its listeners hear it) until it
        is answered, or the run stops waiting: what the view draws."""
        fut = self._future
        return self.pending is not None and (fut is None or not fut.done())

    def _offer(self, item: Q, state: HealState) -> asyncio.Future[A]:
        """The future that the answer to ``item`` resolves (each kind's ``__call__``)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[A] = loop.create_future()
        self._loop, self._future, self.pending = loop, None, item
        for listener in self._listeners:
            with contextlib.suppress(Exception):  # a broken panel must not lose the answer
                listener(item, state)
        self._future = fut  # published last (``waiting``)
        return fut

    def _resolve(self, value: A) -> None:
        """Answer what waits. Safe to call from any thread."""
        fut, loop = self._future, self._loop
        if fut is None or loop is None or fut.done():
            raise ConfigError(self.nothing_waiting)
        self.pending = None
        self._future = None  # answered: no longer waiting, even before the run's loop hears it

        def _set() -> None:
            if not fut.done():
                fut.set_result(value)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _set()
        else:
            loop.call_soon_threadsafe(_set)

    def cancel(self) -> None:
        """Stop waiting (the run task ends with ``CancelledError``)."""
        self.pending = None
        if self._future is not None and not self._future.done():
            self._future.cancel()
