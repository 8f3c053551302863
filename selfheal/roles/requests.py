"""The requests a generator round makes: one candidate each (its origin, prompt, variables,
temperature, and for the ``complete`` and ``script`` forms the start of its reply), their
seeds, and the variables every generator prompt shares."""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from selfheal.config import candidates_of
from selfheal.config.groups import FORMS, Form
from selfheal.spec import header_of
from selfheal.state import HealState
from selfheal.state.candidates import CandidateOrigin


@dataclass(frozen=True)
class Request:
    """One candidate to ask for."""

    origin: CandidateOrigin
    """How the candidate is made (``greedy``, ``sample``, ``patch``, ...)."""
    prompt: str
    """The prompt file (``prompts/<prompt>.yaml``) the request renders."""
    variables: dict[str, Any]
    """The prompt's variables (the spec's own are added when it is rendered)."""
    temperature: float
    """Sampling temperature (0: greedy)."""
    parent: str | None = None
    """The candidate a patch starts from."""
    prefill: str = ""
    """The start of the reply the model continues (the ``complete`` and ``script`` forms)."""
    form: Form = "instruct"
    """The prompt form: ``complete`` when the reply is prefilled with the header to continue,
    ``script`` when it is asked as EvalPlus asks it, else ``instruct``."""


SCRIPT_REPLY = (
    "Below is a Python script with a self-contained function that solves the problem and "
    "passes corresponding tests:\n```python\n"
)
"""The start of a ``script`` form's reply: EvalPlus's response prefix and an opened python block
(its instruct prompt is ``prompts/script.yaml``). The model continues it under the same stop
rules as the ``complete`` form (the closing fence; the function's end, ``FunctionEnds``)."""


def seed_for(state: HealState, where: str) -> int | None:
    """The sampling seed of one request: derived from ``HealConfig.seed`` and the request's
    place in the run (node, round, position, temperature), so a run repeated with the same seed
    asks the same questions with the same seeds; None (a random seed) without one."""
    if state.config.generation.seed is None:
        return None
    return (state.config.generation.seed * 1_000_003 + zlib.crc32(where.encode())) % 2**31


def shown_lessons(state: HealState) -> list[str]:
    """The lessons the prompts show: the rolling ones when the lessons role is on, and always
    those a human gave a fork (``Run.fork(lessons=...)``), which would otherwise be dropped."""
    given = state.parent is not None and "lessons" in state.parent.changes
    return (
        [lesson.text for lesson in state.lessons] if state.config.repairs.lessons or given else []
    )


def base_variables(state: HealState) -> dict[str, Any]:
    """The variables every generator prompt shares beside the spec's own (``_calls``)."""
    return {
        "examples": [f"{e.call} == {e.expected}" for e in state.spec.examples],
        "lessons": shown_lessons(state),
        "remembered": [r.text for r in state.remembered if r.kind == "lesson"],
        "feedback": state.feedback,
        "failures": [],
    }


def _in_form(state: HealState, base: dict[str, Any], form: Form, req: Request) -> Request:
    """``req`` asked in ``form``: as it is (``instruct``); as a completion of the spec's own
    header with that header prefilled as the start of the reply (``complete``; a spec with no
    header to complete stays ``instruct``); or as EvalPlus's instruct prompt with its response
    prefix prefilled (``script``: :data:`SCRIPT_REPLY`)."""
    if form == "instruct":
        return req
    header = header_of(state.spec)
    code_spec = header is not None and header != f"def {state.spec.entry_point}("
    if form == "script":
        variables = {**base, "code_spec": code_spec}
        return replace(req, prompt="script", variables=variables, prefill=SCRIPT_REPLY, form=form)
    if header is None:
        return req
    variables = {**base, "header": header, "code_spec": code_spec}
    return replace(
        req, prompt="complete", variables=variables, prefill=f"```python\n{header}", form=form
    )


def first_answers(state: HealState, base: dict[str, Any]) -> list[Request]:
    """The greedy answer in each form of ``HealConfig.first_answer``, the lead first (``both``:
    completing the header, then instructed)."""
    greedy = Request("greedy", "generator", base, state.config.calls.temperature)
    return [_in_form(state, base, f, greedy) for f in FORMS[state.config.generation.first_answer]]


def population_draws(state: HealState) -> tuple[tuple[Form, ...], tuple[float, ...]]:
    """The forms and the temperatures the first round's samples take turns across:
    ``population_forms`` (empty: the forms of ``first_answer``) and
    ``population_temperatures`` (empty: ``sample_temperature``)."""
    g = state.config.generation
    forms = g.population_forms or FORMS[g.first_answer]
    return forms, g.population_temperatures or (g.sample_temperature,)


def samples_in_turn(state: HealState, base: dict[str, Any], asked: int, n: int) -> list[Request]:
    """``n`` sampled answers of the first round after ``asked`` model answers: the round's
    k-th answer (its greedy answers counted) is asked in the k-th form and at the k-th
    temperature of :func:`population_draws`, each list repeated as long as needed."""
    forms, temperatures = population_draws(state)
    return [
        _in_form(
            state,
            base,
            forms[(asked + i) % len(forms)],
            Request("sample", "generator", base, temperatures[(asked + i) % len(temperatures)]),
        )
        for i in range(n)
    ]


def first_round_batches(state: HealState) -> tuple[int, ...]:
    """The batch sizes the first round asks a backend for: how many of its requests share one
    prompt and temperature (sampled answers waiting together are decoded as one batch, the
    greedy answers one by one), smallest first; e.g. ``(1, 3)`` for 8 candidates in both
    forms. A backend warms these up before the run needs them (docs/gpu.md)."""
    base = base_variables(state)
    want = min(state.config.generation.first_sample, candidates_of(state.config))
    requests = first_answers(state, base)[:want]
    requests += samples_in_turn(state, base, len(requests), max(0, want - len(requests)))
    together = Counter((r.prompt, r.prefill, r.temperature) for r in requests)
    return tuple(sorted({n if t > 0 else 1 for (_, _, t), n in together.items()}))
