"""Async first, sync derived, on one loop: providers, the ask loops and the retry loop are
coroutines whose blocking twins come in one line from :mod:`selfheal._sync`
(``complete = blocking(acomplete)``); a provider's async entry points run on selfheal's one
event loop whoever awaits them (``entered``), so its callbacks (``on_token``) run in that
loop's thread and its one HTTP client (:class:`OwnedClient`) is only ever used there."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from selfheal._sync import entered, on_process_loop, run_sync
from selfheal._sync import sync_twin as blocking

__all__ = ["OwnedClient", "blocking", "entered", "run_sync"]

T = TypeVar("T")


class OwnedClient(Generic[T]):
    """A provider's async HTTP client, made on first use on selfheal's loop (a connection
    pool belongs to the loop it was made on); a new ``key`` (another URL or API key, as after
    a server's restart) replaces it."""

    def __init__(self) -> None:
        self._held: tuple[Hashable, T] | None = None

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The client for ``key`` (made with ``make`` when there is none)."""
        if not on_process_loop():
            raise RuntimeError(
                "a provider's HTTP client was used off selfheal's event loop: call the "
                "provider through its public async API (acomplete, acomplete_many, asend), "
                "which enters that loop"
            )
        if self._held is None or self._held[0] != key:
            self._held = (key, make())
        return self._held[1]
