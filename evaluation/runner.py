"""Run every (task, mode) pair: the agent sees the prompt only, the reference tests score
its code afterwards, and each result is appended to ``results.jsonl`` as soon as it exists."""

from __future__ import annotations

import functools
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from evaluation.errors import ResultsFileError
from evaluation.honesty import check_calls
from evaluation.modes import PAIRED, config_for, split_mode
from evaluation.paired import archive_run, base_history, paired_record, shared_calls
from evaluation.recording import RecordedCall, RecordingProvider
from evaluation.records import AttemptRecord, TaskRecord, TestRecord
from evaluation.results_file import ResultsFile
from evaluation.scoring import DEFAULT_LIMITS, ReferenceVerdict, score
from evaluation.suites import Task
from selfheal.config import HealConfig
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm.base import Provider
from selfheal.scale import Engine, LocalEngine, current, stream
from selfheal.state import HealState

__all__ = [
    "BenchmarkRunner",
    "HealFunction",
    "RemotePairs",
    "continue_quietly",
    "default_executor",
    "error_record",
    "heal_quietly",
    "run_pair",
]


class HealFunction(Protocol):
    """The shape of ``selfheal.heal`` the runner calls."""

    def __call__(
        self, spec: str, *, provider: Any, config: HealConfig, entry_point: str | None
    ) -> Any: ...


def heal_quietly(
    spec: str,
    *,
    provider: Any,
    config: HealConfig,
    entry_point: str | None,
    executor: Executor | None = None,
) -> Any:
    """``selfheal.heal`` without a frontend: run inside a notebook, a benchmark shows no view
    per task (the records hold everything a view would show). ``executor``: the sandbox
    (default: the shared kernel pool; a cluster worker's own pool)."""
    from selfheal import HealRequest, Run

    request = HealRequest(
        spec, provider=provider, config=config, entry_point=entry_point, executor=executor
    )
    return Run.start(request).run()


def continue_quietly(state: HealState, *, provider: Any, executor: Executor | None = None) -> Any:
    """Go on with a run from ``state`` (a branch of an earlier run: ``evaluation.paired``),
    without a frontend, as ``heal_quietly`` does for a new one."""
    from selfheal import Run
    from selfheal.graph.build import make_context

    ctx = make_context(state.config, provider, spec=state.spec.text, executor=executor)
    return Run.new(state, ctx).run()


def default_executor() -> Executor:
    """The real kernel sandbox used for scoring (thread-safe, shared by the workers)."""
    from selfheal.kernel_sandbox import KernelPool

    pool: Executor = KernelPool(size=1)
    return pool


def _dump(value: Any) -> dict[str, Any]:
    if hasattr(value, "model_dump"):
        dumped: dict[str, Any] = value.model_dump(mode="json")
        return dumped
    if hasattr(value, "to_dict"):
        as_dict: dict[str, Any] = value.to_dict()
        return as_dict
    return {"repr": repr(value)}


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
    elif config.seed is None:
        # every mode of a task samples with the same seeds: modes differ by what they do, not
        # by the luck of their samples
        config = config.model_copy(update={"seed": task_seed(task.id)})
    recorder = RecordingProvider(provider)
    started = clock()
    try:
        if start is not None:
            result = continue_quietly(start, provider=recorder)
        else:
            result = heal(
                task.prompt, provider=recorder, config=config, entry_point=task.entry_point
            )
    except Exception as exc:
        # The agent itself failed (model server down, a bug): record it and go on.
        return _record(
            task=task,
            mode=mode,
            config=config,
            recorder=recorder,
            wall=clock() - started,
            error=f"{type(exc).__name__}: {exc}",
            prior_calls=prior_calls,
        )
    wall = clock() - started
    return _record(
        task=task,
        mode=mode,
        config=config,
        recorder=recorder,
        wall=wall,
        result=result,
        executor=executor,
        score_limits=score_limits,
        clock=clock,
        prior_calls=prior_calls,
    )


