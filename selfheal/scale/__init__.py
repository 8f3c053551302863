"""Scale out: heal and evaluate many specs at once, here or on a Dask cluster (docs/scale.md):
``heal_many``, the engines that fan jobs out to workers, and what each worker holds.
``DaskEngine`` needs the ``dask`` extra (``pip install "selfheal[dask]"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfheal.scale.base import Engine, EngineName, Finished
from selfheal.scale.engine import LocalEngine, astream, make_engine, stream
from selfheal.scale.many import HealJob, HealOutcome, aheal_many, heal_many
from selfheal.scale.resources import ProviderSource, WorkerResources, build_provider_from, current

if TYPE_CHECKING:
    from selfheal.scale.dask_engine import DaskEngine

__all__ = [
    "DaskEngine",
    "Engine",
    "EngineName",
    "Finished",
    "HealJob",
    "HealOutcome",
    "LocalEngine",
    "ProviderSource",
    "WorkerResources",
    "aheal_many",
    "astream",
    "build_provider_from",
    "current",
    "heal_many",
    "make_engine",
    "stream",
]


def __getattr__(name: str) -> Any:
    if name == "DaskEngine":
        from selfheal.scale.dask_engine import DaskEngine, require_dask

        require_dask("selfheal.scale.DaskEngine")
        return DaskEngine
    raise AttributeError(f"module 'selfheal.scale' has no attribute {name!r}")
