"""One (task, mode) pair: the agent sees the prompt only, the reference tests score its code
afterwards, and the pair ends as one ``TaskRecord``, here or on a cluster's worker."""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evaluation.honesty import check_calls
from evaluation.modes import asks_of
from evaluation.recording import RecordedCall, RecordingProvider
from evaluation.records import AttemptRecord, TaskRecord, TestRecord
from evaluation.scoring import DEFAULT_LIMITS, ReferenceVerdict, score
from evaluation.simulated_user import SimulatedUser
from evaluation.suites import Task
from selfheal.config import HealConfig
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm.base import Provider
from selfheal.scale import current
from selfheal.state import HealState
from selfheal.state.timeline import Tokens

__all__ = [
    "HealFunction",
    "RemotePairs",
    "continue_quietly",
    "default_executor",
    "error_record",
    "heal_quietly",
    "run_pair",
    "task_seed",
]


class HealFunction(Protocol):
    """The shape of ``selfheal.heal`` the runner calls (``code`` only for a task that has
    starting code, ``Task.code``)."""

    def __call__(
        self,
        spec: str,
        *,
        provider: Any,
        config: HealConfig,
        entry_point: str | None,
        code: str | None = None,
    ) -> Any: ...


def heal_quietly(
    spec: str,
    *,
    provider: Any,
    config: HealConfig,
    entry_point: str | None,
    code: str | None = None,
    executor: Executor | None = None,
    asker: Any = None,
) -> Any:
    """``selfheal.heal`` without a frontend: run inside a notebook, a benchmark shows no view
    per task (the records hold everything a view would show). ``code``: the user's code to
    heal (``Task.code``). ``executor``: the sandbox (default: the shared kernel pool; a
    cluster worker's own pool)."""
    from selfheal import HealRequest, Run

    request = HealRequest(
        spec,
        provider=provider,
        config=config,
        entry_point=entry_point,
        code=code,
        executor=executor,
        asker=asker,
    )
    return Run.start(request).run()


def continue_quietly(
    state: HealState, *, provider: Any, executor: Executor | None = None, asker: Any = None
) -> Any:
    """Go on with a run from ``state`` (a branch of an earlier run: ``evaluation.paired``),
    without a frontend, as ``heal_quietly`` does for a new one."""
    from selfheal import Run
    from selfheal.graph.build import make_context

    ctx = make_context(state.config, provider, spec=state.spec.text, executor=executor, asker=asker)
    return Run.new(state, ctx).run()


def default_executor() -> Executor:
    """The real kernel sandbox used for scoring (thread-safe, shared by the workers)."""
    from selfheal.kernel_sandbox import KernelPool

    pool: Executor = KernelPool(size=1)
    return pool


def task_seed(task_id: str) -> int:
    """The sampling seed of a task's runs (``HealConfig.seed``): stable across processes."""
    return zlib.crc32(task_id.encode()) % 2**31