def _record(
    *,
    task: Task,
    mode: str,
    config: HealConfig,
    recorder: RecordingProvider,
    wall: float,
    result: Any = None,
    error: str = "",
    executor: Callable[[], Executor] | None = None,
    score_limits: Limits = DEFAULT_LIMITS,
    clock: Callable[[], float] = time.monotonic,
    prior_calls: Sequence[RecordedCall] = (),
) -> TaskRecord:
    calls = recorder.calls
    completions = [c.completion for c in calls if c.completion is not None]
    common: dict[str, Any] = {
        "suite": task.suite,
        "task_id": task.id,
        "category": task.category,
        "mode": mode,
        "model": recorder.model_id,
        "llm_calls": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in completions),
        "completion_tokens": sum(c.completion_tokens for c in completions),
        "cached_tokens": sum(c.cached_tokens for c in completions),
        "wall_time": wall,
        "honesty": check_calls(task, [*prior_calls, *calls]),
        "config": config.model_dump(mode="json"),
    }
    if result is None:
        verdict = ReferenceVerdict(
            passed=False, outcome="no_code", message=f"The agent raised: {error}"
        )
        return TaskRecord(
            **common,
            passed=False,
            first_attempt_passed=False,
            verified=False,
            status="harness_error",
            verdict=verdict,
            error=error,
            finished_at=time.time(),
        )

    assert executor is not None
    sandbox = executor()
    score_started = clock()
    final_code: str | None = result.code
    verdict = score(task, final_code, sandbox, limits=score_limits)
    attempts = tuple(result.attempts)
    population = tuple(getattr(result, "candidates", ()) or ())
    first_verdict: ReferenceVerdict | None = None
    if attempts or population:
        # the first answer is the greedy candidate (what one generation gives), not the
        # winner of the first round
        greedy = next((c for c in population if c.origin == "greedy"), None)
        first_code = greedy.code if greedy is not None else attempts[0].code
        first_verdict = (
            verdict
            if first_code == final_code
            else score(task, first_code, sandbox, limits=score_limits)
        )
    score_time = clock() - score_started

    outcomes: dict[str, Any] = dict(result.test_outcomes())
    tests = tuple(
        TestRecord(
            id=t.id,
            origin=str(t.origin),
            trusted=bool(t.trusted),
            code=str(t.code),
            outcome=outcomes.get(t.id),
        )
        for t in result.tests
    )
    attempt_records = tuple(
        AttemptRecord(
            iteration=a.iteration,
            strategy=str(a.strategy),
            code=a.code,
            own_tests_passed=None if a.report is None else bool(a.report.passed),
        )
        for a in attempts
    )
    return TaskRecord(
        **common,
        passed=verdict.passed,
        first_attempt_passed=bool(first_verdict and first_verdict.passed),
        verified=bool(result.verified),
        status=str(result.status),
        iterations=int(result.iterations),
        score_time=score_time,
        code=final_code,
        verdict=verdict,
        first_verdict=first_verdict,
        attempts=attempt_records,
        tests=tests,
        diagnoses=tuple(_dump(d) for d in result.diagnoses),
        lessons=tuple(str(getattr(lesson, "text", lesson)) for lesson in result.lessons),
        timeline=tuple(_dump(e) for e in result.timeline),
        evidence=_dump(result.evidence) if hasattr(result, "evidence") else None,
        candidates=tuple(
            _candidate(c, chosen=c.id == _chosen(attempts, final_code)) for c in population
        ),
        remembered=tuple(_dump(r) for r in getattr(result, "remembered", ()) or ()),
        run_id=str(getattr(result, "run_id", "")),
        finished_at=time.time(),
    )


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


def error_record(task: Task, mode: str, config: HealConfig, model: str, error: str) -> TaskRecord:
    """The record of a pair whose job itself was lost (e.g. it killed too many workers):
    a harness error, run again by ``--resume``."""
    return TaskRecord(
        suite=task.suite,
        task_id=task.id,
        category=task.category,
        mode=mode,
        model=model,
        passed=False,
        first_attempt_passed=False,
        verified=False,
        status="harness_error",
        verdict=ReferenceVerdict(passed=False, outcome="no_code", message=f"Lost: {error}"),
        config=config.model_dump(mode="json"),
        error=error,
        finished_at=time.time(),
    )


