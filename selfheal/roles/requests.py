"""The requests a generator round makes: one candidate each (its origin, prompt, variables,
temperature, and for the ``complete`` form the start of its reply), their seeds, and the
variables every generator prompt shares."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from selfheal.spec import header_of
from selfheal.state import HealState
from selfheal.state.candidates import CandidateOrigin

__all__ = ["Request", "base_variables", "first_answer", "seed_for"]


@dataclass(frozen=True)
class Request:
    """One candidate to ask for."""

    origin: CandidateOrigin
    prompt: str
    variables: dict[str, Any]
    temperature: float
    parent: str | None = None
    prefill: str = ""
    """The start of the reply the model continues (the ``complete`` form of the first answer)."""


def seed_for(state: HealState, where: str) -> int | None:
    """The sampling seed of one request: derived from ``HealConfig.seed`` and the request's
    place in the run (node, round, position, temperature), so a run repeated with the same seed
    asks the same questions with the same seeds; None (a random seed) without one."""
    if state.config.seed is None:
        return None
    return (state.config.seed * 1_000_003 + zlib.crc32(where.encode())) % 2**31


def shown_lessons(state: HealState) -> list[str]:
    """The lessons the prompts show: the rolling ones when the lessons role is on, and always
    those a human gave a fork (``Run.fork(lessons=...)``), which would otherwise be dropped."""
    given = state.parent is not None and "lessons" in state.parent.changes
    return [lesson.text for lesson in state.lessons] if state.config.lessons or given else []


def base_variables(state: HealState) -> dict[str, Any]:
    spec = state.spec
    return {
        "spec": spec.text,
        "signature": spec.signature or "",
        "entry_point": spec.entry_point or "",
        "examples": [f"{e.call} == {e.expected}" for e in spec.examples],
        "lessons": shown_lessons(state),
        "remembered": [r.text for r in state.remembered if r.kind == "lesson"],
        "feedback": state.feedback,
        "failures": [],
    }


def first_answer(state: HealState, base: dict[str, Any]) -> Request:
    """The greedy first answer: asked as usual (``instruct``), or as a completion of the spec's
    own header with that header prefilled as the start of the reply (``complete``)."""
    cfg = state.config
    header = header_of(state.spec) if cfg.first_answer == "complete" else None
    if header is None:
        return Request("greedy", "generator", base, cfg.temperature)
    variables = {**base, "header": header, "code_spec": header != f"def {state.spec.entry_point}("}
    return Request("greedy", "complete", variables, cfg.temperature, prefill=f"```python\n{header}")