def run_pair(
    task: Task,
    mode: str,
    *,
    config: HealConfig,
    provider: Provider,
    heal: HealFunction,
    executor: Callable[[], Executor],
    score_limits: Limits = DEFAULT_LIMITS,
    clock: Callable[[], float] = time.monotonic,
    start: HealState | None = None,
    prior_calls: Sequence[RecordedCall] = (),
) -> TaskRecord:
    """Run the agent on ``task`` in ``mode``, then score it with the sandbox ``executor()``
    gives. Never raises for a bad candidate or a failing agent: both end as a failing
    record. ``start``: go on from this state of an earlier run instead of starting afresh
    (``evaluation.paired``; ``config`` must be the state's), whose model calls so far are
    ``prior_calls`` (the honesty check reads them first)."""
    if start is not None:
        config = start.config
    elif config.generation.seed is None:
        # every mode of a task samples with the same seeds: modes differ by what they do, not
        # by the luck of their samples
        config = config.model_copy(update={"seed": task_seed(task.id)})
    recorder = RecordingProvider(provider)
    started = clock()
    error = ""
    # the task's reference answers heal's questions
    asker = SimulatedUser(task, executor, limits=score_limits) if asks_of(mode) else None
    try:
        if start is not None:
            result = continue_quietly(start, provider=recorder, asker=asker)
        else:
            # starting code goes only where a task has it (a heal function may not take it)
            given: dict[str, Any] = {"code": task.code} if task.code is not None else {}
            if asker is not None:
                given["asker"] = asker
            result = heal(
                task.prompt,
                provider=recorder,
                config=config,
                entry_point=task.entry_point,
                **given,
            )
    except Exception as exc:
        result, error = None, f"{type(exc).__name__}: {exc}"
    calls = recorder.calls
    spent = Tokens.of(c.completion for c in calls if c.completion is not None)
    measured: dict[str, Any] = {
        "usage": spent.model_copy(update={"calls": len(calls)}),
        "wall_time": clock() - started,
        "honesty": check_calls(task, [*prior_calls, *calls]),
    }
    if result is None:
        # the agent itself failed (model server down, a bug): record it and go on
        return error_record(task, mode, config, recorder.model_id, error, raised=True, **measured)
    return TaskRecord(
        **_identity(task, mode, config, recorder.model_id),
        **measured,
        **_scored(task, result, executor(), score_limits, clock),
    )


def error_record(
    task: Task,
    mode: str,
    config: HealConfig,
    model: str,
    error: str,
    *,
    raised: bool = False,
    **measured: Any,
) -> TaskRecord:
    """A harness error, run again by ``--resume``: the agent ``raised`` (with what was
    ``measured`` of its run), or the pair's job itself was lost (e.g. it killed too many
    workers)."""
    message = f"The agent raised: {error}" if raised else f"Lost: {error}"
    return TaskRecord(
        **_identity(task, mode, config, model),
        **measured,
        passed=False,
        first_attempt_passed=False,
        verified=False,
        status="harness_error",
        verdict=ReferenceVerdict(passed=False, outcome="no_code", message=message),
        error=error,
        finished_at=time.time(),
    )


def _identity(task: Task, mode: str, config: HealConfig, model: str) -> dict[str, Any]:
    """The fields that name a pair's record."""
    return {
        "suite": task.suite,
        "task_id": task.id,
        "category": task.category,
        "mode": mode,
        "model": model,
        "config": config.model_dump(mode="json"),
    }


def first_answer(attempts: Sequence[Any], population: Sequence[Any]) -> str | None:
    """The code of a run's first answer: the greedy candidate (what one generation gives), not
    the winner of the first round; else the first attempt; else (a population of samples only,
    none run) the first sample; None for a run with neither."""
    greedy = next((c for c in population if c.origin == "greedy"), None)
    first = greedy or (attempts[0] if attempts else population[0] if population else None)
    return None if first is None else str(first.code)