class BenchmarkRunner:
    """Runs tasks × modes with one provider and writes one ``TaskRecord`` per pair.

    ``workers`` pairs run at once in this process; with ``engine`` (a
    :class:`selfheal.scale.DaskEngine`) they run on a cluster instead, and the provider must
    then be a model string (one provider per worker, from the worker's environment) or a
    ``provider_factory`` that pickles. Either way each record is appended the moment it
    comes back."""

    def __init__(
        self,
        *,
        tasks: Sequence[Task],
        modes: Sequence[str],
        provider: Provider | str | None = None,
        provider_factory: Callable[[], Provider] | None = None,
        results: ResultsFile,
        heal: HealFunction | None = None,
        executor_factory: Callable[[], Executor] = default_executor,
        max_iterations: int | None = None,
        temperature: float = 0.0,
        workers: int = 1,
        engine: Engine | None = None,
        config_extra: Mapping[str, object] | None = None,
        score_limits: Limits = DEFAULT_LIMITS,
        progress: bool = True,
        clock: Callable[[], float] = time.monotonic,
        paired: bool = False,
    ) -> None:
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1 (got {workers}).")
        if paired:
            _check_paired(list(modes), workers=workers, engine=engine)
        if (provider is None) == (provider_factory is None):
            raise ConfigError(
                "BenchmarkRunner needs exactly one of provider= (shared by every run) and "
                "provider_factory= (a new provider for each run)."
            )
        self.tasks = list(tasks)
        self.modes = list(modes)
        self.model = provider if isinstance(provider, str) else None
        """The model string the shared provider is built from (here on first use; on a
        cluster, once per worker)."""
        self._provider = None if isinstance(provider, str) else provider
        self.provider_factory = provider_factory
        """Builds each run's own provider: for providers that keep per-run state, like the
        scripted demo, whose script replays one heal."""
        self.results = results
        self._heal = heal
        self._executor_factory = executor_factory
        self.workers = workers
        self.engine = engine
        self.configs = {
            m: config_for(
                m, max_iterations=max_iterations, temperature=temperature, extra=config_extra
            )
            for m in self.modes
        }
        # the memory modes share one memory of their own, beside the results (never the
        # user's); it starts empty with the run and is kept for --resume
        self.memory_path = results.path.parent / "memory.sqlite3"
        for m, config in self.configs.items():
            if config.memory and config.memory_path is None:
                self.configs[m] = config.model_copy(update={"memory_path": str(self.memory_path)})
        self._score_limits = score_limits
        self._progress = progress
        self._clock = clock
        self._executor_lock = threading.Lock()
        self._shared_executor: Executor | None = None
        self.paired = paired
        """Modes in ``PAIRED`` continue their base mode's run of the task (``--paired``)."""
        self.archive = results.path.parent / "runs"
        """Where the base runs' logs are kept for the paired modes (``archive_run``)."""
        self._bases = {PAIRED[m] for m in self.modes if m in PAIRED} if paired else set()

    @property
    def provider(self) -> Provider | None:
        """The provider every (task, mode) run shares (None with ``provider_factory``)."""
        if self._provider is None and self.model is not None:
            with self._executor_lock:
                if self._provider is None:
                    from selfheal.llm.router import resolve_provider

                    self._provider = resolve_provider(self.model)
        return self._provider

    # ------------------------------------------------------------------ planning

    def plan(self, *, resume: bool) -> list[tuple[Task, str]]:
        """The (task, mode) pairs still to run, task-major so partial runs stay paired; a
        later pass of a mode (``heal-memory:2``) after every earlier one, the suite in order."""
        done = self.results.done() if resume else set()
        pairs = [(t, m) for t in self.tasks for m in self.modes if (t.id, m) not in done]
        return sorted(pairs, key=lambda pair: split_mode(pair[1])[1])  # stable: order kept

    # ------------------------------------------------------------------ one task

    def _executor(self) -> Executor:
        with self._executor_lock:
            if self._shared_executor is None:
                self._shared_executor = self._executor_factory()
            return self._shared_executor

    def _heal_fn(self) -> HealFunction:
        if self._heal is None:
            self._heal = heal_quietly
        return self._heal

    def run_one(self, task: Task, mode: str, *, cold: bool = False) -> TaskRecord:
        """Run the agent on ``task`` in ``mode`` here, then score it. Never raises for a bad
        candidate or a failing agent: both end as a failing record. ``cold``: first erase the
        prompts the model server has cached (a provider with ``forget_prompts``), so that this
        run is not served prompts an earlier mode of the same task processed."""
        provider = self.provider_factory() if self.provider_factory else self.provider
        assert provider is not None  # one of the two is set (checked in __init__)
        forget = getattr(provider, "forget_prompts", None)
        if cold and callable(forget):
            forget()
        return run_pair(
            task,
            mode,
            config=self.configs[mode],
            provider=provider,
            heal=self._heal_fn(),
            executor=self._executor,
            score_limits=self._score_limits,
            clock=self._clock,
        )

    def run_paired(self, task: Task, mode: str) -> TaskRecord:
        """``mode`` on ``task`` as a branch of its base mode's run of the task
        (``evaluation.paired``); a run of its own, unpaired, when that run or its log is
        missing."""
        base_mode = PAIRED[mode]
        base = self.results.latest().get((task.id, base_mode))
        config = self.configs[base_mode]
        history = None if base is None else base_history(base, config, self.archive)
        if base is None or history is None:
            return self.run_one(task, mode, cold=True)
        archive_run(base, config, self.archive)  # a base recorded before it was kept
        provider = self.provider_factory() if self.provider_factory else self.provider
        assert provider is not None

        def run_from(state: HealState) -> TaskRecord:
            return run_pair(
                task,
                mode,
                config=state.config,
                provider=provider,
                heal=self._heal_fn(),
                executor=self._executor,
                score_limits=self._score_limits,
                clock=self._clock,
                start=state,
                prior_calls=shared_calls(state),
            )

        return paired_record(
            task, mode, config=self.configs[mode], base=base, history=history, run_from=run_from
        )

    # ------------------------------------------------------------------ the run

    @contextmanager
    def _bar(self, total: int) -> Iterator[Any]:
        if not self._progress:
            yield None
            return
        try:
            from tqdm import tqdm
        except ImportError:
            print(
                'No progress bar: tqdm is not installed (pip install "selfheal[eval]"); '
                "each result is still appended to the results file as it finishes.",
                file=sys.stderr,
            )
            yield None
            return
        bar = tqdm(total=total, unit="task", desc="benchmark", dynamic_ncols=True)
        try:
            yield bar
        finally:
            bar.close()

    def run(
        self, *, resume: bool = False, on_record: Callable[[TaskRecord], None] | None = None
    ) -> list[TaskRecord]:
        """Run every pending pair, appending each record as it finishes; return the new
        records. ``KeyboardInterrupt`` stops scheduling and re-raises (the file then holds
        everything that finished; pairs still running are run again by ``--resume``)."""
        if resume:
            self.results.repair_tail()
        elif self.memory_path.exists() and any(
            c.memory_path == str(self.memory_path) for c in self.configs.values()
        ):
            raise ResultsFileError(
                f"{self.memory_path} already holds a memory, and a memory mode's first pass must "
                "start from an empty one. Move it away, or pass --resume to continue that run."
            )
        pending = self.plan(resume=resume)
        previous = self.results.latest() if resume else {}
        counts: dict[str, list[int]] = {m: [0, 0] for m in self.modes}  # passed, total
        for (task_id, mode), record in previous.items():
            if mode in counts and any(t.id == task_id for t in self.tasks) and not record.error:
                counts[mode][0] += record.passed
                counts[mode][1] += 1
        new: list[TaskRecord] = []

        def finished(record: TaskRecord, bar: Any) -> None:
            self.results.append(record)
            if record.mode in self._bases:
                archive_run(record, self.configs[record.mode], self.archive)
            new.append(record)
            counts[record.mode][0] += record.passed
            counts[record.mode][1] += 1
            if on_record is not None:
                on_record(record)
            if bar is not None:
                bar.set_postfix_str(
                    "  ".join(f"{m} {p}/{n}" for m, (p, n) in counts.items()), refresh=False
                )
                bar.update(1)

        try:
            with self._bar(len(pending)) as bar:
                # each pass starts once the one before it has finished (a second pass recalls
                # what the whole first pass learnt)
                phases = [
                    [(t, m) for t, m in pending if split_mode(m)[1] == n]
                    for n in sorted({split_mode(m)[1] for _, m in pending})
                ]
                if self.engine is None and self.workers == 1:
                    # one run at a time: each starts from a cold prompt cache (modes of a task
                    # run back to back with the same prompt; the first would warm the others)
                    for task, mode in (pair for phase in phases for pair in phase):
                        if self.paired and mode in PAIRED:
                            finished(self.run_paired(task, mode), bar)
                        else:
                            finished(self.run_one(task, mode, cold=True), bar)
                elif phases:
                    self._run_on_engine(phases, lambda r: finished(r, bar))
        finally:
            self.close()
        return new

    def _run_on_engine(
        self,
        phases: Sequence[Sequence[tuple[Task, str]]],
        finished: Callable[[TaskRecord], None],
    ) -> None:
        """Each phase on the engine's workers (one after the other, the engine started once),
        each record handed to ``finished`` as it comes back."""
        engine = self.engine or LocalEngine(self.workers)
        work: Callable[[tuple[Task, str]], TaskRecord]
        if engine.name == "local":
            work = self._run_pair_here
        else:
            if self.provider_factory is None and self.model is None:
                raise ConfigError(
                    "A Provider object cannot be sent to cluster workers; give the runner a "
                    "model string (provider='openai:MODEL') or a provider_factory."
                )
            work = RemotePairs(
                configs=self.configs,
                model=self.model,
                provider_factory=self.provider_factory,
                heal=self._heal,
                score_limits=self._score_limits,
            )
        for done in stream(engine, work, *[list(phase) for phase in phases]):
            if done.error is not None:
                if not isinstance(done.error, Exception):
                    raise done.error
                task, mode = done.job
                err = f"{type(done.error).__name__}: {done.error}"
                finished(error_record(task, mode, self.configs[mode], self.model or "", err))
            else:
                assert done.result is not None
                finished(done.result)

    def _run_pair_here(self, pair: tuple[Task, str]) -> TaskRecord:
        return self.run_one(*pair)

    def close(self) -> None:
        """Shut down the scoring sandboxes."""
        with self._executor_lock:
            executor, self._shared_executor = self._shared_executor, None
        closer = getattr(executor, "close", None)
        if callable(closer):
            closer()


