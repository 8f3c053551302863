"""Fixtures of the notebook tests: a real kernel pool and real runs of the mock demo."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nb_fakes import InProcessExecutor

from selfheal.config import HealConfig
from selfheal.graph.runner import Run
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import DEMO_SPEC, MockProvider
from selfheal.request import HealRequest


@pytest.fixture(scope="session")
def pool() -> Iterator[KernelPool]:
    """One real sandbox kernel pool for every notebook test."""
    with KernelPool(size=1) as p:
        yield p


@pytest.fixture(autouse=True)
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(d))
    for var in ("SELFHEAL_MODEL", "ANTHROPIC_API_KEY", "SELFHEAL_HEADLESS"):
        monkeypatch.delenv(var, raising=False)
    return d


@pytest.fixture
def demo_run() -> Run:
    """A fresh run of the demo spec with the mock's demo script (full autonomy); its scripted
    candidates run in-process (the view tests are about the view, not the sandbox). Lessons
    and the spec-blind test writer are on so every tab has something to show; the instructed
    form, which the demo script's first round (the greedy answer and three samples) is written
    for."""
    return Run.start(
        HealRequest(
            DEMO_SPEC,
            provider=MockProvider.demo(),
            executor=InProcessExecutor(),
            config=HealConfig(lessons=True, spec_blind_tests=True, first_answer="instruct"),
        )
    )


@pytest.fixture
def review_run() -> Run:
    """A fresh demo run that stops before its repair (autonomy ``review_repairs``)."""
    return Run.start(
        HealRequest(
            DEMO_SPEC,
            provider=MockProvider.demo(),
            executor=InProcessExecutor(),
            config=HealConfig(autonomy="review_repairs", lessons=True, spec_blind_tests=True),
        )
    )
