"""What a finished run teaches, read from its final state (pure): its lessons, its verified
solution, and which remembered lessons it used."""

from __future__ import annotations

from typing import Any, Literal

from selfheal._record import Record
from selfheal.state import Attempt, HealState

MAX_LESSON_CHARS = 500
"""A lesson longer than this is cut (a small model's diagnosis sometimes runs on)."""


class LessonNote(Record):
    """A lesson to remember."""

    text: str
    """The lesson."""
    failure: str = ""
    """The failure it came from: the tests the diagnosed code failed."""
    source: Literal["lessons", "diagnosis"] = "lessons"
    """Written by the lessons role, or taken from a diagnosis (root cause and fix) when that
    role is off."""


class SolutionNote(Record):
    """A verified solution to remember."""

    code: str
    """The chosen code."""
    signature: str = ""
    """The spec's ``def`` line, when known."""
    evidence: dict[str, Any]
    """The run's evidence record (``HealState.evidence``)."""
    tests: tuple[str, ...] = ()
    """The tests the code passed (their source), trusted ones first."""


class Learnt(Record):
    """Everything a finished run leaves in the memory."""

    run_id: str
    """The run."""
    spec: str
    """Its spec."""
    entry_point: str | None = None
    """The function's name."""
    status: str
    """How the run ended."""
    verified: bool
    """Whether it ended verified."""
    lessons: tuple[LessonNote, ...] = ()
    """Its lessons."""
    solution: SolutionNote | None = None
    """Its solution, when verified."""
    used: tuple[int, ...] = ()
    """Numbers of the remembered lessons (``L3`` -> 3) that went into its prompts."""


def _failing(state: HealState, attempt: Attempt | None) -> str:
    if attempt is None or attempt.report is None:
        return ""
    if not attempt.report.load.ok:
        load = attempt.report.load
        return f"the code did not load: {load.exc_type}: {load.message}"[:300]
    lines = []
    for r in attempt.report.results:
        test = state.test(r.test_id)  # None for a probe input: those have no right answer
        if r.outcome != "passed" and test is not None:
            lines.append(f"{test.headline} ({r.outcome})")
    return "; ".join(lines)[:500]


def _lessons(state: HealState) -> tuple[LessonNote, ...]:
    diagnoses = [
        d
        for d in state.diagnoses
        if d.source != "heuristic" and d.blame in ("code", "both") and d.root_cause.strip()
    ]
    failure = _failing(state, state.attempt(diagnoses[-1].iteration)) if diagnoses else ""
    if state.lessons:
        return tuple(
            LessonNote(text=x.text[:MAX_LESSON_CHARS], failure=failure, source="lessons")
            for x in state.lessons
        )
    notes: list[LessonNote] = []
    for d in diagnoses:
        text = " ".join(d.root_cause.split())
        if d.repair_strategy.strip():
            text += " Fix: " + " ".join(d.repair_strategy.split())
        notes.append(
            LessonNote(
                text=text[:MAX_LESSON_CHARS],
                failure=_failing(state, state.attempt(d.iteration)),
                source="diagnosis",
            )
        )
    return tuple(notes)


def _solution(state: HealState) -> SolutionNote | None:
    if state.status != "verified" or not state.final_code:
        return None
    chosen = next((a for a in reversed(state.attempts) if a.code == state.final_code), None)
    passed = (
        {r.test_id for r in chosen.report.results if r.outcome == "passed"}
        if chosen is not None and chosen.report is not None
        else set()
    )
    ordered = sorted((t for t in state.tests if t.id in passed), key=lambda t: not t.trusted)
    if not any(t.verifies for t in ordered):
        return None  # only a trusted test that checks a value makes a solution worth reusing
    return SolutionNote(
        code=state.final_code,
        signature=state.spec.signature or "",
        evidence=state.evidence.model_dump(mode="json") if state.evidence else {},
        tests=tuple(t.source for t in ordered),
    )


def learnt_from(state: HealState) -> Learnt:
    """What ``state`` (a finished run) leaves in the memory."""
    used = tuple(
        int(r.id[1:]) for r in state.remembered if r.kind == "lesson" and r.id[1:].isdigit()
    )
    return Learnt(
        run_id=state.run_id,
        spec=state.spec.text,
        entry_point=state.spec.entry_point,
        status=state.status,
        verified=state.status == "verified",
        lessons=_lessons(state),
        solution=_solution(state),
        used=used,
    )
