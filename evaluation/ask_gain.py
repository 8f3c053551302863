"""What a simulated user's answers bought: a ``+askN`` mode (``--ask N``) against the same mode
without questions, on the tasks both ran: right answers gained per question asked."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.modes import asks_of, without_asks
from evaluation.records import TaskRecord
from selfheal.records import Record

__all__ = ["AskGain", "ask_gain"]


class AskGain(Record):
    """One ``+askN`` mode against its mode without questions."""

    mode: str
    """The mode with a simulated user (``heal+ask2``)."""
    base: str
    """The same mode without questions (``heal``)."""
    answers: int
    """The answers it allowed a run (N)."""
    tasks: int
    """Tasks both ran (harness errors left out)."""
    base_passed: int
    """Of those, passed (and credited) without questions."""
    passed: int
    """Of those, passed (and credited) with the simulated user."""
    gained: tuple[str, ...] = ()
    """Tasks that pass only with the questions."""
    lost: tuple[str, ...] = ()
    """Tasks that pass only without them."""
    asked: int = 0
    """Questions asked over those tasks."""
    answered: int = 0
    """Questions answered with an output or a value (not skipped)."""
    tasks_asked: int = 0
    """Tasks where at least one question was asked."""
    verified: int = 0
    """Tasks verified with the simulated user."""
    base_verified: int = 0
    """Tasks verified without it."""
    leaked: int = 0
    """Runs with the simulated user that the leak check flagged (not credited): an answer that
    equals a secret hidden assertion counts as one (docs/evaluation.md)."""

    @property
    def per_question(self) -> float | None:
        """Right answers gained (net) per question asked; None when none was asked."""
        return (self.passed - self.base_passed) / self.asked if self.asked else None


def ask_gain(records: Sequence[TaskRecord], mode: str) -> AskGain | None:
    """``mode`` (a ``+askN`` label) against its base on the tasks both hold a record of; None
    when ``mode`` has no questions or the base was not run."""
    n = asks_of(mode)
    base = without_asks(mode)
    if not n:
        return None
    mine = {r.task_id: r for r in records if r.mode == mode and r.status != "harness_error"}
    theirs = {r.task_id: r for r in records if r.mode == base and r.status != "harness_error"}
    common = [t for t in mine if t in theirs]
    if not common:
        return None
    with_q = [mine[t] for t in common]
    without = [theirs[t] for t in common]
    return AskGain(
        mode=mode,
        base=base,
        answers=n,
        tasks=len(common),
        base_passed=sum(r.credited for r in without),
        passed=sum(r.credited for r in with_q),
        gained=tuple(t for t in common if mine[t].credited and not theirs[t].credited),
        lost=tuple(t for t in common if theirs[t].credited and not mine[t].credited),
        asked=sum(r.asked for r in with_q),
        answered=sum(r.answered for r in with_q),
        tasks_asked=sum(1 for r in with_q if r.asked),
        verified=sum(r.verified for r in with_q),
        base_verified=sum(r.verified for r in without),
        leaked=sum(r.leaked for r in with_q),
    )


def _tasks(ids: tuple[str, ...]) -> str:
    """``2 (a, b)``; ``0``."""
    shown = ", ".join(ids[:4]) + (", ..." if len(ids) > 4 else "")
    return f"{len(ids)} ({shown})" if ids else "0"


def ask_table(gains: Sequence[AskGain]) -> list[str]:
    """The report's markdown table of ``gains``."""
    if not gains:
        return []
    lines = [
        "## Asking a simulated user (the reference answers heal's questions)",
        "",
        "| mode | vs | tasks | passed without | passed with | gained | lost | questions "
        "asked | answered | tasks asked | right answers gained per question | verified "
        "without / with | leaks |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for g in gains:
        per = f"{g.per_question:+.2f}" if g.per_question is not None else "n/a (none asked)"
        lines.append(
            f"| `{g.mode}` | `{g.base}` | {g.tasks} | {g.base_passed} | {g.passed} | "
            f"{_tasks(g.gained)} | {_tasks(g.lost)} | "
            f"{g.asked} | {g.answered} | {g.tasks_asked} | {per} | "
            f"{g.base_verified} / {g.verified} | {g.leaked} |"
        )
    lines.append("")
    return lines
