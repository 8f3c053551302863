"""``FutureApprover``: an async approver whose answers come from buttons (or code). The run goes
on as an asyncio task on the kernel's loop and, when it needs a decision, awaits a future that
the Approve / Edit / Reject buttons resolve (a blocked cell would never see the click:
docs/notebook.md)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from selfheal.errors import ConfigError
from selfheal.state import Decision, HealState, Proposal

ProposalListener = Callable[[Proposal, HealState], None]


class FutureApprover:
    """Implements ``selfheal.approval.Approver``: each call returns a future that ``decide``
    resolves. ``on_proposal`` listeners (the view's approval panel) hear about each proposal."""

    def __init__(self) -> None:
        self._future: asyncio.Future[Decision] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.proposal: Proposal | None = None
        """The proposal waiting for a decision, if any."""
        self._listeners: list[ProposalListener] = []

    def on_proposal(self, listener: ProposalListener) -> None:
        self._listeners.append(listener)

    @property
    def waiting(self) -> bool:
        """True while a proposal waits for ``decide``."""
        return self._future is not None and not self._future.done()

    def __call__(self, proposal: Proposal, state: HealState) -> asyncio.Future[Decision]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Decision] = loop.create_future()
        self._loop, self._future, self.proposal = loop, fut, proposal
        for listener in self._listeners:
            with contextlib.suppress(Exception):  # a broken panel must not lose the decision
                listener(proposal, state)
        return fut

    def decide(self, decision: Decision) -> None:
        """Answer the waiting proposal. Safe to call from any thread."""
        fut, loop = self._future, self._loop
        if fut is None or loop is None or fut.done():
            raise ConfigError(
                "No proposal is waiting for a decision (it was already answered, or the run "
                "has not asked yet). Check `handle.status` before deciding."
            )
        self.proposal = None
        self._future = None  # answered: no longer waiting, even before the run's loop hears it

        def _set() -> None:
            if not fut.done():
                fut.set_result(decision)

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
        if self._future is not None and not self._future.done():
            self._future.cancel()