def _check_paired(modes: list[str], *, workers: int, engine: Engine | None) -> None:
    """``--paired`` runs one pair at a time, each paired mode after its base mode."""
    if workers != 1 or engine is not None:
        raise ConfigError(
            "--paired runs one pair at a time in this process: drop --workers and --executor."
        )
    for mode in modes:
        if mode in PAIRED:
            base = PAIRED[mode]
            if base not in modes or modes.index(base) > modes.index(mode):
                raise ConfigError(
                    f"--paired: {mode} continues {base}'s runs; put {base} before it in --modes."
                )


def _chosen(attempts: Sequence[Any], code: str | None) -> str | None:
    """The id of the candidate the final code is (the last attempt with that code)."""
    return next((a.candidate for a in reversed(attempts) if a.code == code), None)


def _candidate(c: Any, *, chosen: bool = False) -> dict[str, Any]:
    """One member of the population, as the record keeps it."""
    report = getattr(c, "report", None)
    return {
        "id": c.id,
        "chosen": chosen,
        "origin": c.origin,
        "round": c.round,
        "parent": c.parent,
        "memory_id": getattr(c, "memory_id", None),
        "temperature": c.temperature,
        "cluster": c.cluster,
        "loaded": bool(report is not None and report.load.ok),
        "outcomes": {r.test_id: r.outcome for r in report.results} if report is not None else {},
        "behaviour": dict(c.behaviour),
        "code": c.code,
        "cost": c.cost.model_dump(mode="json") if hasattr(c, "cost") else None,
    }
