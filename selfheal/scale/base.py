"""What an engine is: the :class:`Engine` protocol and the :class:`Finished` record it streams
(``selfheal.scale.engine`` has the local engine, ``selfheal.scale.dask_engine`` Dask's)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")

EngineName = Literal["local", "dask"]
"""The engines ``make_engine`` (and ``--executor``) knows."""


@dataclass(frozen=True)
class Finished(Generic[J, R]):
    """One job, done: its result, or the exception it raised (never both)."""

    index: int
    """The job's position in the jobs given."""
    job: J
    """The job."""
    result: R | None
    """What the function returned."""
    error: BaseException | None
    """What it raised instead (for a cluster: also a job that killed too many workers)."""


class Engine(Protocol):
    """Runs a function on many jobs, on some workers. Used as an async context manager
    (which starts and stops its workers)."""

    name: str
    """``local`` or ``dask``."""

    async def __aenter__(self) -> Engine: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def run(self, fn: Callable[[J], R], jobs: Sequence[J]) -> AsyncIterator[Finished[J, R]]:
        """``fn(job)`` for every job on the workers, each ``Finished`` as soon as it is.
        Closing the iterator early cancels the jobs not yet finished."""
        ...
