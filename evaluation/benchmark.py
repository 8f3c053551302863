"""Run every (task, mode) pair of a benchmark (``evaluation.pair`` runs one), here or on a
cluster, appending each record to ``results.jsonl`` as soon as it exists; ``--resume`` goes on
where an interrupted run stopped."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from evaluation.errors import ResultsFileError
from evaluation.modes import base_of, config_for, split_mode
from evaluation.pair import (
    HealFunction,
    RemotePairs,
    default_executor,
    error_record,
    heal_quietly,
    run_pair,
)
from evaluation.paired import archive_run, base_history, paired_record, shared_calls
from evaluation.records import TaskRecord
from evaluation.results_file import ResultsFile
from evaluation.scoring import DEFAULT_LIMITS
from evaluation.suites import Task
from selfheal.errors import ConfigError
from selfheal.kernel_sandbox.types import Executor, Limits
from selfheal.llm.base import Provider
from selfheal.scale import Engine, LocalEngine, stream
from selfheal.state import HealState

__all__ = ["BenchmarkRunner"]


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
            if config.storage.memory and config.storage.memory_path is None:
                self.configs[m] = config.changed(memory_path=str(self.memory_path))
        self._score_limits = score_limits
        self._progress = progress
        self._clock = clock
        self._executor_lock = threading.Lock()
        self._shared_executor: Executor | None = None
        self.paired = paired
        """Modes with a base (``modes.base_of``) continue its run of the task (``--paired``)."""
        self.archive = results.path.parent / "runs"
        """Where the base runs' logs are kept for the paired modes (``archive_run``)."""
        self._bases = {b for m in self.modes if (b := base_of(m))} if paired else set()

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

    def _pair_provider(self) -> Provider:
        provider = self.provider_factory() if self.provider_factory else self.provider
        assert provider is not None  # one of the two is set (checked in __init__)
        return provider

    def _pair(self, task: Task, mode: str, provider: Provider, **how: Any) -> TaskRecord:
        """``run_pair`` with this runner's sandbox and settings (``how``: the rest, such as
        where a paired mode starts)."""
        return run_pair(
            task,
            mode,
            provider=provider,
            heal=self._heal or heal_quietly,
            executor=self._executor,
            score_limits=self._score_limits,
            clock=self._clock,
            **{"config": self.configs[mode], **how},
        )

    def run_one(self, task: Task, mode: str, *, cold: bool = False) -> TaskRecord:
        """Run the agent on ``task`` in ``mode`` here, then score it. Never raises for a bad
        candidate or a failing agent: both end as a failing record. ``cold``: first erase the
        prompts the model server has cached (a provider with ``forget_prompts``), so that this
        run is not served prompts an earlier mode of the same task processed."""
        provider = self._pair_provider()
        forget = getattr(provider, "forget_prompts", None)
        if cold and callable(forget):
            forget()
        return self._pair(task, mode, provider)

    def run_paired(self, task: Task, mode: str) -> TaskRecord:
        """``mode`` on ``task`` as a branch of its base mode's run of the task
        (``evaluation.paired``); a run of its own, unpaired, when that run or its log is
        missing."""
        base_mode = base_of(mode)
        assert base_mode is not None  # (run_paired is asked for paired modes only)
        base = self.results.latest().get((task.id, base_mode))
        config = self.configs[base_mode]
        history = None if base is None else base_history(base, config, self.archive)
        if base is None or history is None:
            return self.run_one(task, mode, cold=True)
        archive_run(base, config, self.archive)  # a base recorded before it was kept
        provider = self._pair_provider()

        def run_from(state: HealState) -> TaskRecord:
            how = {"config": state.config, "start": state, "prior_calls": shared_calls(state)}
            return self._pair(task, mode, provider, **how)

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
            c.storage.memory_path == str(self.memory_path) for c in self.configs.values()
        ):
            raise ResultsFileError(
                f"{self.memory_path} already holds a memory, and a memory mode's first pass must "
                "start from an empty one. Move it away, or pass --resume to continue that run."
            )
        pending = self.plan(resume=resume)
        previous = self.results.latest() if resume else {}
        counts: dict[str, list[int]] = {m: [0, 0] for m in self.modes}  # passed, total

        def count(record: TaskRecord) -> None:
            counts[record.mode][0] += record.passed
            counts[record.mode][1] += 1

        ids = {t.id for t in self.tasks}
        for (task_id, mode), record in previous.items():
            if mode in counts and task_id in ids and not record.error:
                count(record)
        new: list[TaskRecord] = []

        def finished(record: TaskRecord, bar: Any) -> None:
            self.results.append(record)
            if record.mode in self._bases:
                archive_run(record, self.configs[record.mode], self.archive)
            new.append(record)
            count(record)
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
                        if self.paired and base_of(mode):
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
        base = base_of(mode)
        if base is not None and (base not in modes or modes.index(base) > modes.index(mode)):
            raise ConfigError(
                f"--paired: {mode} continues {base}'s runs; put {base} before it in --modes."
            )
