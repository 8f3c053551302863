"""Spec oracle: from the spec alone, what one call must return. A second reading of the spec,
asked once per input (answers are cached in the state), used as the tie-breaker where the
clusters of passing candidates disagree and to judge a lone candidate's failing model test."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pydantic import BaseModel

from selfheal.agreement import distinguishing_probes, select
from selfheal.context import Context
from selfheal.errors import MalformedReply, ProviderError
from selfheal.roles._calls import CallLog, ask_for_json, fan_out
from selfheal.state import HealState

NODE = "consult"
MAX_TOKENS = 320
"""Completion cap of one answer (160 cut off 8 of 80 answers in the first HumanEval run)."""


class OracleReply(BaseModel):
    """The spec oracle's answer (``prompts/oracle.yaml``): the reasoning first, then the value.
    Both fields are required, so schema-constrained decoding keeps this order (docs/loop.md)."""

    reasoning: str
    """The working-out, from the spec alone."""
    value: str
    """The return value, as a Python literal."""


async def ask(state: HealState, log: CallLog, calls: Sequence[str]) -> dict[str, str]:
    """Answers for ``calls`` not asked before (at once), as ``{call: value source}``; an
    unusable answer is recorded as ``""`` so the same question is not asked again."""
    todo = [c for c in dict.fromkeys(calls) if c not in state.oracle]

    async def job(call: str) -> OracleReply:
        return await ask_for_json(
            state,
            log,
            OracleReply,
            role="oracle",
            prompt="oracle",
            max_tokens=MAX_TOKENS,
            variables={"call": call},
        )

    answers: dict[str, str] = {}
    jobs = [functools.partial(job, c) for c in todo]
    for call, res in zip(todo, await fan_out(log.ctx, "oracle", jobs), strict=True):
        if isinstance(res, BaseException):
            if not isinstance(res, MalformedReply | ProviderError):
                raise res
            log.failure(state, "oracle", res)
            answers[call] = ""
        else:
            answers[call] = res.value.strip()
    return answers


async def aanswers(state: HealState, ctx: Context, calls: Sequence[str]) -> dict[str, str]:
    """``ask`` outside a run (``evaluation.judge`` replays the oracle on recorded runs, through
    ``selfheal.llm.run_sync``): the
    answers for ``calls``, with the calls' usage and failures not kept anywhere."""
    return await ask(state, CallLog(ctx, NODE), calls)


def open_questions(state: HealState) -> list[str]:
    """What to ask the oracle, within the run's ``oracle_calls`` budget: a critic's
    counterexample on which the passing candidates differ, then the inputs where the two leading
    clusters, tied in standing, disagree; never the same call twice."""
    budget = state.config.selection.oracle_calls - len(state.oracle)
    if budget <= 0:
        return []
    sel = select(state)
    calls: list[str] = []
    # a critic's counterexample counts only if it separates the candidates: ask about it then
    for call in dict.fromkeys(r.counterexample for r in state.reviews if r.counterexample):
        probe = next((p for p in state.probes if p.call == call), None)
        if probe is None or call in state.oracle:
            continue
        if len({c.behaviour.get(probe.id) for c in sel.passing}) > 1:
            calls.append(call)
    if sel.tied:
        calls += [
            p.call
            for p in distinguishing_probes(sel, state.probes)
            if p.call not in state.oracle and p.call not in calls
        ]
    return calls[:budget]


async def consult(state: HealState, ctx: Context) -> HealState:
    """Ask the oracle about the inputs that separate the leading clusters."""
    log = CallLog(ctx, NODE)
    questions = open_questions(state)[:2]
    answers = await ask(state, log, questions)
    usable = {c: v for c, v in answers.items() if v}
    log.info(
        state,
        f"asked the spec oracle about {len(answers)} input(s) where the clusters disagree; "
        + (", ".join(f"{c} -> {v}" for c, v in usable.items())[:300] or "no usable answer"),
    )
    return log.apply(state, oracle={**state.oracle, **answers})
