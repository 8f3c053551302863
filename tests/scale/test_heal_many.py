"""heal_many: every spec healed once, each outcome as it finishes, the same results on this
machine and on a real 2-worker Dask cluster; clear errors for what cannot work."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from scale_fakes import builtin_oracle

import selfheal
from evaluation.suites import BuiltinSuite, Task
from selfheal.config import HealConfig
from selfheal.errors import ConfigError, MissingDependency
from selfheal.llm.mock import DEMO_SPEC, MockProvider
from selfheal.scale import HealJob, HealOutcome, LocalEngine, aheal_many, heal_many

# memory off: heals that run at once must not recall each other (the order would matter)
CONFIG = HealConfig(autonomy="full_auto", on_headless="approve", memory=False)


def _tasks(n: int) -> list[Task]:
    return BuiltinSuite().tasks()[:n]


def _jobs(tasks: list[Task]) -> list[HealJob]:
    # one of the task's assertions as the user's own test, so a right answer is verified
    return [
        HealJob(spec=t.prompt, entry_point=t.entry_point, tests=t.reference_tests[:1], key=t.id)
        for t in tasks
    ]


def _summary(outcomes: list[HealOutcome]) -> dict[str, tuple[Any, ...]]:
    out = {}
    for o in outcomes:
        assert o.result is not None, o.error
        r = o.result
        out[o.job.key] = (o.index, r.status, r.code, r.iterations, len(r.candidates))
    return out


def test_every_spec_is_healed_once_locally() -> None:
    outcomes = list(heal_many([DEMO_SPEC] * 3, provider="mock", config=CONFIG, workers=2))
    assert sorted(o.index for o in outcomes) == [0, 1, 2]
    alone = selfheal.heal(DEMO_SPEC, provider="mock", config=CONFIG)
    for o in outcomes:
        assert o.worker == "local" and o.error == ""
        assert o.result is not None and o.status == "verified"
        assert o.result.code == alone.code  # each heal gets its own scripted model


def test_a_heal_that_raises_is_an_outcome_not_an_exception() -> None:
    def server_gone_for_the_second(spec: str, **kw: Any) -> Any:
        if spec == "second":
            raise ConnectionError("the model server went away")
        return selfheal.heal(DEMO_SPEC, **kw)

    outcomes = {
        o.job.spec: o
        for o in heal_many(
            ["first", "second", "third"],
            provider="mock",
            config=CONFIG,
            workers=2,
            heal_fn=server_gone_for_the_second,
        )
    }
    shown = {k: (o.status, o.error) for k, o in outcomes.items()}
    assert outcomes["first"].status == outcomes["third"].status == "verified", shown
    gone = outcomes["second"]
    assert gone.result is None and gone.status == "error"
    assert gone.error == "ConnectionError: the model server went away"


async def test_the_async_twin_streams_the_same_outcomes() -> None:
    tasks = _tasks(3)
    factory = functools.partial(builtin_oracle, 3)
    seen = [o async for o in aheal_many(_jobs(tasks), provider=factory, config=CONFIG)]
    here = list(heal_many(_jobs(tasks), provider=factory, config=CONFIG, workers=1))
    assert _summary(seen) == _summary(here)


def test_dask_cluster_gives_the_same_results_as_local(cluster: Any, client: Any) -> None:
    tasks = _tasks(4)
    factory = functools.partial(builtin_oracle, 4)  # each worker builds its own oracle
    local = list(heal_many(_jobs(tasks), provider=factory, config=CONFIG, workers=2))
    remote = list(
        heal_many(
            _jobs(tasks),
            provider=factory,
            config=CONFIG,
            executor="dask",
            address=cluster.scheduler_address,
            pool_size=1,
        )
    )
    assert _summary(remote) == _summary(local)
    assert all(o.status == "verified" for o in remote)
    workers = set(client.scheduler_info()["workers"])
    assert {o.worker for o in remote} <= workers


def test_what_cannot_work_says_how_to_fix_it(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot be sent to Dask workers"):
        list(
            heal_many(
                ["x"],
                provider=MockProvider.demo(),
                executor="dask",
                address=cluster.scheduler_address,
            )
        )
    with pytest.raises(ConfigError, match="selfheal serve"):
        list(heal_many(["x"], provider="local", executor="dask"))
    with pytest.raises(ConfigError, match="HealJob"):
        list(heal_many([42], provider="mock"))  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="Unknown executor"):
        list(heal_many(["x"], provider="mock", executor="ray"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--executor dask"):
        list(heal_many(["x"], provider="mock", address="tcp://127.0.0.1:1"))
    with pytest.raises(ConfigError, match="workers must be at least 1"):
        LocalEngine(0)


def test_without_the_dask_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import selfheal.scale.dask_engine as dask_engine

    monkeypatch.setattr(dask_engine, "distributed", None)
    with pytest.raises(MissingDependency) as info:
        list(heal_many(["x"], provider="mock:demo", executor="dask"))
    assert info.value.extra == "dask"
    assert 'pip install "selfheal[dask]"' in str(info.value)


def test_importing_selfheal_does_not_import_dask() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, selfheal; assert selfheal.heal_many and selfheal.aheal_many; "
        "print('distributed' in sys.modules, 'dask' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "False"]
