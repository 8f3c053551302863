"""``FutureApprover``: an async approver whose answers come from buttons (or code). The run goes
on as an asyncio task on the kernel's loop and, when it needs a decision, awaits a future that
the Approve / Edit / Reject buttons resolve (a blocked cell would never see the click:
docs/notebook.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from selfheal.state import Decision, HealState, Proposal
from selfheal.widgets.pending import Pending

ProposalListener = Callable[[Proposal, HealState], None]


class FutureApprover(Pending[Proposal, Decision]):
    """Implements ``selfheal.approval.Approver``: each call returns a future that ``decide``
    resolves. ``on_proposal`` listeners (the view's approval panel) hear about each proposal."""

    nothing_waiting = (
        "No proposal is waiting for a decision (it was already answered, or the run "
        "has not asked yet). Check `handle.status` before deciding."
    )

    @property
    def proposal(self) -> Proposal | None:
        """The proposal waiting for a decision, if any."""
        return self.pending

    def __call__(self, proposal: Proposal, state: HealState) -> asyncio.Future[Decision]:
        return self._offer(proposal, state)

    def on_proposal(self, listener: ProposalListener) -> None:
        self._listen(listener)

    def decide(self, decision: Decision) -> None:
        """Answer the waiting proposal. Safe to call from any thread."""
        self._resolve(decision)
