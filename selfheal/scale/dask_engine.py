"""``DaskEngine``: jobs on a Dask cluster, each worker with its own resources
(:class:`SelfhealWorker`), model limits held across the cluster (:class:`DaskGate`), each
result released once the client has it (docs/scale.md: what a dying worker costs). Needs the
``dask`` extra."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar

from selfheal._sync import enter
from selfheal.errors import ConfigError, MissingDependency
from selfheal.llm.limits import ModelLimits, configure_limits, configured_limits
from selfheal.scale.base import Finished
from selfheal.scale.resources import WorkerResources, using

if TYPE_CHECKING:
    from distributed import Client, Semaphore

try:
    import distributed
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - exercised by the optional-dependency test
    distributed = None  # type: ignore[assignment]
    WorkerPlugin = object  # type: ignore[assignment,misc]

J = TypeVar("J")
R = TypeVar("R")


def require_dask(purpose: str = "the dask executor") -> Any:
    """The ``distributed`` module, or :class:`MissingDependency` naming the extra."""
    if distributed is None:
        raise MissingDependency("distributed", "dask", purpose)
    return distributed


class DaskGate:
    """The limits of one model across a Dask cluster: a semaphore of ``max_concurrency``
    leases held while a request runs, and one of ``permits`` leases each held for the rate
    window after it was granted (so no window sees more than ``permits`` requests start).
    Both live on the scheduler; the leases of a worker that dies expire after
    ``distributed.scheduler.locks.lease-timeout``."""

    def __init__(self, worker: Any, name: str, limits: ModelLimits) -> None:
        self.limits = limits
        self._loop: asyncio.AbstractEventLoop = worker.loop.asyncio_loop
        self._window = limits.window()
        self._concurrency: Semaphore | None = None
        self._rate: Semaphore | None = None
        self._releasing: set[asyncio.Future[Any]] = set()

        def semaphore(kind: str, leases: int) -> Semaphore:
            return distributed.Semaphore(
                max_leases=leases,
                name=f"{name}-{kind}",
                scheduler_rpc=worker.scheduler,
                loop=worker.loop,
            )

        if limits.max_concurrency is not None:
            self._concurrency = semaphore("concurrency", limits.max_concurrency)
        if self._window is not None:
            self._rate = semaphore("rate", self._window[0])

    async def _on_worker_loop(self, make: Callable[[], Any]) -> Any:
        """Await ``make()`` on the worker's event loop (the semaphores belong to it) from
        whatever loop the request runs on."""

        async def run() -> Any:
            return await make()

        return await enter(run(), self._loop)

    def _release_later(self, semaphore: Semaphore, delay: float) -> None:
        def release() -> None:
            task = asyncio.ensure_future(semaphore.release())
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

        self._loop.call_soon_threadsafe(self._loop.call_later, delay, release)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        concurrency, rate = self._concurrency, self._rate
        if concurrency is not None:
            await self._on_worker_loop(concurrency.acquire)
        try:
            if rate is not None and self._window is not None:
                await self._on_worker_loop(rate.acquire)
                self._release_later(rate, self._window[1])
            yield
        finally:
            if concurrency is not None:
                await self._on_worker_loop(concurrency.release)


class SelfhealWorker(WorkerPlugin):  # type: ignore[misc,valid-type]
    """Installed on every worker of a run: its resources, and the run's model limits with
    cluster-wide gates."""

    def __init__(self, *, name: str, pool_size: int, limits: Mapping[str, ModelLimits]) -> None:
        self.name = name
        self.pool_size = pool_size
        self.limits = dict(limits)
        self.resources: WorkerResources | None = None

    def setup(self, worker: Any) -> None:
        self.resources = WorkerResources(pool_size=self.pool_size, where=str(worker.address))
        if self.limits:
            configure_limits(
                self.limits,
                gates=lambda model_id, limits: DaskGate(worker, f"{self.name}-{model_id}", limits),
            )

    def teardown(self, worker: Any) -> None:
        if self.limits:
            configure_limits(None)
        if self.resources is not None:
            self.resources.close()


def run_on_worker(plugin: str, fn: Callable[[J], R], job: J) -> R:
    """The task a worker runs: ``fn(job)`` with the worker's resources."""
    worker = distributed.get_worker()
    installed = worker.plugins.get(plugin)
    if not isinstance(installed, SelfhealWorker) or installed.resources is None:
        raise ConfigError(
            f"Worker {worker.address} has no selfheal plugin {plugin!r}: the run that "
            "submitted this job has ended."
        )
    with using(installed.resources):
        return fn(job)


