"""Fixtures for every test: each test gets its own memory across runs; a check that a killed
benchmark resumes from its file (``kill_then_resume``); the required-components check
(tests/required_components.py: under ``CI=true`` a skipped test of the local model, the
browser, the sandbox kernels... fails the run).

``HealConfig.memory`` is on by default, so without this the suite's runs would remember each
other (and a developer's own runs): a test's second heal of a spec would recall the first.
The variable is set per test, and kernels or subprocesses a test starts inherit it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir
from required_components import (  # noqa: F401  (the required-components hooks)
    pytest_collectreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
)


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis keeps its files (its home, ``.hypothesis/``) in a temporary folder, not in
    the checkout: tests write only under temporary folders."""
    set_hypothesis_home_dir(tempfile.mkdtemp(prefix="selfheal-hypothesis-"))


@pytest.fixture(autouse=True)
def memory_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own memory file (``$SELFHEAL_MEMORY``), empty at its start."""
    path = tmp_path / "memory" / "memory.sqlite3"
    monkeypatch.setenv("SELFHEAL_MEMORY", str(path))
    return path


ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 270.0
"""The longest a test here waits in all: under pytest-timeout's 300 s (pyproject.toml)."""


def _kill_then_resume(cmd: list[str], results: Path, task_ids: list[str]) -> None:
    """Run the benchmark ``cmd`` (with ``--resume``), SIGKILL it once ``results`` holds a
    record, run it again: the second run must finish every task in ``task_ids`` and keep the
    records the killed one wrote, unchanged and first."""
    from evaluation.results_file import ResultsFile

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # both runs share one generous budget under pytest-timeout's 300 s (pyproject.toml), so a
    # run that takes too long fails here, saying which, instead of being killed by the plugin
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = ResultsFile(results).read()
    assert 1 <= len(before) < len(task_ids), f"{len(before)} records when killed"
    left = max(1.0, deadline - time.monotonic())
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=left)
    assert done.returncode == 0, done.stderr[-3000:]
    after = ResultsFile(results).read()
    assert sorted(r.task_id for r in after) == sorted(task_ids)
    assert after[: len(before)] == before


@pytest.fixture
def kill_then_resume() -> Callable[[list[str], Path, list[str]], None]:
    """:func:`_kill_then_resume`: a benchmark killed mid-run resumes from its file."""
    return _kill_then_resume
