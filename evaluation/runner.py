"""Run every (task, mode) pair: the agent sees the prompt only, the reference tests score
its code afterwards, and each result is appended to ``results.jsonl`` as soon as it exists."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol

from evaluation.errors import ResultsFileError
from evaluation.honesty import check_calls
from evaluation.modes import config_for, split_mode
from evaluation.recording import RecordingProvider
from evaluation.records import AttemptRecord, TaskRecord, TestRecord
from evaluation.results_file import ResultsFile
from evaluation.scoring import DEFAULT_LIMITS, ReferenceVerdict, score
from evaluation.suites import Task
from selfheal.config import HealConfig
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm.base import Provider

__all__ = ["BenchmarkRunner", "HealFunction", "default_executor", "heal_quietly"]


class HealFunction(Protocol):
    """The shape of ``selfheal.heal`` the runner calls."""

    def __call__(
        self, spec: str, *, provider: Any, config: HealConfig, entry_point: str | None
    ) -> Any: ...


def heal_quietly(spec: str, *, provider: Any, config: HealConfig, entry_point: str | None) -> Any:
    """``selfheal.heal`` without a frontend: run inside a notebook, a benchmark shows no view
    per task (the records hold everything a view would show)."""
    from selfheal import HealRequest, Run

    request = HealRequest(spec, provider=provider, config=config, entry_point=entry_point)
    return Run.start(request).run()


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


class BenchmarkRunner:
    """Runs tasks × modes with one provider and writes one ``TaskRecord`` per pair."""

    def __init__(
        self,
        *,
        tasks: Sequence[Task],
        modes: Sequence[str],
        provider: Provider | None = None,
        provider_factory: Callable[[], Provider] | None = None,
        results: ResultsFile,
        heal: HealFunction | None = None,
        executor_factory: Callable[[], Executor] = default_executor,
        max_iterations: int | None = None,
        temperature: float = 0.0,
        workers: int = 1,
        config_extra: Mapping[str, object] | None = None,
        score_limits: Limits = DEFAULT_LIMITS,
        progress: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1 (got {workers}).")
        if (provider is None) == (provider_factory is None):
            raise ConfigError(
                "BenchmarkRunner needs exactly one of provider= (shared by every run) and "
                "provider_factory= (a new provider for each run)."
            )
        self.tasks = list(tasks)
        self.modes = list(modes)
        self.provider = provider
        """The provider every (task, mode) run shares (None with ``provider_factory``)."""
        self.provider_factory = provider_factory
        """Builds each run's own provider: for providers that keep per-run state, like the
        scripted demo, whose script replays one heal."""
        self.results = results
        self._heal = heal
        self._executor_factory = executor_factory
        self.workers = workers
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

    def run_one(self, task: Task, mode: str) -> TaskRecord:
        """Run the agent on ``task`` in ``mode``, then score it. Never raises for a bad
        candidate or a failing agent: both end as a failing record."""
        config = self.configs[mode]
        provider = self.provider_factory() if self.provider_factory else self.provider
        assert provider is not None  # one of the two is set (checked in __init__)
        recorder = RecordingProvider(provider)
        started = self._clock()
        try:
            result = self._heal_fn()(
                task.prompt, provider=recorder, config=config, entry_point=task.entry_point
            )
        except Exception as exc:
            # The agent itself failed (model server down, a bug): record it and go on.
            return self._record(
                task=task,
                mode=mode,
                config=config,
                recorder=recorder,
                wall=self._clock() - started,
                error=f"{type(exc).__name__}: {exc}",
            )
        wall = self._clock() - started
        return self._record(
            task=task, mode=mode, config=config, recorder=recorder, wall=wall, result=result
        )

    def _record(
        self,
        *,
        task: Task,
        mode: str,
        config: HealConfig,
        recorder: RecordingProvider,
        wall: float,
        result: Any = None,
        error: str = "",
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
            "honesty": check_calls(task, calls),
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

        executor = self._executor()
        score_started = self._clock()
        final_code: str | None = result.code
        verdict = score(task, final_code, executor, limits=self._score_limits)
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
                else score(task, first_code, executor, limits=self._score_limits)
            )
        score_time = self._clock() - score_started

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

    # ------------------------------------------------------------------ the run

    @contextmanager
    def _bar(self, total: int) -> Iterator[Any]:
        if not self._progress:
            yield None
            return
        from tqdm import tqdm

        bar = tqdm(total=total, unit="task", desc="benchmark", dynamic_ncols=True)
        try:
            yield bar
        finally:
            bar.close()

    def run(
        self, *, resume: bool = False, on_record: Callable[[TaskRecord], None] | None = None
    ) -> list[TaskRecord]:
        """Run every pending pair, appending each record as it finishes; return the new
        records. ``KeyboardInterrupt`` stops scheduling, lets running tasks end, and
        re-raises (the file then holds everything that finished)."""
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
                for n in sorted({split_mode(m)[1] for _, m in pending}):
                    phase = [(t, m) for t, m in pending if split_mode(m)[1] == n]
                    if self.workers == 1:
                        for task, mode in phase:
                            finished(self.run_one(task, mode), bar)
                    else:
                        self._run_parallel(phase, lambda r: finished(r, bar))
        finally:
            self.close()
        return new

    def _run_parallel(
        self, pending: Sequence[tuple[Task, str]], finished: Callable[[TaskRecord], None]
    ) -> None:
        queue = list(pending)
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="bench") as pool:
            running: set[Future[TaskRecord]] = set()
            try:
                while queue or running:
                    while queue and len(running) < self.workers:
                        task, mode = queue.pop(0)
                        running.add(pool.submit(self.run_one, task, mode))
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        finished(future.result())
            except BaseException:
                queue.clear()
                for future in running:
                    future.cancel()
                raise

    def close(self) -> None:
        """Shut down the scoring sandboxes."""
        with self._executor_lock:
            executor, self._shared_executor = self._shared_executor, None
        closer = getattr(executor, "close", None)
        if callable(closer):
            closer()


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
    }
