"""What a run does with what it recalled: a remembered verified solution becomes one more
candidate of the first round (pure)."""

from __future__ import annotations

from selfheal.state import Candidate, HealState


def remembered_candidates(state: HealState, after: int) -> list[Candidate]:
    """The verified solutions ``state`` recalled, as ``memory`` candidates of the first round,
    numbered after ``after`` candidates. They are run and ranked like any other: one that fails
    this spec's trusted tests is never chosen."""
    solutions = [r for r in state.remembered if r.kind == "solution"]
    return [
        Candidate(
            id=f"c{after + i}",
            code=r.text,
            origin="memory",
            round=1,
            rationale=f"remembered from run {r.run_id} ({r.id}, a verified solution of a spec "
            f"{r.score:.0%} alike)",
            memory_id=r.id,
        )
        for i, r in enumerate(solutions, 1)
    ]
