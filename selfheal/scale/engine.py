"""Engines: fan jobs out to workers and hand back each result as it finishes:
:class:`LocalEngine` (threads of this process) here, ``DaskEngine`` in ``dask_engine.py``
(docs/scale.md). Each job runs with its worker's resources (``resources.current``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from selfheal._sync import sync_iter_twin
from selfheal.errors import ConfigError
from selfheal.llm.limits import ModelLimits, configure_limits, configured_limits
from selfheal.scale.base import Engine, EngineName, Finished
from selfheal.scale.resources import WorkerResources, using

J = TypeVar("J")
R = TypeVar("R")


class LocalEngine:
    """``workers`` jobs at once, in threads of this process, sharing one
    :class:`WorkerResources` (one kernel pool of ``pool_size`` kernels)."""

    name = "local"

    def __init__(
        self,
        workers: int = 4,
        *,
        pool_size: int = 2,
        limits: Mapping[str, ModelLimits] | None = None,
    ) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be at least 1 (got {workers}).")
        self.workers = workers
        self.pool_size = pool_size
        self.limits = dict(limits) if limits is not None else None
        self._resources: WorkerResources | None = None

    async def __aenter__(self) -> LocalEngine:
        if self.limits is not None:
            configure_limits({**configured_limits(), **self.limits})
        self._resources = WorkerResources(pool_size=self.pool_size, where="local")
        return self

    async def __aexit__(self, *exc: object) -> None:
        resources, self._resources = self._resources, None
        if resources is not None:
            await asyncio.to_thread(resources.close)

    def _call(self, fn: Callable[[J], R], job: J) -> R:
        assert self._resources is not None
        with using(self._resources):
            return fn(job)

    async def run(self, fn: Callable[[J], R], jobs: Sequence[J]) -> AsyncIterator[Finished[J, R]]:
        if self._resources is None:
            raise ConfigError("use the engine as `async with engine:` before running jobs")
        jobs = list(jobs)
        queue: asyncio.Queue[tuple[int, Future[R]]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def report(i: int, done: Future[R]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (i, done))

        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="selfheal-job")
        try:
            for i, job in enumerate(jobs):
                future = pool.submit(self._call, fn, job)
                future.add_done_callback(functools.partial(report, i))
            for _ in jobs:
                i, future = await queue.get()
                if future.cancelled():
                    continue
                error = future.exception()
                yield Finished(
                    index=i,
                    job=jobs[i],
                    result=None if error is not None else future.result(),
                    error=error,
                )
        finally:
            # jobs not started are dropped; running ones end on their own (a thread cannot
            # be stopped) and their results are not reported
            pool.shutdown(wait=False, cancel_futures=True)


def make_engine(
    name: EngineName | str,
    *,
    workers: int = 2,
    address: str | None = None,
    pool_size: int = 2,
    limits: Mapping[str, ModelLimits] | None = None,
) -> Engine:
    """The engine ``name``: ``local`` (``workers`` threads here) or ``dask`` (the cluster at
    ``address``, or a local cluster of ``workers`` processes on 127.0.0.1)."""
    if name == "local":
        if address:
            raise ConfigError(
                "A scheduler address only means something with the dask executor; use "
                "--executor dask (or executor='dask')."
            )
        return LocalEngine(workers, pool_size=pool_size, limits=limits)
    if name == "dask":
        from selfheal.scale.dask_engine import DaskEngine

        return DaskEngine(address=address, workers=workers, pool_size=pool_size, limits=limits)
    raise ConfigError(f"Unknown executor {name!r}. Choose local or dask.")


async def astream(
    engine: Engine, fn: Callable[[J], R], jobs: Sequence[J], *then: Sequence[J]
) -> AsyncIterator[Finished[J, R]]:
    """Start ``engine``, run ``fn`` on ``jobs``, yield each ``Finished`` as it is, and stop
    the engine (also when the caller stops early). Each further batch in ``then`` starts
    once the one before it has finished, on the same workers (``index`` counts within a
    batch)."""
    async with engine:
        for batch in (jobs, *then):
            async for done in engine.run(fn, batch):
                yield done


stream: Callable[..., Iterator[Finished[Any, Any]]]
stream = sync_iter_twin(astream)
