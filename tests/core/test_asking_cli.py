"""The CLI asks its questions on a terminal (stdin a real pty), and never when stdin is not a
terminal. A real ``selfheal heal`` process with a scripted mock model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import scripted as s
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _script(tmp_path: Path) -> Path:
    # two candidates that pass the example clamp(5, 0, 3) -> 3 and differ below lo
    path = tmp_path / "clamp.yaml"
    path.write_text(yaml.safe_dump({"generator": [s.BUGGY, s.GOOD], "test_writer": [s.NO_TESTS]}))
    return path


def _argv(tmp_path: Path, *more: str) -> list[str]:
    return [
        sys.executable, "-m", "selfheal", "heal", s.SPEC,
        "--provider", f"mock:{_script(tmp_path)}", "--candidates", "2", "--oracle-calls", "0",
        "--first-answer", "instruct", "--no-memory", "--json", *more,
    ]  # fmt: skip


def _env(runs_dir: Path) -> dict[str, str]:
    env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir), PYTHONPATH=str(ROOT))
    env.pop("SELFHEAL_MODEL", None)
    return env


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(x, hi))


def test_the_cli_asks_on_a_terminal_and_the_answer_chooses(tmp_path: Path, runs_dir: Path) -> None:
    master, slave = os.openpty()
    p = subprocess.Popen(
        _argv(tmp_path, "--autonomy", "review_repairs"),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(runs_dir),
    )
    os.close(slave)
    assert p.stderr is not None and p.stdout is not None
    seen: list[str] = []
    try:
        while True:
            line = p.stderr.readline().decode()
            assert line, "the run ended without asking:\n" + "".join(seen)
            seen.append(line)
            if m := re.match(r"selfheal: which is right for clamp\((.*)\)\?", line):
                break
        args = [int(a) for a in m.group(1).split(",")]
        want = str(_clamp(*args))
        choices: dict[str, str] = {}
        while True:
            line = p.stderr.readline().decode()
            seen.append(line)
            if c := re.match(r"\s+(\d+)\. (\S+)\s+\(", line):
                choices[c.group(2)] = c.group(1)
            if line.strip() == "s. skip":
                break
        os.write(master, f"{choices[want]}\n".encode())
        out, _ = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    result = json.loads(out)
    assert result["status"] in ("unverified", "verified")
    assert "your answer" in result["evidence"]["summary"]
    assert "max(lo" in result["code"]


def test_the_cli_never_asks_when_stdin_is_not_a_terminal(tmp_path: Path, runs_dir: Path) -> None:
    p = subprocess.run(
        _argv(tmp_path, "--autonomy", "review_repairs", "--on-headless", "approve"),
        input=b"1\n",
        capture_output=True,
        env=_env(runs_dir),
        timeout=240,
    )
    err = p.stderr.decode()
    assert "which is right" not in err
    result = json.loads(p.stdout)
    assert "your answer" not in result["evidence"]["summary"]
    assert result["evidence"]["clusters"] == [1, 1]  # the disagreement was there
