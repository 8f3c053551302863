"""``heal_many``: heal many specs at once, on this machine or on a Dask cluster (docs/scale.md).
Every spec is one job (:class:`HealJob`) run on a worker with its kernel pool and provider;
each :class:`HealOutcome` comes back as it finishes, a heal that raised as one with ``error``."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from selfheal._sync import sync_iter_twin
from selfheal.config import HealConfig
from selfheal.errors import ConfigError
from selfheal.graph.runner import Run
from selfheal.llm.base import Provider
from selfheal.llm.limits import ModelLimits
from selfheal.llm.router import parse_model_string, resolve_model_string
from selfheal.records import Record
from selfheal.request import HealRequest
from selfheal.result import HealResult
from selfheal.scale.base import Engine, EngineName
from selfheal.scale.engine import astream, make_engine
from selfheal.scale.resources import ProviderSource, current


class HealJob(Record):
    """One spec to heal."""

    spec: str
    """The plain-language spec."""
    entry_point: str | None = None
    """The function's name (default: read from the spec)."""
    tests: tuple[str, ...] = ()
    """Your own assertion tests for it (trusted)."""
    key: str = ""
    """Your name for the job (default: its position)."""


class HealOutcome(Record):
    """A finished job: the heal's result, or why there is none."""

    index: int
    """The job's position among the specs given."""
    job: HealJob
    """The job."""
    result: HealResult | None = None
    """The heal's result (None when it raised)."""
    error: str = ""
    """``Type: message`` when the heal raised instead of returning."""
    worker: str = ""
    """Where it ran: ``local``, or the Dask worker's address."""

    @property
    def status(self) -> str:
        """The result's status, or ``error``."""
        return self.result.status if self.result is not None else "error"


def shippable_source(source: ProviderSource, engine: str) -> ProviderSource:
    """``source`` as the workers of ``engine`` get it. For a cluster: a model string is
    resolved here (``auto`` once, not on every worker); ``local`` needs a shared server;
    a Provider object cannot travel."""
    if engine == "local":
        return source
    if isinstance(source, Provider):
        raise ConfigError(
            f"A Provider object ({source.model_id}) cannot be sent to Dask workers. Pass a "
            "model string (e.g. 'openai:MODEL', built on each worker from its environment) "
            "or a zero-argument function that builds the provider on the worker."
        )
    if source is not None and not isinstance(source, str):
        return source
    model = resolve_model_string(source)
    spec = parse_model_string(model)
    if spec is not None and spec.provider == "local" and not os.environ.get("SELFHEAL_LOCAL_URL"):
        raise ConfigError(
            "The dask executor does not start one local model server per worker. Serve the "
            "model once and point the workers at it: run `selfheal serve` and set "
            "SELFHEAL_LOCAL_URL (and SELFHEAL_LOCAL_KEY) on every worker, or serve a model with "
            "vLLM and use --model openai:MODEL with OPENAI_BASE_URL."
        )
    return model


def _heal_job(
    source: ProviderSource,
    config: HealConfig,
    heal_fn: Callable[..., Any] | None,
    item: tuple[int, HealJob],
) -> HealOutcome:
    """One heal on the worker running it (module-level, so a cluster can ship it)."""
    index, job = item
    resources = current()
    try:
        # a model string is built by each heal, as heal() does; a function or an object is
        # one provider per worker
        provider = (
            source if source is None or isinstance(source, str) else resources.provider(source)
        )
        if heal_fn is not None:
            result = heal_fn(
                job.spec,
                provider=provider,
                config=config,
                entry_point=job.entry_point,
                tests=list(job.tests),
            )
        else:  # headless: no notebook view for a heal on a worker
            request = HealRequest(
                job.spec,
                provider=provider,
                config=config,
                entry_point=job.entry_point,
                tests=job.tests,
                executor=resources.pool(),
            )
            result = Run.start(request).run()
    except Exception as exc:
        return HealOutcome(
            index=index, job=job, error=f"{type(exc).__name__}: {exc}", worker=resources.where
        )
    if not isinstance(result, HealResult):
        raise ConfigError(f"heal returned {type(result).__name__}, not a HealResult")
    return HealOutcome(index=index, job=job, result=result, worker=resources.where)


def _jobs(specs: Iterable[str | HealJob]) -> list[HealJob]:
    jobs: list[HealJob] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, HealJob):
            jobs.append(spec if spec.key else spec.model_copy(update={"key": str(i)}))
        elif isinstance(spec, str):
            jobs.append(HealJob(spec=spec, key=str(i)))
        else:
            raise ConfigError(
                f"Spec #{i} is a {type(spec).__name__}; give each spec as a string or a "
                "selfheal.scale.HealJob(spec=..., entry_point=..., tests=[...])."
            )
    return jobs


async def aheal_many(
    specs: Iterable[str | HealJob],
    *,
    provider: ProviderSource = None,
    config: HealConfig | None = None,
    executor: EngineName | Engine = "local",
    workers: int = 4,
    address: str | None = None,
    pool_size: int = 2,
    limits: Mapping[str, ModelLimits] | None = None,
    heal_fn: Callable[..., Any] | None = None,
) -> AsyncIterator[HealOutcome]:
    """Heal every spec, yielding each :class:`HealOutcome` as soon as it finishes.

    ``provider``: a model string (built on each worker from its own environment), a
    zero-argument function that builds a provider, or (local only) a Provider object.
    ``executor``: ``local`` (``workers`` heals at once here), ``dask`` (the cluster at
    ``address``, or a local cluster of ``workers`` processes), or an :class:`Engine`; each
    worker has a kernel pool of ``pool_size`` kernels. ``limits``: request concurrency and
    rate per model id, across all the workers. ``config`` applies to every heal
    (docs/scale.md: approvals on a worker, the memory of heals running at once).
    ``heal_fn`` replaces ``selfheal.heal`` (tests)."""
    jobs = _jobs(specs)
    engine = (
        make_engine(executor, workers=workers, address=address, pool_size=pool_size, limits=limits)
        if isinstance(executor, str)
        else executor
    )
    source = shippable_source(provider, engine.name)
    work = functools.partial(_heal_job, source, config or HealConfig(), heal_fn)
    async for done in astream(engine, work, list(enumerate(jobs))):
        if done.result is not None:
            yield done.result
        else:
            index, job = done.job
            error = done.error
            if error is not None and not isinstance(error, Exception):
                raise error
            yield HealOutcome(
                index=index, job=job, error=f"{type(error).__name__}: {error}", worker=""
            )


heal_many = sync_iter_twin(aheal_many)
