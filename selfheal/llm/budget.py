"""Model calls that stop when the run's time budget runs out or its caller stops it.

The runner gives each node a deadline (what is left of ``HealConfig.time_budget``) and the
run's cancel event; every model call of the node goes through :class:`BoundedProvider`, which
cancels the call in flight at the deadline or within a tenth of a second of the event. A
cancelled call stops its generation: the transformers provider's worker thread at its next
token (its stopping criteria), a server's streamed request by closing the stream (llama-server
then stops decoding it). The call raises :class:`~selfheal.errors.BudgetSpent`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable
from typing import TypeVar

from selfheal.errors import BudgetSpent
from selfheal.llm.base import (
    Completion,
    CompletionRequest,
    Provider,
    WrapperProvider,
    acomplete_many,
    asend,
)

__all__ = ["BoundedProvider"]

T = TypeVar("T")

POLL = 0.1
"""Seconds between looks at the cancel event."""


class BoundedProvider(WrapperProvider):
    """``inner`` whose calls stop at ``deadline`` (``time.monotonic()``) or once ``cancel``
    is set, raising :class:`BudgetSpent`."""

    def __init__(
        self,
        inner: Provider,
        *,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        budget: float | None = None,
    ) -> None:
        super().__init__(inner)
        self.deadline = deadline
        self.cancel = cancel
        self.budget = budget
        """The run's ``time_budget`` (for the message)."""

    def _why(self) -> str:
        if self.cancel is not None and self.cancel.is_set():
            return "the run was stopped by its caller"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            shown = f" ({self.budget:g}s)" if self.budget is not None else ""
            return f"time budget spent{shown}"
        return ""

    async def _bounded(self, call: Awaitable[T]) -> T:
        task = asyncio.ensure_future(call)
        try:
            while True:
                why = self._why()
                if why:
                    break
                wait = POLL if self.cancel is not None else None
                if self.deadline is not None:
                    left = max(0.0, self.deadline - time.monotonic())
                    wait = left if wait is None else min(wait, left)
                done, _ = await asyncio.wait({task}, timeout=wait)
                if done:
                    return task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise BudgetSpent(f"{why}: the {self.model_id} call in flight was stopped", reason=why)

    async def _acomplete(self, request: CompletionRequest) -> Completion:
        return await self._bounded(asend(self.inner, request))

    async def _acomplete_many(self, request: CompletionRequest, n: int) -> list[Completion]:
        options = {
            k: getattr(request, k)
            for k in ("max_tokens", "temperature", "stop", "schema", "seed", "on_token")
        }
        options.update(role=request.role, node=request.node)
        return await self._bounded(acomplete_many(self.inner, request.messages, n=n, **options))
