"""Fixtures for every test: each test gets its own memory across runs.

``HealConfig.memory`` is on by default, so without this the suite's runs would remember each
other (and a developer's own runs): a test's second heal of a spec would recall the first.
The variable is set per test, and kernels or subprocesses a test starts inherit it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def memory_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own memory file (``$SELFHEAL_MEMORY``), empty at its start."""
    path = tmp_path / "memory" / "memory.sqlite3"
    monkeypatch.setenv("SELFHEAL_MEMORY", str(path))
    return path
