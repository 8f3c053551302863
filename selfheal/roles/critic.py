"""Critic: reviews the chosen candidate; backs a rejection with a counterexample input (run on
every candidate, it counts only if it separates them and the spec oracle sides against the
chosen one) or tests (run like any other); an opinion alone is advice."""

from __future__ import annotations

import ast
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from selfheal._parse import parse_or_none
from selfheal.context import Context
from selfheal.errors import MalformedReply
from selfheal.probes import calls_in_test, merge_probes
from selfheal.roles._calls import CallLog, ask_for_json
from selfheal.state import CriticReview, Diagnosis, HealState
from selfheal.state.repair import Verdict
from selfheal.testsuite import add_tests, parse_test_block, sources

NODE = "critic"


def _verdict(value: Any) -> Any:
    """Anything that starts with "rej" rejects; any other string accepts."""
    if not isinstance(value, str):
        return value
    return "reject" if value.strip().lower().startswith("rej") else "accept"


class CriticReply(BaseModel):
    """What the critic replies (``prompts/critic.yaml``); its JSON schema is what the model is
    asked for."""

    verdict: Annotated[Verdict, BeforeValidator(_verdict)] = "accept"
    concerns: list[str] = Field(default_factory=list)
    counterexample: str = ""
    tests: list[str] = Field(default_factory=list)


def _counterexample(text: str, entry_point: str | None) -> str:
    """The critic's counterexample when it is one call of the function on literal inputs
    (else "")."""
    tree = parse_or_none(text.strip().rstrip(";"), "eval")
    node = tree.body if tree else None
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == entry_point
    ):
        return ""
    calls = calls_in_test(ast.unparse(node), entry_point)  # refuses references to other names
    return calls[0] if calls else ""


async def critic(state: HealState, ctx: Context) -> HealState:
    """Review the passing candidate. Accept, or reject with tests (run next) or concerns."""
    cfg = state.config
    log = CallLog(ctx, NODE)
    current = state.current
    assert current is not None
    try:
        reply = await ask_for_json(
            state,
            log,
            CriticReply,
            role="critic",
            prompt="critic",
            max_tokens=256,
            variables={
                "code": current.code,
                "tests": sources(state.active_tests),
                "max_tests": cfg.selection.max_critic_tests,
            },
        )
    except MalformedReply as exc:
        log.failure(state, "critic", exc)
        review = CriticReview(
            iteration=state.iteration,
            verdict="accept",
            concerns=("critic reply unusable; not reviewed",),
        )
        return log.apply(state, reviews=state.reviews + (review,))
    verdict = reply.verdict
    found: list[tuple[str, str]] = []
    for src in reply.tests:
        if parse_or_none(src) is not None:
            found.extend(parse_test_block(src, state.spec.entry_point)[1])
    new = (
        add_tests(
            state,
            found,
            origin="critic",
            prefix="cr",
            trusted=False,
            limit=cfg.selection.max_critic_tests,
        )
        if verdict == "reject"
        else ()
    )
    concerns = tuple(c.strip() for c in reply.concerns if c.strip())
    counter = (
        _counterexample(reply.counterexample, state.spec.entry_point) if verdict == "reject" else ""
    )
    review = CriticReview(
        iteration=state.iteration,
        verdict=verdict,
        concerns=concerns,
        added_tests=tuple(t.id for t in new),
        counterexample=counter,
    )
    update: dict[str, object] = {"reviews": state.reviews + (review,), "tests": state.tests + new}
    if counter:
        update["probes"] = merge_probes(
            state.probes, [(counter, "critic")], limit=len(state.probes) + 1, round=state.iteration
        )
    if verdict == "reject" and not new and concerns:
        update["diagnoses"] = state.diagnoses + (
            Diagnosis(
                iteration=state.iteration,
                root_cause="; ".join(concerns)[:500],
                category="other",
                repair_strategy="Address the reviewer's concerns without breaking any passing test.",
                confidence=0.4,
                source="critic",
            ),
        )
    log.info(
        state,
        f"{verdict}"
        + (f": {concerns[0][:120]}" if concerns else "")
        + (f"; {len(new)} new test(s)" if new else "")
        + (f"; counterexample {counter}" if counter else ""),
    )
    return log.apply(state, **update)
