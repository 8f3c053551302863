"""The engines and the iterator twin: results stream back in the order jobs finish, a job's
exception is its result, stopping early runs no more jobs and cleans up; the cluster-wide
rate gate never grants more than its rate in any window, across workers."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from scale_fakes import rate_grants

from selfheal._sync import sync_iter_twin
from selfheal.scale import LocalEngine, current, stream


def test_the_iterator_twin_yields_in_order_and_cleans_up_when_stopped_early() -> None:
    cleaned: list[bool] = []

    async def acount(n: int) -> AsyncIterator[int]:
        try:
            for i in range(n):
                yield i
        finally:
            cleaned.append(True)

    count = sync_iter_twin(acount)
    assert count.__name__ == "count"
    assert list(count(3)) == [0, 1, 2] and cleaned == [True]
    for i in count(10):
        if i == 1:
            break
    assert cleaned == [True, True]


def test_results_come_back_in_the_order_jobs_finish() -> None:
    release = threading.Event()

    def job(i: int) -> str:
        if i == 0:
            assert release.wait(timeout=60)  # job 0 ends only when the caller says so
        if i == 2:
            raise ValueError("bad job")
        return f"{i} on {current().where}"

    finished = stream(LocalEngine(3), job, [0, 1, 2])
    first, second = next(finished), next(finished)  # while job 0 still runs
    assert {first.index, second.index} == {1, 2}
    release.set()
    (last,) = list(finished)
    assert last.index == 0 and last.result == "0 on local"
    by_index = {d.index: d for d in (first, second)}
    assert by_index[1].result == "1 on local" and by_index[1].error is None
    assert isinstance(by_index[2].error, ValueError) and by_index[2].result is None


def test_stopping_early_runs_no_more_jobs() -> None:
    ran: list[int] = []
    release = threading.Event()

    started = threading.Event()

    def job(i: int) -> int:
        ran.append(i)
        if i > 0:
            started.set()
            assert release.wait(timeout=60)  # job 1 is still running when the caller stops
        return i

    for finished in stream(LocalEngine(1), job, list(range(20))):
        assert finished.index == 0
        # the one worker has taken job 1 (else stopping would cancel it before it starts)
        assert started.wait(timeout=60)
        break
    release.set()
    time.sleep(0.5)  # a job the stop failed to cancel would start in this time
    assert ran == [0, 1]


def test_the_cluster_rate_gate_holds_across_workers(cluster: Any, client: Any) -> None:
    """Two workers take slots from one gate of 2 a (1-second) window: sorted together, no
    three grants fall within a window."""
    name = f"rate-test-{uuid.uuid4().hex}"
    workers = list(client.scheduler_info()["workers"])[:2]
    futures = [
        client.submit(rate_grants, name, 1.0, 2, 4, workers=[w], pure=False) for w in workers
    ]
    grants = sorted(t for f in futures for t in f.result(timeout=300))
    assert len(grants) == 8
    gaps = [later - earlier for earlier, later in zip(grants, grants[2:], strict=False)]
    assert min(gaps) >= 1.0 - 0.05, gaps


def test_a_job_outside_an_engine_has_no_resources() -> None:
    from selfheal.errors import ConfigError

    with pytest.raises(ConfigError, match="runs as a job of a selfheal engine"):
        current()
