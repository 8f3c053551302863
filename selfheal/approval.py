"""Human-in-the-loop: decisions on proposals, and the ``Approver`` protocol that gives them."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

from selfheal.state import Decision, HealState, Proposal

__all__ = ["Approve", "Approver", "Decision", "Edit", "Reject"]


def Approve(reason: str = "") -> Decision:
    """Run the proposed code as it is."""
    return Decision(kind="approve", reason=reason)


def Edit(code: str, reason: str = "") -> Decision:
    """Run this code instead of the proposal."""
    return Decision(kind="edit", code=code, reason=reason)


def Reject(reason: str = "") -> Decision:
    """Do not run the proposal; ``reason`` is shown to the generator for the next proposal."""
    return Decision(kind="reject", reason=reason)


@runtime_checkable
class Approver(Protocol):
    """Answers a proposal. May be sync or async (return an awaitable)."""

    def __call__(self, proposal: Proposal, state: HealState) -> Decision | Awaitable[Decision]: ...
