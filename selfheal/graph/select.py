"""The tournament: after every execution, rank the whole population, dispute the model-written
tests the agreeing candidates fail, and make the winner the round's attempt."""

from __future__ import annotations

from typing import Literal

from selfheal.agreement import Selection, evidence_for
from selfheal.agreement import select as rank
from selfheal.context import Context
from selfheal.graph.events import record
from selfheal.state import Attempt, Candidate, HealState

_STRATEGY: dict[str, Literal["initial", "repair", "human_edit"]] = {
    "greedy": "initial",
    "sample": "initial",
    "memory": "initial",
    "patch": "repair",
    "rewrite": "repair",
    "regenerate": "repair",
    "human_edit": "human_edit",
    "user": "initial",
}


def _signature(state: HealState, c: Candidate) -> tuple[object, ...]:
    """What a candidate does: loads, its trusted outcomes, its outputs on every probe."""
    rep = c.report
    if rep is None or not rep.load.ok:
        return ("no load",)
    out = {r.test_id: r.outcome for r in rep.results}
    trusted = tuple(out.get(t.id) for t in state.tests if t.trusted)
    return (trusted, tuple(sorted(c.behaviour.items())))


def brought_nothing_new(state: HealState) -> bool:
    """A repair round whose candidates all behave like earlier ones (the population repeats)."""
    if state.iteration <= 1:
        return False
    now = [c for c in state.candidates if c.round == state.iteration]
    before = {_signature(state, c) for c in state.candidates if c.round < state.iteration}
    return bool(now) and all(_signature(state, c) in before for c in now)


def _strategy(
    state: HealState, c: Candidate
) -> Literal["initial", "repair", "human_edit", "critic_repair"]:
    strategy = _STRATEGY.get(c.origin, "initial")
    critic_round = any(d.source == "critic" and d.iteration == c.round - 1 for d in state.diagnoses)
    return "critic_repair" if strategy == "repair" and critic_round else strategy


def _with_attempt(state: HealState, chosen: Candidate) -> tuple[Attempt, ...]:
    attempt = Attempt(
        iteration=state.iteration,
        code=chosen.code,
        strategy=_strategy(state, chosen),
        rationale=chosen.rationale,
        report=chosen.report,
        candidate=chosen.id,
    )
    attempts = state.attempts
    if attempts and attempts[-1].iteration == state.iteration:
        return attempts[:-1] + (attempt,)
    return attempts + (attempt,)


def apply_selection(state: HealState, sel: Selection) -> HealState:
    """The state with the selection's disputes, clusters, attempt and evidence (pure)."""
    tests = tuple(
        t.model_copy(update={"quarantined": True, "quarantine_reason": sel.disputed[t.id]})
        if t.id in sel.disputed
        else t
        for t in state.tests
    )
    cluster_of = {c.id: i for i, group in enumerate(sel.clusters) for c in group}
    candidates = tuple(
        c.model_copy(update={"cluster": cluster_of.get(c.id)}) for c in state.candidates
    )
    state = state.model_copy(update={"tests": tests, "candidates": candidates})
    update: dict[str, object] = {"evidence": evidence_for(state, sel)}
    if sel.chosen is not None:
        update["attempts"] = _with_attempt(state, sel.chosen)
    return state.model_copy(update=update)


async def select(state: HealState, ctx: Context) -> HealState:
    """Rank the population and keep the winner as this round's attempt."""
    sel = rank(state)
    state = apply_selection(state, sel)
    if sel.disputed:
        disputed = ", ".join(sorted(sel.disputed))
        state = record(
            ctx, state, "select", detail=f"disputed {disputed}: {next(iter(sel.disputed.values()))}"
        )
    chosen = sel.chosen
    detail = (f"chose {chosen.id} ({chosen.origin}): " if chosen else "") + (
        state.evidence.summary if state.evidence else ""
    )
    state = record(ctx, state, "select", detail=detail)
    if brought_nothing_new(state) and sel.failing:
        reason = "the repair round brought no new behaviour"
        state = record(
            ctx, state, "select", detail=f"{reason}: stopping", update={"stop_reason": reason}
        )
    return state
