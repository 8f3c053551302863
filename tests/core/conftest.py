from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from selfheal.kernel_sandbox import KernelPool


@pytest.fixture(scope="session")
def pool() -> Iterator[KernelPool]:
    """One real warm kernel pool for the core tests."""
    with KernelPool(size=2) as p:
        yield p


@pytest.fixture(autouse=True)
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "runs"
    monkeypatch.setenv("SELFHEAL_RUNS_DIR", str(d))
    for var in ("SELFHEAL_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return d
