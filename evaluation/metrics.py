"""Aggregate ``TaskRecord``s into per-mode metrics, per-category breakdowns and paired
comparisons against the baseline mode."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from evaluation.records import TaskRecord
from selfheal.records import Record
from selfheal.state.timeline import Tokens

__all__ = [
    "CategoryMetrics",
    "Comparison",
    "MemoryUse",
    "ModeMetrics",
    "PairedUse",
    "compare",
    "memory_use",
    "paired_use",
    "summarise",
]


class CategoryMetrics(Record):
    """Pass counts of one category in one mode."""

    tasks: int
    """Tasks scored."""
    passed: int
    """Tasks whose final code passed the reference tests."""
    pass_rate: float
    """passed / tasks."""


class ModeMetrics(Record):
    """Everything measured for one mode."""

    mode: str
    """Mode name."""
    tasks: int
    """Tasks scored in this mode."""
    passed: int
    """Final code passed the reference tests, and no reference assertion leaked to the model
    (``TaskRecord.credited``: a leaky run that passes is not counted)."""
    pass_at_1: float
    """passed / tasks (reference-validated pass@1, temperature 0, one run per task)."""
    first_attempt_passed: int
    """The first attempt's code passed the reference tests."""
    first_attempt_rate: float
    """first_attempt_passed / tasks."""
    healed: int
    """First attempt failed the reference, final code passed."""
    broken: int
    """First attempt passed the reference, final code failed (repair made it worse)."""
    verified: int
    """The agent reported success."""
    false_success: int
    """Reported success while the reference tests fail."""
    false_success_rate: float
    """false_success / verified (0 when nothing was verified)."""
    false_failure: int
    """The agent gave up (failed/exhausted) while the reference tests pass."""
    gave_up: int = 0
    """The agent tested its code and gave up (``failed``/``exhausted``)."""
    disputed: int = 0
    """The agent gave up while its final code passes every trusted test and only
    model-written tests fail (see ``TaskRecord.disputed``)."""
    disputed_passed: int = 0
    """Of ``disputed``, how many pass the reference tests (the model's tests were wrong)."""
    harness_errors: int
    """Runs where the agent raised instead of returning (counted as not passed)."""
    leaks: int
    """Runs where a reference assertion was found in a message to the model (must be 0)."""
    mean_iterations: float
    """Mean code versions per task."""
    mean_llm_calls: float
    """Mean model calls per task."""
    prompt_tokens: int
    """Total prompt tokens."""
    completion_tokens: int
    """Total completion tokens."""
    tokens_per_pass: float | None = None
    """(prompt + completion tokens) / tasks passed: what one right answer cost in tokens
    (None when nothing passed)."""
    cached_tokens: int = 0
    """Total prompt tokens the server reused from its prompt cache (not processed again); 0 in
    summaries written before it was kept."""
    warm_starts: int = 0
    """Runs whose first model call found prompt tokens already cached: a cold start
    (``forget_prompts``) leaves none, so these ran on prompts processed before them."""
    mean_wall_time: float
    """Mean seconds per task (agent only)."""
    median_wall_time: float
    """Median seconds per task (agent only)."""
    total_wall_time: float
    """Sum of seconds over tasks (agent only)."""
    by_category: dict[str, CategoryMetrics]
    """Breakdown by task category."""


class Comparison(Record):
    """Paired comparison of a mode against the baseline on the tasks both ran."""

    baseline: str
    """Baseline mode (usually ``single_shot``)."""
    mode: str
    """Compared mode."""
    tasks: int
    """Tasks both modes ran."""
    both: int
    """Passed in both."""
    gained: tuple[str, ...]
    """Task ids the mode passed and the baseline failed."""
    lost: tuple[str, ...]
    """Task ids the baseline passed and the mode failed."""
    neither: int
    """Failed in both."""


class MemoryUse(Record):
    """What the runs of one mode recalled from the memory across runs, and what it did."""

    mode: str
    """The mode (a pass of ``heal-memory``)."""
    tasks: int
    """Tasks scored in this mode."""
    lessons: int
    """Tasks whose prompts got at least one remembered lesson."""
    solutions: int
    """Tasks where a remembered verified solution joined the first round."""
    chosen: int
    """Of those, tasks whose chosen candidate is the remembered solution (not a model answer
    with the same behaviour)."""
    chosen_passed: int
    """Of those, tasks where it passes the reference tests."""


class PairedUse(Record):
    """A paired mode (``--paired``) against its base mode, task by task."""

    mode: str
    """The paired mode."""
    base: str
    """The base mode whose runs it continued."""
    tasks: int
    """Tasks with a record of both."""
    unpaired: int
    """Of those, tasks the mode ran on its own (the base run's log was missing)."""
    diverged: int
    """Tasks where its switch mattered and the run went on its own way."""
    at_nodes: dict[str, int]
    """Where those branches started: node -> tasks."""
    passed: int
    """Of the diverged tasks, those the mode passes."""
    base_passed: int
    """Of the diverged tasks, those the base mode passes."""
    extra_seconds: float
    """Mean seconds the mode's runs took beyond the base's on the diverged tasks."""


