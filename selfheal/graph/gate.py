"""The approval gate, the application of a human decision, and the end of a run."""

from __future__ import annotations

from selfheal.context import Context
from selfheal.diffs import unified_diff
from selfheal.errors import ConfigError
from selfheal.graph.events import record
from selfheal.state import Attempt, Candidate, Decision, Event, HealState, Proposal
from selfheal.state.candidates import numbered
from selfheal.testsuite import all_active_pass, attempt_score


def needs_review(state: HealState, proposal: Proposal) -> bool:
    """Whether ``proposal`` waits for a human: never under ``full_auto``, nor for your own
    code (``c0``, run as you gave it: nothing new to approve)."""
    if proposal.candidates and all(c.origin == "user" for c in proposal.candidates):
        return False
    autonomy = state.config.approval.autonomy
    if autonomy == "review_all":
        return True
    return autonomy == "review_repairs" and proposal.kind == "repair"


def against_yours(state: HealState, proposal: Proposal) -> Proposal:
    """With code you gave (``heal(code=...)``, ``%selfheal``), a proposal is shown as the
    change to your code, a first version as well as a repair."""
    given = state.given_code
    if given is None:
        return proposal
    diff = unified_diff(given, proposal.code, a="your code", b="proposed")
    return proposal.model_copy(update={"previous_code": given, "diff": diff})


def accept(
    state: HealState, proposal: Proposal, *, code: str | None = None, reason: str = ""
) -> HealState:
    """Add the proposal's candidates to the population (``code``: a human's edit replaces the
    first). A first-round top-up stays in round 1; anything else opens the next round."""
    top_up = proposal.kind == "initial" and state.iteration >= 1
    round_no = state.iteration if top_up else state.iteration + 1
    fresh = list(proposal.candidates) or [
        Candidate(id="c0", code=proposal.code, origin="greedy", round=round_no)
    ]
    if code is not None:
        fresh[0] = fresh[0].model_copy(
            update={"code": code, "origin": "human_edit", "rationale": reason, "parent": None}
        )
    # your code is c0; the model's candidates count from c1
    n = numbered(state.candidates)
    ours = [c for c in fresh if c.origin != "user"]
    renumbered = [c.model_copy(update={"id": f"c{n + i}"}) for i, c in enumerate(ours, 1)]
    fresh = [
        c.model_copy(update={"round": round_no, "report": None})
        for c in renumbered + [c for c in fresh if c.origin == "user"]
    ]
    candidates = state.candidates + tuple(fresh)
    update = {"candidates": candidates, "iteration": round_no, "pending": None, "status": "running"}
    return state.model_copy(update=update)


async def gate(state: HealState, ctx: Context) -> HealState:
    """Accept the pending proposal, or stop for a human when autonomy asks for review."""
    proposal = state.pending
    assert proposal is not None, "gate needs a pending proposal"
    if needs_review(state, proposal):
        return record(
            ctx,
            state,
            "gate",
            "decision",
            f"awaiting approval of the {proposal.kind} proposal",
            update={"status": "awaiting_approval", "pending": against_yours(state, proposal)},
        )
    return accept(state, proposal)


def apply_decision(state: HealState, decision: Decision, *, clock: float) -> HealState:
    """Apply a human decision to a state that awaits approval (pure)."""
    proposal = state.pending
    if state.status != "awaiting_approval" or proposal is None:
        raise ConfigError(
            f"Run {state.run_id} is not waiting for approval (status {state.status!r}); "
            "nothing to approve."
        )
    decision = decision.model_copy(update={"iteration": state.iteration})
    ev = Event(
        time=clock,
        node="gate",
        kind="decision",
        iteration=state.iteration,
        detail=f"{decision.kind}" + (f": {decision.reason}" if decision.reason else ""),
    )
    state = state.model_copy(
        update={"decisions": state.decisions + (decision,), "events": state.events + (ev,)}
    )
    if decision.kind == "approve":
        return accept(state, proposal)
    if decision.kind == "edit":
        if not decision.code or not decision.code.strip():
            raise ConfigError("Edit(code) needs the code to run; it was empty.")
        return accept(state, proposal, code=decision.code, reason=decision.reason)
    # reject: the reason becomes feedback for the next proposal
    return state.model_copy(
        update={
            "pending": None,
            "status": "running",
            "feedback": decision.reason or "The reviewer rejected the proposal without a reason.",
        }
    )


def best_attempt(state: HealState) -> Attempt | None:
    """The attempt to keep: loads, most trusted tests passed, then most others; ties -> earlier.

    So a repair that only satisfies a model-written test while breaking a trusted one never wins."""
    executed = [a for a in state.attempts if a.report is not None]
    if not executed:
        return state.current
    best = max(executed, key=lambda a: attempt_score(state, a.report))  # ties: the earliest
    # the latest attempt wins a tie only when it passes everything (it carries the latest review)
    last = executed[-1]
    if (
        last is not best
        and attempt_score(state, last.report) == attempt_score(state, best.report)
        and all_active_pass(state, last.report)
    ):
        best = last
    return best


def _unrun(state: HealState) -> Attempt | None:
    """Code that never ran (single shot: ``run_tests`` off): the round's first candidate."""
    if not state.candidates:
        return None
    c = state.candidates[0]
    return Attempt(iteration=c.round, code=c.code, candidate=c.id)


def finish(state: HealState, ctx: Context) -> HealState:
    """Settle on the chosen attempt and the final status: ``verified`` by the rule of
    docs/loop.md ("Statuses": trusted tests, one of them checking a value, ``Evidence.agreed``,
    ``Evidence.majority``), else
    ``unverified``: the chosen code is the best there is, not evidence."""
    best = (state.current if state.candidates else best_attempt(state)) or _unrun(state)
    if state.status == "failed":
        return state.model_copy(update={"final_code": best.code if best else None})
    code = best.code if best else None
    executed = best is not None and best.report is not None
    # a smoke test (yours, checking no value) must pass, but is no evidence on its own; nor
    # is your answer to a question (``TestCase.verifies``)
    checks_value = any(t.verifies for t in state.tests)
    if best is None:
        status = "exhausted" if state.stop_reason else "failed"
    elif not executed or not checks_value:
        status = "unverified"
    elif all_active_pass(state, best.report):
        # a critic's rejection counts through the tests it added (run like any other);
        # an opinion without one is advice and never changes the status
        ev = state.evidence
        agreed = ev.majority and ev.agreed if ev else state.config.selection.agreement <= 1
        status = "verified" if agreed else "unverified"
    else:
        status = "exhausted"
    error = state.error
    if best is None and not error:
        error = (
            f"No code was produced: {state.stop_reason}."
            if state.stop_reason
            else "No code was produced."
        )
    return state.model_copy(update={"status": status, "final_code": code, "error": error})
