"""``ResultsFile``: the append-only JSON-lines file a run writes as tasks finish.

Each finished (task, mode) is one line, flushed and fsynced before the next starts, so a
run killed at any moment loses at most the tasks that were still running. On resume a
partial last line (the process died mid-write) is cut off, and every (task, mode) already
recorded without a harness error is skipped. When a pair appears twice, the later line wins.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from evaluation.errors import ResultsFileError
from evaluation.records import TaskRecord

__all__ = ["ResultsFile", "folder_command", "reporting_errors", "results_in"]


class ResultsFile:
    """Thread-safe appender and reader of ``TaskRecord`` lines."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def repair_tail(self) -> int:
        """Cut a partial last line left by a killed run; return how many bytes were cut."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        with self.path.open("r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        return len(data) - keep

    def read(self) -> list[TaskRecord]:
        """Every complete record, in file order. Unreadable lines raise ``ResultsFileError``
        except a partial last line, which is ignored."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").split("\n")
        records: list[TaskRecord] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(TaskRecord.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError) as exc:
                if number == len(lines):  # partial tail of a killed run
                    break
                raise ResultsFileError(
                    f"{self.path}:{number} is not a valid result record ({exc}). "
                    "Move the file away to start afresh, or delete that line."
                ) from exc
        return records

    def latest(self) -> dict[tuple[str, str], TaskRecord]:
        """The last record of each (task, mode)."""
        return {r.key: r for r in self.read()}

    def done(self) -> set[tuple[str, str]]:
        """(task, mode) pairs finished without a harness error (skipped by ``--resume``)."""
        return {key for key, r in self.latest().items() if not r.error}

    def append(self, record: TaskRecord) -> None:
        """Write one record as one line, durably."""
        line = record.model_dump_json() + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())


def results_in(folder: Path) -> ResultsFile:
    """The results file of a folder ``run_benchmark`` wrote; ``ResultsFileError`` saying so
    when there is none."""
    path = Path(folder) / "results.jsonl"
    if not path.is_file():
        raise ResultsFileError(f"{path} does not exist; give a folder run_benchmark wrote.")
    return ResultsFile(path)


def folder_command(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m MODULE RESULTS ...``, a command that reads a results folder
    (its first argument); the description is the first line of the module's docstring."""
    ap = argparse.ArgumentParser(
        prog=f"python -m {module}", description=(doc or "").strip().split("\n")[0]
    )
    ap.add_argument("results", type=Path, help="a results folder (with results.jsonl)")
    return ap


class Main(Protocol):
    """A command's ``main(argv=None) -> exit code``."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def reporting_errors(main: Main) -> Main:
    """``main`` with a results folder it cannot read (``ResultsFileError``) said on stderr as
    ``error: ...`` and exit code 2, not a traceback."""

    @functools.wraps(main)
    def run(argv: Sequence[str] | None = None) -> int:
        try:
            return main(argv)
        except ResultsFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run