def _scored(
    task: Task, result: Any, sandbox: Executor, limits: Limits, clock: Callable[[], float]
) -> dict[str, Any]:
    """A finished run's fields of its record: the reference verdicts on its final and first
    code, and what the run did (attempts, tests, diagnoses, candidates ...)."""
    score_started = clock()
    final_code: str | None = result.code
    verdict = score(task, final_code, sandbox, limits=limits)
    attempts = tuple(result.attempts)
    population = tuple(getattr(result, "candidates", ()) or ())
    first_verdict: ReferenceVerdict | None = None
    first_code = first_answer(attempts, population)
    if first_code is not None:
        first_verdict = (
            verdict if first_code == final_code else score(task, first_code, sandbox, limits=limits)
        )
    score_time = clock() - score_started
    outcomes: dict[str, Any] = dict(result.test_outcomes())
    chosen = next((a.candidate for a in reversed(attempts) if a.code == final_code), None)
    state = getattr(result, "state", None)
    questions = tuple(getattr(state, "questions", ()) or ())
    return {
        "asked": len(questions),
        "answered": sum(1 for q in questions if q.test_id is not None),
        "questions": tuple(_dump(q) for q in questions),
        "passed": verdict.passed,
        "first_attempt_passed": bool(first_verdict and first_verdict.passed),
        "verified": bool(result.verified),
        "status": str(result.status),
        "iterations": int(result.iterations),
        "score_time": score_time,
        "code": final_code,
        "verdict": verdict,
        "first_verdict": first_verdict,
        "attempts": tuple(
            AttemptRecord(
                iteration=a.iteration,
                strategy=str(a.strategy),
                code=a.code,
                own_tests_passed=None if a.report is None else bool(a.report.passed),
            )
            for a in attempts
        ),
        "tests": tuple(
            TestRecord(
                id=t.id,
                origin=str(t.origin),
                trusted=bool(t.trusted),
                code=str(t.code),
                outcome=outcomes.get(t.id),
            )
            for t in result.tests
        ),
        "diagnoses": tuple(_dump(d) for d in result.diagnoses),
        "lessons": tuple(str(getattr(lesson, "text", lesson)) for lesson in result.lessons),
        "timeline": tuple(_dump(e) for e in result.timeline),
        "evidence": _dump(result.evidence) if hasattr(result, "evidence") else None,
        "candidates": tuple(_candidate(c, chosen=c.id == chosen) for c in population),
        "remembered": tuple(_dump(r) for r in getattr(result, "remembered", ()) or ()),
        "run_id": str(getattr(result, "run_id", "")),
        "finished_at": time.time(),
    }


def _dump(value: Any) -> dict[str, Any]:
    if hasattr(value, "model_dump"):
        dumped: dict[str, Any] = value.model_dump(mode="json")
        return dumped
    if hasattr(value, "to_dict"):
        as_dict: dict[str, Any] = value.to_dict()
        return as_dict
    return {"repr": repr(value)}


def _candidate(c: Any, *, chosen: bool = False) -> dict[str, Any]:
    """One member of the population, as the record keeps it; ``chosen``: the final code is
    this candidate (the last attempt with that code)."""
    report = getattr(c, "report", None)
    return {
        "id": c.id,
        "chosen": chosen,
        "origin": c.origin,
        "round": c.round,
        "parent": c.parent,
        "memory_id": getattr(c, "memory_id", None),
        "temperature": c.temperature,
        "form": getattr(c, "form", None),
        "cluster": c.cluster,
        "loaded": bool(report is not None and report.load.ok),
        "outcomes": {r.test_id: r.outcome for r in report.results} if report is not None else {},
        "behaviour": dict(c.behaviour),
        "code": c.code,
        "cost": c.cost.model_dump(mode="json") if hasattr(c, "cost") else None,
    }


@dataclass(frozen=True)
class RemotePairs:
    """What a worker of a cluster needs to run pairs: shipped to the workers (it pickles),
    called there with ``(task, mode)``. The agent's candidates run in the worker's kernel pool
    and the scoring in its ``scoring`` pool."""

    configs: Mapping[str, HealConfig]
    """Mode -> the HealConfig it runs with."""
    model: str | None = None
    """A model string: one provider per worker, built there from the worker's environment."""
    provider_factory: Callable[[], Provider] | None = None
    """Or: builds each pair's own provider, on the worker."""
    heal: HealFunction | None = None
    """Replaces ``selfheal.heal`` (tests)."""
    score_limits: Limits = DEFAULT_LIMITS
    """The scoring sandbox's limits."""

    def __call__(self, pair: tuple[Task, str]) -> TaskRecord:
        task, mode = pair
        resources = current()
        heal = self.heal or functools.partial(heal_quietly, executor=resources.pool())
        provider = (
            self.provider_factory()
            if self.provider_factory is not None
            else resources.provider(self.model)
        )
        record = run_pair(
            task,
            mode,
            config=self.configs[mode],
            provider=provider,
            heal=heal,
            executor=lambda: resources.pool("scoring", size=1),
            score_limits=self.score_limits,
        )
        return record.model_copy(update={"worker": resources.where})
