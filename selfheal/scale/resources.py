"""What the jobs on one worker share: its kernel pools (kernels never cross machines) and one
provider per model; a job finds them with :func:`current` while an engine runs it."""

from __future__ import annotations

import contextvars
import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from selfheal.errors import ConfigError
from selfheal.kernel_sandbox import KernelPool
from selfheal.kernel_sandbox.types import Executor
from selfheal.llm.base import Provider

ProviderSource = str | Provider | Callable[[], Provider] | None
"""How a worker gets its model: a model string (built on the worker, from the worker's
environment), a zero-argument function that builds the provider there (it must pickle for a
cluster), a Provider object (local engine only), or None for ``auto``."""

_ENV_PREFIXES = ("SELFHEAL_", "OPENAI_", "OLLAMA_", "ANTHROPIC_")


def build_provider_from(source: ProviderSource) -> Provider:
    """The provider ``source`` names, built here, behind its model's gate when limits are set
    for it."""
    from selfheal.llm.limits import apply_limits
    from selfheal.llm.router import resolve_provider

    if source is None or isinstance(source, str):
        return resolve_provider(source)  # build_provider applies the limits
    if isinstance(source, Provider):
        return apply_limits(source)
    return apply_limits(source())


class WorkerResources:
    """The kernel pools and providers of one worker. Thread-safe; ``close`` kills the pools.

    ``where`` names the worker in results (a Dask worker's address, ``local`` here)."""

    def __init__(self, *, pool_size: int = 2, where: str = "local") -> None:
        if pool_size < 1:
            raise ConfigError(f"pool_size must be at least 1 (got {pool_size}).")
        self.pool_size = pool_size
        self.where = where
        self._lock = threading.Lock()
        self._pools: dict[str, KernelPool] = {}
        self._providers: dict[object, Provider] = {}
        self._closed = False

    def pool(self, name: str = "candidates", *, size: int | None = None) -> Executor:
        """The worker's kernel pool ``name`` (started on first use; ``size`` defaults to the
        worker's ``pool_size``)."""
        with self._lock:
            if self._closed:
                raise ConfigError("these worker resources are closed; the engine has stopped")
            pool = self._pools.get(name)
            if pool is None:
                pool = KernelPool(size=size or self.pool_size).start()
                self._pools[name] = pool
            return pool

    def provider(self, source: ProviderSource) -> Provider:
        """The worker's provider for ``source``, built once (behind its model's gate when
        limits are set for it)."""
        if isinstance(source, Provider):
            return build_provider_from(source)
        key = self._key(source)
        with self._lock:
            built = self._providers.get(key)
        if built is not None:
            return built
        made = build_provider_from(source)
        with self._lock:
            return self._providers.setdefault(key, made)

    @staticmethod
    def _key(source: ProviderSource) -> object:
        if source is None or isinstance(source, str):
            # a model string means what the worker's environment says (a base URL, a key)
            env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))
            return ("model", source, hashlib.sha256(repr(env).encode()).hexdigest())
        try:  # the same function, shipped to the worker once per job, is one provider
            import cloudpickle

            return ("factory", hashlib.sha256(cloudpickle.dumps(source)).hexdigest())
        except Exception:
            return ("factory", id(source))

    def close(self) -> None:
        """Kill every pool of the worker."""
        with self._lock:
            self._closed = True
            pools, self._pools = list(self._pools.values()), {}
            self._providers = {}
        for pool in pools:
            pool.close()


_current: contextvars.ContextVar[WorkerResources | None] = contextvars.ContextVar(
    "selfheal_worker_resources", default=None
)


@contextmanager
def using(resources: WorkerResources) -> Iterator[WorkerResources]:
    """Make ``resources`` what :func:`current` returns while a job runs."""
    token = _current.set(resources)
    try:
        yield resources
    finally:
        _current.reset(token)


def current() -> WorkerResources:
    """The resources of the worker running this job."""
    resources = _current.get()
    if resources is None:
        raise ConfigError(
            "No worker resources here: this function runs as a job of a selfheal engine "
            "(selfheal.scale.LocalEngine or DaskEngine), which provides them."
        )
    return resources
