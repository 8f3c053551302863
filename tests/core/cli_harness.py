"""Running the command line in this process (``selfheal.cli.main``, the function the
``selfheal`` script calls), with stdin, stdout and stderr captured, and as a real subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selfheal.cli import main

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ran:
    """One command's exit code and output."""

    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        """stdout as the one JSON object it must be (fails if it is not exactly one)."""
        data = json.loads(self.out)
        assert isinstance(data, dict), self.out
        return data


def run_cli(*argv: str, stdin: bytes = b"") -> Ran:
    """``selfheal ARGV`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    old_stdin = sys.stdin
    sys.stdin = fake_stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        sys.stdin = old_stdin
    return Ran(code, out.getvalue(), err.getvalue())


def run_process(
    *argv: str | bytes, runs_dir: Path, env: dict[str, str] | None = None, stdin: bytes = b""
) -> Ran:
    """``selfheal ARGV`` as a real process (arguments may be bytes that are not UTF-8)."""
    full_env = dict(os.environ, SELFHEAL_RUNS_DIR=str(runs_dir), PYTHONPATH=str(ROOT))
    for var in ("SELFHEAL_MODEL", "SELFHEAL_DEBUG"):
        full_env.pop(var, None)
    full_env.update(env or {})
    p = subprocess.run(
        [sys.executable, "-m", "selfheal", *argv],
        capture_output=True,
        env=full_env,
        timeout=240,
        input=stdin,
    )
    return Ran(p.returncode, p.stdout.decode(), p.stderr.decode())
