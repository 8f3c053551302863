"""The approval gate, the application of a human decision, and the end of a run."""

from __future__ import annotations

from selfheal.graph.context import Context
from selfheal.roles.testcode import all_active_pass, attempt_score
from selfheal.state import Attempt, Decision, Event, HealState, Proposal


def needs_review(state: HealState, proposal: Proposal) -> bool:
    autonomy = state.config.autonomy
    if autonomy == "review_all":
        return True
    return autonomy == "review_repairs" and proposal.kind == "repair"


def accept(state: HealState, code: str, strategy: str, rationale: str = "") -> HealState:
    """Make ``code`` the next attempt."""
    attempt = Attempt(
        iteration=state.iteration + 1,
        code=code,
        strategy=strategy,  # type: ignore[arg-type]
        rationale=rationale,
    )
    return state.model_copy(
        update={
            "attempts": state.attempts + (attempt,),
            "iteration": state.iteration + 1,
            "pending": None,
            "status": "running",
        }
    )


def gate(state: HealState, ctx: Context) -> HealState:
    """Accept the pending proposal, or stop for a human when autonomy asks for review."""
    proposal = state.pending
    assert proposal is not None, "gate needs a pending proposal"
    if needs_review(state, proposal):
        ev = Event(
            time=ctx.clock(),
            node="gate",
            kind="decision",
            iteration=state.iteration,
            detail=f"awaiting approval of the {proposal.kind} proposal",
        )
        ctx.emit(ev)
        return state.model_copy(
            update={"status": "awaiting_approval", "events": state.events + (ev,)}
        )
    return accept(state, proposal.code, proposal.strategy, proposal.rationale)


def apply_decision(state: HealState, decision: Decision, *, clock: float) -> HealState:
    """Apply a human decision to a state that awaits approval (pure)."""
    proposal = state.pending
    if state.status != "awaiting_approval" or proposal is None:
        from selfheal.errors import ConfigError

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
        return accept(state, proposal.code, proposal.strategy, proposal.rationale)
    if decision.kind == "edit":
        if not decision.code or not decision.code.strip():
            from selfheal.errors import ConfigError

            raise ConfigError("Edit(code) needs the code to run; it was empty.")
        return accept(state, decision.code, "human_edit", decision.reason)
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

    So a repair that only satisfies a model-written test while breaking a trusted one never wins.
    """
    executed = [a for a in state.attempts if a.report is not None]
    if not executed:
        return state.current
    best = executed[0]
    for a in executed[1:]:
        if attempt_score(state, a.report) > attempt_score(state, best.report):
            best = a
    # the latest attempt wins a tie only when it passes everything (it carries the latest review)
    last = executed[-1]
    if (
        last is not best
        and attempt_score(state, last.report) == attempt_score(state, best.report)
        and all_active_pass(state, last.report)
    ):
        best = last
    return best


def finish(state: HealState, ctx: Context) -> HealState:
    """Settle on the best attempt and the final status."""
    if state.status == "failed":
        best = best_attempt(state)
        return state.model_copy(update={"final_code": best.code if best else None})
    best = best_attempt(state)
    code = best.code if best else None
    cfg = state.config
    executed = best is not None and best.report is not None
    if best is None:
        status = "exhausted" if state.stop_reason else "failed"
    elif not executed or not state.active_tests:
        status = "unverified"
    elif all_active_pass(state, best.report):
        last = state.reviews[-1] if state.reviews else None
        # a rejection backed by tests is settled by running them; one without tests stands
        rejected = (
            last is not None
            and last.verdict == "reject"
            and last.iteration == best.iteration
            and not last.added_tests
        )
        status = "exhausted" if (cfg.critic and rejected) else "verified"
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