def paired_use(records: Iterable[TaskRecord], mode: str) -> PairedUse | None:
    """``mode`` against the base it was paired with (None when no record of it is paired)."""
    rs = list(records)
    mine = {r.task_id: r for r in rs if r.mode == mode}
    base_mode = next((r.paired.base for r in mine.values() if r.paired is not None), None)
    if base_mode is None:
        return None
    base = {r.task_id: r for r in rs if r.mode == base_mode}
    both = [(mine[t], base[t]) for t in mine if t in base]
    diverged = [(m, b) for m, b in both if m.paired is not None and m.paired.diverged]
    nodes: dict[str, int] = {}
    for m, _ in diverged:
        assert m.paired is not None
        nodes[m.paired.at_node] = nodes.get(m.paired.at_node, 0) + 1
    return PairedUse(
        mode=mode,
        base=base_mode,
        tasks=len(both),
        unpaired=sum(m.paired is None for m, _ in both),
        diverged=len(diverged),
        at_nodes=nodes,
        passed=sum(m.credited for m, _ in diverged),
        base_passed=sum(b.credited for _, b in diverged),
        extra_seconds=_rate(sum(m.wall_time - b.wall_time for m, b in diverged), len(diverged)),
    )


def _first_call_cached(record: TaskRecord) -> int:
    """The prompt tokens the run's first model call found cached (0 without a call)."""
    calls = (e for e in record.timeline if e.get("kind") == "llm")
    return int(next(calls, {}).get("cached_tokens") or 0)


def _rate(part: float, whole: int) -> float:
    return part / whole if whole else 0.0


def summarise(records: Iterable[TaskRecord], mode: str) -> ModeMetrics:
    """Metrics of ``mode`` over ``records`` (records of other modes are ignored)."""
    rs = [r for r in records if r.mode == mode]
    n = len(rs)
    passed = sum(r.credited for r in rs)
    verified = sum(r.verified for r in rs)
    false_success = sum(r.false_success for r in rs)
    walls = [r.wall_time for r in rs]
    usage = sum((r.usage for r in rs), Tokens())
    categories: dict[str, CategoryMetrics] = {}
    for category in sorted({r.category for r in rs}):
        group = [r for r in rs if r.category == category]
        ok = sum(r.credited for r in group)
        categories[category] = CategoryMetrics(
            tasks=len(group), passed=ok, pass_rate=_rate(ok, len(group))
        )
    return ModeMetrics(
        mode=mode,
        tasks=n,
        passed=passed,
        pass_at_1=_rate(passed, n),
        first_attempt_passed=sum(r.first_attempt_passed and not r.leaked for r in rs),
        first_attempt_rate=_rate(sum(r.first_attempt_passed and not r.leaked for r in rs), n),
        healed=sum(r.healed for r in rs),
        broken=sum(r.first_attempt_passed and not r.passed for r in rs),
        verified=verified,
        false_success=false_success,
        false_success_rate=_rate(false_success, verified),
        false_failure=sum(r.false_failure for r in rs),
        gave_up=sum(r.status in ("failed", "exhausted") for r in rs),
        disputed=sum(r.disputed for r in rs),
        disputed_passed=sum(r.disputed and r.credited for r in rs),
        harness_errors=sum(bool(r.error) for r in rs),
        leaks=sum(r.leaked for r in rs),
        mean_iterations=statistics.fmean([r.iterations for r in rs]) if rs else 0.0,
        mean_llm_calls=statistics.fmean([r.usage.calls for r in rs]) if rs else 0.0,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        tokens_per_pass=usage.total_tokens / passed if passed else None,
        cached_tokens=usage.cached_tokens,
        warm_starts=sum(_first_call_cached(r) > 0 for r in rs),
        mean_wall_time=statistics.fmean(walls) if walls else 0.0,
        median_wall_time=statistics.median(walls) if walls else 0.0,
        total_wall_time=sum(walls),
        by_category=categories,
    )


def compare(records: Sequence[TaskRecord], baseline: str, mode: str) -> Comparison:
    """Paired comparison of ``mode`` against ``baseline`` on the tasks both have."""
    base = {r.task_id: r.credited for r in records if r.mode == baseline}
    other = {r.task_id: r.credited for r in records if r.mode == mode}
    common = [t for t in base if t in other]
    return Comparison(
        baseline=baseline,
        mode=mode,
        tasks=len(common),
        both=sum(base[t] and other[t] for t in common),
        gained=tuple(t for t in common if other[t] and not base[t]),
        lost=tuple(t for t in common if base[t] and not other[t]),
        neither=sum(not base[t] and not other[t] for t in common),
    )


def memory_use(records: Iterable[TaskRecord], mode: str) -> MemoryUse:
    """What ``mode``'s runs recalled (``TaskRecord.remembered``) and how often a remembered
    solution was the chosen candidate."""
    rs = [r for r in records if r.mode == mode]
    recalled = [r for r in rs if any(x.get("kind") == "solution" for x in r.remembered)]
    chosen = [
        r
        for r in recalled
        if any(c.get("origin") == "memory" and c.get("chosen") for c in r.candidates)
    ]
    return MemoryUse(
        mode=mode,
        tasks=len(rs),
        lessons=sum(any(x.get("kind") == "lesson" for x in r.remembered) for r in rs),
        solutions=len(recalled),
        chosen=len(chosen),
        chosen_passed=sum(r.credited for r in chosen),
    )
