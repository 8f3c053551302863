"""Async first, sync derived: providers, the ask loops and the retry loop are coroutines whose
blocking twins come in one line from :mod:`selfheal._sync` (``complete = blocking(acomplete)``);
callbacks a coroutine makes (``on_token``) run on its background loop's thread.
:class:`PerLoop` keeps one async HTTP client per event loop (a connection pool belongs to the
loop it was made in)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from selfheal._sync import run_sync
from selfheal._sync import sync_twin as blocking

__all__ = ["PerLoop", "blocking", "run_sync"]

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One value per running event loop, made on first use. A new ``key`` (another URL or
    key) replaces the loop's value."""

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
