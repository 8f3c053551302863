"""Generator: the population. The first round's independent candidates (the greedy answer plus
samples), and each repair round's strategies (targeted patches, rewrites, fresh samples).

Every request of a round goes out at once (``_calls.fan_out``); the local server answers
them in parallel slots. A candidate that repeats a known version is replaced by a fresh sample.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from selfheal._parse import normalized
from selfheal.config import candidates_of
from selfheal.context import Context
from selfheal.diffs import unified_diff
from selfheal.errors import MalformedReply, ProviderError
from selfheal.examples import find_examples
from selfheal.llm.ask import with_prefill
from selfheal.llm.base import Completion
from selfheal.llm.parsing import code_like, prose
from selfheal.memory.recall import remembered_candidates
from selfheal.roles._calls import CallLog, ask_for_code, fan_out
from selfheal.roles._source import entry_point_of, missing_imports, with_prelude
from selfheal.roles.requests import (
    Request,
    base_variables,
    first_answers,
    samples_in_turn,
    seed_for,
)
from selfheal.roles.test_writer import (
    spec_blind_inputs,
    spec_blind_tests,
    wants_inputs,
    with_examples,
    with_inputs,
)
from selfheal.state import Candidate, Diagnosis, HealState, Proposal
from selfheal.state.candidates import CandidateCost, CandidateOrigin, numbered
from selfheal.testsuite import failure_lines

LOW_CONFIDENCE = 0.4
"""A diagnosis below this confidence routes to fresh samples instead of a targeted patch."""


async def _ask_round(
    state: HealState,
    ctx: Context,
    log: CallLog,
    requests: list[Request],
    *,
    round: int,
    never_empty: bool = False,
) -> list[Candidate]:
    """Ask for every request at once; returns the candidates that came back usable. With
    ``never_empty``, when none did, the code the unusable replies held (:func:`code_like`)
    comes back instead, for the sandbox to run and a repair to fix (issue 45)."""

    def job(i: int, r: Request) -> Callable[[], Awaitable[tuple[str, str, CandidateCost]]]:
        async def asked() -> tuple[str, str, CandidateCost]:
            # a reply that does not parse is asked again as a repair of it, sampled
            return await ask_for_code(
                state,
                log,
                role="generator",
                prompt=r.prompt,
                entry_point=state.spec.entry_point,
                variables=r.variables,
                temperature=r.temperature,
                seed=seed_for(
                    state, f"{log.node}:{round}:{len(state.candidates) + i}:{r.temperature}"
                ),
                prefill=r.prefill,
            )

        return asked

    # the requests that share a prompt and a temperature go through the gate side by side, so
    # that a backend that joins them (llm/together.py: llama-server's n) asks each such group
    # as one request even when the round is wider than its slots; results in request order
    order = _grouped(requests)
    asked = await fan_out(ctx, "generator", [job(i, requests[i]) for i in order])
    results = [asked[order.index(i)] for i in range(len(requests))]
    # a dead server or a bad key fails the node (the runner checkpoints and says how to go
    # on); an unusable reply only loses its candidate
    down = [
        r for r in results if isinstance(r, ProviderError) and not isinstance(r, MalformedReply)
    ]
    if down and len(down) == len(results):
        raise down[0]
    n = numbered(state.candidates)  # your code is c0: the model's count from c1
    out: list[Candidate] = []
    usable = any(not isinstance(r, BaseException) for r in results)
    for req, res in zip(requests, results, strict=True):
        if isinstance(res, BaseException):
            if not isinstance(res, MalformedReply | ProviderError):
                raise res
            log.failure(state, "generator", res)
            meant = _meant(state, req, res) if never_empty and not usable else None
            if meant is None:
                continue
            log.info(state, f"c{n + 1} {req.origin}: the code of a reply that does not parse")
            res = meant
        code, text, cost = res
        n += 1
        out.append(
            Candidate(
                id=f"c{n}",
                code=with_prelude(code, state.spec.prelude),
                origin=req.origin,
                round=round,
                parent=req.parent,
                temperature=req.temperature,
                form=req.form,
                rationale=prose(text),
                cost=cost,
            )
        )
    return out


def _grouped(requests: list[Request]) -> list[int]:
    """The positions of ``requests`` with those that share a prompt, a prefill and a
    temperature next to each other, each group where its first member was."""
    first: dict[tuple[str, str, float], int] = {}
    for i, r in enumerate(requests):
        first.setdefault(_key(r), i)
    return sorted(range(len(requests)), key=lambda i: first[_key(requests[i])])


def _key(r: Request) -> tuple[str, str, float]:
    return (r.prompt, r.prefill, r.temperature)


def _meant(
    state: HealState, req: Request, exc: ProviderError
) -> tuple[str, str, CandidateCost] | None:
    """The code an unusable reply held (the latest reply first; the first is the continuation
    of the request's prefill), as ``(code, reply, cost)``; None when none held code."""
    replies = [c for c in getattr(exc, "completions", ()) or () if isinstance(c, Completion)]
    texts = [
        with_prefill(c, req.prefill).text if i == 0 and req.prefill else c.text
        for i, c in enumerate(replies)
    ]
    for text in reversed(texts):
        code = code_like(text, entry_point=state.spec.entry_point)
        if code is not None:
            cost = CandidateCost(
                prompt_tokens=sum(c.prompt_tokens for c in replies),
                completion_tokens=sum(c.completion_tokens for c in replies),
                model_seconds=sum(c.latency for c in replies),
            )
            return code, text, cost
    return None


def _name_the_function(state: HealState, code: str, log: CallLog) -> HealState:
    """When the spec named no function, take the name the first candidate chose and read the
    spec's examples of it."""
    spec = state.spec
    if spec.entry_point is not None:
        return state
    name = entry_point_of(code)
    if not name:
        return state
    spec = spec.model_copy(
        update={"entry_point": name, "examples": spec.examples or find_examples(spec.text, name)}
    )
    return with_examples(state.model_copy(update={"spec": spec}), log)


async def generate(state: HealState, ctx: Context) -> HealState:
    """The first round: the greedy answer plus samples (``first_sample`` of them first), with
    the spec-blind test writer asked at the same time, and a remembered verified solution of a
    very similar spec when the run recalled one; or the top-up to ``candidates``."""
    cfg = state.config
    log = CallLog(ctx, "generate")
    if state.given_code is not None and not state.candidates and state.pending is None:
        return _given(state, log)
    # your code (c0) is not a model's answer: the first request still comes after it
    first_round = [c for c in state.candidates if c.round <= 1 and c.origin != "user"]
    base = base_variables(state)
    # the model's own answers count; a remembered solution is one more
    asked = sum(c.origin in ("greedy", "sample") for c in first_round)
    if not first_round and state.pending is None:
        want = min(cfg.generation.first_sample, candidates_of(cfg))
        requests = first_answers(state, base)[:want]
    else:
        want = candidates_of(cfg) - asked
        requests = []
    requests += samples_in_turn(state, base, asked + len(requests), max(0, want - len(requests)))
    wanted = cfg.tests.spec_blind_tests
    if wanted == "auto":
        wanted = not any(t.trusted for t in state.tests) or len(state.probes) < 4
    inputs = wants_inputs(state)
    write_tests = (
        wanted
        and cfg.tests.max_spec_tests > 0
        and not any(t.origin == "spec_blind" for t in state.tests)
        and not any(p.origin == "model_input" for p in state.probes)
        and not first_round
    )
    jobs: list[Callable[[], Awaitable[Any]]] = [
        lambda: _ask_round(state, ctx, log, requests, round=1, never_empty=not first_round)
    ]
    if write_tests:
        writer = spec_blind_inputs if inputs else spec_blind_tests
        jobs.append(lambda: writer(state, log))
    results = await fan_out(ctx, "generator", jobs)
    if isinstance(results[0], BaseException):
        raise results[0]
    candidates: list[Candidate] = results[0]
    if not first_round and state.pending is None:  # the first request: remembered solutions join
        remembered = remembered_candidates(state, numbered(state.candidates) + len(candidates))
        candidates += [
            c.model_copy(update={"code": with_prelude(c.code, state.spec.prelude)})
            for c in remembered
        ]
    if not candidates:
        return log.apply(state, status="failed", error="The generator gave no usable code.")
    if write_tests:
        tests = results[1]
        if isinstance(tests, BaseException):
            if not isinstance(tests, MalformedReply | ProviderError):
                raise tests
            log.failure(state, "test_writer", tests)
        elif inputs:
            state = with_inputs(state, tests)
        else:
            state = state.model_copy(update={"tests": state.tests + tests})
    state = _name_the_function(state, candidates[0].code, log)
    lead = candidates[0]
    proposal = Proposal(
        kind="initial",
        code=lead.code,
        diff=unified_diff("", lead.code),
        strategy="initial",
        rationale=lead.rationale,
        candidates=tuple(candidates),
    )
    log.info(
        state,
        f"{len(candidates)} candidate(s): " + ", ".join(f"{c.id} {c.origin}" for c in candidates),
    )
    return log.apply(state, pending=proposal, feedback="")


def _given(state: HealState, log: CallLog) -> HealState:
    """Your code first (``c0``): run before any model is asked; repairs start from it."""
    c0 = Candidate(id="c0", code=state.given_code or "", origin="user", round=1)
    log.info(state, "c0 user: your code, run before any model is asked")
    pending = Proposal(kind="initial", code=c0.code, diff="", candidates=(c0,))
    return log.apply(state, pending=pending, feedback="")


def _failures_of(state: HealState, c: Candidate) -> list[str]:
    if c.report is None:
        return []
    lines = failure_lines(state, c.report)
    if not c.report.load.ok:
        load = c.report.load
        lines.insert(0, f"the code does not load: {load.exc_type} line {load.line}: {load.message}")
    return lines


def _failing_leaders(state: HealState, limit: int) -> list[Candidate]:
    """The best failing candidates with distinct behaviour, best first (the chosen one first)."""
    chosen_id = state.current.candidate if state.current else None
    ranked = sorted(
        (c for c in state.candidates if c.report is not None),
        key=lambda c: (c.id != chosen_id, -_trusted_passed(state, c), c.round, c.id),
    )
    distinct: dict[str, Candidate] = {}
    for c in ranked:
        distinct.setdefault(normalized(c.code) + repr(sorted(c.behaviour.items())), c)
    return list(distinct.values())[:limit]


def _trusted_passed(state: HealState, c: Candidate) -> int:
    if c.report is None or not c.report.load.ok:
        return -1
    out = {r.test_id: r.outcome for r in c.report.results}
    return sum(1 for t in state.tests if t.trusted and out.get(t.id) == "passed")


async def repair(state: HealState, ctx: Context) -> HealState:
    """A repair round: a targeted patch of the best failing candidate from the diagnosis, a
    patch of the next distinct one, fresh rewrites from the spec with the failures and
    lessons; all at once. A low-confidence diagnosis routes to fresh samples only; with no
    diagnosis asked (``diagnosis=False``) the patches go from the failing tests alone."""
    cfg = state.config
    log = CallLog(ctx, "repair")
    current = state.current
    assert current is not None, "repair needs an attempt"
    diagnosis: Diagnosis | None = state.diagnoses[-1] if state.diagnoses else None
    confident = (
        diagnosis is not None
        and diagnosis.source != "heuristic"
        and diagnosis.confidence >= LOW_CONFIDENCE
    )
    leaders = _failing_leaders(state, 2)
    base = base_variables(state)
    requests: list[Request] = []
    patching = confident or candidates_of(cfg) == 1 or not cfg.repairs.diagnosis
    if patching:
        for i, c in enumerate(leaders[: 1 if cfg.repairs.repair_width < 3 else 2]):
            d = diagnosis if c.id == current.candidate else None
            requests.append(
                Request(
                    "patch",
                    "repair",
                    {
                        **base,
                        "code": c.code,
                        "failures": _failures_of(state, c),
                        "diagnosis": (f"{d.root_cause} Fix: {d.repair_strategy}" if d else ""),
                    },
                    cfg.calls.temperature if i == 0 else cfg.generation.sample_temperature,
                    parent=c.id,
                )
            )
    else:
        log.info(state, "low-confidence diagnosis: fresh samples from the spec instead of a patch")
    fresh_variables = {**base, "failures": _failures_of(state, leaders[0]) if leaders else []}
    origin: CandidateOrigin = "rewrite" if confident or not cfg.repairs.diagnosis else "regenerate"
    rewrite = Request(
        origin, "generator", fresh_variables, max(cfg.generation.sample_temperature, 0.2)
    )
    requests += [rewrite] * (cfg.repairs.repair_width - len(requests))
    round_no = state.iteration + 1
    fresh = await _ask_round(state, ctx, log, requests, round=round_no)
    seen = {normalized(c.code) for c in state.candidates}

    def unseen(c: Candidate) -> bool:
        key = normalized(c.code)
        new = key not in seen
        seen.add(key)
        return new

    kept = [c for c in fresh if unseen(c)]
    repeats = len(fresh) - len(kept)
    if repeats:
        # a repeated version brings nothing: replace it by a fresh sample, hotter
        hot = Request(
            "regenerate", "generator", fresh_variables, max(1.0, cfg.generation.sample_temperature)
        )
        state_for_ids = state.model_copy(update={"candidates": state.candidates + tuple(kept)})
        again = await _ask_round(state_for_ids, ctx, log, [hot] * repeats, round=round_no)
        kept += [c for c in again if unseen(c)]
        log.info(state, f"{repeats} repair(s) repeated a known version: resampled")
    if not kept:
        log.info(state, "every repair repeats an earlier version: no new idea")
        return log.apply(state, stop_reason="repairs repeat earlier versions")
    kept = [
        c.model_copy(update={"id": f"c{numbered(state.candidates) + i}"})
        for i, c in enumerate(kept, 1)
    ]
    lead = kept[0]
    strategy = (
        "critic_repair" if diagnosis is not None and diagnosis.source == "critic" else "repair"
    )
    proposal = Proposal(
        kind="repair",
        code=lead.code,
        previous_code=current.code,
        diff=unified_diff(current.code, lead.code),
        diagnosis=diagnosis,
        strategy=strategy,  # type: ignore[arg-type]
        rationale=lead.rationale,
        candidates=tuple(kept),
    )
    log.info(state, f"{len(kept)} candidate(s): " + ", ".join(f"{c.id} {c.origin}" for c in kept))
    return log.apply(state, pending=proposal, feedback="")


__all__ = ["entry_point_of", "generate", "missing_imports", "repair", "with_prelude"]
