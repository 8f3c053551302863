"""Fixtures of the scale-out tests: one local Dask cluster of 2 worker processes on
127.0.0.1 for the session (its workers get one task at a time each), the fakes of the
evaluation and LLM tests importable here and on the workers, and model limits reset after
each test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "evaluation", HERE.parent / "llm"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Dask cluster: a scheduler and 2 worker processes (1 thread each, restarted by
    their nanny if killed) on 127.0.0.1."""
    dask = pytest.importorskip("dask", reason='the dask extra: pip install "selfheal[dask]"')
    distributed = pytest.importorskip(
        "distributed", reason='the dask extra: pip install "selfheal[dask]"'
    )
    runs = tmp_path_factory.mktemp("worker-runs")
    # a worker holds only the task it runs (none queued behind it), so a test knows where
    # every task is
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env={"SELFHEAL_RUNS_DIR": str(runs), "PYTHONPATH": ":".join(sys.path)},
        )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    """A client of the session's cluster, for the test to look at (and kill) its workers."""
    import distributed

    with distributed.Client(cluster.scheduler_address) as c:
        c.wait_for_workers(2, timeout=120)
        yield c


@pytest.fixture(autouse=True)
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from selfheal.llm.limits import configure_limits

    d = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(d))
    for var in ("SELFHEAL_MODEL", "ANTHROPIC_API_KEY", "SELFHEAL_MODEL_LIMITS"):
        monkeypatch.delenv(var, raising=False)
    configure_limits(None)
    yield d
    configure_limits(None)