class DaskEngine:
    """Jobs on a Dask cluster: the scheduler at ``address``, or a local cluster of
    ``workers`` processes (``threads`` jobs each) on 127.0.0.1 that the engine starts and
    stops. Each worker gets a kernel pool of ``pool_size`` kernels. ``limits`` (default:
    this process's configured limits) hold across the whole cluster."""

    name = "dask"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int = 2,
        threads: int = 1,
        pool_size: int = 2,
        limits: Mapping[str, ModelLimits] | None = None,
    ) -> None:
        require_dask()
        if workers < 1 or threads < 1:
            raise ConfigError(
                f"A local Dask cluster needs at least 1 worker and 1 thread (got {workers} "
                f"and {threads})."
            )
        self.address = address
        self.workers = workers
        self.threads = threads
        self.pool_size = pool_size
        self.limits = dict(limits) if limits is not None else None
        self.run_id = f"selfheal-{uuid.uuid4().hex[:12]}"
        self._cluster: Any = None
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        """The engine's (asynchronous) client while it runs."""
        if self._client is None:
            raise ConfigError("use the engine as `async with engine:` before running jobs")
        return self._client

    async def __aenter__(self) -> DaskEngine:
        try:
            if self.address is None:
                self._cluster = await distributed.LocalCluster(
                    n_workers=self.workers,
                    threads_per_worker=self.threads,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    asynchronous=True,
                )
                self._client = await distributed.Client(self._cluster, asynchronous=True)
            else:
                self._client = await distributed.Client(self.address, asynchronous=True)
        except OSError as exc:
            await self._close()
            raise ConfigError(
                f"Could not reach the Dask scheduler at {self.address}: {exc}. Start one "
                "(`dask scheduler`, then `dask worker ADDRESS` on each machine) or leave the "
                "address out to run a local cluster."
            ) from exc
        limits = self.limits if self.limits is not None else configured_limits()
        plugin = SelfhealWorker(name=self.run_id, pool_size=self.pool_size, limits=limits)
        await self.client.register_plugin(plugin, name=self.run_id)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        client, self._client = self._client, None
        cluster, self._cluster = self._cluster, None
        if client is not None:
            with suppress(Exception):  # workers that are gone have nothing to tear down
                if client.status == "running":
                    await client.unregister_worker_plugin(self.run_id)
            await client.close()
        if cluster is not None:
            await cluster.close()

    async def run(self, fn: Callable[[J], R], jobs: Sequence[J]) -> AsyncIterator[Finished[J, R]]:
        client = self.client
        jobs = list(jobs)
        if not jobs:
            return
        keys = [f"{self.run_id}-{i}" for i in range(len(jobs))]
        futures = {
            key: client.submit(run_on_worker, self.run_id, fn, job, key=key, pure=False)
            for key, job in zip(keys, jobs, strict=True)
        }
        index = {key: i for i, key in enumerate(keys)}
        try:
            async for future in distributed.as_completed(list(futures.values())):
                i = index[future.key]
                result: Any = None
                error: BaseException | None = None
                try:
                    result = await future
                except Exception as exc:
                    error = exc
                # the client now holds the result: let the cluster forget it, so a worker
                # that dies later takes nothing with it that would have to run again
                futures.pop(future.key, None)
                future.release()
                yield Finished(index=i, job=jobs[i], result=result, error=error)
        finally:
            left = list(futures.values())
            if left and client.status == "running":
                await client.cancel(left)
