"""The ``ask`` node: when the evidence runs out, ask you which output is right for one input,
and make your answer a trusted test (docs/loop.md, "Asking you")."""

from __future__ import annotations

import inspect

from selfheal.asking import shown
from selfheal.context import Context
from selfheal.graph.events import record
from selfheal.questions import answer_test, open_question
from selfheal.state import Answer, Asked, HealState

NODE = "ask"


def _answer_text(answer: Answer, test_id: str | None, note: str) -> str:
    if answer.kind == "skip":
        return "you skipped the question"
    said = shown(answer.value) if answer.kind == "output" else f"none of these: {answer.value}"
    if test_id is None:
        return f"your answer {said[:120]} could not be a test: {note}"
    return f"your answer {said[:160]} is the trusted test {test_id}"


async def ask(state: HealState, ctx: Context) -> HealState:
    """Ask the open question (``selfheal.questions.open_question``); the answer becomes a
    trusted test, run on every candidate next (``execute``). With no asker (a run reopened
    without one) nothing is asked, and the run stops asking."""
    question = open_question(state)
    if question is None or ctx.asker is None:
        why = "nothing to ask" if question is None else "no one to ask (no asker)"
        can = state.can_ask and ctx.asker is not None
        return record(ctx, state, NODE, detail=why, update={"can_ask": can})
    # what is asked is news (its row shows it while the answer is awaited); the answer is
    # your decision
    news = f"asked you about {question.call} ({len(question.choices)} output(s) compete)"
    state = record(ctx, state, NODE, "info", news)
    reply = ctx.asker(question, state)
    answer = await reply if inspect.isawaitable(reply) else reply
    test, note = answer_test(state, question, answer)
    asked = Asked(
        question=question,
        answer=answer,
        test_id=test.id if test else None,
        note=note,
        iteration=state.iteration,
    )
    update: dict[str, object] = {"questions": state.questions + (asked,)}
    if test is not None:
        update["tests"] = state.tests + (test,)
    return record(
        ctx,
        state,
        NODE,
        "decision",
        _answer_text(answer, asked.test_id, note),
        update=update,
    )
