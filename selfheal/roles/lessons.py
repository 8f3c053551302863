"""Lesson summarizer: a rolling list of at most five short lessons."""

from __future__ import annotations

from pydantic import BaseModel, Field

from selfheal.context import Context
from selfheal.errors import MalformedReply
from selfheal.roles._calls import CallLog, ask_for_json
from selfheal.state import HealState, Lesson
from selfheal.testsuite import failure_lines

NODE = "lessons"
MAX_LESSONS = 5


class LessonsReply(BaseModel):
    """What the summarizer replies."""

    lessons: list[str] = Field(default_factory=list)


async def summarize(state: HealState, ctx: Context) -> HealState:
    """Rewrite the lessons from the latest diagnosis (keeps the old ones on a bad reply)."""
    log = CallLog(ctx, NODE)
    diag = state.diagnoses[-1] if state.diagnoses else None
    current = state.current
    failures = failure_lines(state, current.report) if current and current.report else []
    try:
        reply = await ask_for_json(
            state,
            log,
            LessonsReply,
            role="lessons",
            prompt="lessons",
            max_tokens=256,
            variables={
                "lessons": [lesson.text for lesson in state.lessons],
                "diagnosis": f"{diag.root_cause} {diag.repair_strategy}" if diag else "",
                "failures": failures,
            },
        )
    except MalformedReply as exc:
        log.failure(state, "lessons", exc)
        return log.apply(state)
    texts: list[str] = []
    for text in reply.lessons:
        text = " ".join(str(text).split())
        if text and text not in texts:
            texts.append(text[:300])
    texts = texts[:MAX_LESSONS]
    lessons = tuple(Lesson(text=t, iteration=state.iteration) for t in texts)
    log.info(state, f"{len(lessons)} lesson(s)")
    return log.apply(state, lessons=lessons)
