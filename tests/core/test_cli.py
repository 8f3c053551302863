"""The command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def selfheal(
    *args: str, runs_dir: Path, input_: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir), PYTHONPATH=str(ROOT))
    env.pop("SELFHEAL_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "selfheal", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        input=input_ or "",
    )


def test_heal_with_the_mock_prints_the_loop(runs_dir: Path) -> None:
    p = selfheal("heal", "--provider", "mock", runs_dir=runs_dir)
    assert p.returncode == 0, p.stderr
    lines = [line.split()[1] for line in p.stderr.splitlines() if line.startswith("  ✓ ")]
    assert lines == [
        "recall",  # nothing remembered yet
        "plan_tests", "generate", "gate", "execute", "select",  # greedy + 1 sample: both fail
        "generate", "gate", "execute", "select",  # topped up to 4: all fail the even example
        "diagnose", "repair", "gate", "execute", "select",  # 3 repairs agree
        "finish",
    ]  # fmt: skip
    assert "no candidate of 4 passes every trusted test; still failing: ex2" in p.stderr
    assert "edge_case (90%, blame code)" in p.stderr  # the diagnosis
    assert "c5 patch, c6 patch, c7 rewrite" in p.stderr  # the repair round fans out
    assert "3 of 3 candidates that pass them agree" in p.stderr and "status verified" in p.stderr
    assert "VERIFIED after 2 iteration(s)" in p.stdout
    assert "return (ordered[mid - 1] + ordered[mid]) / 2" in p.stdout


def test_heal_json_and_out_file(runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "median.py"
    p = selfheal("heal", "--provider", "mock", "--json", "--out", str(out), runs_dir=runs_dir)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["verified"] is True and data["status"] == "verified" and data["iterations"] == 2
    assert "def median" in data["code"]
    # the demo spec has examples: the spec-blind test writer is not asked ("auto")
    assert {t["origin"] for t in data["tests"]} == {"example"}
    assert len(data["candidates"]) == 7 and data["evidence"]["trusted_passed"] == 2
    assert data["evidence"]["clusters"] == [3]
    assert out.read_text().strip() == data["code"].strip()


def test_runs_list_show_fork(runs_dir: Path) -> None:
    assert selfheal("heal", "--provider", "mock", "--quiet", runs_dir=runs_dir).returncode == 0
    listed = selfheal("runs", "list", runs_dir=runs_dir)
    run_id = listed.stdout.split()[0]
    assert "verified" in listed.stdout
    shown = selfheal("runs", "show", run_id, runs_dir=runs_dir)
    assert (
        shown.returncode == 0 and "status verified" in shown.stdout and "def median" in shown.stdout
    )
    calls = selfheal("runs", "show", run_id, "--calls", runs_dir=runs_dir)
    assert calls.returncode == 0, calls.stderr
    assert "=== call 1/8 · generate" in calls.stdout and "=== call 8/8 · repair" in calls.stdout
    assert "Raise ValueError if the list is empty" in calls.stdout  # the spec, as sent
    assert "ordered[(len(ordered) - 1) // 2]" in calls.stdout  # a raw reply, as received
    forked = selfheal(
        "runs", "fork", run_id, "--at", "0", "--model", "mock", "--json", runs_dir=runs_dir
    )
    assert forked.returncode == 0, forked.stderr
    assert json.loads(forked.stdout)["status"] == "verified"
    assert f"(fork of {run_id} @ 0)" in selfheal("runs", "list", runs_dir=runs_dir).stdout


def test_review_without_a_terminal_stops_and_resume_approves(runs_dir: Path) -> None:
    p = selfheal(
        "heal", "--provider", "mock", "--autonomy", "review_repairs", "--quiet", runs_dir=runs_dir
    )
    assert p.returncode == 3, p.stderr
    assert "AWAITING_APPROVAL" in p.stdout and "selfheal runs resume" in p.stderr
    run_id = selfheal("runs", "list", runs_dir=runs_dir).stdout.split()[0]
    # the repair proposal is in the log; a fresh demo mock answers the critic that comes next
    r = selfheal("runs", "resume", run_id, "--approve", "--json", runs_dir=runs_dir)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["status"] == "verified" and data["iterations"] == 2


def test_missing_model_is_an_actionable_error(runs_dir: Path) -> None:
    p = selfheal(
        "heal", "--provider", "ollama:nosuch", "--quiet", "add two numbers", runs_dir=runs_dir
    )
    assert p.returncode == 2
    assert "selfheal: error:" in p.stderr


def test_debugger_options_reach_the_config() -> None:
    from selfheal.cli import build_parser
    from selfheal.cli.heal import heal_config as _config

    args = build_parser().parse_args(
        ["heal", "SPEC", "--debugger-steps", "3", "--debugger-tool-calls", "structured"]
    )
    cfg = _config(args)
    assert (cfg.repairs.debugger_steps, cfg.repairs.debugger_tool_calls) == (3, "structured")
    default = _config(build_parser().parse_args(["heal", "SPEC"]))
    assert (default.repairs.debugger_steps, default.repairs.debugger_tool_calls) == (0, "native")


def test_population_options_reach_the_config() -> None:
    from selfheal.cli import build_parser
    from selfheal.cli.heal import heal_config as _config

    def cfg(*argv: str) -> tuple[int | str, int, int]:
        c = _config(build_parser().parse_args(["heal", "SPEC", *argv]))
        return c.generation.candidates, c.generation.first_sample, c.selection.agreement

    assert cfg() == ("auto", 2, 2)  # resolved from the backend when the run starts
    assert cfg("--candidates", "auto") == ("auto", 2, 2)
    assert cfg("--candidates", "1") == (1, 1, 2)  # the first round cannot ask for more
    assert cfg("--first-sample", "1") == ("auto", 1, 2)
    assert cfg("--candidates", "6", "--first-sample", "3", "--agreement", "3") == (6, 3, 3)
