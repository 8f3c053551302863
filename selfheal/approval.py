"""Human-in-the-loop: decisions on proposals, and the ``Approver`` protocol that gives them."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

from selfheal.state import Decision, HealState, Proposal
from selfheal.texts import proposal_text

__all__ = ["Approve", "Approver", "Decision", "Edit", "Reject", "ask_with_input"]


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


def ask_with_input(proposal: Proposal, state: HealState) -> Decision:
    """An approver that asks where the call runs, with ``input()``: the input box of a running
    notebook cell (JupyterLab, Notebook 7: the cell keeps running while it waits, so its reply
    carries what it offers next), or the terminal. Shows the proposal and its diff, then takes
    ``a`` (approve, also an empty answer) or ``r <reason>`` (reject); ``e`` is not offered
    here (edit the offered cell instead)."""
    print(proposal_text(proposal), flush=True)
    while True:
        answer = input("selfheal: approve this change? [a]pprove / [r]eject <reason>: ").strip()
        word, _, reason = answer.partition(" ")
        if word.lower() in ("", "a", "approve", "y", "yes"):
            return Approve()
        if word.lower() in ("r", "reject", "n", "no"):
            return Reject(reason.strip())
        print(f"selfheal: {answer!r} is not an answer: type a, or r and a reason.", flush=True)
