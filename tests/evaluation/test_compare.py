"""evaluation/compare.py: two runs of the same modes side by side (what changed between the
runs, and which mode alone passes each task, run by run and over both), and its command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evaluation.compare import compare_runs
from evaluation.pair import error_record
from evaluation.results_file import ResultsFile
from evaluation.suites import BuiltinSuite
from selfheal.config import HealConfig

ROOT = Path(__file__).resolve().parents[2]


def test_changes_between_runs_and_what_one_mode_alone_passes() -> None:
    first = {("T/1", "heal"): True, ("T/1", "s"): False, ("T/2", "heal"): True, ("T/2", "s"): True}
    second = {("T/1", "heal"): False, ("T/1", "s"): True, ("T/2", "heal"): True, ("T/2", "s"): True}
    second[("T/3", "heal")] = True  # only in one run: not compared
    text = compare_runs([("r1", first), ("r2", second)], ["heal", "s"])
    assert text.startswith("2 tasks in both r1 and r2")
    assert "- `heal`: 2 -> 1; changed on 1: gained 0 (none), lost 1 (/1)" in text
    assert "- `s`: 1 -> 2; changed on 1: gained 1 (/1), lost 0 (none)" in text
    assert "- r1: only `heal` passes 1 (/1); only `s` passes 0 (none)" in text
    assert "- r2: only `heal` passes 0 (none); only `s` passes 1 (/1)" in text
    assert "- over the runs: only `heal` 1, only `s` 1" in text


def test_command_line(tmp_path: Path) -> None:
    task = BuiltinSuite().tasks()[0]
    for name, passed in (("a", True), ("b", False)):
        rec = error_record(task, "heal", HealConfig(), "mock:x", "")
        ResultsFile(tmp_path / name / "results.jsonl").append(
            rec.model_copy(update={"passed": passed, "error": ""})
        )
    cmd = [sys.executable, "-m", "evaluation.compare", str(tmp_path / "a"), str(tmp_path / "b")]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*cmd, "--modes", "heal"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"- `heal`: 1 -> 0; changed on 1: gained 0 (none), lost 1 (/{task.id.rsplit('/', 1)[-1]})"
        in done.stdout
    )
    missing = subprocess.run(
        [*cmd[:-1], str(tmp_path / "nothing")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "error:" in missing.stderr


def test_a_mode_renamed_in_the_second_run_is_named_first_equals_second(tmp_path: Path) -> None:
    """``--modes heal=heal-r4`` compares the first folder's ``heal`` with the second's
    ``heal-r4`` (a later run that kept the old defaults under a new name)."""
    from evaluation.compare import main

    task = BuiltinSuite().tasks()[0]
    for name, mode, passed in (("a", "heal", True), ("b", "heal-r4", False), ("b", "heal", True)):
        rec = error_record(task, mode, HealConfig(), "mock:x", "")
        ResultsFile(tmp_path / name / "results.jsonl").append(
            rec.model_copy(update={"passed": passed, "error": ""})
        )
    short = task.id.rsplit("/", 1)[-1]
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*folders, "--modes", "heal=heal-r4"]) == 0
    assert f"- `heal=heal-r4`: 1 -> 0; changed on 1: gained 0 (none), lost 1 (/{short})" in (
        out.getvalue()
    )
